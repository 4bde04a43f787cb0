"""Config loading: the reference's keys, typed checks, and the schedules."""
import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from plumbing.yaml_input import read_yaml
from config import (ConfigError, ScheduleConfig, check_resume_overrides, config_from_dict, load_config,
                    schedule_value)

ROOT = Path(__file__).resolve().parent.parent

# The reference baseline's cartpole.yaml, key for key (its published hyperparameters).
REFERENCE_YAML = """
environment:
    type: "CartPoleMasked"
gamma: 0.99
lamda: 0.95
updates: 100
epochs: 4
n_workers: 16
worker_steps: 256
n_mini_batch: 4
value_loss_coefficient: 0.2
hidden_layer_size: 128
max_grad_norm: 0.5
recurrence:
    sequence_length: 8
    hidden_state_size: 64
    layer_type: lstm
    reset_hidden_state: True
learning_rate_schedule:
    initial: 3.0e-4
    final: 3.0e-6
    power: 1.0
    max_decay_steps: 100
beta_schedule:
    initial: 0.001
    final: 0.0001
    power: 1.0
    max_decay_steps: 100
clip_range_schedule:
    initial: 0.2
    final: 0.2
    power: 1.0
    max_decay_steps: 1000
"""


def test_reference_config_loads_unchanged(tmp_path):
    path = tmp_path / "cartpole.yaml"
    path.write_text(REFERENCE_YAML)
    c = load_config(path)
    assert c.environment.type == "CartPoleMasked"
    assert (c.n_workers, c.worker_steps, c.n_mini_batch, c.epochs, c.updates) == (16, 256, 4, 4, 100)
    assert c.recurrence.layer_type == "lstm" and c.recurrence.sequence_length == 8
    assert c.recurrence.reset_hidden_state is True
    assert c.learning_rate_schedule.final == 3.0e-6 and c.clip_range_schedule.max_decay_steps == 1000
    assert isinstance(c.gamma, float) and isinstance(c.updates, int)


@pytest.mark.parametrize("name", ["poc_memory_env", "cartpole_masked"])
def test_shipped_configs_load(name):
    load_config(f"configs/{name}.yaml")


