"""Each PPO switch of the config does what it says (issue: the implementation details as switches)."""
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from agent import Agent
from checkpoint import load_checkpoint
from config import ScheduleConfig, config_from_dict, schedule_value
from losses import ppo_loss
from model import EvaluateOutput
from buffer import Minibatch
from normalization import ObservationNormalizer, RewardScaler, RunningMeanStd
from tests.test_losses import loss_config
from trainer import PhaseTimes, Trainer


def small(**sections):
    raw = {"environment": {"type": "CartPoleMasked"}, "n_workers": 4, "worker_steps": 64, "n_mini_batch": 2,
           "updates": 2, "hidden_layer_size": 32, "recurrence": {"hidden_state_size": 16}}
    for key, value in sections.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) and key in raw else value
    return config_from_dict(raw)


def trainer_for(tmp_path, **sections) -> Trainer:
    return Trainer(small(**sections), summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)


# ------------------------------------------------------------ normalisation

def test_running_mean_std_equals_the_whole_batch_statistics():
    data = np.random.default_rng(0).normal(3.0, 2.0, size=(1000, 4))
    stats = RunningMeanStd((4,))
    for chunk in np.array_split(data, 7):
        stats.update(chunk)
    np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats.var, data.var(0), rtol=1e-4)


def test_normalised_observations_have_zero_mean_unit_std_after_warm_up(tmp_path):
    # 16 x 128 steps: ~90 episodes per rollout, so the sample means are near the running ones
    trainer = trainer_for(tmp_path, normalization={"observations": True}, n_workers=16, worker_steps=128)
    try:
        trainer.collect(PhaseTimes())
        trainer.collect(PhaseTimes())  # the second rollout uses statistics warmed up on the first
        obs = trainer.buffer.obs.reshape(-1, 4)  # (W, T, 4) -> (W*T, 4); masked CartPole zeroes entries 1 and 3
        np.testing.assert_allclose(obs.mean(0), 0.0, atol=0.25)
        assert ((0.7 < obs.std(0)[[0, 2]]) & (obs.std(0)[[0, 2]] < 1.4)).all()  # CartPole's position drifts
        assert (obs[:, [1, 3]] == 0).all()  # a constant feature stays 0, never divided by a zero std
        assert (trainer.obs.std(0)[[0, 2]] < 0.5).all()  # the raw observations are not like that
    finally:
        trainer.close()


def test_images_are_never_normalised():
    clip = ObservationNormalizer(np.array([True, False]), clip=5.0)
    obs = np.array([[100.0, 100.0], [300.0, 200.0]], np.float32)
    out = clip(obs, update=True)
    assert (out[:, 1] == obs[:, 1]).all()  # the non-vector feature is left as it is
    assert np.abs(out[:, 0]).max() <= 5.0


def test_reward_scaling_gives_the_discounted_return_unit_std():
    rng = np.random.default_rng(1)
    scaler = RewardScaler(workers=8, gamma=0.99, clip=100.0)
    returns = np.zeros(8)
    seen = []
    for t in range(3000):
        done = rng.random(8) < 0.01
        scaled = scaler(rng.normal(5.0, 3.0, size=8), done)
        returns = returns * 0.99 + scaled
        seen.append(returns.copy())
        returns[done] = 0.0
    # Scaled by the running std of the discounted raw return, the discounted scaled return has std ~1
    assert 0.7 < np.concatenate(seen[1000:]).std() < 1.3


def test_value_targets_are_standardised_when_switched_on(tmp_path):
    trainer = trainer_for(tmp_path, normalization={"value_targets": True})
    try:
        trainer.run()
        returns = trainer.buffer.returns
        assert abs(returns.mean()) < 0.5 and 0.5 < returns.std() < 1.5
        off = trainer_for(tmp_path / "off")
        off.run()
        assert off.buffer.returns.std() < 0.2  # the same targets unnormalised (CartPole's rewards x 0.01)
        off.close()
    finally:
        trainer.close()


