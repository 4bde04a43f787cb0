"""tools/benchmark.py: the ref, the temporary worktree, the alternation, which code each side runs, the
statistics, the load beside each run, the working tree alone, and one real short run against HEAD.

Most tests use a throwaway git repository whose train.py only reports where its modules came from, so they
run in seconds; the last one trains the real poc_memory_env for one update per side."""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.hang import HANG_S
from tools import benchmark

ROOT = Path(__file__).resolve().parent.parent

# Reports which probe_mod it imported, in its own process and in a forkserver child (as the env workers
# are started), and where and how it was started.
FAKE_TRAIN = '''
import json, multiprocessing, os, sys
import probe_mod

if __name__ == "__main__":
    args = sys.argv[1:]
    if os.environ.get("FAKE_FAIL") == probe_mod.VALUE:
        sys.exit("boom: " + probe_mod.VALUE)
    listing = sorted(os.listdir())
    context = multiprocessing.get_context("forkserver")
    queue = context.Queue()
    worker = context.Process(target=probe_mod.where, args=(queue,))
    worker.start()
    child_file = queue.get()
    worker.join()
    print("training bench on cpu; summaries in summaries/bench/x", flush=True)
    print("update    1/1  steps       64  reward   -0.500  length    3.0  sps     640", flush=True)
    print("timings: " + json.dumps({
        "updates": 1, "env_steps": 64, "train_seconds": 0.1, "reward_mean_last100": -0.5,
        "steps_per_second": 640.0, "peak_rss_mb": 10.0, "env_seconds": 0.01, "inference_seconds": 0.02,
        "buffer_seconds": 0.003, "update_seconds": 0.04, "probe_value": probe_mod.VALUE,
        "probe_file": probe_mod.__file__, "child_file": child_file, "cwd": os.getcwd(), "cwd_listing": listing,
        "executable": sys.executable, "argv": args}), flush=True)
'''
PROBE_MOD = '''VALUE = "{value}"


def where(queue):
    queue.put(__file__)
'''


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.com",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def worktrees(repo) -> list[str]:
    return [l for l in git(repo, "worktree", "list", "--porcelain").splitlines() if l.startswith("worktree ")]


def leftovers(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("benchmark-*")}


