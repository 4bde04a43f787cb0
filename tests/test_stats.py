"""stats.py: IQM, bootstrap intervals, grid points from run folders, the report and its CLI."""
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import stats
from tests.hang import HANG_S

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ statistics
def test_iqm_is_the_mean_of_the_middle_half():
    # 8 scores, sorted -50 1 2 3 4 5 9 100: the 2 lowest and 2 highest dropped, mean of 2 3 4 5
    x = np.array([100.0, 1, 5, 3, -50, 4, 9, 2])
    assert stats.iqm(x) == pytest.approx(3.5)
    # 10 scores: int(10 / 4) = 2 dropped at each end, the middle six averaged: 4.0
    # (not 3.8, the IQM that would weigh the 3rd and 8th scores by a half)
    y = np.array([1000.0, 0, 1, 2, 3, 4, 5, 9, 1000, 0])
    assert stats.iqm(y) == pytest.approx((1 + 2 + 3 + 4 + 5 + 9) / 6)
    # along the last axis of a (runs, seeds) array
    assert np.allclose(stats.iqm(np.stack([x, x + 1])), [3.5, 4.5])


def oracle_interval(x, statistic, n_resamples, confidence, rng):
    """The percentile bootstrap in plain loops."""
    values = [statistic(x[rng.integers(0, len(x), len(x))]) for _ in range(n_resamples)]
    alpha = (1 - confidence) / 2
    return np.percentile(values, 100 * alpha), np.percentile(values, 100 * (1 - alpha))


@pytest.mark.parametrize("name", ["mean", "iqm"])
def test_interval_matches_a_looped_bootstrap(name):
    x = np.random.default_rng(1).normal(0, 1, 40)
    statistic = stats.STATISTICS[name]
    point, low, high = stats.interval(x, statistic, n_resamples=4000)
    want_low, want_high = oracle_interval(x, statistic, 4000, 0.95, np.random.default_rng(2))
    assert point == pytest.approx(statistic(x))
    # two independent 4000-resample runs: endpoints agree to Monte Carlo error (width ~0.6)
    assert low == pytest.approx(want_low, abs=0.04)
    assert high == pytest.approx(want_high, abs=0.04)


def test_mean_interval_of_a_large_normal_sample_is_the_textbook_one():
    x = np.random.default_rng(3).normal(5.0, 2.0, 2000)
    point, low, high = stats.interval(x, np.mean)
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))  # 0.088
    assert point == pytest.approx(x.mean())
    assert low == pytest.approx(x.mean() - half, abs=0.1 * half)
    assert high == pytest.approx(x.mean() + half, abs=0.1 * half)


@pytest.mark.parametrize("x", [np.array([1.5]), np.full(6, 2.0)])
def test_degenerate_input_gives_a_zero_width_interval(x):
    for statistic in stats.STATISTICS.values():
        point, low, high = stats.interval(x, statistic)
        assert low == high == point == x[0]


