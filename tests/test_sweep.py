"""sweep.py: seeds, grids and searches as Ray Tune trials, each a normal run.

Each sweep here is tiny (4 workers x 32 steps, a few updates): what is tested is the plumbing
(paths, checkpoints, resume, nodes, refusals), not learning. Every Ray started here is stopped
by its handle: the sweep's own ray.shutdown(), the test cluster's shutdown().
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest
import torch
import yaml

import sweep
from checkpoint import load_checkpoint
from config import ConfigError, config_from_dict
from tests.hang import HANG_S, wait_until
from tests.test_tracking import offline_run

pytestmark = pytest.mark.slow  # processes, Ray or whole configs: make test-fast leaves these out

ROOT = Path(__file__).resolve().parent.parent
TINY = ["n_workers=4", "worker_steps=32", "n_mini_batch=2", "updates=3", "hidden_layer_size=16",
        "recurrence.hidden_state_size=8"]
POC = str(ROOT / "configs/poc_memory_env.yaml")


def sets(*items: str) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def start_sweep(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, str(ROOT / "sweep.py"), *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_sweep(tmp_path: Path, *args: str, timeout: float = HANG_S, env: dict | None = None) \
        -> subprocess.CompletedProcess:
    process = start_sweep(tmp_path, *args, env=env)
    out, err = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def results(trial_folder: Path) -> list[dict]:
    """What the trial reported to Tune, one dict per update."""
    return [json.loads(line) for line in (trial_folder / "result.json").read_text().splitlines()]


def run_folder(summaries: Path, name: str) -> Path:
    """The trial's one TensorBoard folder, summaries/<sweep-id>/<trial-name>/<time>."""
    folders = list((summaries / name).iterdir())
    assert len(folders) == 1, folders
    return folders[0]


# ---------------------------------------------------------------- without Ray

def read(*argv: str) -> sweep.Sweep:
    config = [] if "--config" in argv else ["--config", POC]
    return sweep.read_sweep(sweep.parser().parse_args([*config, *argv]))


def test_only_tunes_own_stop_lines_and_a_vanished_temporary_are_left_out_of_rays_log():
    """Tune's state saved while a trial's checkpoint is renamed can fail on Tune's own temporary file (no
    fault: the next save copies it); any other failed save is still shown."""
    import logging

    def record(message: str, error: Exception | None = None) -> logging.LogRecord:
        return logging.LogRecord("ray.tune", logging.ERROR, __file__, 1, message, None,
                                 error and (type(error), error, None))
    lost = FileNotFoundError(2, "Failed to open local file '/tmp/ray/session_1/artifacts/x/s/driver_artifacts/"
                                ".34d5b919-tmp-basic-variant-state-2026-11-25_00-20-24.json'")
    assert not sweep._not_noise(record("Saving experiment state to storage at 's' failed with exception: ", lost))
    assert not sweep._not_noise(record(f"Last sync command failed:\nTraceback\nFileNotFoundError: {lost}"))
    assert not sweep._not_noise(record("Stop signal received (e.g. via SIGINT/Ctrl+C), ending Ray Tune run."))
    assert sweep._not_noise(record("Saving experiment state failed: ", OSError(28, "No space left on device")))
    assert sweep._not_noise(record("Saving failed: ", FileNotFoundError(2, "Failed to open local file '/s/a.json'")))
    assert sweep._not_noise(record("No trial is running and no new trial can be started"))

def test_seeds_cross_every_grid_point_with_readable_distinct_names():
    plan = read("--seeds", "2", "--grid", "learning_rate_schedule.initial=0.0003,1.0e-4",
                "--grid", "recurrence.layer_type=gru,lstm")
    assert plan.trials == 8
    names = [sweep.trial_name({"seed": seed, "learning_rate_schedule.initial": rate, "recurrence.layer_type": layer})
             for seed in plan.seeds for rate in plan.grid["learning_rate_schedule.initial"]
             for layer in plan.grid["recurrence.layer_type"]]
    assert len(set(names)) == 8
    assert "seed1-initial0.0003-layer_typelstm" in names and "seed0-initial0.0001-layer_typegru" in names
    assert sweep.trial_name({"seed": 3, "environment.kwargs": {"a b": 1}}) == "seed3-kwargs__a_b___1_"


