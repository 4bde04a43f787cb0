"""The three changes docs/extending.md shows, each done here as a researcher would: a new recurrent core,
a new environment family, a new loss term. Each test changes one place (with monkeypatch, so the registry
is back as it was afterwards) and trains through the normal Trainer; and the examples the page points to
touch no program file beyond those it names."""
import ast
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import cores
import environments
import model
from config import load_config
from trainer import PhaseTimes, Trainer

POC = "configs/poc_memory_env.yaml"
# one torch thread: with torch_threads 0 the count follows the machine's load, and two runs of a seed that sum
# in another order differ in the last bits
SMALL = ["n_workers=4", "worker_steps=32", "n_mini_batch=2", "updates=2", "torch_threads=1"]


class MyGRU(nn.Module):
    """A user's own core, as docs/extending.md writes it: a GRU cell stepped in Python, one layer."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.cell = nn.GRUCell(input_size, hidden_size)

    def forward(self, x: torch.Tensor, h: torch.Tensor):  # x (N, L, F), h (1, N, H)
        outputs, h = [], h[0]
        for x_t in x.unbind(1):
            h = self.cell(x_t, h)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h[None]  # (N, L, H), (1, N, H)


CORES = {"rnn": model.Core(nn.RNN, state_parts=1), "mygru": model.Core(MyGRU, state_parts=1)}


def trainer_for(tmp_path, overrides=(), config=POC) -> Trainer:
    return Trainer(load_config(config, [*SMALL, *overrides]), summaries_dir=tmp_path, models_dir=tmp_path,
                   verbose=False)


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("name", CORES)
def test_a_third_core_is_one_entry_and_the_training_pass_reproduces_its_rollout(tmp_path, monkeypatch, name, packed,
                                                                                layers):
    """One CORES entry makes recurrence.layer_type accept the core; the PoC config then trains with it, and the
    training pass recomputes the rollout's log-probs and values from the stored states. packed: torch's nn.RNN
    runs the real steps alone as a PackedSequence; the user's module, which takes none, is never packed. Two
    layers: nn.RNN stacks its own, the model stacks two of the user's one-layer module."""
    monkeypatch.setitem(model.CORES, name, CORES[name])
    monkeypatch.setattr(model, "PACK_MIN_PADDING", 0.0 if packed else 1.0)
    trainer = trainer_for(tmp_path, [f"recurrence.layer_type={name}", f"recurrence.num_layers={layers}"])
    try:
        built = trainer.model.core
        assert isinstance(built, CORES[name].layer) or [type(layer) for layer in built.layers] == [MyGRU] * layers
        with torch.no_grad():
            trainer.model.policy_out.weight.mul_(300.0)  # a sharp policy shows a wrong state in its log-probs
        trainer.collect(PhaseTimes())
        trainer.advantages()
        for mb in trainer.buffer.minibatches(2):
            with torch.no_grad():
                out = trainer.model.evaluate(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask)
            torch.testing.assert_close(out.log_probs[mb.mask], mb.log_probs[mb.mask], atol=1e-5, rtol=0)
            torch.testing.assert_close(out.values[mb.mask], mb.values[mb.mask], atol=1e-5, rtol=0)
            assert (mb.log_probs[mb.mask] < -0.1).any()
        before = [p.detach().clone() for p in trainer.model.core.parameters()]
        trainer.one_update()
        assert all(not torch.equal(a, b) for a, b in zip(before, trainer.model.core.parameters()))
    finally:
        trainer.close()


def test_an_unknown_layer_type_is_refused_with_the_cores_there_are(monkeypatch):
    from config import ConfigError
    names = ", ".join(model.CORES)
    with pytest.raises(ConfigError, match=f"'recurrence.layer_type' = 'rnn' is not allowed: one of {names}$"):
        load_config(POC, ["recurrence.layer_type=rnn"])
    monkeypatch.setitem(model.CORES, "rnn", CORES["rnn"])
    assert load_config(POC, ["recurrence.layer_type=rnn"]).recurrence.layer_type == "rnn"


