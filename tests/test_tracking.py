"""--track (tracking.py): an offline W&B run holds the run's config, git commit and every TensorBoard scalar under
its TensorBoard name; a run without it imports nothing of wandb; a tracker that fails costs the run nothing."""
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import tracking
import train
from config import load_config
from stats import read_events
from tests.hang import HANG_S
from trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent
POC = str(ROOT / "configs/poc_memory_env.yaml")
TINY = ["n_workers=4", "worker_steps=32", "n_mini_batch=2", "updates=2", "hidden_layer_size=16",
        "recurrence.hidden_state_size=8"]


def train_run(tmp_path: Path, *flags: str, python: tuple = (), env: dict | None = None) -> subprocess.CompletedProcess:
    """train.py on the tiny PoC config as run id r in tmp_path, with a home of its own (no W&B login)."""
    sets = [arg for item in TINY for arg in ("--set", item)]
    return subprocess.run([sys.executable, *python, str(ROOT / "train.py"), "--config", POC, "--run-id", "r", *sets,
                           *flags], cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path), **(env or {})},
                          capture_output=True, text=True, timeout=HANG_S)


def wandb_records(path: Path):
    """The records of a .wandb file, read as wandb's own format lays them out: a 7-byte header, then blocks of
    32 KiB holding records of (checksum, length, type) and a protobuf Record, split across blocks by type."""
    from wandb.proto import wandb_internal_pb2
    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    position, pieces = 7, b""
    while position + 7 <= len(data):
        if block - position % block < 7:  # the block's tail: too short for a record header
            position += block - position % block
            continue
        _, length, kind = struct.unpack_from("<IHB", data, position)
        if kind == 0:  # padding to the block's end
            position += block - position % block
            continue
        pieces += data[position + 7:position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            pieces = b""
            yield record


def offline_run(folder: Path) -> tuple[dict, dict, dict[int, dict[str, float]]]:
    """The run record (name, project, group), its config and its scalars by step, from the one offline run."""
    path, = folder.glob("wandb/offline-run-*/run-*.wandb")
    run, config, history = {}, {}, {}
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = {"name": record.run.display_name, "project": record.run.project, "group": record.run.run_group}
            config = {item.key: json.loads(item.value_json) for item in record.run.config.update}
        elif kind == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json)
                     for item in record.history.item}
            history[record.history.step.num] = {k: v for k, v in items.items() if not k.startswith("_")}
    config.pop("_wandb", None)
    return run, config, history


def tensorboard_scalars(folder: Path) -> dict[int, dict[str, float]]:
    scalars: dict[int, dict[str, float]] = {}
    for file in folder.glob("events.out.tfevents.*"):
        for scalar in read_events(file):
            scalars.setdefault(scalar.step, {})[scalar.tag] = scalar.value
    return scalars


@pytest.mark.slow
def test_an_offline_run_holds_the_config_the_commit_and_every_scalar_under_its_tensorboard_name(tmp_path):
    done = train_run(tmp_path, "--track", "--wandb-project", "tiny", env={"WANDB_MODE": "offline"})
    assert done.returncode == 0, done.stderr
    folder, = (tmp_path / "summaries/r").iterdir()
    assert f"tracking with W&B: offline in {folder.relative_to(tmp_path)}/wandb/offline-run-" in done.stdout
    run, config, history = offline_run(folder)
    assert run == {"name": "r", "project": "tiny", "group": ""}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert config.pop("git_commit").startswith(commit)
    assert config == json.loads((folder / "config.json").read_text())  # the resolved config, seed included
    board = tensorboard_scalars(folder)
    assert sorted(history) == sorted(board) == [1, 2]
    for step, scalars in board.items():
        assert sorted(history[step]) == sorted(scalars)  # the same names, no more, no fewer
        assert history[step] == pytest.approx(scalars, rel=1e-6)  # TensorBoard keeps float32


@pytest.mark.slow
def test_a_run_without_track_imports_nothing_of_wandb(tmp_path):
    done = train_run(tmp_path, python=("-X", "importtime"))
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
    assert {"torch", "trainer", "summaries", "tracking"} <= imported
    assert not [name for name in imported if name.split(".")[0] == "wandb"]


