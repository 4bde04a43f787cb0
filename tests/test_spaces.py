"""Observation and action spaces: layouts, distributions, action masks, observation masks."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from config import ConfigError, EnvironmentConfig, InitializationConfig, RecurrenceConfig, config_from_dict
from distributions import Bernoulli, Categorical, Gaussian, make_distribution
from environments import spaces_of
from model import ActorCritic
from spaces import SpaceError, action_format, env_actions, layout, pack
from trainer import Trainer

import tests.memory_tasks  # noqa: F401  (registers the tiny tasks)


def test_gaussian_log_prob_and_entropy_match_torch():
    d = Gaussian(3)
    with torch.no_grad():
        d.log_std.copy_(torch.tensor([-0.5, 0.0, 0.7]))
    mean, actions = torch.randn(5, 3), torch.randn(5, 3) * 3
    log_prob, entropy = d.evaluate(mean, actions, None)
    reference = torch.distributions.Normal(mean, d.log_std.exp())
    torch.testing.assert_close(log_prob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))


def test_gaussian_samples_stay_unclipped_and_only_the_env_gets_clipped_actions():
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    d = make_distribution(space)
    mean = torch.full((4000, 1), 1.5)
    actions, log_prob = d.sample(mean, None, deterministic=False)
    assert actions.max() > 2.0  # the sample itself is not clipped...
    torch.testing.assert_close(log_prob, d.evaluate(mean, actions, None)[0])  # ...and its log-prob is its own
    sent = np.stack(env_actions(space, actions.detach().numpy()))
    assert sent.max() == 2.0 and sent.min() >= -2.0 and sent.dtype == np.float32


def test_bernoulli_log_prob_and_entropy_match_torch():
    d = Bernoulli(4)
    logits = torch.randn(6, 4) * 2
    actions, log_prob = d.sample(logits, None, deterministic=False)
    reference = torch.distributions.Bernoulli(logits=logits)
    torch.testing.assert_close(log_prob, reference.log_prob(actions.float()).sum(-1))
    torch.testing.assert_close(d.evaluate(logits, actions, None)[1], reference.entropy().sum(-1))
    assert set(np.unique(np.stack(env_actions(gym.spaces.MultiBinary(4), actions.numpy())))) <= {0, 1}


def test_multidiscrete_is_one_categorical_per_branch():
    d = Categorical([2, 3])
    logits = torch.randn(5, 5)
    actions = torch.tensor([[0, 2], [1, 0], [1, 1], [0, 0], [1, 2]])
    log_prob, entropy = d.evaluate(logits, actions, None)
    a, b = torch.distributions.Categorical(logits=logits[:, :2]), torch.distributions.Categorical(logits=logits[:, 2:])
    torch.testing.assert_close(log_prob, a.log_prob(actions[:, 0]) + b.log_prob(actions[:, 1]))
    torch.testing.assert_close(entropy, a.entropy() + b.entropy())


def test_masked_actions_are_never_sampled_and_get_zero_probability():
    d = Categorical([5])
    logits = torch.randn(2000, 5, requires_grad=True)
    mask = torch.rand(2000, 5) < 0.5
    mask[torch.arange(2000), torch.randint(0, 5, (2000,))] = True
    actions, log_prob = d.sample(logits.detach(), mask, deterministic=False)
    assert mask.gather(1, actions).all()
    assert torch.isfinite(log_prob).all()
    banned = (~mask).float().argmax(1, keepdim=True)  # a masked action where the row has one
    has_banned = (~mask).any(1)
    lp, entropy = d.evaluate(logits, banned, mask)
    assert (lp[has_banned] == -math.inf).all()  # log-prob of a masked action: -inf
    lp_ok, entropy = d.evaluate(logits, actions, mask)
    (lp_ok.sum() + entropy.sum()).backward()
    assert torch.isfinite(logits.grad).all() and torch.isfinite(entropy).all()
    assert (logits.grad[~mask] == 0).all()  # masked logits get no gradient
    # The entropy counts the allowed actions only
    single = torch.zeros(1, 5, dtype=torch.bool)
    single[0, 3] = True
    assert d.evaluate(torch.randn(1, 5), torch.tensor([[3]]), single)[1].item() == pytest.approx(0.0, abs=1e-6)


def test_a_row_that_allows_nothing_is_buffer_padding_and_stays_finite():
    d = Categorical([2, 3])
    log_prob, entropy = d.evaluate(torch.randn(1, 5), torch.zeros(1, 2, dtype=torch.long),
                                   torch.zeros(1, 5, dtype=torch.bool))
    assert torch.isfinite(log_prob).all() and torch.isfinite(entropy).all()


@pytest.mark.parametrize("mask_in", ["info", "obs"])
def test_masked_env_trains_without_an_invalid_action_and_stores_its_masks(tmp_path, mask_in):
    config = config_from_dict({
        "environment": {"type": "gym", "name": "tests.memory_tasks:MaskedChoice-v0", "kwargs": {"mask_in": mask_in}},
        "n_workers": 4, "worker_steps": 32, "n_mini_batch": 2, "updates": 3, "hidden_layer_size": 32,
        "worker_processes": 2, "recurrence": {"hidden_state_size": 16}})
    trainer = Trainer(config, summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    try:
        history = trainer.run()  # the env raises on any invalid action, in its worker process
        assert all(math.isfinite(v) for h in history for v in h.metrics.values())
        b = trainer.buffer
        assert b.masked and b.action_mask.shape == (4, 32, 5)
        taken = np.take_along_axis(b.action_mask, b.actions, axis=-1)  # (W, T, 1): the stored actions allowed
        assert taken.all()
    finally:
        trainer.close()


def test_observation_mask_hides_entries_from_yaml():
    env = EnvironmentConfig(type="gym", name="Pendulum-v1", observation_mask=[2]).make()
    obs, _ = env.reset(seed=0)
    theta, _ = env.unwrapped.state  # Pendulum observes cos, sin of the angle and the angular velocity
    assert env.observation_space.shape == (2,)
    np.testing.assert_allclose(obs, [np.cos(theta), np.sin(theta)], rtol=1e-6)
    with pytest.raises(ConfigError, match="observation_mask"):
        EnvironmentConfig(type="gym", name="Pendulum-v1", observation_mask=[3]).make()
    with pytest.raises(ConfigError, match="observation_mask"):
        config_from_dict({"environment": {"type": "gym", "name": "Pendulum-v1", "observation_mask": ["x"]}})


def test_dict_observation_is_packed_and_each_key_gets_its_own_encoder():
    env = EnvironmentConfig(type="gym", name="tests.memory_tasks:CueDict-v0").make()
    spaces = spaces_of(env, seed=0)
    assert isinstance(spaces.observation_space, gym.spaces.Dict) and env.observation_space.shape == (4,)
    obs, _ = env.reset(seed=0)
    assert [p.key for p in spaces.observation.parts] == ["clock", "cue"]
    np.testing.assert_array_equal(obs, pack(env.unwrapped._obs(), spaces.observation_space))
    model = ActorCritic(spaces.observation, env.action_space, 16, RecurrenceConfig(hidden_state_size=8),
                        vector_encoder_size=5, initialization=InitializationConfig())
    assert len(model.encoder.encoders) == 2 and model.encoder.out_features == 10
    with pytest.raises(SpaceError, match="not supported"):
        layout(gym.spaces.Dict({"a": gym.spaces.Text(5)}))


NESTED = gym.spaces.Dict({
    "where": gym.spaces.Discrete(4, start=1),
    "flags": gym.spaces.MultiBinary(3),
    "pair": gym.spaces.Tuple((gym.spaces.MultiDiscrete([2, 3]), gym.spaces.Box(-1.0, 1.0, (2,), np.float32))),
    "action_mask": gym.spaces.MultiBinary(2),  # moved to info, not an observation
})


def small_model(observation) -> ActorCritic:
    return ActorCritic(observation, gym.spaces.Discrete(2), 16, RecurrenceConfig(hidden_state_size=8),
                       initialization=InitializationConfig())


def test_every_observation_space_has_a_layout_and_packs_to_it():
    """Discrete and MultiDiscrete are stored as category indices (minus their start), MultiBinary
    as 0/1, Tuple like Dict in order; nested, in storage order (Dict keys sorted)."""
    L = layout(NESTED)
    assert [(p.key, p.kind, p.start, p.size) for p in L.parts] == [
        ("flags", "vector", 0, 3), ("pair.0", "categorical", 3, 2), ("pair.1", "vector", 5, 2),
        ("where", "categorical", 7, 1)]
    assert L.packed and L.shape == (8,) and L.parts[1].categories == (2, 3) and L.parts[3].categories == (4,)
    obs = {"where": 3, "flags": np.array([1, 0, 1], np.int8), "action_mask": np.ones(2, np.int8),
           "pair": (np.array([1, 2]), np.array([0.5, -0.25], np.float32))}
    np.testing.assert_array_equal(pack(obs, NESTED), [1, 0, 1, 1, 2, 0.5, -0.25, 2])
    np.testing.assert_array_equal(L.vector_features(), [1, 1, 1, 0, 0, 1, 1, 0])  # indices are never normalised
    for space, size in ((gym.spaces.Discrete(5), 1), (gym.spaces.MultiDiscrete([[2, 2], [3, 3]]), 4),
                        (gym.spaces.MultiBinary([2, 2]), 4), (gym.spaces.Tuple((gym.spaces.Discrete(2),) * 3), 3)):
        assert layout(space).shape == (size,) and pack(space.sample(), space).shape == (size,)
    assert not layout(gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)).packed  # images stay as they are


def test_categorical_parts_are_one_hot_encoded():
    model = small_model(NESTED)
    assert model.encoder.out_features == 3 + (2 + 3) + 2 + 4
    obs = torch.tensor([[1, 0, 1, 1, 2, 0.5, -0.25, 2]], dtype=torch.float32)
    features = model.encoder(obs)
    expected = [1, 0, 1, 0, 1, 0, 0, 1, 0.5, -0.25, 0, 0, 1, 0]  # flags, one-hot 1 of 2 and 2 of 3, box, one-hot 2 of 4
    torch.testing.assert_close(features, torch.tensor([expected], dtype=torch.float32))


def test_channels_first_and_last_images_give_the_same_features():
    hwc = gym.spaces.Box(0, 255, (36, 36, 3), np.uint8)
    chw = gym.spaces.Box(0, 255, (3, 36, 36), np.uint8)
    torch.manual_seed(0)
    a = small_model(hwc)
    b = small_model(chw)
    b.load_state_dict(a.state_dict())
    image = torch.randint(0, 256, (2, 36, 36, 3), dtype=torch.uint8)
    torch.testing.assert_close(a.encoder(image), b.encoder(image.permute(0, 3, 1, 2)))
    floats = gym.spaces.Box(0.0, 1.0, (36, 36, 3), np.float32)  # float images are taken as they are
    c = small_model(floats)
    c.load_state_dict(a.state_dict())
    torch.testing.assert_close(c.encoder(image.float() / 255), a.encoder(image))


@pytest.mark.parametrize("nesting", ["alone", "dict", "tuple"])
def test_an_image_smaller_than_the_cnns_kernels_is_refused_naming_the_smallest_size(nesting):
    """A 12x12 image was a conv2d traceback, "kernel size can't be greater than actual input size" (issue 72)."""
    def observation(side: int) -> gym.Space:
        image = gym.spaces.Box(0, 255, (side, side, 3), np.uint8)
        vector = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        return {"alone": image, "dict": gym.spaces.Dict({"view": image, "where": vector}),
                "tuple": gym.spaces.Tuple((vector, image))}[nesting]
    for side in (12, 35):
        with pytest.raises(SpaceError) as refused:
            small_model(observation(side))
        where = {"alone": "", "dict": " 'view'", "tuple": " '1'"}[nesting]
        assert f"the image observation{where} is {side}x{side} pixels" in str(refused.value)
        assert "at least 36x36" in str(refused.value)
    assert small_model(observation(36)).encoder.out_features > 0


def test_unsupported_action_space_is_one_line():
    with pytest.raises(SpaceError, match="action space"):
        action_format(gym.spaces.Box(-1, 1, (2, 2)))
    assert action_format(gym.spaces.MultiBinary(3)).size == 3
