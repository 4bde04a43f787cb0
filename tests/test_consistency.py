"""Before the first gradient step, the training pass must reproduce the rollout exactly.

Recomputing log-probs and values over the padded sequences from their stored
initial states catches wrong initial states, bad padding and bad reshapes at once.
"""
import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

from config import CORES, ConfigError, InitializationConfig, RecurrenceConfig, config_from_dict
import fastpath
import model
from model import ActorCritic
from plumbing import machine
from tests.devices import BFLOAT16_DEVICES, DEVICES
from trainer import PhaseTimes, Trainer


# float32 rounding only. On a GPU the rollout's one-step calls and the training pass's whole sequences
# may run different cuDNN kernels, whose sums round differently (docs/results.md). A wrong initial state
# or a shuffled step moves the sharpened log-probs by orders of magnitude more.
TOLERANCE = {"cpu": 1e-5, "cuda": 1e-4}


def packing(monkeypatch, packed: bool) -> None:
    """Makes training_pass() feed torch's layers the real steps alone (a PackedSequence) always, or never."""
    monkeypatch.setattr(fastpath, "PACK_MIN_WIDTH", 0 if packed else 2 ** 62)
    monkeypatch.setattr(fastpath, "PACK_MIN_PADDING", 0.0 if packed else 1.0)


def running_on(recurrence: dict) -> dict:
    """The recurrence section; a state running on across episodes is skipped for a core whose entry declares its
    memory episodic (config.py refuses it)."""
    if CORES[recurrence.get("layer_type", "gru")].episodic and recurrence.get("reset_hidden_state") is False:
        pytest.skip("an episodic core's memory is reset at every episode's start")
    return recurrence


def small_config(env: str, layer: str, L: int, reset: bool, seed: int = 0):
    return config_from_dict({
        "environment": {"type": env}, "n_workers": 4, "worker_steps": 40, "n_mini_batch": 2, "updates": 1,
        "hidden_layer_size": 32, "seed": seed,
        "recurrence": running_on({"layer_type": layer, "sequence_length": L, "hidden_state_size": 16,
                                  "reset_hidden_state": reset})})


@pytest.mark.parametrize("env", ["PocMemoryEnv", "CartPoleMasked"])
@pytest.mark.parametrize("reset", [True, False])
@pytest.mark.parametrize("L", [8, 0])
@pytest.mark.parametrize("layer", list(CORES))
@pytest.mark.parametrize("device", DEVICES)
def test_recomputed_log_probs_and_values_match_rollout(tmp_path, device, layer, L, reset, env):
    trainer = Trainer(small_config(env, layer, L, reset), device=device, summaries_dir=tmp_path,
                      models_dir=tmp_path, verbose=False)
    # A fresh policy head (gain 0.01) makes nearly uniform actions whatever the state;
    # sharpen it so that a wrong initial state or a shuffled step shows in the log-probs.
    with torch.no_grad():
        trainer.model.policy_out.weight.mul_(300.0)
    try:
        for rollout in range(2):  # the second rollout starts from states carried over from the first
            trainer.collect(PhaseTimes())
            trainer.advantages()
            checked = 0
            for mb in trainer.buffer.minibatches(2):
                # every slot encoded (the observations padded with zeros), or the real steps only (the trainer's way)
                padded = model._scatter(mb.obs, mb.mask)  # (R, *obs) -> (n, L, *obs), zeros on padding
                for obs, encoded in ((padded, None), (mb.obs, mb.mask)):
                    with torch.no_grad():
                        out = trainer.model.training_pass(obs, mb.states, mb.actions, mask=encoded)
                    torch.testing.assert_close(out.log_probs[mb.mask], mb.log_probs[mb.mask], atol=TOLERANCE[device],
                                               rtol=0)
                    torch.testing.assert_close(out.values[mb.mask], mb.values[mb.mask], atol=TOLERANCE[device], rtol=0)
                checked += int(mb.mask.sum())
            assert checked == 4 * 40
        assert trainer.buffer.terminated.any() or trainer.buffer.truncated.any() or env == "CartPoleMasked"
    finally:
        trainer.close()


