"""tools/branches.py: its windows of updates after the branch point."""
import pytest

from tools.branches import windows


def update(reward, entropy, kl, evaluation=None):
    row = {"reward": reward, "entropy": entropy, "kl": kl}
    return row if evaluation is None else {**row, "eval": evaluation}


def test_windows_start_after_the_branch_point_and_stop_at_the_last_full_one():
    by_update = {u: update(0.5, 0.1, 0.01) for u in range(1, 31)}  # the source's updates before the branch too
    by_update[12] = update(0.9, 0.001, 0.4)
    by_update[20] = update(0.7, 0.2, 0.02, evaluation=0.8)
    rows = windows(by_update, start=10, window=10)
    # (10, 20] and (20, 30]; update 10 belongs to the window before the branch
    assert [r["update"] for r in rows] == [20, 30]
    assert rows[0] == {"update": 20, "eval": 0.8, "reward": pytest.approx((0.9 + 0.7 + 8 * 0.5) / 10),
                       "entropy_min": 0.001, "kl_max": 0.4}
    assert rows[1]["eval"] is None  # no evaluation at its end
    del by_update[25]  # a window with an update missing is not a full window
    assert [r["update"] for r in windows(by_update, start=10, window=10)] == [20]