def test_a_config_is_read_and_checked_without_torch():
    """config.py knows the cores by their entries (CORES): loading and checking a config, a core's own keys included,
    imports no torch (examples/onnx_agent.py reads configs where torch is not installed)."""
    probe = ("import sys, config\n"
             "config.load_config('configs/poc_memory_env.yaml', ['recurrence.layer_type=trxl'])\n"
             "print(sorted(name for name in sys.modules if name.split('.')[0] == 'torch'))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"
    with pytest.raises(ConfigError, match="'recurrence.memory_length' = 8 is not allowed: it applies only with "
                                          "recurrence.layer_type: trxl"):
        load_config(ROOT / "configs/poc_memory_env.yaml", ["recurrence.memory_length=8"])


@pytest.mark.parametrize("raw,words", [
    ({"gamme": 0.9}, ["gamme", "gamma"]),
    ({"recurrence": {"layer_typ": "gru"}}, ["recurrence.layer_typ", "recurrence.layer_type"]),
    ({"updates": 1.5}, ["updates", "int"]),
    ({"recurrence": {"layer_type": "rnn"}}, ["recurrence.layer_type", "gru, lstm"]),
    ({"learning_rate_schedule": {"initial": -1.0}}, ["learning_rate_schedule.initial"]),
    ({"beta_schedule": {"power": 0}}, ["beta_schedule.power", "> 0"]),
    ({"worker_steps": 16, "recurrence": {"sequence_length": 32}}, ["recurrence.sequence_length", "16"]),
    ({"recurrence": {"reset_hidden_state": "yes"}}, ["reset_hidden_state", "bool"]),
    ({"n_workers": 1, "worker_steps": 8, "n_mini_batch": 4, "recurrence": {"sequence_length": 8}}, ["n_mini_batch"]),
    ({"n_workers": 0}, ["n_workers", "from 1 to 65,536"]),
    ({"worker_steps": -1}, ["worker_steps", "> 0"]),
    ({"epochs": 0}, ["epochs", "> 0"]),
    ({"updates": "ten"}, ["updates", "int", "'ten'"]),
    ({"gamma": 1.5}, ["gamma", "[0, 1]"]),
    ({"lamda": -0.1}, ["lamda", "[0, 1]"]),
    ({"value_loss_coefficient": -1}, ["value_loss_coefficient", ">= 0"]),
    ({"max_grad_norm": 0}, ["max_grad_norm", "> 0"]),
    ({"n_workers": 4, "worker_processes": 5}, ["worker_processes", "at most n_workers (4)"]),
    ({"worker_processes": -1}, ["worker_processes", ">= 0"]),
    ({"torch_threads": -2}, ["torch_threads", ">= 0"]),
    ({"seed": -1}, ["seed", "[0, 2**32)"]),
    ({"seed": 2 ** 32}, ["seed", "[0, 2**32)"]),
    ({"gamma": float("nan")}, ["gamma", "finite"]),
    ({"max_grad_norm": float("inf")}, ["max_grad_norm", "finite"]),
    ({"device": "tpu"}, ["device", "auto, cpu, cuda"]),
    ({"recurrence": {"hidden_state_size": 0}}, ["recurrence.hidden_state_size", "> 0"]),
    ({"recurrence": {"memory_length": 16}}, ["recurrence.memory_length", "only with recurrence.layer_type: trxl"]),
    ({"recurrence": {"layer_type": "lstm", "gated": True}}, ["recurrence.gated", "only with", "trxl"]),
    ({"recurrence": {"layer_type": "trxl", "reset_hidden_state": False}},
     ["recurrence.reset_hidden_state", "the trxl core's memory holds the current episode alone",
      "--set recurrence.reset_hidden_state=true"]),
    ({"recurrence": {"layer_type": "trxl", "positional_encoding": "learned"}},
     ["recurrence.positional_encoding", "one of relative, absolute, none"]),
    ({"recurrence": {"layer_type": "trxl", "memory_length": 0}}, ["recurrence.memory_length", "from 1 to 65,536"]),
    ({"recurrence": {"layer_type": "trxl", "memory_length": 2 ** 63 - 1}}, ["recurrence.memory_length", "from 1 to 65,536"]),
    ({"recurrence": {"layer_type": "trxl", "hidden_state_size": 30, "attention_heads": 4}},
     ["recurrence.attention_heads", "divide recurrence.hidden_state_size (30)"]),
    ({"clip_range_schedule": {"final": 0.0}}, ["clip_range_schedule.final", "> 0"]),
    ({"learning_rate_schedule": {"initial": 0.0}}, ["learning_rate_schedule.initial", "> 0"]),
    ({"beta_schedule": {"max_decay_steps": 0}}, ["beta_schedule.max_decay_steps", "> 0"]),
    ({"environment": {"reward_scale": 0}}, ["environment.reward_scale", "> 0"]),
    ({"environment": 3}, ["environment", "mapping"]),
    ({"recurrence": {"sequence_length": 4.5}}, ["recurrence.sequence_length", "int"]),
    ({"checkpoint_interval": -1}, ["checkpoint_interval", ">= 0"]),
    ({"vector_encoder_size": -2}, ["vector_encoder_size", ">= 0"]),
    ({"hidden_layer_size": 0}, ["hidden_layer_size", "> 0"]),
    ({"environment": {"typ": "gym"}}, ["environment.typ", "environment.type"]),
    ({"recurrence": {"burn_in": -1}}, ["recurrence.burn_in", ">= 0"]),
    ({"recurrence": {"burn_in": 4, "sequence_length": 0}}, ["recurrence.burn_in", "sequence_length > 0"]),
    ({"worker_steps": 16, "recurrence": {"burn_in": 9, "sequence_length": 8}},
     ["recurrence.burn_in", "burn_in + sequence_length at most worker_steps (16)"]),
    ({"recurrence": {"previous_reward_scale": 0.1}}, ["recurrence.previous_reward_scale", "previous_reward: true"]),
    ({"recurrence": {"previous_reward_clip": 1.0}}, ["recurrence.previous_reward_clip", "previous_reward: true"]),
    ({"recurrence": {"previous_reward": True, "previous_reward_scale": 0}}, ["previous_reward_scale", "> 0"]),
    ({"recurrence": {"previous_reward": True, "previous_reward_clip": -1.0}}, ["previous_reward_clip", "> 0"]),
    ({"recurrence": {"previous_action": 1}}, ["recurrence.previous_action", "bool"]),
    ({"recurrence": {"refresh_states": "yes"}}, ["recurrence.refresh_states", "bool"]),
    # bounds where a huge value failed deep inside numpy or torch (a traceback) or hung start-up
    ({"n_workers": 2 ** 16 + 1}, ["n_workers", "from 1 to 65,536", "environments are Python objects"]),
    ({"hidden_layer_size": 10 ** 30}, ["hidden_layer_size", "64-bit"]),
    ({"recurrence": {"num_layers": 101}}, ["recurrence.num_layers", "from 1 to 100"]),
    ({"evaluation": {"episodes": 10 ** 6 + 1}}, ["evaluation.episodes", "1,000,000"]),
    # a gain that changes nothing: minGRU and LRU initialise their own parameters (accepted and ignored, issue 72)
    ({"recurrence": {"layer_type": "lru"}, "initialization": {"recurrent_gain": 3.0}},
     ["initialization.recurrent_gain", "torch's own recurrent layers (gru, lstm)", "the lru core initialises"]),
    ({"recurrence": {"layer_type": "mingru"}, "initialization": {"recurrent_gain": 0.5}},
     ["initialization.recurrent_gain", "mingru"]),
])
def test_bad_configs_name_the_key(raw, words):
    with pytest.raises(ConfigError) as error:
        config_from_dict(raw)
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_the_recurrent_gain_is_taken_for_torchs_own_layers_and_a_default_one_for_any_core(monkeypatch):
    import config
    for layer_type in ("gru", "lstm"):
        assert config_from_dict({"recurrence": {"layer_type": layer_type},
                                 "initialization": {"recurrent_gain": 3.0}}).initialization.recurrent_gain == 3.0
    for layer_type in ("mingru", "lru", "trxl"):
        with pytest.raises(ConfigError, match=f"the {layer_type} core initialises its own parameters"):
            config_from_dict({"recurrence": {"layer_type": layer_type}, "initialization": {"recurrent_gain": 3.0}})
    monkeypatch.setitem(config.CORES, "mygru", config.Core("mygru.MyGRU"))  # a researcher's own core (docs/extending.md)
    assert config_from_dict({"recurrence": {"layer_type": "mygru"}}).recurrence.layer_type == "mygru"
    with pytest.raises(ConfigError, match="the mygru core initialises its own parameters"):
        config_from_dict({"recurrence": {"layer_type": "mygru"}, "initialization": {"recurrent_gain": 3.0}})


def test_schedule_value_known_points():
    linear = ScheduleConfig(initial=1.0, final=0.0, power=1.0, max_decay_steps=10)
    assert schedule_value(linear, 0) == 1.0
    assert schedule_value(linear, 5) == pytest.approx(0.5)
    assert schedule_value(linear, 10) == 0.0
    assert schedule_value(linear, 50) == 0.0
    quadratic = ScheduleConfig(initial=3e-4, final=1e-5, power=2.0, max_decay_steps=100)
    assert schedule_value(quadratic, 50) == pytest.approx((3e-4 - 1e-5) * 0.25 + 1e-5)
    rising = ScheduleConfig(initial=0.1, final=0.2, power=1.0, max_decay_steps=10)
    assert schedule_value(rising, 0) == 0.2  # schedules only decay, as in the reference


@pytest.mark.parametrize("override,words", [
    ("recurrence.layer_type=lstm", None),
    ("recurrence.layer_typ=lstm", ["recurrence.layer_typ", "recurrence.layer_type"]),
    ("updates", ["key=value"]),
    ("gamma.x=1", ["gamma", "not a section"]),
    ("updates=[1, 2", ["cannot read the value"]),
    ("learning_rate_schedule.power=-1", ["learning_rate_schedule.power", "> 0"]),
])
def test_overrides_are_checked_like_the_file(override, words):
    if words is None:
        assert load_config("configs/poc_memory_env.yaml", [override]).recurrence.layer_type == "lstm"
        return
    with pytest.raises(ConfigError) as error:
        load_config("configs/poc_memory_env.yaml", [override])
    for word in words:
        assert word in str(error.value)


def test_numbers_in_exponent_notation_are_numbers_in_files_and_overrides(tmp_path):
    """--set learning_rate_schedule.initial=3e-4 was refused as 'must be of type float': YAML 1.1 reads 3e-4
    (no dot) and 1.0e5 (no exponent sign) as text (issue 58, borderline)."""
    (tmp_path / "c.yaml").write_text("learning_rate_schedule:\n  initial: 3e-4\n  final: 1.0e-5\n")
    config = load_config(tmp_path / "c.yaml", ["beta_schedule.initial=1E-3", "max_grad_norm=5e0"])
    assert (config.learning_rate_schedule.initial, config.learning_rate_schedule.final) == (3e-4, 1e-5)
    assert (config.beta_schedule.initial, config.max_grad_norm) == (1e-3, 5.0)
    assert read_yaml("[3e, e5, 1e5x, run1e5]") == ["3e", "e5", "1e5x", "run1e5"]  # text stays text


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_a_config_without_keys_is_refused_and_an_empty_mapping_takes_the_defaults(tmp_path, text):
    """An empty or comment-only config trained on the defaults without a word (issue 58, borderline)."""
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"c.yaml holds no keys \(it is empty, or comments only\): to train on "
                                          r"every default, write \{\} in it"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "c.yaml").write_text(text + "{}\n")
    assert load_config(tmp_path / "c.yaml") == config_from_dict({})


