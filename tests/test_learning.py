"""The agent learns both fast memory tasks with the shipped configs, on three seeds each.

A run passes when the mean episode reward over its last five updates (the
episodes that ended in them) clears the bar: stricter than touching the bar once.
"""
import numpy as np
import pytest

from config import load_config
from trainer import Trainer

SEEDS = [0, 1, 2]


def train(config_path: str, seed: int, tmp_path):
    config = load_config(config_path)
    config.seed = seed
    trainer = Trainer(config, run_id=f"seed{seed}", summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    history = trainer.run()
    return config, history


def last5(history, key):
    values = [getattr(h, key) for h in history if getattr(h, key) is not None]
    return float(np.mean(values[-5:]))


@pytest.mark.learning
@pytest.mark.parametrize("seed", SEEDS)
def test_poc_memory_env_gru_learns(seed, tmp_path):
    config, history = train("configs/poc_memory_env.yaml", seed, tmp_path)
    assert config.recurrence.layer_type == "gru" and config.recurrence.sequence_length == 8
    assert history[-1].steps <= 61_440
    reward, success = last5(history, "reward_mean"), last5(history, "success_mean")
    assert reward >= 1.15, f"seed {seed}: mean reward over the last 5 updates {reward:.3f}"
    assert success >= 0.95, f"seed {seed}: success over the last 5 updates {success:.3f}"


@pytest.mark.learning
@pytest.mark.parametrize("seed", SEEDS)
def test_cartpole_masked_lstm_learns(seed, tmp_path):
    config, history = train("configs/cartpole_masked.yaml", seed, tmp_path)
    assert config.recurrence.layer_type == "lstm" and config.recurrence.sequence_length == 8
    assert history[-1].steps <= 409_600
    reward = last5(history, "reward_mean")
    assert reward >= 180, f"seed {seed}: mean return over the last 5 updates {reward:.1f}"