def test_stored_state_is_zero_at_episode_start_only_when_reset():
    for reset in (True, False):
        trainer = Trainer(small_config("PocMemoryEnv", "gru", 8, reset), summaries_dir="/tmp/unused",
                          models_dir="/tmp/unused", verbose=False)
        try:
            trainer.collect(PhaseTimes())
            b = trainer.buffer
            starts = np.zeros_like(b.terminated)
            starts[:, 1:] = b.terminated[:, :-1] | b.truncated[:, :-1]
            norms = np.abs(b.states).sum(-1)  # (W, T)
            assert starts.any()
            if reset:
                assert (norms[starts] == 0).all()
            else:
                assert (norms[starts] > 0).all()
        finally:
            trainer.close()


VARIANTS = {
    "box-actions": {"environment": {"type": "gym", "name": "Pendulum-v1", "observation_mask": [2]}},
    "multidiscrete": {"environment": {"type": "gym", "name": "tests.memory_tasks:CueMultiDiscrete-v0"}},
    "dict-obs": {"environment": {"type": "gym", "name": "tests.memory_tasks:CueDict-v0"}},
    "mask-in-info": {"environment": {"type": "gym", "name": "tests.memory_tasks:MaskedChoice-v0"}},
    "mask-in-obs": {"environment": {"type": "gym", "name": "tests.memory_tasks:MaskedChoice-v0",
                                    "kwargs": {"mask_in": "obs"}}},
    "separate-critic-2-layers": {"environment": {"type": "PocMemoryEnv"},
                                 "recurrence": {"layer_type": "lstm", "num_layers": 2,
                                                "separate_critic_core": True}},
    "normalised": {"environment": {"type": "CartPoleMasked"},
                   "normalization": {"observations": True, "rewards": True, "value_targets": True}},
    "discrete-obs": {"environment": {"type": "gym", "name": "tests.memory_tasks:CueDiscrete-v0"}},
    # the previous action and reward the rollout fed the core are stored and fed again
    "previous-discrete": {"environment": {"type": "PocMemoryEnv"},
                          "recurrence": {"previous_action": True, "previous_reward": True}},
    "previous-multidiscrete": {"environment": {"type": "gym", "name": "tests.memory_tasks:CueMultiDiscrete-v0"},
                               "recurrence": {"previous_action": True, "previous_reward": True,
                                              "previous_reward_scale": 3.0, "previous_reward_clip": 1.0}},
    "previous-box": {"environment": {"type": "gym", "name": "Pendulum-v1", "observation_mask": [2]},
                     "recurrence": {"previous_action": True, "previous_reward": True, "previous_reward_scale": 0.1},
                     "normalization": {"observations": True, "rewards": True}},
    # before the first gradient step, burn-in and refreshed states reproduce the stored states
    "burn-in-refresh-gru": {"environment": {"type": "PocMemoryEnv"},
                            "recurrence": {"burn_in": 6, "refresh_states": True, "previous_action": True}},
    "burn-in-refresh-lstm-no-reset": {"environment": {"type": "CartPoleMasked"},
                                      "recurrence": {"layer_type": "lstm", "reset_hidden_state": False,
                                                     "burn_in": 12, "refresh_states": True,
                                                     "separate_critic_core": True}},
}