def test_yaml_syntax_error_and_missing_file_are_one_line(tmp_path):
    (tmp_path / "broken.yaml").write_text("gamma: [0.9\nlamda: 0.95\n")
    for path, word in ((tmp_path / "broken.yaml", "not valid yaml"), (tmp_path / "none.yaml", "not found")):
        with pytest.raises(ConfigError) as error:
            load_config(path)
        assert word in str(error.value) and "\n" not in str(error.value)


def test_resume_refuses_changed_model_inputs_and_takes_older_checkpoints_without_the_keys():
    saved = config_from_dict({"recurrence": {"previous_action": True}}).to_dict()
    for override in ("recurrence.previous_action=false", "recurrence.previous_reward=true"):
        with pytest.raises(ConfigError, match=override.split("=")[0]):
            check_resume_overrides(saved, config_from_dict(saved, [override]))
    check_resume_overrides(saved, config_from_dict(saved, ["recurrence.burn_in=4", "recurrence.refresh_states=true"]))
    older = config_from_dict({}).to_dict()
    for key in ("previous_action", "previous_reward", "previous_reward_scale", "previous_reward_clip", "burn_in",
                "refresh_states"):
        del older["recurrence"][key]  # a checkpoint written before these keys existed
    check_resume_overrides(older, config_from_dict(older))


