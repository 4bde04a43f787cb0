"""The sequence index map and its burn-in steps against plain-loop oracles, and GAE against hand-computed values."""
import numpy as np
import pytest

from buffer import burn_in_index, compute_gae, sequence_index


def oracle_sequences(dones: np.ndarray, L: int) -> list[list[int]]:
    """The obvious loops: walk each worker's row, cut at episode ends and every L steps."""
    W, T = dones.shape
    sequences = []
    for w in range(W):
        episode = []
        for t in range(T):
            episode.append(w * T + t)
            if dones[w, t] or t == T - 1:
                if L > 0:
                    sequences += [episode[i:i + L] for i in range(0, len(episode), L)]
                else:
                    sequences.append(episode)
                episode = []
    return sequences


def as_lists(index: np.ndarray, mask: np.ndarray) -> list[list[int]]:
    return [row[m].tolist() for row, m in zip(index, mask)]


def done_patterns():
    rng = np.random.default_rng(0)
    yield "random", rng.random((6, 40)) < 0.1
    yield "dense", rng.random((4, 33)) < 0.6
    yield "every step (one-step episodes)", np.ones((3, 10), dtype=bool)
    yield "never (episodes cross both rollout edges)", np.zeros((3, 25), dtype=bool)
    last = np.zeros((2, 17), dtype=bool)
    last[:, -1] = True
    yield "episode ends on the last step", last


@pytest.mark.parametrize("L", [1, 3, 8, 0, -1])
@pytest.mark.parametrize("name,dones", list(done_patterns()))
def test_sequence_index_equals_loop_oracle(name, dones, L):
    index, mask, starts = sequence_index(dones, L)
    expected = oracle_sequences(dones, L)
    assert as_lists(index, mask) == expected
    assert starts.tolist() == [s[0] for s in expected]
    # Padding comes only after the real steps and points at the zero row W*T.
    W, T = dones.shape
    for row, m in zip(index, mask):
        n = int(m.sum())
        assert m[:n].all() and not m[n:].any()
        assert (row[n:] == W * T).all()


def oracle_burn_in(dones: np.ndarray, sequences: list[list[int]], k: int) -> list[list[int]]:
    """The obvious loop: from each sequence's first step, walk back along its worker's row while
    the step before is of the same episode (not done) and inside the rollout, at most k steps."""
    W, T = dones.shape
    burn_ins = []
    for sequence in sequences:
        w, t = divmod(sequence[0], T)
        before = []
        while len(before) < k and t > 0 and not dones[w, t - 1]:
            t -= 1
            before.insert(0, w * T + t)
        burn_ins.append(before)
    return burn_ins


@pytest.mark.parametrize("k", [1, 3, 8, 20])
@pytest.mark.parametrize("L", [1, 3, 8])
@pytest.mark.parametrize("name,dones", list(done_patterns()))
def test_burn_in_index_equals_loop_oracle(name, dones, L, k):
    W, T = dones.shape
    _, _, starts = sequence_index(dones, L)
    index, mask, first = burn_in_index(dones, starts, k)
    expected = oracle_burn_in(dones, oracle_sequences(dones, L), k)
    assert index.shape == (len(starts), k)
    assert as_lists(index, mask) == expected
    assert first.tolist() == [b[0] if b else s for b, s in zip(expected, starts)]
    for row, m in zip(index, mask):  # right-aligned: padding first, pointing at the zero row
        n = int(m.sum())
        assert not m[:k - n].any() and m[k - n:].all()
        assert (row[:k - n] == W * T).all()


@pytest.mark.parametrize("L", [2, 8])
def test_no_sequence_longer_than_L_and_every_step_once(L):
    dones = np.random.default_rng(1).random((16, 128)) < 0.05
    index, mask, _ = sequence_index(dones, L)
    assert index.shape[1] == L
    assert sorted(index[mask].tolist()) == list(range(16 * 128))


def test_whole_episode_mode_pads_to_longest_piece_only():
    dones = np.zeros((2, 12), dtype=bool)
    dones[0, 2] = dones[1, 4] = True  # pieces: 3, 9, 5, 7 steps
    index, mask, _ = sequence_index(dones, 0)
    assert index.shape == (4, 9)
    assert mask.sum(1).tolist() == [3, 9, 5, 7]


def gae_hand(rewards, values, nexts, continues, gamma, lamda):
    """Backwards over one worker: deltas with the given next-state values, then the lambda sum."""
    T = len(rewards)
    deltas = [rewards[t] + gamma * nexts[t] - values[t] for t in range(T)]
    adv, acc = [0.0] * T, 0.0
    for t in reversed(range(T)):
        acc = deltas[t] + gamma * lamda * continues[t] * acc
        adv[t] = acc
    return adv


def test_gae_terminated_truncated_and_rollout_cut():
    gamma, lamda = 0.9, 0.8
    rewards = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], dtype=np.float32)
    values = np.array([[0.5, 0.4, 0.3, 0.2, 0.1]], dtype=np.float32)
    final_values = np.array([[0.0, 7.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    truncated = np.array([[False, True, False, False, False]])  # cut by a time limit after step 1
    terminated = np.array([[False, False, False, True, False]])  # a terminal state after step 3
    last_values = np.array([9.0], dtype=np.float32)  # V after the rollout's last step (rollout cut)
    got = compute_gae(rewards, values, final_values, terminated, truncated, last_values, gamma, lamda)[0]
    # Worth of what follows each step: V(s1); V(final obs) = 7 (bootstrap); V(s3); 0 (terminal); 9 (rollout cut).
    nexts = [0.4, 7.0, 0.2, 0.0, 9.0]
    continues = [1, 0, 1, 0, 1]
    expected = gae_hand(rewards[0], values[0], nexts, continues, gamma, lamda)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    # By hand for the two ends of the first episode:
    d1 = 2.0 + 0.9 * 7.0 - 0.4
    d0 = 1.0 + 0.9 * 0.4 - 0.5
    assert got[1] == pytest.approx(d1)
    assert got[0] == pytest.approx(d0 + 0.9 * 0.8 * d1)
    assert got[3] == pytest.approx(4.0 - 0.2)  # terminal: no bootstrap at all
    assert got[4] == pytest.approx(5.0 + 0.9 * 9.0 - 0.1)


def test_gae_workers_are_independent():
    rng = np.random.default_rng(3)
    W, T = 5, 30
    r, v, fv = (rng.normal(size=(W, T)).astype(np.float32) for _ in range(3))
    term, trunc = rng.random((W, T)) < 0.1, rng.random((W, T)) < 0.05
    trunc &= ~term
    last = rng.normal(size=W).astype(np.float32)
    batch = compute_gae(r, v, fv, term, trunc, last, 0.99, 0.95)
    for w in range(W):
        one = compute_gae(r[w:w + 1], v[w:w + 1], fv[w:w + 1], term[w:w + 1], trunc[w:w + 1], last[w:w + 1],
                          0.99, 0.95)
        np.testing.assert_allclose(batch[w], one[0], rtol=1e-6)
        nexts = [0.0 if term[w, t] else fv[w, t] if trunc[w, t] else (v[w, t + 1] if t + 1 < T else last[w])
                 for t in range(T)]
        expected = gae_hand(r[w], v[w], nexts, [0 if term[w, t] or trunc[w, t] else 1 for t in range(T)],
                            0.99, 0.95)
        np.testing.assert_allclose(batch[w], expected, rtol=1e-4, atol=1e-5)