def test_bfloat16_is_refused_where_it_does_not_run_natively(tmp_path, monkeypatch):
    """An explicit precision bfloat16 on a CPU without AVX-512 BF16 or AMX is one ConfigError line
    before anything starts (oneDNN could not build its LSTM: the training pass crashed)."""
    monkeypatch.setattr(machine, "bfloat16_is_fast", lambda device: False)
    raw = {"n_workers": 4, "worker_steps": 32, "n_mini_batch": 2, "precision": "bfloat16"}
    with pytest.raises(ConfigError, match="'precision' = 'bfloat16' is not allowed on this CPU"):
        Trainer(config_from_dict(raw), summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    trainer = Trainer(config_from_dict({**raw, "precision": "auto"}), summaries_dir=tmp_path, models_dir=tmp_path,
                      verbose=False)
    trainer.close()
    with trainer.machine.autocast():
        assert not torch.is_autocast_enabled("cpu")  # auto: float32 there


def test_auto_precision_is_bfloat16_only_on_a_cpu_that_runs_it_natively(monkeypatch):
    """On a GPU auto is float32 (bfloat16 was slower there: results/gpu/README.md); an explicit bfloat16 still runs."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(machine, "bfloat16_is_fast", lambda device: True)
    assert machine.uses_bfloat16("auto", cpu) and not machine.uses_bfloat16("auto", cuda)
    assert machine.uses_bfloat16("bfloat16", cuda) and not machine.uses_bfloat16("float32", cpu)
    monkeypatch.setattr(machine, "bfloat16_is_fast", lambda device: False)
    assert not machine.uses_bfloat16("auto", cpu)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("layer", list(CORES))
@pytest.mark.parametrize("env", ["tests.memory_tasks:CueImage-v0", "tests.memory_tasks:CueDict-v0"])
@pytest.mark.parametrize("device", BFLOAT16_DEVICES)
def test_recomputed_log_probs_match_the_rollout_under_bfloat16(tmp_path, monkeypatch, device, env, layer, packed):
    """precision bfloat16: the rollout's inference (one step, 4 rows) and the training pass (sequences,
    all rows) round differently, so they agree to a stated tolerance, not to 1e-5: log-probs within
    0.01 for a sharp policy (a ratio within 1% of 1; PPO clips at 20%; 0.002 was the largest seen),
    values within 2% of their scale. packed: the training pass runs the core over the real steps only, as a
    PackedSequence, as it does on an image encoder's features."""
    packing(monkeypatch, packed)
    raw = {"environment": {"type": "gym", "name": env}, "n_workers": 4, "worker_steps": 32, "n_mini_batch": 2,
           "hidden_layer_size": 32, "precision": "bfloat16",
           "recurrence": {"sequence_length": 8, "hidden_state_size": 16, "layer_type": layer}}
    trainer = Trainer(config_from_dict(raw), device=device, summaries_dir=tmp_path, models_dir=tmp_path,
                      verbose=False)
    with torch.no_grad():
        trainer.model.policy_out.weight.mul_(300.0)
    try:
        trainer.collect(PhaseTimes())
        trainer.advantages()
        for mb in trainer.buffer.minibatches(2):
            with torch.no_grad(), trainer.machine.autocast():
                out = trainer.model.training_pass(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask)
            assert out.log_probs.dtype == torch.float32 and torch.isfinite(out.log_probs).all()
            torch.testing.assert_close(out.log_probs[mb.mask], mb.log_probs[mb.mask], atol=0.01, rtol=0)
            scale = mb.values[mb.mask].abs().max().clamp(min=1e-3)
            assert ((out.values - mb.values)[mb.mask].abs().max() / scale) < 0.02
            assert (mb.log_probs[mb.mask] < -0.1).any()  # the policy is sharp enough to show a wrong state
    finally:
        trainer.close()


