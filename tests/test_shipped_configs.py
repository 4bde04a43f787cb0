"""Every shipped config trains two (small) updates with finite losses and a checkpoint that loads."""
import math
from pathlib import Path

import pytest
import torch

from checkpoint import load_checkpoint
from config import config_from_dict, load_config
from tests.devices import DEVICES
from trainer import Trainer

pytestmark = pytest.mark.slow  # processes, Ray or whole configs: make test-fast leaves these out

CONFIGS = sorted(Path(__file__).resolve().parent.parent.glob("configs/*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
@pytest.mark.parametrize("device", DEVICES)
def test_config_trains_two_updates(path, device, tmp_path):
    config = load_config(path, ["updates=2", "n_workers=4", "worker_steps=32", "n_mini_batch=2",
                                "evaluation.episodes=2"])  # a config that evaluates does so after update 2
    trainer = Trainer(config, run_id=path.stem, device=device, summaries_dir=tmp_path, models_dir=tmp_path,
                      verbose=False)
    history = trainer.run()
    assert len(history) == 2
    for log in history:
        assert all(math.isfinite(v) for v in log.metrics.values()), log.metrics
    checkpoint = load_checkpoint(tmp_path / f"{path.stem}.pt")
    assert checkpoint["update"] == 2
    again = Trainer(config_from_dict(checkpoint["config"]), run_id="again", device=device, summaries_dir=tmp_path,
                    models_dir=tmp_path, verbose=False)
    again.load_state_dict(checkpoint)
    for a, b in zip(trainer.model.parameters(), again.model.parameters()):
        assert torch.equal(a, b)
    again.close()