def test_fraction_at_least_and_the_profile():
    x = np.array([0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    point, low, high = stats.interval(x >= 7.0, np.mean)  # the table's "seeds >= threshold"
    assert point == pytest.approx(0.3)
    assert 0.0 <= low < 0.3 < high <= 0.7
    taus = np.array([-1.0, 4.5, 9.0])
    profile = stats.performance_profile(x, taus)
    assert np.allclose(profile.point, [1.0, 0.5, 0.0])
    assert np.all(profile.low <= profile.point) and np.all(profile.point <= profile.high)
    assert profile.low[0] == profile.high[0] == 1.0 and profile.high[2] == 0.0  # nothing above the max, ever
    assert 0.1 < profile.low[1] < 0.5 < profile.high[1] < 0.9


def test_a_curve_interval_resamples_whole_runs():
    rng = np.random.default_rng(7)
    first = rng.normal(0, 1, 12)
    curves = np.stack([first, first + 5.0, 2 * first], axis=1)  # (seeds, updates)
    point, low, high = stats.interval(curves.T, np.mean)
    assert point.shape == low.shape == high.shape == (3,)
    assert np.allclose(point, curves.mean(0))
    # update 2 is update 1 shifted, update 3 scaled: with the same seeds drawn at every
    # update, its interval is shifted and scaled alike (independent draws would not be)
    assert (low[1], high[1]) == pytest.approx((low[0] + 5.0, high[0] + 5.0))
    assert (low[2], high[2]) == pytest.approx((2 * low[0], 2 * high[0]))
    # and each update's interval is the one-sample interval of that column
    assert (low[0], high[0]) == pytest.approx(tuple(stats.interval(first, np.mean)[1:]))


def test_intervals_are_reproducible_and_the_seed_matters():
    x = np.random.default_rng(8).normal(0, 1, 20)
    assert stats.interval(x, stats.iqm) == stats.interval(x, stats.iqm)
    assert stats.interval(x, stats.iqm, seed=1)[1] != stats.interval(x, stats.iqm)[1]


# ------------------------------------------------------------------ runs and grid points
CONFIG = {"seed": 0, "updates": 5, "learning_rate_schedule": {"initial": 3e-4, "final": 3e-4},
          "recurrence": {"sequence_length": 8, "layer_type": "gru"},
          "environment": {"type": "PocMemoryEnv", "name": "", "kwargs": {}}}


def write_run(folder, seed, rewards, steps_per_update=2048, evaluations=None, started=1.8e9, **changes):
    """A run as train.py leaves it: <folder>/<start time>/ holding config.json and TensorBoard scalars for
    updates 1, 2, ..., written at wall times from `started` on."""
    from torch.utils.tensorboard import SummaryWriter
    config = json.loads(json.dumps(CONFIG))
    config["seed"], config["updates"] = seed, len(rewards)  # a finished run, unless `updates` says more
    for dotted, value in changes.items():  # learning_rate_schedule__initial=1e-3 -> config[...][...]
        *parents, key = dotted.split("__")
        node = config
        for parent in parents:
            node = node.setdefault(parent, {})
        node[key] = value
    run = folder / time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    writer = SummaryWriter(str(run))
    for update, reward in enumerate(rewards, start=1):
        if reward is not None:  # None: no episode ended in this update
            writer.add_scalar("episode/reward_mean_last100", reward, update, walltime=started + update)
        writer.add_scalar("time/env_steps", update * steps_per_update, update, walltime=started + update)
        # the run's median steps/s: 1002 + 100 seed
        writer.add_scalar("time/steps_per_second", 1000 + 100 * seed + update, update, walltime=started + update)
    for update, score in (evaluations or {}).items():  # {update: eval/reward_mean}
        writer.add_scalar("eval/reward_mean", score, update, walltime=started + update)
    writer.close()
    return run


def test_runs_are_grouped_by_config_without_seed_and_labelled_by_what_differs(tmp_path):
    for seed in range(3):
        write_run(tmp_path / f"lr3e-4_L8_{seed}", seed, [0.1, 0.5, 1.0 + seed])
        write_run(tmp_path / f"lr1e-3_L8_{seed}", seed, [0.2, 0.6, 0.9], learning_rate_schedule__initial=1e-3)
        write_run(tmp_path / f"lr1e-3_L16_{seed}", seed, [0.2, 0.6, 0.8], learning_rate_schedule__initial=1e-3,
                  recurrence__sequence_length=16)
    points = stats.group_runs(stats.load_runs([tmp_path]))
    assert [p.label for p in points] == [
        "learning_rate_schedule.initial=0.0003, recurrence.sequence_length=8",
        "learning_rate_schedule.initial=0.001, recurrence.sequence_length=8",
        "learning_rate_schedule.initial=0.001, recurrence.sequence_length=16",
    ]
    assert [sorted(r.seed for r in p.runs) for p in points] == [[0, 1, 2]] * 3
    assert sorted(points[0].scores()) == [1.0, 2.0, 3.0]
    assert sorted(points[0].scores(last=2)) == pytest.approx([0.75, 1.25, 1.75])  # (0.5 + 1 + seed) / 2
    updates, steps, curves = points[1].curves()
    assert updates.tolist() == [1, 2, 3] and steps.tolist() == [2048, 4096, 6144]
    assert np.allclose(curves, [[0.2, 0.6, 0.9]] * 3)


def test_runs_that_differ_only_in_where_they_ran_are_seeds_of_one_config(tmp_path):
    # a sweep's seeds split between this machine and a GPU machine (results/minigrid/gpu_seeds.sh)
    write_run(tmp_path / "seed0", 0, [0.5, 0.9], hidden_layer_size=512, device="cpu", torch_threads=2,
              worker_processes=2)
    write_run(tmp_path / "seed4", 4, [0.4, 0.8], hidden_layer_size=512, device="auto", torch_threads=0,
              worker_processes=6, checkpoint_interval=10)
    write_run(tmp_path / "other", 1, [0.1, 0.2], device="cpu", hidden_layer_size=64)
    points = stats.group_runs(stats.load_runs([tmp_path]))
    assert [sorted(r.seed for r in p.runs) for p in points] == [[1], [0, 4]]
    assert [p.label for p in points] == ["hidden_layer_size=64", "hidden_layer_size=512"]
    # one steps/s for seeds of different machines would mean nothing: the table says so, each run's is kept
    markdown = stats.report([tmp_path], tmp_path / "out" / "split", n_resamples=100)
    assert "| hidden_layer_size=512 | 2 |" in markdown and "| mixed | 0 |" in markdown
    assert "0: 1002 (device cpu, worker_processes 2, torch_threads 2, checkpoint_interval None)" in markdown
    result = json.loads((tmp_path / "out" / "split.json").read_text())
    assert [p["steps_per_second"] for p in result["grid_points"]] == [pytest.approx(1101.5), None]
    assert sorted(r["steps_per_second"] for r in result["grid_points"][1]["runs"]) == [1001.5, 1401.5]


def test_one_grid_point_is_labelled_by_its_environment(tmp_path):
    write_run(tmp_path / "a", 0, [1.0])
    write_run(tmp_path / "b", 1, [2.0])
    (point,) = stats.group_runs(stats.load_runs([tmp_path]))
    assert point.label == "PocMemoryEnv" and point.config["recurrence"]["sequence_length"] == 8
    write_run(tmp_path / "c" / "nested", 0, [1.0], environment__type="Minigrid",
              environment__name="MiniGrid-MemoryS9-v0")
    labels = [p.label for p in stats.group_runs(stats.load_runs([tmp_path]))]
    assert labels == ["environment.name=, environment.type=PocMemoryEnv",
                      "environment.name=MiniGrid-MemoryS9-v0, environment.type=Minigrid"]


def test_a_run_with_fewer_updates_is_stopped_early_not_scored(tmp_path):
    for seed in range(3):
        write_run(tmp_path / f"full{seed}", seed, [0.0, 0.5, 1.0, 1.0])
    write_run(tmp_path / "asha", 3, [0.0, -5.0], updates=4)  # stopped after 2 of 4 updates
    (point,) = stats.group_runs(stats.load_runs([tmp_path]))
    assert [r.seed for r in point.stopped] == [3] and point.stopped[0].updates == 2
    assert sorted(r.seed for r in point.runs) == [0, 1, 2]
    assert np.allclose(point.scores(), 1.0)  # the -5.0 of the stopped run counts nowhere


def test_a_run_cut_short_is_never_scored_as_its_configs_final_score(tmp_path, capsys):
    """One seed stopped at update 3 of 5 was the whole grid point: its update 3 reported as the final score,
    'stopped early 0' (issue 58 point 7)."""
    write_run(tmp_path / "cut", 0, [0.1, 0.2, 0.3], updates=5)
    write_run(tmp_path / "done", 1, [0.5, 0.6], gamma=0.9)
    (point,) = stats.group_runs(stats.load_runs([tmp_path]))
    assert point.label == "gamma=0.9, updates=2" and [r.seed for r in point.runs] == [1]
    assert capsys.readouterr().err == ("warning: gamma=null, updates=5 left out: none of its 1 run(s) reached "
                                       "its config's 5 updates (the furthest stopped at 3)\n")
    code = stats.main(["--runs", str(tmp_path / "cut"), "--out", str(tmp_path / "out")])
    assert code == 2 and "error: no run reached its config's updates" in capsys.readouterr().err


def test_a_run_whose_events_hold_no_update_is_named_in_a_warning(tmp_path, capsys):
    """An empty events file: the run was dropped without a word (issue 58 point 7)."""
    write_run(tmp_path / "s0", 0, [0.5, 1.0])
    empty = write_run(tmp_path / "s1", 1, [0.5, 1.0])
    for events in empty.glob("events.out.tfevents.*"):
        events.write_bytes(b"")
    assert [r.seed for r in stats.load_runs([tmp_path])] == [0]
    assert capsys.readouterr().err == (f"warning: {empty} left out: its events hold no whole update (empty, "
                                       "damaged, or the run ended before its first)\n")


def test_a_run_damaged_in_its_first_update_is_named_in_words_that_agree(tmp_path, capsys):
    """A run whose events are damaged inside update 1 was said to be 'read up to update 1', then to hold 'no
    update' (issue 72, borderline). Alone under --runs it is refused: no run is left to score (exit 2)."""
    damaged = write_run(tmp_path / "s0", 0, [0.5, 1.0])
    events, = damaged.glob("events.out.tfevents.*")
    first_update = events.read_bytes()
    events.write_bytes(first_update[:first_update.index(b"time/env_steps") - 20])  # update 1 without env_steps
    code = stats.main(["--runs", str(tmp_path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and err == [
        f"warning: {events} is damaged or cut short after a record of update 1: read up to there",
        f"warning: {damaged} left out: its events hold no whole update (empty, damaged, or the run ended before its "
        "first)", f"error: no runs under {tmp_path} (a run's folder holds config.json and TensorBoard events of at "
        "least one update)"]


def test_reward_carries_over_updates_without_a_finished_episode(tmp_path):
    write_run(tmp_path / "run", 0, [None, 0.4, None, None, 0.9, None])
    (run,) = stats.load_runs([tmp_path])
    assert run.updates == 6 and run.update.tolist() == [1, 2, 3, 4, 5, 6]
    assert np.isnan(run.reward[0]) and np.allclose(run.reward[1:], [0.4, 0.4, 0.4, 0.9, 0.9])
    assert run.final_score(1) == pytest.approx(0.9) and run.final_score(3) == pytest.approx((0.4 + 0.9 + 0.9) / 3)



def test_a_resumed_run_replaces_what_the_stopped_process_wrote_after_its_checkpoint(tmp_path):
    """Written up to update 4, resumed from update 2's checkpoint and stopped after update 3: the resumed
    process's update 3, and no update 4. Events files are read in name order, which starts with their time."""
    from torch.utils.tensorboard import SummaryWriter
    run = write_run(tmp_path / "r", 0, [0.1, 0.2, 0.3, 0.4])
    (first,) = run.glob("events.out.tfevents.*")
    writer = SummaryWriter(str(run))
    writer.add_scalar("episode/reward_mean_last100", 0.9, 3)
    writer.add_scalar("time/env_steps", 3 * 2048, 3)
    writer.close()
    (second,) = set(run.glob("events.out.tfevents.*")) - {first}
    second.rename(run / "events.out.tfevents.9999999999.later")
    (loaded,) = stats.load_runs([tmp_path])
    assert loaded.update.tolist() == [1, 2, 3] and loaded.reward.tolist() == pytest.approx([0.1, 0.2, 0.9])

# ------------------------------------------------------------------ report and command line
def test_report_writes_the_table_json_and_figure(tmp_path):
    rewards = {0: 1.2, 1: 1.0, 2: 1.2, 3: 0.4}
    for seed, final in rewards.items():
        write_run(tmp_path / "runs" / f"s{seed}", seed, [-1.0, 0.0, final])
    write_run(tmp_path / "runs" / "stopped", 9, [-1.0, 5.0], updates=3)
    out = tmp_path / "out" / "poc"
    markdown = stats.report([tmp_path / "runs"], out, threshold=1.1, n_resamples=500)
    assert markdown == (tmp_path / "out" / "poc.md").read_text()
    row = next(line for line in markdown.splitlines() if line.startswith("| PocMemoryEnv"))
    assert markdown.splitlines()[-1] == "- PocMemoryEnv: 0: 3, 1: -, 2: 3, 3: -"  # first update at 1.1, or never
    # mean 0.95, median 1.1, IQM of 0.4 1.0 1.2 1.2 drops one each end: 1.1; 2 of 4 seeds >= 1.1; 1 stopped
    # steps/s: the median over seeds 0-3 of each run's median (1002, 1102, 1202, 1302), the stopped one left out
    assert row.startswith("| PocMemoryEnv | 4 | 0.95 [") and row.endswith("| 1152 | 1 |")
    assert "| 1.1 [" in row and "| 0.50 [" in row and "seeds >= 1.1" in markdown
    result = json.loads((tmp_path / "out" / "poc.json").read_text())
    (point,) = result["grid_points"]
    assert sorted((r["seed"], r["final_score"]) for r in point["runs"]) == [
        (s, pytest.approx(v)) for s, v in sorted(rewards.items())]
    assert [r["seed"] for r in point["stopped_early"]] == [9]
    assert point["final_score"]["iqm"]["value"] == pytest.approx(1.1)
    assert point["steps_per_second"] == pytest.approx(1152)
    assert point["curve"]["env_steps"] == [2048, 4096, 6144] and point["curve"]["iqm"]["value"][0] == -1.0
    # each seed's curve, in the order of "runs", for the figure's thin lines
    assert point["curve"]["per_seed"] == [[-1.0, 0.0, pytest.approx(r["final_score"])] for r in point["runs"]]
    assert len(point["profile"]["tau"]) == len(point["profile"]["value"]) == 101
    assert result["reference"].endswith("poc_memory_env.csv") and result["n_resamples"] == 500
    assert (tmp_path / "out" / "poc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_final_held_out_evaluation_is_reported_over_seeds(tmp_path):
    """Runs that evaluated (config `evaluation`): each run's evaluation after its last update, and their
    IQM with its interval, beside the training score; a run whose last update had no evaluation has none."""
    finals = {0: 0.96, 1: 0.5, 2: 0.97, 3: 0.95}
    for seed, final in finals.items():
        write_run(tmp_path / "runs" / f"s{seed}", seed, [0.5, 0.9, 0.96], evaluations={2: 0.8, 3: final})
    markdown = stats.report([tmp_path / "runs"], tmp_path / "out" / "e", n_resamples=500)
    assert "Final held-out evaluation" in markdown
    row = markdown.splitlines()[-1]
    assert row.startswith("| PocMemoryEnv | 4 |") and row.endswith("| 0: 0.960, 1: 0.500, 2: 0.970, 3: 0.950 |")
    (point,) = json.loads((tmp_path / "out" / "e.json").read_text())["grid_points"]
    assert point["final_evaluation"]["iqm"]["value"] == pytest.approx(0.955)  # the middle two: 0.95, 0.96
    assert point["runs"][0]["evaluations"] == {"update": [2, 3], "reward_mean": [pytest.approx(0.8),
                                                                                pytest.approx(0.96)]}
    assert (tmp_path / "out" / "e.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # with its held-out panel
    write_run(tmp_path / "late" / "s0", 0, [0.5, 0.9, 0.96], evaluations={2: 0.8})
    assert stats.load_runs([tmp_path / "late"])[0].final_evaluation is None
    assert "held-out" not in stats.report([tmp_path / "late"], tmp_path / "out" / "late", n_resamples=100)


def test_the_first_update_at_the_threshold_is_reported_per_seed(tmp_path):
    """How soon each seed learned: the first update its training curve and its held-out evaluations
    reached the threshold, or never."""
    write_run(tmp_path / "runs" / "s0", 0, [0.5, 0.9, 0.8, 0.95], evaluations={2: 0.7, 4: 0.9})
    write_run(tmp_path / "runs" / "s1", 1, [0.5, 0.6, 0.7, 0.8], evaluations={2: 0.5, 4: 0.6})
    markdown = stats.report([tmp_path / "runs"], tmp_path / "out" / "f", threshold=0.85, n_resamples=100)
    assert "- PocMemoryEnv: 0: 2 / 4, 1: - / -" in markdown
    runs = json.loads((tmp_path / "out" / "f.json").read_text())["grid_points"][0]["runs"]
    assert [r["first_update_at_threshold"] for r in runs] == [{"training": 2, "evaluation": 4},
                                                              {"training": None, "evaluation": None}]
    write_run(tmp_path / "plain" / "s0", 0, [0.5, 0.9])  # never evaluated: the training column alone
    assert "- PocMemoryEnv: 0: 2\n" in stats.report([tmp_path / "plain"], tmp_path / "out" / "g", threshold=0.85,
                                                    n_resamples=100)


def test_published_figures_are_parsed_listed_and_kept_in_the_json(tmp_path):
    assert stats.parse_published("8192000:0.42:GRU: Memory Gym authors") == (8192000, 0.42, "GRU: Memory Gym authors")
    assert stats.parse_published(":0.017:random") == (None, 0.017, "random")
    write_run(tmp_path / "runs" / "s0", 0, [0.1, 0.3], evaluations={2: 0.25})
    published = [stats.parse_published("4096:0.42:GRU"), stats.parse_published(":0.017:random")]
    markdown = stats.report([tmp_path / "runs"], tmp_path / "out" / "p", published=published, n_resamples=100)
    assert "Figures drawn beside the runs (--published): GRU 0.42 at 4,096 steps; random 0.017." \
        in markdown
    saved = json.loads((tmp_path / "out" / "p.json").read_text())["published"]
    assert saved == [{"env_steps": 4096, "value": 0.42, "label": "GRU"},
                     {"env_steps": None, "value": 0.017, "label": "random"}]
    assert (tmp_path / "out" / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Published" not in stats.report([tmp_path / "runs"], tmp_path / "out" / "q", n_resamples=100)


def test_reference_for_picks_the_environments_curve():
    assert stats.reference_for({"environment": {"type": "PocMemoryEnv", "name": ""}}).name == "poc_memory_env.csv"
    assert stats.reference_for({"environment": {"type": "CartPoleMasked"}}).name == "cartpole_masked.csv"
    minigrid = stats.reference_for({"environment": {"type": "Minigrid", "name": "MiniGrid-MemoryS9-v0"}})
    assert minigrid.name == "minigrid_memory_s9.csv"
    curve = stats.read_reference(minigrid)
    assert curve.runs[0] == 10 and curve.env_steps[0] == 4096 and len(curve.reward_mean_over_runs) == 500
    assert stats.reference_for({"environment": {"type": "Minigrid", "name": "MiniGrid-MemoryS13-v0"}}) is None
    assert stats.reference_for({"environment": {"type": "CartPole"}}) is None


@pytest.mark.slow
def test_cli_refuses_bad_input_in_one_line_with_exit_code_2(tmp_path):
    # as a user meets it: a process that ends with one line and exit code 2, no traceback
    result = subprocess.run([sys.executable, str(ROOT / "stats.py"), "--runs", str(tmp_path / "missing"),
                             "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=HANG_S)
    assert result.returncode == 2
    assert result.stderr == f"error: {tmp_path / 'missing'} does not exist\n"


@pytest.mark.parametrize("args, message", [
    (["--runs", "{tmp}/empty"], "no runs under"),
    (["--runs", "{tmp}/runs", "--threshold", "high"], "argument --threshold: invalid number value: 'high'"),
    (["--runs", "{tmp}/runs", "--threshold", "nan"], "argument --threshold: must be a number from -inf to inf"),
    (["--runs", "{tmp}/runs", "--final-updates", "0"], "--final-updates 0: must be from 1 to the 1 update(s)"),
    (["--runs", "{tmp}/runs", "--final-updates", "2"],
     "--final-updates 2: must be from 1 to the 1 update(s) the runs of PocMemoryEnv have"),
    (["--runs", "{tmp}/runs", "--published", "0.42:GRU"], "argument --published: expected STEPS:VALUE:LABEL"),
    (["--runs", "{tmp}/runs", "--published", "8M:0.42:GRU"], "expected STEPS:VALUE:LABEL"),
    (["--runs", "{tmp}/runs", "--published", "100:inf:GRU"], "expected STEPS:VALUE:LABEL"),
    (["--runs", "{tmp}/runs", "--published=-1:0.4:GRU"], "expected STEPS:VALUE:LABEL"),
    (["--runs", "{tmp}/runs", "--published", "1:0.4: "], "expected STEPS:VALUE:LABEL"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, args, message):
    # the same path as above, in this process: a process start per case would cost 2 s
    (tmp_path / "empty").mkdir()
    write_run(tmp_path / "runs" / "s0", 0, [1.0])
    code = stats.main([a.format(tmp=tmp_path) for a in args] + ["--out", str(tmp_path / "out")])
    stderr = capsys.readouterr().err
    assert code == 2 and stderr.startswith("error: ") and stderr.count("\n") == 1 and message in stderr, stderr
    assert not (tmp_path / "out.md").exists()


def test_cli_writes_the_report(tmp_path, capsys):
    write_run(tmp_path / "runs" / "s0", 0, [0.5, 1.0])
    write_run(tmp_path / "runs" / "s1", 1, [0.5, 2.0])
    stats.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "sweep")])
    assert "| PocMemoryEnv | 2 | 1.5 [1, 2] |" in capsys.readouterr().out
    assert (tmp_path / "sweep.png").exists()


@pytest.mark.parametrize("out", [".", "done", "done/", "new/"])
def test_out_names_a_prefix_or_a_folder_to_write_stats_into(tmp_path, capsys, monkeypatch, out):
    """--out is a prefix; an existing folder, or a path ending in a slash, gets stats.md, .json and .png
    inside; the paths printed are the files written."""
    write_run(tmp_path / "runs" / "s0", 0, [0.5, 1.0])
    (tmp_path / "done").mkdir()
    monkeypatch.chdir(tmp_path)
    stats.main(["--runs", "runs", "--out", out])
    written = capsys.readouterr().out.splitlines()[-1].removeprefix("wrote ").split(", ")
    assert written == [str(Path(out, "stats")) + suffix for suffix in (".md", ".json", ".png")]
    assert all(Path(path).is_file() for path in written)


def test_existing_outputs_need_overwrite_and_an_unknown_pool_key_is_refused(tmp_path, capsys):
    """stats.py replaced its output files unasked and took any --pool key (issue 58, borderline)."""
    write_run(tmp_path / "runs" / "s0", 0, [0.5, 1.0])
    (tmp_path / "mine.png").write_bytes(b"a user's figure")
    code = stats.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "mine")])
    assert code == 2 and capsys.readouterr().err == (f"error: {tmp_path / 'mine.png'} exists: choose another --out, "
                                                      "or pass --overwrite to replace it\n")
    assert (tmp_path / "mine.png").read_bytes() == b"a user's figure" and not (tmp_path / "mine.md").exists()
    assert stats.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "mine"), "--overwrite"]) == 0
    assert (tmp_path / "mine.png").read_bytes().startswith(b"\x89PNG")
    for pool, hint in (("recurence", "; did you mean recurrence?"), ("recurrence.layer_type", ""), ("zzz", "")):
        code = stats.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / pool), "--pool", pool])
        err = capsys.readouterr().err
        if pool == "recurrence.layer_type":  # a key the runs have: taken
            assert code == 0, err
        else:
            assert code == 2 and err == f"error: --pool {pool}: no run's config has that key or section{hint}\n"