def check_the_training_pass_reproduces_the_rollout(tmp_path, sections: dict) -> None:
    """Two rollouts, the second after a real update: before each update's first gradient step, the training pass
    recomputes the rollout's log-probs and values from the stored (or refreshed, or burnt-in) states."""
    raw = {"n_workers": 4, "worker_steps": 40, "n_mini_batch": 2, "updates": 1, "hidden_layer_size": 32,
           "recurrence": {"sequence_length": 8, "hidden_state_size": 16}}
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    raw["recurrence"] = running_on(raw["recurrence"])
    trainer = Trainer(config_from_dict(raw), summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    with torch.no_grad():
        trainer.model.policy_out.weight.mul_(300.0)
    try:
        for rollout in range(2):
            if rollout:  # the second rollout follows a real update, and the normalisers have moved
                trainer.one_update()
            trainer.collect(PhaseTimes())
            trainer.advantages()
            for mb in trainer.buffer.minibatches(2, trainer.model):  # refreshes the states where switched on
                with torch.no_grad():
                    out = trainer.model.training_pass(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask,
                                                 mb.previous, mb.burn_in)
                assert torch.isfinite(out.log_probs).all() and torch.isfinite(out.entropy).all()
                torch.testing.assert_close(out.log_probs[mb.mask], mb.log_probs[mb.mask], atol=1e-4, rtol=0)
                if trainer.normalizers.values is None:  # else the targets' scale moved with this rollout
                    torch.testing.assert_close(out.values[mb.mask], mb.values[mb.mask], atol=1e-5, rtol=0)
    finally:
        trainer.close()


@pytest.mark.parametrize("variant", VARIANTS)
def test_recomputed_log_probs_match_rollout_for_every_space_and_switch(tmp_path, variant):
    check_the_training_pass_reproduces_the_rollout(tmp_path, VARIANTS[variant])


# every recurrence switch, on every core (the fixed and whole-episode sequences: test_recomputed_log_probs_...)
SWITCHES = {
    "2-layers-critic-core": {"num_layers": 2, "separate_critic_core": True},
    "burn-in-refresh-previous": {"burn_in": 6, "refresh_states": True, "previous_action": True,
                                 "previous_reward": True},
    "whole-episodes-no-reset": {"sequence_length": 0, "reset_hidden_state": False, "refresh_states": True},
}


@pytest.mark.parametrize("switches", SWITCHES)
@pytest.mark.parametrize("layer", list(CORES))
def test_every_core_reproduces_its_rollout_under_every_switch(tmp_path, layer, switches):
    check_the_training_pass_reproduces_the_rollout(
        tmp_path, {"environment": {"type": "PocMemoryEnv"}, "recurrence": {"layer_type": layer, **SWITCHES[switches]}})


@pytest.mark.parametrize("layer", list(CORES))
def test_encoding_only_real_steps_leaves_outputs_and_gradients_unchanged(layer):
    """training_pass(mask=...) takes the real steps' observations alone and skips the encoder on padding: the same
    outputs on real steps and the same gradients as every slot encoded."""
    torch.manual_seed(0)
    space = gym.spaces.Box(0, 255, (36, 36, 3), np.uint8)
    model = ActorCritic(space, gym.spaces.Discrete(3), 32, RecurrenceConfig(layer_type=layer, hidden_state_size=16),
                        initialization=InitializationConfig())
    N, L = 6, 5
    lengths = torch.tensor([5, 1, 3, 5, 2, 4])
    mask = torch.arange(L) < lengths[:, None]  # (N, L): padding trails each sequence, as the buffer makes it
    obs = torch.randint(0, 256, (N, L, 36, 36, 3), dtype=torch.uint8) * mask[..., None, None, None]
    state = torch.randn(N, model.state_size)
    actions = torch.randint(0, 3, (N, L, 1))
    results = []
    for encoded in (None, mask):
        model.zero_grad()
        out = model.training_pass(obs if encoded is None else obs[mask], state, actions, mask=encoded)
        ((out.log_probs + out.values + out.entropy) * mask).sum().backward()
        results.append((out, [p.grad.clone() for p in model.parameters()]))
    (full, full_grads), (real, real_grads) = results
    for name in ("log_probs", "values", "entropy"):
        torch.testing.assert_close(getattr(real, name)[mask], getattr(full, name)[mask])
    for a, b in zip(full_grads, real_grads):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("critic_core", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("layer", [name for name, core in CORES.items() if core.packed])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("extras", [False, True])  # the previous action and reward, an action mask
def test_the_packed_way_gives_the_padded_ways_outputs_and_gradients(monkeypatch, layer, layers, critic_core, padded,
                                                                   extras):
    """training_pass()'s two ways (torch's layer over every slot, padding included, or over the real steps alone as a
    PackedSequence) are one function: the same outputs on real steps and the same gradients in float32, with
    sequences of several lengths (padding trailing) or none, with the previous action and reward beside the
    observation and an action mask or without; both read 0 on padding."""
    torch.manual_seed(0)
    recurrence = RecurrenceConfig(layer_type=layer, hidden_state_size=16, num_layers=layers,
                                  separate_critic_core=critic_core, previous_action=extras, previous_reward=extras)
    net = ActorCritic(gym.spaces.Box(-1, 1, (24,), np.float32), gym.spaces.Discrete(3), 32, recurrence,
                      initialization=InitializationConfig())
    N, L = 6, 7
    lengths = torch.tensor([7, 1, 3, 7, 2, 4]) if padded else torch.full((N,), L)
    mask = torch.arange(L) < lengths[:, None]  # (N, L): padding trails each sequence, as the buffer makes it
    obs, actions = torch.randn(N, L, 24) * mask[..., None], torch.randint(0, 3, (N, L, 1))
    # (N, L, P = 3 + 1): the previous action one-hot and the previous reward, zeros on padding
    previous = torch.cat((torch.eye(3)[torch.randint(0, 3, (N, L))], torch.randn(N, L, 1)), -1) * mask[..., None]
    action_mask = (torch.rand(N, L, 3) < 0.5).scatter(-1, actions, True)  # (N, L, 3), the taken action allowed
    state = torch.randn(N, net.state_size) * 0.5
    results, calls = [], []
    monkeypatch.setattr(fastpath, "pack_padded_sequence", lambda *a, **k: calls.append(1) or pack_padded_sequence(*a, **k))
    for packed in (False, True):
        packing(monkeypatch, packed)
        net.zero_grad()
        out = net.training_pass(obs[mask], state, actions, mask=mask, previous=previous if extras else None,
                           action_mask=action_mask if extras else None)
        ((out.log_probs + out.values.square() + out.entropy) * mask).sum().backward()
        results.append((out, [p.grad.clone() for p in net.parameters()]))
    assert len(calls) == 1  # the second way packed, the first did not
    (fused, fused_grads), (packed, packed_grads) = results
    for name in ("log_probs", "values", "entropy"):
        torch.testing.assert_close(getattr(packed, name)[mask], getattr(fused, name)[mask], atol=1e-5, rtol=1e-5)
        assert not getattr(packed, name)[~mask].any() and not getattr(fused, name)[~mask].any()
    for a, b in zip(fused_grads, packed_grads):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)


def test_the_rule_packs_on_a_cpu_for_half_padding_or_wide_inputs_to_torchs_layers(monkeypatch):
    """training_pass() packs on a CPU when at least PACK_MIN_PADDING of the slots are padding, and for torch's own
    layers also when the core's input is at least PACK_MIN_WIDTH wide (with padding or without, with a mask or
    without); minGRU and the LRU gain nothing from packing a wide input."""
    calls = []
    monkeypatch.setattr(fastpath, "pack_padded_sequence", lambda *a, **k: calls.append(1) or pack_padded_sequence(*a, **k))

    def packs(width: int, lengths: list[int], masked: bool = True, layer: str = "gru") -> bool:
        net = ActorCritic(gym.spaces.Box(-1, 1, (width,), np.float32), gym.spaces.Discrete(3), 8,
                          RecurrenceConfig(layer_type=layer, hidden_state_size=4),
                          initialization=InitializationConfig())
        mask = torch.arange(4) < torch.tensor(lengths)[:, None]  # (N, L = 4)
        obs = torch.zeros(int(mask.sum()), width) if masked else torch.zeros(len(lengths), 4, width)
        calls.clear()
        net.training_pass(obs, net.initial_state(len(lengths)), torch.zeros(len(lengths), 4, 1, dtype=torch.long),
                     mask=mask if masked else None)
        return bool(calls)

    assert packs(8, [4, 1, 1, 2]) and packs(8, [2, 2]) and not packs(8, [4, 1, 2, 2]) and not packs(8, [4, 4])
    assert packs(fastpath.PACK_MIN_WIDTH, [4, 4]) and packs(fastpath.PACK_MIN_WIDTH, [4, 4], masked=False)
    assert not packs(fastpath.PACK_MIN_WIDTH - 1, [4, 3]) and not packs(8, [4, 4], masked=False)
    for layer in ("mingru", "lru"):
        assert packs(8, [4, 1, 1, 2], layer=layer) and not packs(8, [4, 1, 2, 2], layer=layer)
        assert not packs(fastpath.PACK_MIN_WIDTH, [4, 4], layer=layer) and packs(fastpath.PACK_MIN_WIDTH, [2, 2], layer=layer)