@pytest.mark.parametrize("asked, expected", [(0, 3), (1, 1), (3, 3), (1000, 3)])
def test_torch_threads_0_or_above_the_cores_here_takes_the_cores_this_process_may_use(tmp_path, monkeypatch,
                                                                                      asked, expected):
    import os

    from trainer import Trainer
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5})
    threads = torch.get_num_threads()
    raw = {"n_workers": 2, "worker_steps": 16, "n_mini_batch": 1, "hidden_layer_size": 8, "torch_threads": asked}
    trainer = Trainer(config_from_dict(raw), summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    try:
        assert trainer.threads == expected and trainer.config.torch_threads == asked
    finally:
        trainer.close()
        torch.set_num_threads(threads)


def bomb(levels: int = 9) -> str:
    """A yaml 'billion laughs': `levels` lists of 10 aliases each of the one before (10**levels leaves)."""
    lines = ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]"
                                                       for i in range(1, levels)]
    return "[" + ", ".join(lines) + "]"


def test_merge_keys_load_as_pyyaml_reads_them_and_an_explicit_key_overrides(tmp_path):
    (tmp_path / "c.yaml").write_text(
        "learning_rate_schedule: &schedule\n  initial: 0.001\n  final: 0.0001\n  max_decay_steps: 10\n"
        "beta_schedule:\n  <<: *schedule\n  initial: 0.01\n"
        "clip_range_schedule: {<<: [*schedule], initial: 0.3, final: 0.1}\n")
    config = load_config(tmp_path / "c.yaml")
    assert (config.beta_schedule.initial, config.beta_schedule.final, config.beta_schedule.max_decay_steps) == \
        (0.01, 0.0001, 10)
    assert (config.clip_range_schedule.initial, config.clip_range_schedule.final) == (0.3, 0.1)
    (tmp_path / "twice.yaml").write_text("beta_schedule:\n  <<: {initial: 0.1}\n  final: 0.1\n  final: 0.2\n")
    with pytest.raises(ConfigError, match="'final' is given twice"):
        load_config(tmp_path / "twice.yaml")