def test_two_seeds_are_not_called_a_95_percent_interval(tmp_path):
    """Over 2 seeds every percentile bootstrap interval is the range of their scores (issue 58, borderline)."""
    for seed, final in ((0, 1.0), (1, 2.0)):
        write_run(tmp_path / f"s{seed}", seed, [0.5, final])
    markdown = stats.report([tmp_path], tmp_path / "out", n_resamples=100)
    assert "| PocMemoryEnv | 2 | 1.5 [1, 2] |" in markdown
    assert ("PocMemoryEnv: 2 seeds, whose every [low, high] is the range of their two scores (a bootstrap over 2 "
            "seeds draws nothing else): no 95% interval.") in markdown


def test_an_unwritable_out_is_one_line(tmp_path, capsys):
    write_run(tmp_path / "runs" / "s0", 0, [1.0])
    (tmp_path / "file").write_text("")
    code = stats.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "file" / "out")])
    stderr = capsys.readouterr().err
    assert code == 2 and stderr.count("\n") == 1 and str(tmp_path / "file") in stderr, stderr



def test_two_seeds_give_no_degenerate_data_warning(tmp_path):
    """A normal 2-seed sweep's statistics printed scipy's DegenerateDataWarning on stderr (about a BCa interval it
    was not asked for): an update in which one seed ended no episode has no value for it, so neither its IQM nor its
    interval has one (issue 72, borderline: the NaN is meant and stays; the warning is left out)."""
    import warnings
    for seed, rewards in ((0, [None, 1.0, 1.5]), (1, [0.5, 2.0, 1.5])):  # seed 0: no episode ended in update 1
        write_run(tmp_path / f"s{seed}", seed, rewards)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        markdown = stats.report([tmp_path], tmp_path / "out", n_resamples=100)
    assert "| PocMemoryEnv | 2 | 1.5 [1.5, 1.5] |" in markdown
    curve = json.loads((tmp_path / "out.json").read_text())["grid_points"][0]["curve"]["iqm"]
    assert [math.isnan(curve[k][0]) for k in ("value", "low", "high")] == [True] * 3  # no value for seed 0 there
    assert (curve["low"][1], curve["high"][1]) == (1.0, 2.0)


