"""The three changes docs/extending.md shows, each done here as a researcher would: a new recurrent core,
a new environment family, a new loss term. Each test changes one place (with monkeypatch, so the registry
is back as it was afterwards) and trains through the normal Trainer; and the examples the page points to
touch no program file beyond those it names."""
import ast
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import checkpoint
import config
import cores
import environments
import fastpath
import losses
import model
import trainer as trainer_module
from config import Core, load_config
from plumbing.errors import StrayParameterError
from tests.test_consistency import SWITCHES, check_the_training_pass_reproduces_the_rollout
from tests.test_cores import (check_a_sequence_equals_its_steps, check_one_layer_cores_are_stacked,
                              check_the_model_keeps_a_cores_own_parameters, suites)
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


def page_examples() -> dict[str, Core]:
    """docs/extending.md's two entries, read from the page as it writes them."""
    page = (Path(__file__).resolve().parent.parent / "docs/extending.md").read_text()
    return {name: eval(f"Core({args})", {"Core": Core})
            for name, args in re.findall(r'^    "(rnn|mygru)": Core\((.*)\),$', page, flags=re.MULTILINE)}


EXAMPLES = page_examples()


class NormedGRU(nn.Module):
    """A user's core with a two-part state (h, m): a GRU cell fed its projected input, layer-normalised, less m, the
    running mean of those inputs; its parameters named its own way, no scan and no packed path."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.W_in = nn.Parameter(torch.randn(input_size, hidden_size) / input_size ** 0.5)
        self.norm = nn.LayerNorm(hidden_size)
        self.cell = nn.GRUCell(hidden_size, hidden_size)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):  # x (N, L, F), 2 x (1, N, H)
        (h, m), outputs = (part[0] for part in state), []
        for x_t in x.unbind(1):
            u = self.norm(x_t @ self.W_in)
            m = 0.9 * m + 0.1 * u
            h = self.cell(u - m, h)
            outputs.append(h)
        return torch.stack(outputs, dim=1), (h[None], m[None])  # (N, L, H), 2 x (1, N, H)


def register(monkeypatch, name: str, core: Core) -> None:
    """A core added as docs/extending.md says: its module in cores.py, its entry in config.CORES."""
    monkeypatch.setattr(cores, "MyGRU", MyGRU, raising=False)
    monkeypatch.setitem(config.CORES, name, core)


def trainer_for(tmp_path, overrides=(), config=POC) -> Trainer:
    return Trainer(load_config(config, [*SMALL, *overrides]), summaries_dir=tmp_path, models_dir=tmp_path,
                   verbose=False)


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("name", EXAMPLES)
def test_a_third_core_trains_and_the_training_pass_reproduces_its_rollout(tmp_path, monkeypatch, name, packed,
                                                                           layers):
    """Its config.CORES entry makes recurrence.layer_type accept the core; the PoC config then trains with it,
    and the training pass recomputes the rollout's log-probs and values from the stored states. packed: torch's nn.RNN
    runs the real steps alone as a PackedSequence; the user's module, which takes none, is never packed. Two
    layers: nn.RNN stacks its own, the model stacks two of the user's one-layer module."""
    register(monkeypatch, name, EXAMPLES[name])
    monkeypatch.setattr(fastpath, "PACK_MIN_PADDING", 0.0 if packed else 1.0)
    trainer = trainer_for(tmp_path, [f"recurrence.layer_type={name}", f"recurrence.num_layers={layers}"])
    try:
        built = trainer.model.core
        assert isinstance(built, model.layer_class(EXAMPLES[name])) or [type(layer) for layer in built.layers] == [MyGRU] * layers
        with torch.no_grad():
            trainer.model.policy_out.weight.mul_(300.0)  # a sharp policy shows a wrong state in its log-probs
        trainer.collect(PhaseTimes())
        trainer.advantages()
        for mb in trainer.buffer.minibatches(2):
            with torch.no_grad():
                out = trainer.model.training_pass(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask)
            torch.testing.assert_close(out.log_probs[mb.mask], mb.log_probs[mb.mask], atol=1e-5, rtol=0)
            torch.testing.assert_close(out.values[mb.mask], mb.values[mb.mask], atol=1e-5, rtol=0)
            assert (mb.log_probs[mb.mask] < -0.1).any()
        before = [p.detach().clone() for p in trainer.model.core.parameters()]
        trainer.one_update()
        assert all(not torch.equal(a, b) for a, b in zip(before, trainer.model.core.parameters()))
    finally:
        trainer.close()