def test_an_eval_metric_needs_evaluations_during_training():
    with pytest.raises(ConfigError, match="evaluation.interval"):
        read("--metric", "eval/reward_mean", "--scheduler", "asha")
    sweep_ = read("--metric", "eval/reward_mean", "--scheduler", "asha", "--set", "evaluation.interval=2")
    assert sweep_.metric == "eval/reward_mean"


def test_trial_threads_processes_and_device_follow_its_reservation():
    plan = read("--config", str(ROOT / "configs/minigrid.yaml"))  # worker_processes: 2 in the file
    one = sweep.trial_config(plan, {"seed": 5})
    assert (one.torch_threads, one.worker_processes, one.device, one.seed) == (1, 0, "cpu", 5)
    plan.cpus, plan.gpus = 2, 0.5
    two = sweep.trial_config(plan, {"seed": 5})
    assert (two.torch_threads, two.worker_processes, two.device) == (2, 2, "cuda")
    plan.config["torch_threads"] = 1  # asked for fewer than reserved: kept
    assert sweep.trial_config(plan, {"seed": 5}).torch_threads == 1


def test_search_is_seeded_and_int_bounds_are_inclusive():
    def samples(seed: str) -> list[dict]:
        plan = read("--seed-list", seed, "--search", "learning_rate_schedule.initial=loguniform:1e-4:1e-3",
                    "--search", "epochs=int:1:2", "--search", "recurrence.layer_type=choice:gru,lstm")
        searcher = sweep.searcher(plan)
        searcher.set_search_properties(None, None, sweep.space(plan))
        return [searcher.suggest(f"t{i}") for i in range(8)]
    first = samples("0")
    assert first == samples("0") and first != samples("1")
    assert {s["epochs"] for s in first} == {1, 2}
    assert all(1e-4 <= s["learning_rate_schedule.initial"] <= 1e-3 for s in first)


def test_statistics_that_cannot_be_written_end_the_sweep_with_exit_1_in_one_line(tmp_path, monkeypatch, capsys):
    """stats.report's write failure (a full disk: none of stats.md, .json, .png changed) fails the sweep after it
    started, in one line that says the trials' work is kept."""
    import stats
    from plumbing.script import Failed

    def full_disk(*args, **kwargs):
        raise Failed("could not write s.md, .json, .png (No space left on device); none of them was written or changed")
    monkeypatch.setattr(stats, "report", full_disk)
    trial = types.SimpleNamespace(error=None, metrics={"update": 3, "updates": 3}, path=str(tmp_path / "seed0"))
    assert sweep.report(read("--storage", str(tmp_path)), [trial], 1.0, None) == 1
    assert capsys.readouterr().err == ("error: no statistics: could not write s.md, .json, .png (No space left on "
                                       "device); none of them was written or changed; the trials' models and "
                                       "summaries are kept\n")


# ---------------------------------------------------------------- end to end