def test_a_full_disk_at_out_changes_none_of_the_set_and_names_it(tmp_path, capsys, monkeypatch):
    """The figure's write failed after .md and .json were written: exit 2, 'could not read or write None', and
    half a set (issue 72). Now none of the three is written or changed, the line names them, exit 1."""
    from matplotlib.figure import Figure
    write_run(tmp_path / "runs" / "s0", 0, [0.5, 1.0])

    def half_then_full(self, path, **kwargs):
        Path(path).write_bytes(b"half")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Figure, "savefig", half_then_full)
    out = tmp_path / "out" / "x"
    assert stats.main(["--runs", str(tmp_path / "runs"), "--out", str(out)]) == 1
    assert capsys.readouterr().err == (f"error: could not write {out}.md, .json, .png (No space left on device); "
                                       "none of them was written or changed\n")
    assert list((tmp_path / "out").iterdir()) == []
    for suffix in (".md", ".json", ".png"):
        Path(f"{out}{suffix}").write_text("kept")
    assert stats.main(["--runs", str(tmp_path / "runs"), "--out", str(out), "--overwrite"]) == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["x.json", "x.md", "x.png"]
    assert all(Path(f"{out}{suffix}").read_text() == "kept" for suffix in (".md", ".json", ".png"))


def damage(events, at):
    """Flips a byte of an events file `at` bytes before its end."""
    data = bytearray(events.read_bytes())
    data[-at] ^= 0xFF
    events.write_bytes(bytes(data))