def test_normaliser_state_round_trips_through_a_checkpoint_and_enjoy_uses_it_frozen(tmp_path):
    trainer = trainer_for(tmp_path, normalization={"observations": True, "rewards": True, "value_targets": True})
    trainer.run()
    checkpoint = load_checkpoint(trainer.checkpoint_path)
    saved = trainer.normalizers.state_dict()
    assert set(checkpoint["normalization"]) == {"observations", "rewards", "values"}
    agent = Agent.load(trainer.checkpoint_path)
    for name, state in saved.items():
        for key, value in state.items():
            np.testing.assert_array_equal(agent.normalizers.state_dict()[name][key], value)
    raw = trainer.obs.copy()
    step = agent.act(raw, None, np.ones(4, dtype=bool), deterministic=True)
    normalised = trainer.normalizers.observations(raw, update=False)
    expected = trainer.model.act(torch.from_numpy(normalised), trainer.model.initial_state(4), True)
    np.testing.assert_array_equal(step.actions, expected.actions[:, 0].numpy())
    np.testing.assert_allclose(step.values, trainer.normalizers.values.denormalize(expected.values.numpy()),
                               rtol=1e-6)
    count = agent.normalizers.observations.count
    agent.act(raw, step.state, np.zeros(4, dtype=bool))
    assert agent.normalizers.observations.count == count  # frozen in evaluation

    resumed = Trainer(small(normalization={"observations": True, "rewards": True, "value_targets": True}),
                      summaries_dir=tmp_path, models_dir=tmp_path / "r", verbose=False)
    resumed.load_state_dict(checkpoint)
    np.testing.assert_array_equal(resumed.normalizers.rewards.returns, trainer.normalizers.rewards.returns)
    resumed.close()


# ------------------------------------------------------------------ losses

def _minibatch(seed=0):
    g = torch.Generator().manual_seed(seed)
    n, L = 4, 6
    r = lambda: torch.randn(n, L, generator=g)  # noqa: E731
    mb = Minibatch(obs=torch.zeros(n * L, 1), states=torch.zeros(n, 1), actions=torch.zeros(n, L, 1),
                   log_probs=r() - 1, values=r(), advantages=3 * r() + 2, returns=r(),
                   mask=torch.ones(n, L, dtype=torch.bool))
    out = EvaluateOutput(log_probs=mb.log_probs + 0.3 * r(), entropy=r().abs(), values=mb.values + 2 * r(),
                         core_outputs=r()[..., None])
    return out, mb


def test_advantage_normalisation_switch():
    out, mb = _minibatch()
    raw = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=loss_config(normalize_advantages=False))
    ratio = (out.log_probs - mb.log_probs).exp()
    by_hand = -torch.min(ratio * mb.advantages, ratio.clamp(0.8, 1.2) * mb.advantages).mean()
    torch.testing.assert_close(raw.pg_loss, by_hand)
    normalised = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=loss_config(normalize_advantages=True))
    assert not torch.isclose(raw.pg_loss, normalised.pg_loss)


def test_value_clipping_switch_and_its_own_range():
    out, mb = _minibatch()
    plain = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=loss_config(value_clip_range=None))
    torch.testing.assert_close(plain.v_loss, (out.values - mb.returns).square().mean())
    clipped = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=loss_config(value_clip_range=0.2))
    assert clipped.v_loss > plain.v_loss  # max(unclipped, clipped) error
    wide = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=loss_config(value_clip_range=100.0))
    torch.testing.assert_close(wide.v_loss, plain.v_loss)  # a range wider than any move clips nothing


def test_value_clip_range_defaults_to_the_policy_clip_range():
    out, mb = _minibatch()
    by_default = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=replace(loss_config(), value_clip=True))
    for clip, same in ((0.2, True), (0.5, False)):
        own = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=loss_config(value_clip_range=clip))
        assert (by_default.v_loss == own.v_loss) == same
    unclipped = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=replace(loss_config(), value_clip=False))
    torch.testing.assert_close(unclipped.v_loss, (out.values - mb.returns).square().mean())


def test_target_kl_stops_the_epochs(tmp_path):
    free = trainer_for(tmp_path, updates=1)
    free.run()
    assert free.summaries.history[0].metrics["minibatch_steps"] == 4 * 2 and free.summaries.history[0].metrics["early_stop"] == 0
    free.close()
    # The first minibatch has KL 0 (nothing moved yet); any step then moves the policy
    # past a target this small, so the second minibatch stops the update.
    forced = trainer_for(tmp_path, updates=1, target_kl=1e-12)
    before = [p.detach().clone() for p in forced.model.parameters()]
    forced.run()
    assert forced.summaries.history[0].metrics["minibatch_steps"] == 1 and forced.summaries.history[0].metrics["early_stop"] == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, forced.model.parameters()))
    forced.close()


