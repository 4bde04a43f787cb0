"""The optimizer's settings and state across a resume, including checkpoints written before torch.optim."""
from pathlib import Path

import pytest
import torch
import yaml

from checkpoint import capture, load_checkpoint, restore, save_checkpoint, torch_optimizer_state
from config import config_from_dict
from trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent

SMALL = {"n_workers": 4, "worker_steps": 32, "n_mini_batch": 2}


def trainer(tmp_path, run_id: str, **settings) -> Trainer:
    raw = {**yaml.safe_load((ROOT / "configs/poc_memory_env.yaml").read_text()), **SMALL, "torch_threads": 1,
           "checkpoint_interval": 0, **settings}
    return Trainer(config_from_dict(raw), run_id=run_id, summaries_dir=tmp_path / "s", models_dir=tmp_path / "m",
                   verbose=False)


def before_torch_optim(state: dict) -> dict:
    """A torch.optim AdamW state as the AdamW of optimizer.py saved it: one step count, and each
    moment as one list in the parameters' order."""
    moments = [state["state"][i] for i in range(len(state["state"]))]
    return {"param_groups": [{k: g[k] for k in ("lr", "betas", "eps", "weight_decay")} for g in state["param_groups"]],
            "steps": int(moments[0]["step"]), "exp_avg": [m["exp_avg"] for m in moments],
            "exp_avg_sq": [m["exp_avg_sq"] for m in moments]}


def test_the_config_sets_epsilon_and_weight_decay_and_wins_over_a_resumed_checkpoint(tmp_path):
    """optimizer.eps and optimizer.weight_decay reach AdamW; a resume takes them from its config
    (which may change them, e.g. to test the epsilon), not from the saved state."""
    first = trainer(tmp_path, "a", updates=1, optimizer={"eps": 1e-5, "weight_decay": 0.0})
    first.one_update()
    assert all(g["eps"] == 1e-5 and g["weight_decay"] == 0.0 for g in first.optimizer.param_groups)
    saved = capture(first)
    first.close()
    changed = trainer(tmp_path, "b", updates=2, optimizer={"eps": 1e-3, "weight_decay": 0.1})
    try:
        restore(changed, saved)
        assert all(g["eps"] == 1e-3 and g["weight_decay"] == 0.1 for g in changed.optimizer.param_groups)
        for p, q in zip(first.model.parameters(), changed.model.parameters()):  # the saved moments and steps
            mine, theirs = changed.optimizer.state[q], first.optimizer.state[p]
            assert all(torch.equal(mine[k], theirs[k]) for k in ("step", "exp_avg", "exp_avg_sq"))
    finally:
        changed.close()


def test_a_checkpoint_from_before_torch_optim_resumes_as_the_same_run(tmp_path):
    """A checkpoint whose optimizer state has the old form resumes with the same moments and step
    count: the next update gives the same parameters as a resume from torch.optim's own state."""
    first = trainer(tmp_path, "first", updates=2)
    first.run()
    saved = load_checkpoint(tmp_path / "m/first.pt")
    old = {**saved, "optimizer": before_torch_optim(saved["optimizer"])}
    save_checkpoint(tmp_path / "old.pt", old)
    resumed = []
    for run_id, checkpoint in (("new", saved), ("old", load_checkpoint(tmp_path / "old.pt"))):
        t = trainer(tmp_path, run_id, updates=3)
        restore(t, checkpoint)
        t.run()
        resumed.append(t)
    new, converted = resumed
    assert converted.optimizer.state_dict()["param_groups"] == new.optimizer.state_dict()["param_groups"]
    for (name, a), b in zip(new.model.state_dict().items(), converted.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_the_old_form_converts_to_the_textbook_step():
    """A small state as optimizer.py saved it: the next step uses its moments, its step count for the
    bias correction and its learning rate."""
    net = torch.nn.Linear(2, 1)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1.0, fused=True)
    m, v = [torch.tensor([[0.1, -0.2]]), torch.tensor([0.3])], [torch.tensor([[0.01, 0.04]]), torch.tensor([0.09])]
    old = {"param_groups": [{"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}], "steps": 3,
           "exp_avg": [t.clone() for t in m], "exp_avg_sq": [t.clone() for t in v]}
    optimizer.load_state_dict(torch_optimizer_state(old, optimizer))
    before = [p.detach().clone() for p in net.parameters()]
    for p in net.parameters():
        p.grad = torch.full_like(p, 0.5)
    optimizer.step()
    for p, p0, m0, v0 in zip(net.parameters(), before, m, v):
        m1, v1 = 0.9 * m0 + 0.1 * 0.5, 0.999 * v0 + 0.001 * 0.25
        expected = p0 * (1 - 1e-2 * 0.01) - 1e-2 * (m1 / (1 - 0.9 ** 4)) / ((v1 / (1 - 0.999 ** 4)).sqrt() + 1e-8)
        torch.testing.assert_close(p.detach(), expected)


def test_an_old_state_for_other_parameters_is_refused():
    optimizer = torch.optim.AdamW(torch.nn.Linear(2, 1).parameters())
    old = {"param_groups": [{"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}], "steps": 1,
           "exp_avg": [torch.zeros(1, 2)], "exp_avg_sq": [torch.zeros(1, 2)]}
    with pytest.raises(ValueError, match="does not match the model's parameters"):
        torch_optimizer_state(old, optimizer)