def test_a_damaged_events_file_is_named_and_read_up_to_the_damage(tmp_path, capsys):
    for seed in range(3):
        write_run(tmp_path / f"s{seed}", seed, [0.1, 0.5, 1.0])
    (events,) = (tmp_path / "s1").rglob("events.out.tfevents.*")
    damage(events, 150)  # inside update 3's first record (its three records take the last 176 bytes)
    (point,) = stats.group_runs(stats.load_runs([tmp_path]))
    assert sorted(r.seed for r in point.runs) == [0, 2] and [r.updates for r in point.stopped] == [2]
    assert capsys.readouterr().err == f"warning: {events} is damaged or cut short after a record of update 2: read up to there\n"
    truncated = (tmp_path / "s2").rglob("events.out.tfevents.*").__next__()
    truncated.write_bytes(truncated.read_bytes()[:60])  # nothing past the first record
    assert sorted(r.seed for r in stats.load_runs([tmp_path])) == [0, 1]
    assert f"warning: {truncated} is damaged or cut short after a record of update 0" in capsys.readouterr().err


def test_a_run_trained_again_counts_once_the_newest(tmp_path, capsys):
    """train.py --overwrite starts a new summaries/<run-id>/<start time>/ beside the old one: the same
    config and seed, one run; the newest counts and a warning names the one left out."""
    old = write_run(tmp_path / "run", 0, [0.1, 0.2], started=1.8e9)
    new = write_run(tmp_path / "run", 0, [0.5, 0.9], started=1.8e9 + 3600)
    other = write_run(tmp_path / "other", 1, [0.5, 0.7])
    (point,) = stats.group_runs(stats.load_runs([tmp_path]))
    assert [r.folder for r in point.runs] == [new, other] and point.stopped == []
    assert point.scores().tolist() == [pytest.approx(0.9), pytest.approx(0.7)]
    assert capsys.readouterr().err == f"warning: {old} left out: {new} is a later run of its config and seed\n"


