"""Nothing a user or an environment does wrong may cost a run or give a silent wrong result.

Each fault test checks afterwards that no process started for it is left.
"""
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import torch
import yaml

from checkpoint import load_checkpoint
from config import config_from_dict, load_config
from trainer import Trainer
from worker import WorkerError
from tests.hang import HANG_S, wait_until

pytestmark = pytest.mark.slow  # processes, Ray or whole configs: make test-fast leaves these out

ROOT = Path(__file__).resolve().parent.parent


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment carries the marker (the run and its workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return [pid for pid in found if pid != os.getpid()]


def parent(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return -1
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def assert_no_process_left(marker: str):
    wait_until(lambda: processes_with(marker) == [], f"end of every process marked {marker}")


class Run:
    """train.py as a child process, tagged so that it and its workers can be found."""

    def __init__(self, tmp_path: Path, *args: str):
        self.marker = f"FAULT_TEST_{uuid.uuid4().hex}"
        env = {**os.environ, self.marker: "1", "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=tmp_path, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_for_line(self, prefix: str) -> str:
        for line in self.process.stdout:  # until the process closes its output
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting with {prefix!r}; stderr: {self.process.stderr.read()}")

    def finish(self, timeout: float = HANG_S):
        out, err = self.process.communicate(timeout=timeout)
        assert_no_process_left(self.marker)
        return self.process.returncode, out, err


def write_config(tmp_path: Path, base: str, name: str = "run.yaml", **changes) -> str:
    raw = yaml.safe_load((ROOT / base).read_text())
    for key, value in changes.items():
        node = raw
        *parents, last = key.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    (tmp_path / name).write_text(yaml.safe_dump(raw))
    return name


SMALL = dict(n_workers=4, worker_steps=32, n_mini_batch=2)


def test_exception_in_a_worker_process_stops_the_run_with_its_traceback(tmp_path):
    config = write_config(tmp_path, "configs/poc_memory_env.yaml", updates=50, worker_processes=2,
                          checkpoint_interval=1, **SMALL,
                          environment={"type": "gym", "name": "tests.faulty_envs:Flaky-v0",
                                       "kwargs": {"at_step": 100}})
    run = Run(tmp_path, "--config", config, "--run-id", "flaky")
    code, out, err = run.finish()
    assert code == 1
    assert "environment 'tests.faulty_envs:Flaky-v0' #" in err and "in worker process" in err
    assert "RuntimeError: Flaky environment broke at step 100" in err and "Traceback" in err
    assert "the last good checkpoint is models/flaky.pt (update 3)" in err
    assert load_checkpoint(tmp_path / "models/flaky.pt")["update"] == 3


@pytest.mark.parametrize("name,kwargs,processes,error", [
    ("BadReset-v0", {"at_reset": 1}, 0, "RuntimeError: BadReset broke at reset 1"),  # the reset that reads the spaces
    ("BadReset-v0", {"at_reset": 2}, 0, "RuntimeError: BadReset broke at reset 2"),  # the run's first reset
    ("BadReset-v0", {"at_reset": 1}, 2, "RuntimeError: BadReset broke at reset 1"),
    ("WrongShape-v0", {}, 0, "ValueError: could not broadcast input array from shape (3,) into shape (2,)"),
    ("WrongShape-v0", {}, 2, "ValueError: could not broadcast input array from shape (3,) into shape (2,)")])
def test_an_environment_that_fails_at_start_or_step_ends_in_the_one_formatted_error(tmp_path, name, kwargs, processes,
                                                                                     error):
    """Wherever an environment fails (its reset at start-up, a step in the trainer's process or in a worker
    process), the run ends the same way: exit 1, its own traceback under one line naming it, nothing of ours."""
    config = write_config(tmp_path, "configs/poc_memory_env.yaml", updates=2, worker_processes=processes, **SMALL,
                          environment={"type": "gym", "name": f"tests.faulty_envs:{name}", "kwargs": kwargs})
    code, out, err = Run(tmp_path, "--config", config, "--run-id", "fails").finish()
    assert code == 1
    first = next(line for line in err.splitlines() if line.startswith("error: "))
    assert first.startswith(f"error: environment 'tests.faulty_envs:{name}' #0 (in ") and first.endswith(") failed:")
    assert err.rstrip().endswith(f"{error}; no checkpoint was saved in this run")
    assert "train.py" not in err and "trainer.py" not in err


def test_a_killed_worker_is_noticed_at_the_next_step_not_waited_on(tmp_path):
    config = write_config(tmp_path, "configs/cartpole_masked.yaml", updates=10_000, worker_processes=2, **SMALL)
    run = Run(tmp_path, "--config", config, "--run-id", "killed")
    run.wait_for_line("update    2/")
    # The env workers are the grandchildren of train.py (children of the forkserver).
    children = [pid for pid in processes_with(run.marker) if parent(pid) == run.process.pid]
    workers = [pid for pid in processes_with(run.marker) if parent(pid) in children]
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    # noticed through the process's sentinel, not a timeout: without it the run would wait forever on the
    # dead worker's pipe, which is what the bound below catches (it is no measure of speed)
    code, out, err = run.finish()
    assert code == 1 and "died" in err


def test_sigint_saves_then_resume_finishes_the_run(tmp_path):
    config = write_config(tmp_path, "configs/poc_memory_env.yaml", updates=400, checkpoint_interval=0, **SMALL)
    run = Run(tmp_path, "--config", config, "--run-id", "interrupted")
    run.wait_for_line("update    3/")
    run.process.send_signal(signal.SIGINT)
    code, out, err = run.finish()
    assert code == 130, err  # saved, and told apart from a finished run
    assert "stopped by SIGINT" in out
    saved = load_checkpoint(tmp_path / "models/interrupted.pt")
    assert 3 <= saved["update"] < 400

    resumed = Run(tmp_path, "--resume", "models/interrupted.pt", "--set", f"updates={saved['update'] + 2}")
    code, out, err = resumed.finish()
    assert code == 0, err
    assert f"resuming interrupted at update {saved['update']}" in out
    assert load_checkpoint(tmp_path / "models/interrupted.pt")["update"] == saved["update"] + 2
    assert len(list((tmp_path / "summaries/interrupted").iterdir())) == 1  # the same summaries run


def test_a_branch_starts_a_new_run_from_a_checkpoint_and_leaves_the_source_run_as_it_was(tmp_path):
    config = write_config(tmp_path, "configs/poc_memory_env.yaml", updates=3, checkpoint_interval=0, torch_threads=1,
                          evaluation__interval=2, evaluation__episodes=4, **SMALL)
    assert Run(tmp_path, "--config", config, "--run-id", "source").finish()[0] == 0
    source_files = {p: p.read_bytes() for p in [*(tmp_path / "models").glob("source*"),
                                                *(tmp_path / "summaries/source").rglob("*")] if p.is_file()}

    code, out, err = Run(tmp_path, "--resume", "models/source.pt", "--run-id", "branch", "--set", "updates=5").finish()
    assert code == 0, err
    assert "branching branch from source at update 3/5" in out
    assert {p: p.read_bytes() for p in source_files} == source_files  # not one byte of the source run changed
    assert sorted(p.name for p in (tmp_path / "models").glob("source*")) == ["source-best.pt", "source.pt"]
    branch = load_checkpoint(tmp_path / "models/branch.pt")
    assert branch["run_id"] == "branch" and branch["update"] == 5
    assert Path(branch["summaries_path"]).parent == Path("summaries/branch")
    assert branch["best"]["update"] in (4, 5)  # its own evaluations', not the source's
    assert (tmp_path / "models/branch-best.pt").exists()

    # without overrides a branch goes on exactly as the source run itself does when resumed
    assert Run(tmp_path, "--resume", "models/source.pt", "--set", "updates=5").finish()[0] == 0
    resumed = load_checkpoint(tmp_path / "models/source.pt")
    for name, value in resumed["model"].items():
        assert torch.equal(value, branch["model"][name]), name

    # a branch is a new run: it never replaces another run's checkpoint
    code, out, err = Run(tmp_path, "--resume", "models/source.pt", "--run-id", "branch", "--set", "updates=7").finish()
    assert code == 2 and err.strip().splitlines() == [
        "error: models/branch.pt exists: continue it with --resume models/branch.pt, or choose another --run-id "
        "(or pass --overwrite to replace it)"]
    assert load_checkpoint(tmp_path / "models/branch.pt")["update"] == 5


@pytest.mark.parametrize("base,processes,extra", [
    ("configs/poc_memory_env.yaml", 0, {}),
    ("configs/cartpole_masked.yaml", 2, {}),
    # Gaussian actions, the observation mask, observation and reward normalisers, value-target normalisation
    ("configs/pendulum_masked.yaml", 0, {"normalization": {"observations": True, "rewards": True,
                                                           "value_targets": True}}),
    # the previous action and reward carried over the checkpoint (Gaussian actions), burn-in, refreshed states
    ("configs/pendulum_masked.yaml", 0, {"recurrence": {"previous_action": True, "previous_reward": True,
                                                        "previous_reward_clip": 5.0, "burn_in": 4,
                                                        "refresh_states": True}}),
    ("configs/poc_memory_env.yaml", 0, {"recurrence": {"layer_type": "lstm", "previous_action": True,
                                                       "previous_reward": True, "burn_in": 8,
                                                       "refresh_states": True}})])
def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path, base, processes, extra):
    raw = yaml.safe_load((ROOT / base).read_text())
    # one thread: another count may round the reductions differently (docs/reliability.md)
    raw.update(updates=20, worker_processes=processes, checkpoint_interval=0, torch_threads=1, **SMALL)
    for key, section in extra.items():  # merged into the config's own section
        raw[key] = {**raw.get(key, {}), **section}

    def trainer(run_id, updates):
        config = config_from_dict({**raw, "updates": updates})
        return Trainer(config, run_id=run_id, summaries_dir=tmp_path / "s", models_dir=tmp_path / "m",
                       verbose=False)

    straight = trainer("straight", 20)
    straight.run()
    first = trainer("split", 10)
    workers = first.envs.pids
    first.run()
    checkpoint = load_checkpoint(tmp_path / "m/split.pt")
    second = trainer("split", 20)
    second.load_state_dict(checkpoint)
    workers += second.envs.pids
    second.run()
    assert all(not Path(f"/proc/{pid}").exists() for pid in workers)  # every env worker is gone
    assert second.update == straight.update == 20
    for (name, a), b in zip(straight.model.state_dict().items(), second.model.state_dict().values()):
        assert torch.equal(a, b), name


def scalars(path: Path) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    accumulator = EventAccumulator(str(path))
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"] if not tag.startswith("time/")}


def test_same_config_and_seed_give_identical_summaries(tmp_path):
    runs = []
    for name in ("a", "b"):
        config = load_config(ROOT / "configs/cartpole_masked.yaml", [f"updates=3", "n_workers=4", "worker_steps=64",
                                                                 "torch_threads=1"])  # 0 follows the load
        trainer = Trainer(config, run_id=name, summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
        trainer.run()
        runs.append(scalars(trainer.summaries.path))
    assert runs[0] == runs[1]
    assert "training/approx_kl" in runs[0] and len(runs[0]["training/pg_loss"]) == 3


@pytest.mark.parametrize("fault, words", [
    ("nan", "its reward is nan as float32: rewards and observations must be finite numbers"),
    ("inf-observation", "its observation holds inf at index (1,)"),
    ("text-reward", "TypeError: its reward is '1.5', a str: rewards are numbers")])
@pytest.mark.parametrize("processes", [0, 2])
def test_a_non_finite_or_text_value_from_an_environment_stops_the_run_naming_it(tmp_path, fault, words, processes):
    """A NaN reward or observation stopped the run later as a 'non-finite loss or gradient', blaming no
    environment, and a reward given as text ('1.5') was taken (issue 58, borderline). The update stops
    there; the last good checkpoint stays."""
    config = config_from_dict({
        **yaml.safe_load((ROOT / "configs/poc_memory_env.yaml").read_text()), **SMALL,
        "updates": 20, "checkpoint_interval": 1, "worker_processes": processes,
        "environment": {"type": "gym", "name": "tests.faulty_envs:Flaky-v0",
                        "kwargs": {"at_step": 70, "fault": fault}}})
    trainer = Trainer(config, run_id="nan", summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    try:
        with pytest.raises(WorkerError) as raised:
            trainer.run()
    finally:
        trainer.close()
    where = "in worker process 0, pid" if processes else "in the trainer's process)"
    message = str(raised.value)
    assert message.startswith(f"environment 'tests.faulty_envs:Flaky-v0' #0 ({where}") and words in message
    saved = load_checkpoint(tmp_path / "nan.pt")
    assert saved["update"] == 2
    assert all(torch.isfinite(v).all() for v in saved["model"].values())


def test_truncated_or_foreign_checkpoint_is_one_line_and_exit_2(tmp_path):
    config = write_config(tmp_path, "configs/poc_memory_env.yaml", updates=1, **SMALL)
    code, _, err = Run(tmp_path, "--config", config, "--run-id", "good").finish()
    assert code == 0, err
    data = (tmp_path / "models/good.pt").read_bytes()
    (tmp_path / "models/truncated.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "models/text.pt").write_text("not a checkpoint")
    for name in ("truncated", "text", "missing"):
        code, _, err = Run(tmp_path, "--resume", f"models/{name}.pt").finish()
        assert code == 2
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"models/{name}.pt" in err