class TooMuchWork(BaseException):
    """A BaseException: no `except Exception` in the code under test can swallow it."""


@contextlib.contextmanager
def work_at_most(calls: int):
    """Fails the block (TooMuchWork) once it has made more than `calls` Python function calls: a bound on
    the work done where a bound on time would fail on a busy machine. Loading a shipped config makes
    about 75,000; a document that expands to 10**9 values, walked, makes at least that many."""
    made = 0

    def count(frame, event, arg):
        nonlocal made
        if event == "call":
            made += 1
            if made > calls:
                sys.setprofile(None)
                raise TooMuchWork(f"more than {calls} calls")
    sys.setprofile(count)
    try:
        yield
    finally:
        sys.setprofile(None)


@pytest.mark.parametrize("text,words", [
    ("environment:\n  type: gym\n  name: CartPole-v1\n  kwargs:\n    x: " + bomb() + "\n", "expands to more than"),
    ("environment:\n  kwargs:\n    x: &x [*x]\n", "holds itself"),
    ("environment:\n  kwargs:\n    x: " + "[" * 3000 + "]" * 3000 + "\n", "nests deeper"),
    ("a: &a {x: 1, y: 2}\n" + "".join(f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}' if i > 1 else '*a'] * 10)}]}}\n"
                                      for i in range(1, 9)), "merge keys expand"),
])
def test_documents_that_expand_without_bound_are_refused_at_once(tmp_path, text, words):
    """A few hundred bytes that expand to 10**9 values hung start-up (walked by the checks, config.json,
    the digest); now refused before anything walks them, from a file or from --set."""
    (tmp_path / "c.yaml").write_text(text)
    with work_at_most(1_000_000), pytest.raises(ConfigError, match=words) as error:
        load_config(tmp_path / "c.yaml")
    assert "c.yaml" in str(error.value) and "\n" not in str(error.value)
    if "kwargs" in text and "nests" not in text:
        with work_at_most(1_000_000), pytest.raises(ConfigError, match=words):
            load_config(ROOT / "configs/poc_memory_env.yaml", ["environment.kwargs.x=" + text.split("x: ", 1)[1]])