def test_pooled_keys_join_runs_that_differ_only_in_them(tmp_path):
    # Breakout's seed 0 evaluated 16 games every 100 updates, seeds 1-2 64 every 500: one training config
    write_run(tmp_path / "seed0", 0, [0.5, 1.0], evaluations={2: 3.0}, evaluation__interval=100,
              evaluation__episodes=16)
    for seed in (1, 2):
        write_run(tmp_path / f"seed{seed}", seed, [0.5, 2.0], evaluations={2: 4.0}, evaluation__interval=500,
                  evaluation__episodes=64)
    assert len(stats.group_runs(stats.load_runs([tmp_path]))) == 2
    (point,) = stats.group_runs(stats.load_runs([tmp_path]), pooled=["evaluation"])
    assert sorted(r.seed for r in point.runs) == [0, 1, 2] and sorted(point.scores()) == [1.0, 2.0, 2.0]
    assert len(stats.group_runs(stats.load_runs([tmp_path]), pooled=["evaluation.interval"])) == 2
    markdown = stats.report([tmp_path], tmp_path / "out", pooled=["evaluation"], n_resamples=100)
    assert "| PocMemoryEnv | 3 |" in markdown and "Pooled (--pool): evaluation may differ" in markdown
    assert "0: 3.000, 1: 4.000, 2: 4.000" in markdown


def test_fresh_scores_of_several_seeds_are_aggregated_over_the_seeds_means(tmp_path):
    """tools/episode_interval.py --seeds: each file one seed's enjoy.py output; IQM over the seeds' means."""
    games = {"seed0": [60, 70, 80], "seed1": [100, 120], "seed2": [10, 20, 30, 40], "seed3": [200, 200]}
    for name, returns in games.items():
        (tmp_path / f"{name}.log").write_text("".join(f"episode {i + 1:4d}  return {r:9.3f}  length   100\n"
                                                      for i, r in enumerate(returns)))
    files = [str(tmp_path / f"{name}.log") for name in games]
    out = subprocess.run([sys.executable, str(ROOT / "tools/episode_interval.py"), "--seeds", *files],
                         capture_output=True, text=True, check=True).stdout
    means = np.array([70.0, 110.0, 25.0, 200.0])
    i = stats.interval(means, stats.iqm)
    assert out.startswith("4 seeds' means (70.000, 110.000, 25.000, 200.000)")
    assert f"iqm {stats.iqm(means):.3f} [{i.low:.3f}, {i.high:.3f}]" in out and "iqm 90.000" in out