@pytest.mark.learning
@pytest.mark.parametrize("name", CORES)
def test_the_poc_config_learns_with_a_third_core(tmp_path, monkeypatch, name):
    """As test_learning's GRU run (seed 0), with torch's vanilla RNN or the user's GRU module."""
    monkeypatch.setitem(model.CORES, name, CORES[name])
    config = load_config(POC, [f"recurrence.layer_type={name}", "torch_threads=1"])  # as test_learning.load
    trainer = Trainer(config, summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    history = trainer.run()
    reward = float(np.mean([h.reward_mean for h in history if h.reward_mean is not None][-5:]))
    assert reward >= 1.15, f"{name}: mean reward over the last 5 updates {reward:.3f}"


class Recall(gym.Env):
    """A new family's environment: a cue (+1 or -1) on the first step only; after `delay` more steps the
    action must name it (1 for +1). Reward 1 for the right answer."""
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)  # the cue, and "answer now"
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None, delay: int = 2):
        self.delay = delay

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.cue = 0, float(self.np_random.choice([-1.0, 1.0]))
        return np.array([self.cue, 0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.t > self.delay
        reward = float(done and (int(action) == 1) == (self.cue > 0))
        return np.array([0.0, float(self.t == self.delay)], np.float32), reward, done, False, {}


def test_a_new_environment_family_is_one_entry(tmp_path, monkeypatch):
    """One FAMILIES entry (environments/__init__.py) makes environment.type accept the family, with the
    constructor kwargs it declares; the Trainer then steps it and scores its episodes."""
    family = environments.Family(Recall, kwargs={"delay": environments.integer(1)})
    monkeypatch.setitem(environments.FAMILIES, "Recall", family)
    trainer = trainer_for(tmp_path, ["environment.type=Recall", "environment.kwargs={delay: 3}"])
    try:
        log = trainer.one_update()
        assert log.episodes and 0.0 <= log.reward_mean <= 1.0
        assert {e["length"] for e in log.episodes} == {4}  # the cue step, 3 steps of delay
    finally:
        trainer.close()


def test_the_activation_penalty_changes_the_gradient_and_is_logged(tmp_path):
    """The trainer minimises what ppo_loss returns as total: the same seed's update moves the parameters the same
    way without the term, another way with it, and the term is reported with the other losses."""
    def one_update(penalty: float):
        trainer = trainer_for(tmp_path, [f"activation_penalty={penalty}"])
        try:
            log = trainer.one_update()
            return [p.detach().clone() for p in trainer.model.parameters()], log.metrics["activation"]
        finally:
            trainer.close()

    (plain, activation), (again, _), (penalised, _) = one_update(0.0), one_update(0.0), one_update(10.0)
    assert all(torch.equal(a, b) for a, b in zip(plain, again))  # the same seed trains the same weights
    assert not all(torch.equal(a, b) for a, b in zip(plain, penalised))
    assert activation > 0


PROGRAM = sorted([*Path(__file__).resolve().parent.parent.glob("*.py"),
                  *Path(__file__).resolve().parent.parent.glob("environments/*.py")])


def naming(name: str) -> set[str]:
    """The program files whose code names `name`: as a variable, attribute, argument, import or string."""
    files = set()
    for path in PROGRAM:
        for node in ast.walk(ast.parse(path.read_text())):
            named = {ast.Name: "id", ast.Attribute: "attr", ast.keyword: "arg", ast.alias: "name",
                     ast.ClassDef: "name", ast.Constant: "value"}.get(type(node))
            if named and getattr(node, named) == name:
                files.add(path.parent.name + "/" + path.name if path.parent.name == "environments" else path.name)
    return files


def test_each_example_touches_only_the_files_this_page_names():
    """docs/extending.md says where each change goes; the examples it points to are there and nowhere else."""
    page = (Path(__file__).resolve().parent.parent / "docs/extending.md").read_text()
    assert "its module in `cores.py`, one entry in `model.CORES`" in page
    assert "`losses.py`, and its coefficient in `config.py`" in page
    for core in ("MinGRU", "LRU"):
        assert naming(core) == {"cores.py", "model.py"}, core
    assert naming("activation_penalty") == {"losses.py", "config.py"}
    assert {f for f in naming("PocMemoryEnv") if not f.startswith("environments/")} <= {"config.py", "stats.py"}
    assert {f for f in naming("make_minigrid") if not f.startswith("environments/")} == set()