def test_a_checkpoint_whose_parts_repeat_by_reference_is_refused_before_its_digest(tmp_path):
    """pickle's memo repeats a part by reference as yaml aliases do: 62 kB that the digest would walk
    10**9 times (a 10**7 one took 15 s) is corrupt at once, and one that holds itself is no RecursionError."""
    from checkpoint import CheckpointError, load_checkpoint
    payload = load_checkpoint(ROOT / "models/poc_memory_env.pt")
    leaves = [1] * 10
    for _ in range(8):
        leaves = [leaves] * 10
    cyclic: list = []
    cyclic.append(cyclic)
    for name, value in (("bomb", leaves), ("cycle", cyclic)):
        crafted = {**payload, "config": {**payload["config"], "environment": {"kwargs": {"x": value}}}}
        torch.save({**crafted, "digest": "0" * 64}, tmp_path / f"{name}.pt")
        with work_at_most(1_000_000), pytest.raises(CheckpointError, match="corrupt checkpoint"):
            load_checkpoint(tmp_path / f"{name}.pt")


def test_model_sizes_whose_bytes_cannot_even_be_counted_are_a_config_error():
    """hidden_layer_size 2**62 fits a 64-bit integer but its weights' byte count does not: torch's
    'Storage size calculation overflowed' was a traceback, as 'cannot allocate' was not."""
    from environments import spaces_of
    from model import build_model
    for key, size in (("hidden_layer_size", 2 ** 62), ("vector_encoder_size", 2 ** 62)):
        config = config_from_dict({key: size})
        env = config.environment.make()
        with pytest.raises(ConfigError, match="do not fit in memory"):
            build_model(config, spaces_of(env))
        env.close()


def test_resume_refuses_a_loss_term_whose_head_would_come_or_go_and_names_its_key():
    """reconstruction_coefficient above 0 builds the decoder: switching it on or off on --resume is refused by its
    key (the checkpoint's parameters would not fit); another value above 0 only reweighs the term."""
    saved = config_from_dict({"reconstruction_coefficient": 0.1}).to_dict()
    with pytest.raises(ConfigError, match=r"^reconstruction_coefficient \(0 or not\) cannot change on --resume"):
        check_resume_overrides(saved, config_from_dict(saved, ["reconstruction_coefficient=0"]))
    with pytest.raises(ConfigError, match="reconstruction_coefficient"):
        check_resume_overrides(config_from_dict({}).to_dict(), config_from_dict({"reconstruction_coefficient": 1}))
    check_resume_overrides(saved, config_from_dict(saved, ["reconstruction_coefficient=0.5"]))
    for key in ("recurrence.memory_length=8", "recurrence.gated=true"):
        trxl = config_from_dict({"recurrence": {"layer_type": "trxl"}}).to_dict()
        with pytest.raises(ConfigError, match=key.split("=")[0]):
            check_resume_overrides(trxl, config_from_dict(trxl, [key]))


def test_an_lstm_config_switched_to_the_transformer_is_refused_until_its_window_resets():
    """A config written for an LSTM (MiniGrid's: reset_hidden_state false) switched to the transformer would train
    a window of mixed episodes; it is refused naming what to type, and trains once the reset is on."""
    with pytest.raises(ConfigError, match="reset_hidden_state.*--set recurrence.reset_hidden_state=true"):
        load_config("configs/minigrid.yaml", ["recurrence.layer_type=trxl", "initialization.recurrent_gain=1.0"])
    config = load_config("configs/minigrid.yaml", ["recurrence.layer_type=trxl", "initialization.recurrent_gain=1.0",
                                                   "recurrence.reset_hidden_state=true"])
    assert config.recurrence.positional_encoding == "relative"
    assert config_from_dict({"recurrence": {"reset_hidden_state": False}}).recurrence.layer_type == "gru"