@pytest.mark.parametrize("setting", ["no login", "no network"])
def test_a_tracker_that_cannot_start_is_one_line_and_the_run_trains_on(tmp_path, monkeypatch, capsys, setting):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc, no W&B settings of this machine's user
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    if setting == "no network":  # a key, and a server where nothing listens; W&B gives up after its init timeout
        monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
        monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
        monkeypatch.setenv("WANDB_INIT_TIMEOUT", "5")
    config = load_config(POC, [*TINY, "updates=1"])
    trainer = Trainer(config, run_id="r", summaries_dir=tmp_path / "summaries", models_dir=tmp_path / "models",
                      verbose=False, tracking=tracking.Tracking(name="r"))
    history = trainer.run()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "tracking" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: tracking is off: W&B did not start (")
    assert warnings[0].endswith("; the run trains on with TensorBoard")
    assert len(history) == 1 and tensorboard_scalars(trainer.summaries.path)[1]
    assert (tmp_path / "models/r.pt").exists()


def test_a_tracker_that_fails_later_turns_off_in_one_line(capsys):
    class Failing:
        def log(self, scalars, step):
            raise ConnectionError("the network went away")

    tracker = tracking.Tracker(Failing())
    tracker.log({"episode/reward_mean": 1.0}, 1)
    tracker.log({"episode/reward_mean": 2.0}, 2)  # off: no second line
    tracker.finish()
    err = capsys.readouterr().err
    assert err == ("warning: tracking is off: W&B stopped taking the scalars (the network went away); the run "
                   "trains on with TensorBoard\n")


@pytest.mark.parametrize("flag", ["--wandb-project", "--wandb-entity", "--wandb-name"])
def test_a_wandb_flag_without_track_is_refused_in_one_line(flag, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert train.main(["--config", POC, flag, "x"]) == 2
    assert capsys.readouterr().err == f"error: {flag} is for --track: add --track, or leave it out\n"
    assert list(tmp_path.iterdir()) == []


def test_a_disabled_wandb_is_one_line_saying_tracking_is_off(tmp_path, monkeypatch, capsys):
    """WANDB_MODE=disabled printed 'tracking with W&B: None', a claim of tracking that was not happening
    (issue 72)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    tracker = tracking.start(tracking.Tracking(name="r"), {"seed": 0}, tmp_path)
    tracker.log({"episode/reward_mean": 1.0}, 1)
    tracker.finish()
    out, err = capsys.readouterr()
    assert out == "" and err == ("warning: tracking is off: W&B is disabled here (WANDB_MODE=disabled or `wandb "
                                 "disabled`); the run trains on with TensorBoard\n")
    assert tracker.off.startswith("W&B is disabled here")


def test_wandbs_own_log_on_a_full_disk_prints_no_logging_errors(tmp_path, monkeypatch, capsys):
    """wandb's debug log on a full disk: Python's logging printed '--- Logging error --- ... No space left on
    device' with a traceback for each record, about 40 of them, while the run trained on (issue 72)."""
    import logging

    from wandb.sdk.lib import wb_logging
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WANDB_MODE", "offline")
    real = wb_logging.add_file_handler
    monkeypatch.setattr(wb_logging, "add_file_handler", lambda run_id, path: real(run_id, Path("/dev/full")))
    tracker = tracking.start(tracking.Tracking(name="r"), {"seed": 0}, tmp_path)
    for step in (1, 2):
        tracker.log({"episode/reward_mean": float(step)}, step)
    tracker.finish()
    out, err = capsys.readouterr()
    assert out.startswith("tracking with W&B: offline in ") and "Logging error" not in err
    # wandb closes its log as the run finishes, which raises the disk's error to us: one line, or none
    assert err in ("", "warning: tracking is off: W&B could not finish the run (No space left on device); the run "
                       "trains on with TensorBoard\n"), err
    assert logging.raiseExceptions


@pytest.mark.slow
def test_a_full_disk_where_wandb_writes_is_one_line_and_the_run_trains_on(tmp_path):
    """The W&B folder of a resumed run on a full file system (a tmpfs, where this machine may mount one): one line
    that tracking is off, and the run trains and saves (issue 72)."""
    assert train_run(tmp_path, "--set", "updates=1").returncode == 0
    folder, = (tmp_path / "summaries/r").iterdir()
    (folder / "wandb").mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=65536", "tmpfs", str(folder / "wandb")],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (folder / "wandb/fill").write_bytes(b"\0" * 65536)
        done = subprocess.run([sys.executable, str(ROOT / "train.py"), "--resume", "models/r.pt", "--set", "updates=2",
                               "--track"], cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path),
                                                             "WANDB_MODE": "offline"},
                              capture_output=True, text=True, timeout=HANG_S)
    finally:
        subprocess.run(["umount", "-l", str(folder / "wandb")])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == (f"warning: tracking is off: W&B did not start (summaries/r/{folder.name}/wandb: No space "
                           "left on device); the run trains on with TensorBoard\n")
    assert "tracking with W&B" not in done.stdout and "update    2/2" in done.stdout


def test_a_resumed_run_keeps_its_wandb_id_in_a_moved_checkout(tmp_path):
    """The id came from the summaries folder's absolute path: a run resumed from a checkout moved elsewhere started a
    new W&B run (issue 72, borderline: fixed, from the folder's last three parts, which a resume keeps)."""
    here, moved = (tmp_path / where / "summaries/r/20260101-120000" for where in ("a", "b/c"))
    assert tracking.wandb_id(here) == tracking.wandb_id(moved)
    assert tracking.wandb_id(here) != tracking.wandb_id(tmp_path / "a/summaries/r/20260101-120001")
    assert tracking.wandb_id(here) != tracking.wandb_id(tmp_path / "a/summaries/q/20260101-120000")