@pytest.fixture
def repo(tmp_path):
    """A git repository: a first commit without train.py, then HEAD with the fake train.py (probe 'old').
    The benchmark's temporary folders go to a folder of this test's own, so that another test running at
    the same time (pytest-xdist) cannot look like a leftover of this one."""
    private = tmp_path / "tmp"
    private.mkdir()
    saved, tempfile.tempdir = tempfile.tempdir, str(private)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("fake\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "before train.py")
    (repo / "train.py").write_text(FAKE_TRAIN)
    (repo / "probe_mod.py").write_text(PROBE_MOD.format(value="old"))
    (repo / "configs").mkdir()
    (repo / "configs/tiny.yaml").write_text("updates: 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "fake train.py")
    try:
        yield repo
    finally:
        tempfile.tempdir = saved
    assert worktrees(repo) == [f"worktree {repo}"], "a temporary worktree is still registered"
    assert not leftovers(private), "temporary folders were left behind"


def against(repo, tmp_path, *extra):
    return benchmark.main(["--against", "HEAD", "--config", "configs/tiny.yaml", "--out", str(tmp_path / "out"),
                           *extra], root=repo)


def fake_run(calls, fail_at=None, error=benchmark.RunError("train.py failed")):
    def run(tree, config, overrides, label=""):
        calls.append((tree, config, git(tree, "rev-parse", "HEAD")))
        if len(calls) == fail_at:
            raise error
        return {"wall_seconds": 1.0 + len(calls), "final_reward": 0.0,
                "updates": 1, "env_steps": 64, "steps_per_second": 100.0 * len(calls), "peak_rss_mb": 10.0,
                **{f"{p}_seconds": 0.1 for p in benchmark.PHASES}}
    return run


def test_ref_resolves_to_the_full_hash(repo):
    assert benchmark.resolve_ref(repo, "HEAD") == git(repo, "rev-parse", "HEAD")
    assert benchmark.resolve_ref(repo, git(repo, "rev-parse", "--short", "HEAD")) == git(repo, "rev-parse", "HEAD")


@pytest.mark.parametrize("case, ref, config, repeats, expect", [
    ("unknown ref", "nosuchref", "configs/tiny.yaml", 3, "unknown git ref 'nosuchref'"),
    ("option as ref", "--version", "configs/tiny.yaml", 3, "unknown git ref '--version'"),
    ("ref without train.py", "HEAD~1", "configs/tiny.yaml", 3, "has no train.py"),
    ("missing config", "HEAD", "configs/nope.yaml", 3, "config not found: configs/nope.yaml"),
    ("too few repeats", "HEAD", "configs/tiny.yaml", 2, "--allow-few-repeats"),
    ("no repository", "HEAD", "configs/tiny.yaml", 3, "not in a git repository"),
    ("no git", "HEAD", "configs/tiny.yaml", 3, "git is not installed")])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(repo, tmp_path, capsys, monkeypatch,
                                                         case, ref, config, repeats, expect):
    root = repo
    if case == "no repository":
        root = tmp_path / "plain"
        (root / "configs").mkdir(parents=True)
        (root / "configs/tiny.yaml").write_text("updates: 1\n")
    elif case == "no git":
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    argv = [f"--against={ref}", "--config", config, "--repeats", str(repeats), "--out", str(tmp_path / "out")]
    assert benchmark.main(argv, root=root) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and expect in err, err
    assert not (tmp_path / "out.json").exists()


def test_runs_alternate_old_new_and_each_side_runs_its_own_commit(repo, tmp_path, monkeypatch):
    (repo / "configs/other.yaml").write_text("updates: 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "second config")
    old = git(repo, "rev-parse", "HEAD~1")
    (repo / "probe_mod.py").write_text(PROBE_MOD.format(value="new"))
    calls = []
    monkeypatch.setattr(benchmark, "run_train", fake_run(calls))
    assert benchmark.main(["--against", "HEAD~1", "--config", "configs/tiny.yaml", "--config", "configs/other.yaml",
                           "--out", str(tmp_path / "out")], root=repo) == 0
    trees = [tree for tree, _, _ in calls]
    ref_tree = trees[0]
    assert ref_tree != repo and not ref_tree.exists()  # a temporary checkout, gone now
    assert trees == [ref_tree, repo] * 6
    assert [config.name for _, config, _ in calls] == ["tiny.yaml"] * 6 + ["other.yaml"] * 6
    assert {commit for tree, _, commit in calls if tree == ref_tree} == {old}
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["order"] == "old new old new old new"
    sides = report["sides"]
    assert sides["old"]["commit"] == old and sides["new"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert sides["new"]["uncommitted_changes"] and sides["new"]["label"].endswith("+ uncommitted changes")
    tiny = report["configs"]["configs/tiny.yaml"]
    # steps/s of call k is 100k: old ran calls 1, 3, 5 and new 2, 4, 6
    assert tiny["old"]["steps_per_second_median"] == 300 and tiny["new"]["steps_per_second_median"] == 400
    assert tiny["ratio"]["steps_per_second_new_over_old"] == pytest.approx(4 / 3)
    assert not tiny["ref_config_differs"] and report["configs"]["configs/other.yaml"]["ref_config_differs"]
    assert "| configs/tiny.yaml | 1.333 |" in (tmp_path / "out.md").read_text()
    # pairs (100, 200), (300, 400), (500, 600): all won by the new tree, too few for an interval
    assert tiny["paired"]["pairs_new_faster"] == 3 and tiny["paired"]["pair_ratio_median"] == pytest.approx(4 / 3)
    assert "| 3 of 3 | 1.333 (too few pairs for an interval) |" in (tmp_path / "out.md").read_text()


@pytest.mark.parametrize("error, code", [(benchmark.RunError("train.py failed"), 1), (KeyboardInterrupt(), 130)])
def test_worktree_is_removed_when_a_run_fails_or_is_interrupted(repo, tmp_path, monkeypatch, capsys, error, code):
    calls = []
    monkeypatch.setattr(benchmark, "run_train", fake_run(calls, fail_at=2, error=error))
    assert against(repo, tmp_path) == code
    assert len(calls) == 2 and not calls[0][0].exists()
    assert not (tmp_path / "out.json").exists()
    # the fixture checks that no worktree is registered and no temporary folder is left


def test_a_failing_train_py_ends_in_exit_1_with_the_end_of_its_output(repo, tmp_path, monkeypatch, capsys):
    (repo / "probe_mod.py").write_text(PROBE_MOD.format(value="new"))
    monkeypatch.setenv("FAKE_FAIL", "new")  # only the working tree's side fails, after the old side ran
    assert against(repo, tmp_path) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: train.py of the working tree") and err.rstrip().endswith("boom: new"), err
    assert not (tmp_path / "out.json").exists()


def test_ref_side_imports_the_refs_modules_even_with_the_working_tree_on_pythonpath(repo, tmp_path, monkeypatch,
                                                                                    capsys):
    (repo / "probe_mod.py").write_text(PROBE_MOD.format(value="new"))  # an uncommitted change
    monkeypatch.setenv("PYTHONPATH", str(repo))
    assert against(repo, tmp_path, "--set", "a=1", "--repeats", "1", "--allow-few-repeats") == 0
    assert "warning: 1 run(s) per side" in capsys.readouterr().err
    report = json.loads((tmp_path / "out.json").read_text())
    (old,), (new,) = report["configs"]["configs/tiny.yaml"]["runs"].values()
    assert old["probe_value"] == "old" and new["probe_value"] == "new"
    ref_tree = Path(old["probe_file"]).parent
    assert ref_tree != repo and Path(old["child_file"]).parent == ref_tree  # the env workers' imports too
    assert Path(new["probe_file"]).parent == repo and Path(new["child_file"]).parent == repo
    for run in (old, new):
        assert run["cwd_listing"] == [] and run["executable"] == sys.executable
        assert "--cpu" in run["argv"] and run["argv"][-2:] == ["--set", "a=1"]
        assert run["argv"][run["argv"].index("--config") + 1] == str(repo / "configs/tiny.yaml")
    assert old["cwd"] != new["cwd"] and not Path(old["cwd"]).exists()


def test_without_against_the_working_tree_runs_alone_and_the_report_names_its_commit(repo, tmp_path):
    assert benchmark.main(["--config", "configs/tiny.yaml", "--repeats", "2", "--out", str(tmp_path / "out")],
                          root=repo) == 0
    report = json.loads((tmp_path / "out.json").read_text())
    (side,) = report["sides"]
    runs = report["configs"]["configs/tiny.yaml"]["runs"]["new"]
    assert side == "new" and report["sides"]["new"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert [run["probe_value"] for run in runs] == ["old", "old"]  # the committed probe_mod, in the tree itself
    assert {Path(run["probe_file"]).parent for run in runs} == {repo}
    text = (tmp_path / "out.md").read_text()
    assert git(repo, "rev-parse", "--short=7", "HEAD") in text and "per pair" not in text


def test_vary_takes_turns_over_the_values_of_one_key(repo, tmp_path, monkeypatch):
    calls, seen = [], []
    run = fake_run(calls)
    monkeypatch.setattr(benchmark, "run_train", lambda tree, config, overrides, label="": seen.append(overrides)
                        or run(tree, config, overrides, label))
    argv = ["--vary", "recurrence.layer_type=gru,lru", "--config", "configs/tiny.yaml", "--repeats", "2", "--set",
            "updates=2", "--out", str(tmp_path / "out")]
    assert benchmark.main(argv, root=repo) == 0
    assert seen == [["updates=2", "recurrence.layer_type=gru"], ["updates=2", "recurrence.layer_type=lru"]] * 2
    report = json.loads((tmp_path / "out.json").read_text())
    assert list(report["sides"]) == ["recurrence.layer_type=gru", "recurrence.layer_type=lru"]
    # steps/s of call k is 100k: gru ran calls 1 and 3, lru 2 and 4
    runs = report["configs"]["configs/tiny.yaml"]
    assert runs["recurrence.layer_type=gru"]["steps_per_second_median"] == 200
    assert runs["recurrence.layer_type=lru"]["steps_per_second_median"] == 300
    assert "sides: recurrence.layer_type=gru, recurrence.layer_type=lru" in (tmp_path / "out.md").read_text()
    for bad in (["--vary", "layer_type"], ["--vary", "a=1,"], ["--vary", "a=1,2", "--against", "HEAD"]):
        assert benchmark.main([*bad, "--config", "configs/tiny.yaml"], root=repo) == 2


def test_pairs_won_and_the_median_pair_ratio_with_its_order_statistic_interval():
    # 11 pairs, new / old = 0.95, 0.96, ..., 1.05: the sign test's interval is [2nd, 10th] (98.8%)
    old = [{"steps_per_second": 1000.0} for _ in range(11)]
    new = [{"steps_per_second": 1000.0 * (0.95 + 0.01 * i)} for i in range(11)]
    p = benchmark.paired(old, new[::-1])
    assert p["pairs"] == 11 and p["pairs_new_faster"] == 5 and p["pair_ratio_median"] == pytest.approx(1.0)
    assert (p["pair_ratio_low"], p["pair_ratio_high"]) == (pytest.approx(0.96), pytest.approx(1.04))
    assert p["pair_ratio_coverage"] == pytest.approx(1 - 2 * 12 / 2048)
    # a drift that slows both runs of every pair alike cancels: all 6 pairs won, the interval above 1
    drift = [1.0, 0.5, 0.8, 0.6, 0.9, 0.7]
    p = benchmark.paired([{"steps_per_second": 100 * d} for d in drift],
                         [{"steps_per_second": 103 * d} for d in drift])
    assert p["pairs_new_faster"] == 6 and p["pair_ratio_low"] == pytest.approx(1.03)
    assert p["pair_ratio_coverage"] == pytest.approx(1 - 2 / 64)
    p = benchmark.paired(old[:5], new[:5])  # 5 pairs cannot give 95%
    assert p["pair_ratio_low"] is None and p["pair_ratio_coverage"] is None


def test_medians_and_ratios_from_given_measurements():
    def run(wall, sps, env):
        return {"wall_seconds": wall, "steps_per_second": sps, "env_steps": 1000, "peak_rss_mb": wall * 10,
                "env_seconds": env, "inference_seconds": 1.0,
                "buffer_seconds": 0.5, "update_seconds": 2.0}
    old = benchmark.summarize([run(10.0, 100.0, 3.0), run(12.0, 90.0, 1.0), run(30.0, 40.0, 2.0)])
    new = benchmark.summarize([run(8.0, 150.0, 1.0), run(5.0, 200.0, 1.0), run(9.0, 120.0, 4.0), run(20, 60.0, 1.0)])
    assert (old["wall_seconds_median"], old["wall_seconds_min"], old["wall_seconds_max"]) == (12.0, 10.0, 30.0)
    assert old["steps_per_second_median"] == 90.0 and old["env_seconds_median"] == 2.0
    assert old["peak_rss_mb_max"] == 300.0
    assert new["wall_seconds_median"] == 8.5 and new["steps_per_second_median"] == 135.0  # even count: the mean
    ratio = benchmark.ratios(old, new)
    assert ratio["steps_per_second_new_over_old"] == pytest.approx(1.5)
    assert ratio["wall_old_over_new"] == pytest.approx(12 / 8.5)
    assert benchmark.alternate(["old", "new"], 3) == ["old", "new"] * 3


def test_output_parsing_survives_progress_bars_and_rewardless_updates():
    out = ("training x on cpu\nupdate    1/2  steps 64  reward   -0.500  sps 9\r 50%|##   | 1/2\r"
           "update    2/2  steps 128  reward        -  sps 9\ntimings: {\"env_steps\": 128}\nsaved models/x.pt\n")
    assert benchmark.parse_output(out) == {"final_reward": None, "env_steps": 128}
    assert benchmark.parse_output(out.replace("reward        -", "reward 1.5"))["final_reward"] == 1.5
    with pytest.raises(benchmark.RunError, match="timings"):
        benchmark.parse_output("update 1/1 reward 1.0\n")


@pytest.mark.slow
def test_real_short_run_against_head(tmp_path):
    before = worktrees(ROOT)
    result = subprocess.run([sys.executable, "tools/benchmark.py", "--against", "HEAD",
                             "--config", "configs/poc_memory_env.yaml", "--set", "updates=1", "--repeats", "1",
                             "--allow-few-repeats", "--out", str(tmp_path / "against")],
                            cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert result.returncode == 0, result.stderr
    assert "warning: 1 run(s) per side" in result.stderr
    report = json.loads((tmp_path / "against.json").read_text())
    entry = report["configs"]["configs/poc_memory_env.yaml"]
    assert report["sides"]["old"]["commit"] == git(ROOT, "rev-parse", "HEAD")
    for side in ("old", "new"):
        (run,) = entry["runs"][side]
        assert run["updates"] == 1 and run["env_steps"] == 16 * 128 and run["wall_seconds"] > run["train_seconds"]
        assert entry[side]["peak_rss_mb_max"] > 0
    assert entry["ratio"]["steps_per_second_new_over_old"] > 0
    assert "| configs/poc_memory_env.yaml | old" in (tmp_path / "against.md").read_text()
    assert worktrees(ROOT) == before


def foreign_busy_process() -> int:
    """A busy loop that is not this process's descendant (its parent, a shell, exits at once): what
    another user's job looks like to the benchmark. Returns its pid."""
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.strip())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_other_processes_cpu_is_counted_and_the_benchmarks_own_runs_are_not():
    foreign = foreign_busy_process()
    own = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        before = benchmark._processes()
        start = {pid: cpu_seconds(pid) for pid in (foreign, own.pid)}
        while min(cpu_seconds(pid) - start[pid] for pid in (foreign, own.pid)) < 0.3:
            time.sleep(0.05)  # until both have used CPU time (an event, whatever the machine's speed)
        others = benchmark.other_cpu(before, benchmark._processes())
        assert others[foreign] >= 0.3 and own.pid not in others
        with pytest.raises(benchmark.UsageError, match="--require-idle: the machine is busy"):
            benchmark.require_idle(seconds=1.0)
    finally:
        os.kill(foreign, 9)
        own.kill()
        own.wait()


def test_the_report_says_when_runs_were_measured_beside_other_work():
    def run(cores):
        return {"load": {"other_cores": cores, "busy": cores > benchmark.BUSY_CORES}}
    quiet = {"configs": {"a.yaml": {"runs": {"old": [run(0.01)], "new": [run(0.02)]}}}}
    noisy = {"configs": {"a.yaml": {"runs": {"old": [run(0.01)], "new": [run(0.9)]}}}}
    assert benchmark.load_line(quiet).startswith("idle")
    assert benchmark.load_line(noisy).startswith("BUSY: 1 of 2 runs") and "0.90 cores" in benchmark.load_line(noisy)
    assert benchmark.load_line({"configs": {"a.yaml": {"runs": {"new": [run(0.5)]}}}}).startswith("BUSY")


def test_timings_carry_the_peak_gpu_memory_only_where_a_gpu_was_used(tmp_path):
    import torch

    from config import config_from_dict
    from summaries import Summaries
    summaries = Summaries(tmp_path, config_from_dict({}), verbose=False)
    if torch.cuda.is_available():
        on_gpu = torch.zeros(2 ** 20, device="cuda")  # 4 MiB held by torch's allocator
        assert summaries.timings(1.0)["peak_gpu_mb"] >= 4 and on_gpu.is_cuda
    else:
        assert summaries.timings(1.0)["peak_gpu_mb"] is None


def test_runs_train_on_the_cpu_unless_an_override_names_the_device():
    # --set device=cuda on a GPU machine: a --cpu beside it would train on the CPU unnoticed
    assert "--cpu" in benchmark.train_command(Path("."), Path("c.yaml"), ["updates=2"])
    command = benchmark.train_command(Path("."), Path("c.yaml"), ["updates=2", "device=cuda"])
    assert "--cpu" not in command and command[-2:] == ["--set", "device=cuda"]