def test_a_core_with_a_two_part_state_passes_every_cores_checks_and_the_declared_ones_pass_it_over(tmp_path,
                                                                                                   monkeypatch):
    """One registered entry: the training pass reproduces the rollout of NormedGRU under every recurrence switch, a
    sequence equals its steps, the model keeps its parameters and stacks its layers. The suites for what a core
    declares pass it over for what it does not declare: no scan_min_length (the scan tests), no packed (the
    packed tests of test_cores.py and test_consistency.py)."""
    entry = Core(NormedGRU, state_parts=2)
    register(monkeypatch, "normedgru", entry)
    assert suites(entry) == {"stacked"} and not entry.packed
    check_a_sequence_equals_its_steps("normedgru")
    check_the_model_keeps_a_cores_own_parameters("normedgru")
    check_one_layer_cores_are_stacked("normedgru")
    for switches in ({}, *SWITCHES.values()):
        check_the_training_pass_reproduces_the_rollout(
            tmp_path, {"environment": {"type": "PocMemoryEnv"}, "recurrence": {"layer_type": "normedgru", **switches}})


def test_an_unknown_layer_type_is_refused_with_the_cores_there_are(monkeypatch):
    from config import ConfigError
    names = ", ".join(config.CORES)
    with pytest.raises(ConfigError, match=f"'recurrence.layer_type' = 'rnn' is not allowed: one of {names}$"):
        load_config(POC, ["recurrence.layer_type=rnn"])
    register(monkeypatch, "rnn", EXAMPLES["rnn"])
    assert load_config(POC, ["recurrence.layer_type=rnn"]).recurrence.layer_type == "rnn"


@pytest.mark.learning
@pytest.mark.parametrize("name", EXAMPLES)
def test_the_poc_config_learns_with_a_third_core(tmp_path, monkeypatch, name):
    """As test_learning's GRU run (seed 0), with torch's vanilla RNN or the user's GRU module."""
    register(monkeypatch, name, EXAMPLES[name])
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
        trainer = trainer_for(tmp_path, [f"activation_penalty={penalty}", "torch_threads=1"])
        try:
            log = trainer.one_update()
            return [p.detach().clone() for p in trainer.model.parameters()], log.metrics["activation"]
        finally:
            trainer.close()

    (plain, activation), (again, _), (penalised, _) = one_update(0.0), one_update(0.0), one_update(10.0)
    assert all(torch.equal(a, b) for a, b in zip(plain, again))  # the same seed trains the same weights
    assert not all(torch.equal(a, b) for a, b in zip(plain, penalised))
    assert activation > 0


def check_every_parameter_the_loss_reaches_is_trained_and_saved(trainer: Trainer, loss=losses.ppo_loss) -> None:
    """One minibatch's loss, every term switched on: each parameter it reaches is the optimiser's and the
    checkpoint's. A head kept anywhere else would take gradients that no step applies and no file holds."""
    trainer.collect(PhaseTimes())
    trainer.advantages()
    mb = next(trainer.buffer.minibatches(2, trainer.model))
    out = trainer.model.training_pass(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask, mb.previous, mb.burn_in)
    total = loss(out, mb, config=trainer.config, clip_range=0.2, beta=0.01).total
    optimised = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    saved = {t.data_ptr() for t in trainer.state_dict()["model"].values()}
    reached = losses.reached_parameters(total)
    assert len(reached) > 4
    for parameter in reached:
        assert id(parameter) in optimised and parameter.data_ptr() in saved, f"{tuple(parameter.shape)} not trained"


# every key config.py declares as weighing a loss term (term=True), each turned on
TERMS = [f"{name}=0.1" for name, f in config.config_fields(config.Config) if f.metadata.get("term")]


