"""train.py end to end: two updates, a checkpoint that loads, summaries; bad input gets one line."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from checkpoint import load_checkpoint
from config import InitializationConfig, config_from_dict
from model import ActorCritic
from worker import VecEnv
from tests.hang import HANG_S

pytestmark = pytest.mark.slow  # processes, Ray or whole configs: make test-fast leaves these out

ROOT = Path(__file__).resolve().parent.parent


def run_train(tmp_path, *args):
    return subprocess.run([sys.executable, str(ROOT / "train.py"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=HANG_S)


def test_train_two_updates_writes_checkpoint_and_summaries(tmp_path):
    raw = yaml.safe_load((ROOT / "configs/cartpole_masked.yaml").read_text())
    raw.update(updates=2, n_workers=4, worker_steps=32, n_mini_batch=2)
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(raw))
    result = run_train(tmp_path, "--config", "small.yaml", "--run-id", "my-run", "--cpu", "--seed", "7")
    assert result.returncode == 0, result.stderr
    lines = [l for l in result.stdout.splitlines() if l.startswith("update")]
    assert len(lines) == 2 and "sps" in lines[0]

    checkpoint = load_checkpoint(tmp_path / "models/my-run.pt")
    assert checkpoint["update"] == 2 and checkpoint["config"]["seed"] == 7
    config = config_from_dict(checkpoint["config"])
    vec = VecEnv(config.environment, [0], processes=0)
    model = ActorCritic(vec.spaces.observation, vec.spaces.action_space, config.hidden_layer_size,
                        config.recurrence, config.vector_encoder_size, initialization=InitializationConfig())
    model.load_state_dict(checkpoint["model"])
    vec.close()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert checkpoint["optimizer"]["state"][0]["step"] == 2 * 2 * config.epochs  # updates x minibatches x epochs
    events = list((tmp_path / "summaries/my-run").glob("*/events.out.tfevents.*"))
    assert len(events) == 1 and events[0].stat().st_size > 0


def test_bad_config_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "bad.yaml").write_text("gamma: 0.99\nrecurrence:\n  layer_type: transformer\n")
    result = run_train(tmp_path, "--config", "bad.yaml")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "recurrence.layer_type" in result.stderr and "Traceback" not in result.stderr

    result = run_train(tmp_path, "--config", "missing.yaml")
    assert result.returncode == 2 and "not found" in result.stderr

    (tmp_path / "env.yaml").write_text("environment:\n  type: Pong\n")
    result = run_train(tmp_path, "--config", "env.yaml")
    assert result.returncode == 2 and "environment.type" in result.stderr and "PocMemoryEnv" in result.stderr


def test_inference_only_checkpoint_acts_the_same_and_refuses_to_resume(tmp_path):
    import numpy as np
    from agent import Agent
    raw = yaml.safe_load((ROOT / "configs/poc_memory_env.yaml").read_text())
    raw.update(updates=2)
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(raw))
    assert run_train(tmp_path, "--config", "small.yaml", "--run-id", "r").returncode == 0
    full, small = tmp_path / "models/r.pt", tmp_path / "small.pt"
    result = subprocess.run([sys.executable, str(ROOT / "checkpoint.py"), "--inference-only", str(full), str(small)],
                            capture_output=True, text=True, timeout=HANG_S)
    assert result.returncode == 0, result.stderr
    assert small.stat().st_size < full.stat().st_size / 2

    obs = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    a, b = (Agent.load(path).act(obs, None, np.ones(5, dtype=bool), deterministic=True) for path in (full, small))
    for field in ("actions", "log_probs", "values"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))

    result = run_train(tmp_path, "--resume", str(small))
    assert result.returncode == 2 and "cannot resume" in result.stderr and result.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("native", [True, False])
def test_the_precision_auto_picks_is_said_and_recorded(tmp_path, monkeypatch, capsys, native):
    """precision auto picked bfloat16 on a CPU that runs it natively, and neither the console nor the run's
    config.json said so (issue 87, borderline): the start line names the precision in use and config.json (with
    W&B's config) records it in place of auto. The checkpoint keeps auto: a resume elsewhere picks again."""
    import json

    import train
    from plumbing import machine
    from trainer import Trainer
    monkeypatch.setattr(machine, "bfloat16_is_fast", lambda device: native)
    monkeypatch.setattr(Trainer, "run", lambda self: self.summaries.open())  # config.json, no training
    trainer = Trainer(config_from_dict({"n_workers": 2, "worker_steps": 8, "n_mini_batch": 1, "precision": "auto"}),
                      run_id="auto", summaries_dir=tmp_path / "summaries", models_dir=tmp_path, verbose=False)
    try:
        assert train.train(trainer, None) == 0
    finally:
        trainer.close()
    used = "bfloat16" if native else "float32"
    assert capsys.readouterr().out.startswith(f"training auto on cpu in {used} (")
    assert json.loads((trainer.summaries.path / "config.json").read_text())["precision"] == used
    assert trainer.state_dict()["config"]["precision"] == "auto"