def test_what_a_trial_writes_stays_in_rays_logs_not_on_the_sweeps_console(tmp_path):
    """Ray forwarded its worker processes' output to the driver: an environment's banner, and the C++
    core's own lines as Ray stopped them. The sweep's console shows what sweep.py says, and the line once,
    from the driver's own check of the environment (as train.py shows it); and Ray's token for its own
    cluster is not written under HOME (~/.ray/auth_token)."""
    said, line = tmp_path / "said", "a-line-from-the-chatty-environment"
    (tmp_path / "home").mkdir()
    done = run_sweep(tmp_path, "--config", POC, "--seeds", "1", "--sweep-id", "quiet",
                     *sets(*TINY, "updates=1", "environment.type=gym", "environment.name=tests.faulty_envs:Chatty-v0",
                           f"environment.kwargs.said={said}", f"environment.kwargs.line={line}"),
                     env={"HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "home/.ray").exists()
    assert said.read_text().count(line) > 2  # made by the driver's check and the trial's 4 environments
    assert done.stderr == line + "\n" and line not in done.stdout and "1 of 1 trials ended" in done.stdout


def test_trials_run_at_the_sweeps_own_priority(tmp_path):
    """Ray starts its workers 15 niceness steps below itself: beside two spinning loops a trial of a
    tiny sweep got 36 s of CPU in 14 min. A trial is a run, at the priority the sweep was started with."""
    probe = ("import os, types, sweep\n"
             "sweep.start_ray(None, types.SimpleNamespace(gpus=0))\n"
             "import ray\n"
             "print(os.nice(0), ray.get(ray.remote(lambda: os.nice(0)).remote()))\n"
             "ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_worker_niceness"} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          timeout=HANG_S, env=env, preexec_fn=lambda: os.nice(2))
    assert done.returncode == 0, done.stderr
    driver, trial = map(int, done.stdout.split())
    assert trial == driver >= 2


def test_two_seeds_locally_give_two_normal_runs_and_the_statistics(tmp_path):
    """With --track (W&B offline here), each trial is a W&B run of the trial's name in the sweep's group."""
    done = run_sweep(tmp_path, "--config", POC, "--seeds", "2", "--sweep-id", "two", "--grid", "gamma=0.95",
                     *sets(*TINY), "--track", env={"WANDB_MODE": "offline", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "2 of 2 trials ended" in done.stdout and "tracking is off" not in done.stderr
    folder, summaries = tmp_path / "sweeps/two", tmp_path / "summaries/two"
    table = (folder / "stats.md").read_text()
    assert table in done.stdout and "| gamma=0.95 | 2 |" not in table and "| PocMemoryEnv | 2 |" in table
    stats = json.loads((folder / "stats.json").read_text())["grid_points"][0]["runs"]
    models = []
    for seed in (0, 1):
        name = f"seed{seed}-gamma0.95"
        run = run_folder(summaries, name)
        config = json.loads((run / "config.json").read_text())
        assert (config["seed"], config["gamma"], config["torch_threads"], config["worker_processes"],
                config["device"]) == (seed, 0.95, 1, 0, "cpu")
        assert list(run.glob("events.out.tfevents.*"))
        tracked, tracked_config, history = offline_run(run)
        assert tracked == {"name": name, "project": "recurrent-ppo", "group": "two"} and sorted(history) == [1, 2, 3]
        assert tracked_config["seed"] == seed
        saved = load_checkpoint(folder / f"models/{name}.pt")
        assert (saved["update"], saved["run_id"], saved["config"]["seed"]) == (3, name, seed)
        assert saved["summaries_path"] == str(run)
        tune_copy, = (folder / name).glob("checkpoint_*/*.pt")  # what Tune keeps (num_to_keep=1)
        assert tune_copy.read_bytes() == (folder / f"models/{name}.pt").read_bytes()
        reported = results(folder / name)
        assert [r["update"] for r in reported] == [1, 2, 3]
        # the statistics read TensorBoard; Tune got the same number from the trial
        score = next(r["final_score"] for r in stats if r["seed"] == seed)
        assert score == pytest.approx(reported[-1]["episode/reward_mean_last100"], rel=1e-6)
        models.append(saved["model"])
    assert any(not torch.equal(a, b) for a, b in zip(models[0].values(), models[1].values()))


def test_a_trial_whose_tracking_is_off_says_so_on_the_sweeps_console(tmp_path):
    """--track without a W&B key: the trials' one-line warnings were only in Ray's worker logs, and the sweep's
    console never said tracking was off (issue 72). Once per trial; the trials train on."""
    env = {"WANDB_MODE": "online", "HOME": str(tmp_path), "WANDB_API_KEY": ""}
    done = run_sweep(tmp_path, "--config", POC, "--seeds", "2", "--sweep-id", "off", *sets(*TINY), "--track", env=env)
    assert done.returncode == 0 and "2 of 2 trials ended" in done.stdout, done.stderr
    for seed in (0, 1):
        said = [line for line in done.stderr.splitlines() if line.startswith(f"warning: seed{seed}: tracking is off")]
        assert len(said) == 1 and "W&B did not start (" in said[0], done.stderr
        assert said[0].endswith("; the trial trains on with TensorBoard")


def test_trials_land_on_both_nodes_of_a_cluster(tmp_path, monkeypatch):
    """The driver (sweep.py --address) runs in its own process, as a user starts it, and has ended
    before the cluster goes down: a driver still connected in this process when the test's cluster
    shut down crashed pytest's worker once (a segfault in Ray's io thread, in a full `make test` run
    on 2026-11-25 beside a niced sweep)."""
    from ray.cluster_utils import Cluster
    monkeypatch.setenv("RAY_worker_niceness", "0")  # as docs/sweeps.md says to start a cluster's nodes
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        done = run_sweep(tmp_path, "--config", POC, "--address", cluster.address, "--seeds", "2", "--sweep-id",
                         "nodes", *sets(*TINY))
        assert done.returncode == 0, done.stderr
        nodes = {node.node_id for node in cluster.list_all_nodes()}
        where = [{(r["node_id"], r["pid"]) for r in results(tmp_path / f"sweeps/nodes/seed{s}")} for s in (0, 1)]
        assert all(len(w) == 1 for w in where)  # each trial ran in one process
        used = {node for w in where for node, _ in w}
        assert used == nodes and len(nodes) == 2
        for seed in (0, 1):
            assert load_checkpoint(tmp_path / f"sweeps/nodes/models/seed{seed}.pt")["update"] == 3
    finally:
        cluster.shutdown()


def test_a_trial_refused_where_it_runs_ends_the_sweep_in_its_one_line_without_a_restart(tmp_path, monkeypatch):
    """On a cluster the sweep checks no node's memory before it starts: a trial whose rollout the node cannot hold
    was restarted three times, each with Ray's 'Trial task failed' traceback, then exit 1 (issue 87, point 3).
    Refused where it runs, it is not retried: the sweep ends in that trial's one line."""
    from ray.cluster_utils import Cluster
    monkeypatch.setenv("RAY_worker_niceness", "0")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.wait_for_nodes()
        done = run_sweep(tmp_path, "--config", POC, "--address", cluster.address, "--sweep-id", "window",
                         *sets(*TINY, "recurrence.layer_type=trxl", "recurrence.memory_length=65536",
                              "recurrence.hidden_state_size=4096"))
    finally:
        cluster.shutdown()
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: seed0: the rollout of n_workers x "
                                                                    "worker_steps = 128 steps needs at least ")
    assert done.stderr.rstrip().endswith("lower recurrence.memory_length, hidden_state_size or num_layers, or "
                                         "n_workers or worker_steps (the trial's config, refused where it ran: not "
                                         "retried; the sweep stopped)")
    assert "restarting" not in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_killed_trial_resumes_from_its_checkpoint_to_the_same_weights(tmp_path):
    marker = tmp_path / "killed-once"
    raw = yaml.safe_load(Path(POC).read_text())
    raw.update(n_workers=4, worker_steps=32, n_mini_batch=2, updates=6, hidden_layer_size=16, checkpoint_interval=2,
               environment={"type": "gym", "name": "tests.faulty_envs:KillsItsProcess-v0",
                            "kwargs": {"marker": str(marker), "at_step": 3 * 32 + 10}})  # in update 4
    (tmp_path / "kill.yaml").write_text(yaml.safe_dump(raw))
    done = run_sweep(tmp_path, "--config", "kill.yaml", "--sweep-id", "kill", "--seed-list", "7")
    assert done.returncode == 0, done.stderr
    assert marker.exists() and "seed7 failed (1 of 3 restarts)" in done.stdout
    reported = results(tmp_path / "sweeps/kill/seed7")
    pids = sorted({r["pid"] for r in reported}, key=[r["pid"] for r in reported].index)
    # killed in update 4: the results it had sent and Tune had not read die with it (on a busy
    # machine all three may), so the first process shows a prefix of [1, 2, 3], perhaps none ...
    assert len(pids) in (1, 2)
    assert [r["update"] for r in reported if r["pid"] != pids[-1]] in ([1, 2, 3], [1, 2], [1], [])
    # ... and the second restarted from the checkpoint of update 2
    assert [r["update"] for r in reported if r["pid"] == pids[-1]] == [3, 4, 5, 6]
    run = run_folder(tmp_path / "summaries/kill", "seed7")  # the resumed trial kept its folder

    from trainer import Trainer
    config = config_from_dict(json.loads((run / "config.json").read_text()))
    threads = torch.get_num_threads()
    try:  # the uninterrupted run of the same config and seed (the marker exists: no kill)
        straight = Trainer(config, run_id="straight", summaries_dir=tmp_path / "straight", models_dir=tmp_path,
                           verbose=False)
        straight.run()
    finally:
        torch.set_num_threads(threads)
    resumed = load_checkpoint(tmp_path / "sweeps/kill/models/seed7.pt")
    assert resumed["update"] == straight.update == 6
    for name, tensor in straight.model.state_dict().items():
        assert torch.equal(tensor, resumed["model"][name]), name


def test_resume_after_ctrl_c_keeps_finished_trials_and_completes_the_others(tmp_path):
    args = ["--config", POC, "--seeds", "3", "--sweep-id", "cut", "--max-concurrent", "1",
            *sets(*TINY, "updates=20", "checkpoint_interval=5")]
    summaries = tmp_path / "summaries/cut"
    process = start_sweep(tmp_path, *args)
    wait_until(lambda: len(list(summaries.glob("*"))) >= 2, "second trial's summaries folder", process)
    # one trial at a time: the first trial has ended once the second has started
    first = min(summaries.iterdir(), key=lambda p: p.stat().st_mtime).name
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in (summaries / first).rglob("*")}
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 130, err
    folder = tmp_path / "sweeps/cut"
    assert f"resume with: python sweep.py --resume {folder}" in out
    unfinished = [s for s in range(3) if not (folder / f"models/seed{s}.pt").exists()
                  or load_checkpoint(folder / f"models/seed{s}.pt")["update"] < 20]
    assert unfinished and first not in [f"seed{s}" for s in unfinished]

    done = run_sweep(tmp_path, "--resume", str(folder))
    assert done.returncode == 0, done.stderr
    assert "3 of 3 trials ended" in done.stdout and "| PocMemoryEnv | 3 |" in done.stdout
    after = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in (summaries / first).rglob("*")}
    assert after == before  # not re-run: the same folder, the same event file, untouched
    assert f"{first} finished" not in done.stdout
    for seed in range(3):
        assert load_checkpoint(folder / f"models/seed{seed}.pt")["update"] == 20
        run_folder(summaries, f"seed{seed}")


