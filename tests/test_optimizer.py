"""The optimizer's settings and state across a resume."""
from pathlib import Path

import torch
import yaml

from config import config_from_dict
from trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent

SMALL = {"n_workers": 4, "worker_steps": 32, "n_mini_batch": 2}


def trainer(tmp_path, run_id: str, **settings) -> Trainer:
    raw = {**yaml.safe_load((ROOT / "configs/poc_memory_env.yaml").read_text()), **SMALL, "torch_threads": 1,
           "checkpoint_interval": 0, **settings}
    return Trainer(config_from_dict(raw), run_id=run_id, summaries_dir=tmp_path / "s", models_dir=tmp_path / "m",
                   verbose=False)


def test_the_config_sets_epsilon_and_weight_decay_and_wins_over_a_resumed_checkpoint(tmp_path):
    """optimizer.eps and optimizer.weight_decay reach AdamW; a resume takes them from its config
    (which may change them, e.g. to test the epsilon), not from the saved state."""
    first = trainer(tmp_path, "a", updates=1, optimizer={"eps": 1e-5, "weight_decay": 0.0})
    first.one_update()
    assert all(g["eps"] == 1e-5 and g["weight_decay"] == 0.0 for g in first.optimizer.param_groups)
    saved = first.state_dict()
    first.close()
    changed = trainer(tmp_path, "b", updates=2, optimizer={"eps": 1e-3, "weight_decay": 0.1})
    try:
        changed.load_state_dict(saved)
        assert all(g["eps"] == 1e-3 and g["weight_decay"] == 0.1 for g in changed.optimizer.param_groups)
        for p, q in zip(first.model.parameters(), changed.model.parameters()):  # the saved moments and steps
            mine, theirs = changed.optimizer.state[q], first.optimizer.state[p]
            assert all(torch.equal(mine[k], theirs[k]) for k in ("step", "exp_avg", "exp_avg_sq"))
    finally:
        changed.close()