@pytest.mark.parametrize("config_path", [POC, "configs/minigrid.yaml"])
@pytest.mark.parametrize("layer", ["gru", "trxl"])
def test_every_parameter_every_loss_term_reaches_is_trained_and_saved(tmp_path, config_path, layer):
    """Every loss term the config declares on, vector and image observations: the reconstruction loss's decoder
    is the model's own, so the optimiser steps it and the checkpoint holds it."""
    assert {"activation_penalty=0.1", "reconstruction_coefficient=0.1"} <= set(TERMS)
    # MiniGrid's LSTM gain is for torch's own layers only, and its reset off for a core whose memory is an episode's
    gain = [] if layer == "gru" else ["initialization.recurrent_gain=1.0", "recurrence.reset_hidden_state=true"]
    trainer = trainer_for(tmp_path, [*TERMS, "n_workers=2", f"recurrence.layer_type={layer}", "evaluation.interval=0",
                                     "worker_processes=0", *gain], config_path)
    try:
        assert len(trainer.model.auxiliary["reconstruction"].decoders) == 1
        check_every_parameter_the_loss_reaches_is_trained_and_saved(trainer)
    finally:
        trainer.close()


def test_a_head_kept_outside_the_model_fails_the_check(tmp_path):
    """The mistake the check is for: a term whose module lives beside the loss, not in the model."""
    outside = nn.Linear(16, 1)

    def loss(out, mb, **kwargs):
        terms = losses.ppo_loss(out, mb, **kwargs)
        return terms._replace(total=terms.total + outside(out.core_outputs[mb.mask]).square().mean())

    trainer = trainer_for(tmp_path, ["recurrence.hidden_state_size=16"])
    try:
        with pytest.raises(AssertionError, match="not trained"):
            check_every_parameter_the_loss_reaches_is_trained_and_saved(trainer, loss)
    finally:
        trainer.close()


HEAD_IN_LOSSES = nn.Linear(16, 1)  # where a hurried user keeps a new term's head: beside the loss


def test_a_run_whose_loss_reaches_a_head_outside_the_model_refuses_before_its_first_step(tmp_path, monkeypatch):
    """The newcomer's mistake, as made: a head kept in losses.py trains nothing and is saved nowhere; the first
    update stops with one line that says so, before any step is taken or any file written."""
    monkeypatch.setattr(losses, "head", HEAD_IN_LOSSES, raising=False)
    ppo_loss = losses.ppo_loss

    def loss(out, mb, **kwargs):
        terms = ppo_loss(out, mb, **kwargs)
        return terms._replace(total=terms.total + losses.head(out.core_outputs[mb.mask]).square().mean())

    monkeypatch.setattr(trainer_module, "ppo_loss", loss)
    trainer = trainer_for(tmp_path, ["recurrence.hidden_state_size=16"])
    try:
        before = [p.detach().clone() for p in trainer.model.parameters()]
        with pytest.raises(StrayParameterError, match=r"^the loss reaches a tensor of shape \(1, 16\) that is not a "
                                                      "parameter of the model") as error:
            trainer.run()
        assert "\n" not in str(error.value)
        assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
        assert not (tmp_path / "run.pt").exists()
    finally:
        trainer.close()