def test_a_resumed_sweep_stops_on_ctrl_c_too(tmp_path):
    """sweep.py --resume ran through the first Ctrl-C: its Tune callback, unpickled from Tune's state, held a
    copy of the stop signals' state that no signal reached (issue 58 point 3)."""
    args = ["--config", POC, "--seed-list", "5", "--sweep-id", "again",
            *sets(*TINY, "updates=2000", "checkpoint_interval=1")]
    run = tmp_path / "summaries/again/seed5"
    events = lambda: list(run.rglob("events.out.tfevents.*"))  # noqa: E731 (one per process of the trial)
    for i, command in enumerate([args, ["--resume", str(tmp_path / "sweeps/again")]]):
        process = start_sweep(tmp_path, *command)
        wait_until(lambda: len(events()) > i and (tmp_path / "sweeps/again/models/seed5.pt").exists(),
                   "the trial's first checkpoint in this process", process)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=HANG_S)
        assert process.returncode == 130, err
        assert "stopped with 0 of 1 trials finished; resume with" in out, out
    assert load_checkpoint(tmp_path / "sweeps/again/models/seed5.pt")["update"] < 2000


def test_a_closed_terminal_stops_the_sweep_at_its_checkpoints_and_leaves_no_ray_process(tmp_path):
    """SIGHUP to the sweep's process group (a shell passing on its terminal's hangup) killed the driver at once, and
    Ray's processes outlived it by 73 to 100 s (issue 87, point 7): the sweep stops as on SIGTERM, exit 129."""
    from tests.test_faults import assert_no_process_left
    marker = f"SWEEP_HANGUP_{os.getpid()}"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "sweep.py"), "--config", POC, "--seed-list", "5", "--sweep-id", "hup",
         *sets(*TINY, "updates=2000", "checkpoint_interval=1")], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, marker: "1", "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # as a terminal's job starts
    wait_until((tmp_path / "sweeps/hup/models/seed5.pt").exists, "the trial's first checkpoint", process)
    os.killpg(process.pid, signal.SIGHUP)
    out, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 129, err
    assert err.startswith("SIGHUP: stopping the trials at their next update") and "Traceback" not in err, err
    assert f"stopped with 0 of 1 trials finished; resume with: python sweep.py --resume {tmp_path}/sweeps/hup" in out
    assert_no_process_left(marker)