# ------------------------------------------------------------------ model

def _orthogonal_rows(w: torch.Tensor, gain: float) -> bool:
    w = w.detach().reshape(w.shape[0], -1)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    return torch.allclose(gram, gain ** 2 * torch.eye(gram.shape[0]), atol=1e-4)


def test_orthogonal_initialisation_switch_and_gains(tmp_path):
    on = trainer_for(tmp_path, initialization={"policy_gain": 0.01, "value_gain": 1.0})
    m = on.model
    assert _orthogonal_rows(m.policy_out.weight, 0.01) and _orthogonal_rows(m.value_out.weight, 1.0)
    assert _orthogonal_rows(m.hidden.weight, math.sqrt(2))
    assert _orthogonal_rows(m.core.weight_hh_l0, 1.0) and _orthogonal_rows(m.core.weight_ih_l0, 1.0)
    assert (m.core.bias_hh_l0 == 0).all()
    on.close()
    off = trainer_for(tmp_path, initialization={"orthogonal": False})
    m = off.model
    assert not _orthogonal_rows(m.policy_out.weight, 0.01) and not _orthogonal_rows(m.core.weight_hh_l0, 1.0)
    assert (m.core.bias_hh_l0 != 0).any()  # torch's default init leaves random biases
    off.close()


def test_separate_critic_core_has_disjoint_parameters(tmp_path):
    t = trainer_for(tmp_path, recurrence={"separate_critic_core": True, "layer_type": "lstm"})
    m = t.model
    assert m.state_size == 2 * 2 * 16
    t.collect(PhaseTimes())
    t.buffer.finish(np.zeros(4, np.float32), 0.99, 0.95, t.config.recurrence)
    mb = next(t.buffer.minibatches(1))
    for target, touched, untouched in (("values", "critic_core", "core"), ("log_probs", "core", "critic_core")):
        m.zero_grad(set_to_none=True)
        getattr(m.training_pass(mb.obs, mb.states, mb.actions, mask=mb.mask), target).sum().backward()
        assert all(p.grad is None or not p.grad.any() for p in getattr(m, untouched).parameters()), target
        assert all(p.grad is not None and p.grad.any() for p in getattr(m, touched).parameters()), target
    w = m.branches.weight.shape[0] // 2
    m.zero_grad(set_to_none=True)
    m.training_pass(mb.obs, mb.states, mb.actions, mask=mb.mask).values.sum().backward()
    assert not m.branches.weight.grad[:w].any() and m.branches.weight.grad[w:].any()
    assert m.critic_hidden is not None and m.hidden.weight.grad is None
    t.close()


@pytest.mark.parametrize("layers", [1, 3])
def test_number_of_recurrent_layers(tmp_path, layers):
    t = trainer_for(tmp_path, updates=1, recurrence={"num_layers": layers})
    assert t.model.core.num_layers == layers and t.model.state_size == layers * 16
    t.run()
    assert all(math.isfinite(v) for v in t.summaries.history[0].metrics.values())
    t.close()


def test_constant_and_polynomial_schedule_shapes():
    constant = ScheduleConfig(shape="constant", initial=1e-3, final=1e-5, max_decay_steps=10)
    assert [schedule_value(constant, u) for u in (0, 5, 50)] == [1e-3] * 3
    poly = ScheduleConfig(shape="polynomial", initial=1e-3, final=1e-5, max_decay_steps=10, power=1.0)
    assert schedule_value(poly, 0) == 1e-3 and schedule_value(poly, 10) == 1e-5
    assert schedule_value(poly, 5) == pytest.approx((1e-3 + 1e-5) / 2)


def test_learning_rate_schedule_reaches_the_optimizer(tmp_path):
    t = trainer_for(tmp_path, updates=3, learning_rate_schedule={"shape": "constant", "initial": 1e-3,
                                                                  "final": 1e-5, "max_decay_steps": 2})
    t.run()
    assert [h.metrics["learning_rate"] for h in t.summaries.history] == [1e-3] * 3
    t.close()