class NextCue(nn.Module):
    """A user's loss term with a head of its own: predict each step's observation from the core's output (a
    smaller cousin of the reconstruction loss). Built as the heads of model.AUXILIARY_HEADS are built."""

    def __init__(self, observation, features: int, init):
        super().__init__()
        self.linear = nn.Linear(features, observation.shape[0])

    def forward(self, y: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:  # (R, F), (R, obs) -> (R,)
        return (self.linear(y) - obs).square().mean(-1)


def test_a_loss_term_with_parameters_of_its_own_is_trained_saved_and_restored(tmp_path, monkeypatch):
    """docs/extending.md's three places: the head in model.py (one AUXILIARY_HEADS entry), its coefficient in
    config.py (`next_cue_coefficient`, set on the config object here), and its term in losses.py (ppo_loss wrapped
    here). Its parameters move with the updates, are the checkpoint's, and a resumed run has them back."""
    monkeypatch.setitem(model.AUXILIARY_HEADS, "next_cue", model.Head("next_cue_coefficient", NextCue))

    def loss(out, mb, *, config, **kwargs):
        terms = losses.ppo_loss(out, mb, config=config, **kwargs)
        return terms._replace(total=terms.total + config.next_cue_coefficient * out.auxiliary["next_cue"].mean())

    monkeypatch.setattr(trainer_module, "ppo_loss", loss)
    config = load_config(POC, [*SMALL, "torch_threads=1"])
    config.next_cue_coefficient = 1.0
    trainer = Trainer(config, summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    try:
        head = trainer.model.auxiliary["next_cue"]
        before = [p.detach().clone() for p in head.parameters()]
        check_every_parameter_the_loss_reaches_is_trained_and_saved(trainer, loss)
        trainer.run()
        assert all(not torch.equal(a, b) for a, b in zip(before, head.parameters()))
        saved = checkpoint.load_checkpoint(trainer.checkpoint_path)["model"]
        torch.testing.assert_close(saved["auxiliary.next_cue.linear.weight"], head.linear.weight, atol=0, rtol=0)
        resumed = Trainer(config, summaries_dir=tmp_path, models_dir=tmp_path / "resumed", verbose=False)
        try:
            resumed.load_state_dict(checkpoint.load_checkpoint(trainer.checkpoint_path))
            torch.testing.assert_close(resumed.model.auxiliary["next_cue"].linear.weight, head.linear.weight,
                                       atol=0, rtol=0)
        finally:
            resumed.close()
    finally:
        trainer.close()


def test_the_reconstruction_loss_off_builds_nothing_and_on_trains_its_decoder(tmp_path):
    """Coefficient 0 (the default): no decoder, no parameter more, a term of 0; above 0 the term is logged and the
    decoder's loss falls over a few updates on the PoC task."""
    off = trainer_for(tmp_path, ["torch_threads=1"])
    on = trainer_for(tmp_path, ["torch_threads=1", "reconstruction_coefficient=1.0", "updates=6"])
    try:
        assert not list(off.model.auxiliary.parameters())
        assert [name for name, _ in on.model.named_parameters() if not name.startswith("auxiliary.")] == \
            [name for name, _ in off.model.named_parameters()]
        assert off.one_update().metrics["reconstruction"] == 0.0
        history = [log.metrics["reconstruction"] for log in on.run()]
        assert history[-1] < history[0]
    finally:
        off.close()
        on.close()


from tests.test_layout import PROGRAM, ROOT as PROGRAM_ROOT  # noqa: E402


def naming(name: str) -> set[str]:
    """The program files whose code names `name`: as a variable, attribute, argument, import or string."""
    files = set()
    for path in PROGRAM:
        for node in ast.walk(ast.parse(path.read_text())):
            named = {ast.Name: "id", ast.Attribute: "attr", ast.keyword: "arg", ast.alias: "name",
                     ast.ClassDef: "name", ast.Constant: "value"}.get(type(node))
            if named and getattr(node, named) == name:
                files.add(path.name if path.parent == PROGRAM_ROOT else path.parent.name + "/" + path.name)
    return files


def test_each_example_touches_only_the_files_this_page_names():
    """docs/extending.md says where each change goes; the examples it points to are there and nowhere else."""
    page = (Path(__file__).resolve().parent.parent / "docs/extending.md").read_text()
    assert "its module in `cores.py`, one entry in `config.CORES`" in page
    assert set(page_examples()) == {"rnn", "mygru"}  # the entries the core tests run, as the page writes them
    assert "`losses.py`, and its coefficient in `config.py`" in page
    for core in ("MinGRU", "LRU"):
        assert naming(core) == {"cores.py"} and f'"cores.{core}"' in (PROGRAM_ROOT / "config.py").read_text(), core
    assert naming("activation_penalty") == {"losses.py", "config.py"}
    assert "A loss term with parameters of its own: its head in `model.py`" in page
    assert naming("ObservationDecoder") == {"model.py"}
    assert naming("reconstruction_coefficient") == {"losses.py", "config.py", "model.py"}
    assert {f for f in naming("PocMemoryEnv") if not f.startswith("environments/")} <= {"config.py", "stats.py"}
    assert {f for f in naming("make_minigrid") if not f.startswith("environments/")} == set()