def test_ctrl_c_once_a_sweep_has_ended_leaves_its_exit_code_alone(tmp_path):
    """Ctrl-C during Ray's shutdown after a finished sweep, or during the seconds Python then took to unload
    Ray, ended in 'stopped by SIGINT during start-up' (130) or a raw signal (issue 58, borderline). SIGINT
    over and over from the sweep's last line on: the sweep still exits 0, in silence."""
    process = start_sweep(tmp_path, "--config", POC, "--sweep-id", "ended", *sets(*TINY, "updates=1"))
    for line in process.stdout:
        if line.startswith("sweep ended: 1 of 1 trials ended"):
            break
    while process.poll() is None:
        process.send_signal(signal.SIGINT)
        threading.Event().wait(0.02)  # a stream of signals until it exits; how many does not matter
    assert process.returncode == 0 and "stopped by" not in process.stderr.read()


def test_search_with_asha_samples_within_bounds_and_stops_only_at_rungs(tmp_path):
    done = run_sweep(tmp_path, "--config", POC, "--sweep-id", "search", "--samples", "2", "--scheduler", "asha",
                     "--search", "learning_rate_schedule.initial=loguniform:1e-4:1e-3",
                     "--search", "recurrence.layer_type=choice:gru,lstm", *sets(*TINY, "updates=8"))
    assert done.returncode == 0, done.stderr
    assert "best sample: seed0-initial" in done.stdout
    trials = sorted(p for p in (tmp_path / "summaries/search").iterdir())
    assert len(trials) == 2
    last = []
    for trial in trials:
        config = json.loads((run_folder(trial.parent, trial.name) / "config.json").read_text())
        rate, layer = config["learning_rate_schedule"]["initial"], config["recurrence"]["layer_type"]
        assert 1e-4 <= rate <= 1e-3 and layer in ("gru", "lstm") and config["seed"] == 0
        assert trial.name.startswith(f"seed0-initial{rate:.4g}-layer_type{layer}-")
        last.append(results(tmp_path / "sweeps/search" / trial.name)[-1]["update"])
    assert set(last) <= {2, 4, 8} and 8 in last  # ASHA: grace period 8 // 4, halving at each rung


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args,says", [
    (["--grid", "learning_rate=1e-4,3e-4"], "unknown config key 'learning_rate'"),
    (["--search", "recurrence.size=int:8:64"], "unknown config key 'recurrence.size'"),
    (["--search", "learning_rate_schedule.initial=loguniform:1e-3"], "loguniform takes two numbers"),
    (["--search", "gamma=normal:0:1"], "is not a distribution"),
    (["--samples", "4"], "--samples is the number of runs of a search"),
    (["--address", "127.0.0.1:PORT"], "nothing answers at 127.0.0.1"),
    (["--sweep-id", "taken"], "sweeps/taken exists: continue that sweep with --resume"),
    (["--config", "bad.yaml"], "config key 'recurrence.layer_type' = 'transformer' is not allowed"),
    # huge counts, refused before anything is allocated for them (--seeds 10**12 was a MemoryError)
    (["--seeds", str(10 ** 12)], "argument --seeds: must be a number from 1 to 10,000"),
    (["--search", "gamma=uniform:0.9:0.99", "--samples", str(10 ** 30)], "argument --samples: must be a number from 1"),
    (["--seeds", "100", "--grid", "gamma=" + ",".join(f"0.{i:03d}" for i in range(1, 201))], "20,000 trials"),
    (["--max-concurrent", "9" * 400], "argument --max-concurrent: must be a number from 1"),
    (["--grid", "gamma=0.99991,0.99992"], "gives two trials the name seed0-gamma0.9999"),
    (["--grid", "gamma=0.9", "--search", "epochs=int:1:2"], "argument --search: not allowed with argument --grid"),
    (["--seeds", "2", "--seed-list", "3"], "argument --seed-list: not allowed with argument --seeds"),
    (["--seed-list", "3,-1"], "seeds must be distinct integers in [0, 2**32)"),
    (["--threshold", "nan"], "argument --threshold: must be a number"),
    (["--resume", "sweeps/taken", "--seeds", "2", "--scheduler", "none"], "--seeds, --scheduler cannot be combined "
                                                                          "with --resume"),  # names keep 4 digits
    (["--cpus-per-trial", str(len(os.sched_getaffinity(0)) + 1)], "CPUs"),  # checked before Ray starts
    (["--gpus-per-trial", "1e300"], "argument --gpus-per-trial: must be a number from 0"),
    # storage that cannot hold the sweep, refused before Ray starts (a file: pyarrow's error after it started)
    (["--storage", "a-file"], "a-file: not a folder"),
    (["--storage", "a-file/deeper"], "a-file/deeper: not a folder"),
    (["--storage", "file://TMP/a-file"], "a-file: not a folder"),
    # values the environment refuses, as train.py does: every grid point, every search bound and choice
    (["--grid", "environment.observation_mask=[0],[9]"], "--grid environment.observation_mask=[9]: "
                                                         "environment.observation_mask: indices [9] are outside"),
    (["--search", "environment.observation_mask=choice:[1],[2],[5]"], "--search environment.observation_mask=[5]"),
    (["--set", "environment.type=gym", "--set", "environment.name=FrozenLake-v1",
      "--grid", "environment.kwargs.map_name=4x4,bogus"], "--grid environment.kwargs.map_name=bogus: environment"),
    # a rollout this machine cannot hold: Ray's traceback in four tries of the trial (issue 87, point 3)
    (["--set", "recurrence.layer_type=trxl", "--set", "recurrence.hidden_state_size=4096", "--grid",
      "recurrence.memory_length=64,65536"],
     "--grid recurrence.memory_length=65536: the rollout of n_workers x worker_steps = 2,048 steps needs at "
     "least 2049.0 GiB"),
    # a model the spaces do not fit: an image smaller than the CNN's kernels (a trial's traceback after Ray started)
    (["--set", "environment.type=gym", "--set", "environment.name=tests.memory_tasks:CueImage-v0",
      "--grid", "environment.kwargs.size=36,12"], "--grid environment.kwargs.size=12: the image observation is 12x12"),
])
def test_bad_input_is_one_line_exit_2_and_starts_nothing(tmp_path, args, says):
    (tmp_path / "sweeps/taken").mkdir(parents=True)
    (tmp_path / "a-file").write_text("a user's file")
    (tmp_path / "bad.yaml").write_text("recurrence:\n  layer_type: transformer\n")
    before = sorted(tmp_path.rglob("*"))
    done = refused(tmp_path, [a.replace("PORT", str(free_port())).replace("TMP", str(tmp_path)) for a in args])
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ") and says in done.stderr, done.stderr
    assert sorted(tmp_path.rglob("*")) == before


def test_an_environment_whose_reset_raises_is_refused_before_ray_starts(tmp_path):
    """As train.py's probe environment: its error with the environment's own trace, before any trial."""
    done = refused(tmp_path, [*sets("environment.type=gym", "environment.name=tests.faulty_envs:BadReset-v0"),
                              "--grid", "environment.kwargs.at_reset=2,1"])
    assert done.stderr.startswith("error: --grid environment.kwargs.at_reset=1: environment "
                                  "'tests.faulty_envs:BadReset-v0' #0 (in the trainer's process) failed"), done.stderr
    assert done.stderr.rstrip().endswith("RuntimeError: BadReset broke at reset 1")


def refused(tmp_path: Path, args: list[str]) -> subprocess.CompletedProcess:
    """sweep.main(args) in its own process, which must exit 2 before Ray was imported."""
    probe = ("import sys, sweep; code = sweep.main(sys.argv[1:]); "
             "print('ray imported' if 'ray' in sys.modules else 'no ray'); sys.exit(code)")
    config = [] if "--config" in args else ["--config", POC]
    done = subprocess.run([sys.executable, "-c", probe, *config, *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=HANG_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stdout == "no ray\n", done.stderr
    return done
