"""Previous action and reward as inputs (recurrence.previous_*)."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from config import RecurrenceConfig, config_from_dict
from model import ActorCritic
from trainer import PhaseTimes, Trainer

SPACES = {
    "discrete": gym.spaces.Discrete(3),
    "multidiscrete": gym.spaces.MultiDiscrete([2, 3]),
    "multibinary": gym.spaces.MultiBinary(3),
    "box": gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
}


def model_for(action_space, layer="gru", **recurrence) -> ActorCritic:
    torch.manual_seed(0)
    config = RecurrenceConfig(layer_type=layer, hidden_state_size=8, **recurrence)
    return ActorCritic(gym.spaces.Box(-1.0, 1.0, (3,), np.float32), action_space, 16, config)


# ------------------------------------------------------------------ previous input

@pytest.mark.parametrize("space", SPACES)
def test_previous_input_is_the_action_as_its_space_encodes_it_and_the_scaled_clipped_reward(space):
    model = model_for(SPACES[space], previous_action=True, previous_reward=True, previous_reward_scale=0.5,
                      previous_reward_clip=1.0)
    B = 5
    actions = torch.stack([torch.as_tensor(np.atleast_1d(SPACES[space].sample())) for _ in range(B)])  # (B, k)
    rewards = np.array([-4.0, -1.0, 0.0, 1.0, 4.0], np.float32)
    previous = model.previous_input(actions, rewards)
    expected_action = {
        "discrete": lambda a: np.eye(3)[a[0]],
        "multidiscrete": lambda a: np.concatenate([np.eye(2)[a[0]], np.eye(3)[a[1]]]),
        "multibinary": lambda a: a.astype(np.float32),
        "box": lambda a: a,  # the sample as drawn, not clipped to the bounds
    }[space]
    expected = np.stack([np.concatenate([expected_action(a.numpy()), [np.clip(r * 0.5, -1, 1)]])
                         for a, r in zip(actions, rewards)])
    assert model.previous_size == expected.shape[1]
    np.testing.assert_allclose(previous.numpy(), expected, rtol=0, atol=1e-7)
    starts = np.array([True, False, False, True, False])
    reset = model.reset_previous(previous, starts).numpy()
    assert (reset[starts] == 0).all() and (reset[~starts] == previous.numpy()[~starts]).all()


def test_previous_input_of_the_reward_alone_and_a_model_without_it():
    model = model_for(SPACES["box"], previous_reward=True)
    assert model.previous_size == 1
    np.testing.assert_array_equal(model.previous_input(torch.zeros(2, 2), np.array([3.0, -7.5])).numpy(),
                                  [[3.0], [-7.5]])  # scale 1, no clip: the raw reward
    plain = model_for(SPACES["box"])
    assert plain.previous_size == 0 and plain.core.input_size == 3  # the observation alone
    assert model.core.input_size == 4
    with pytest.raises(ValueError, match="previous"):
        model.act(torch.zeros(2, 3), model.initial_state(2))  # never zeros by accident


def small(env: str = "PocMemoryEnv", **recurrence):
    return config_from_dict({
        "environment": {"type": env}, "n_workers": 4, "worker_steps": 40, "n_mini_batch": 2, "updates": 2,
        "hidden_layer_size": 32, "recurrence": {"sequence_length": 8, "hidden_state_size": 16, **recurrence}})


def test_rollout_stores_the_previous_action_and_raw_reward_with_zeros_at_episode_starts(tmp_path):
    """CartPole's reward 1 is scaled by 0.01 for training; the previous reward is the raw 1, times 2, clipped to 1.5."""
    trainer = Trainer(small("CartPoleMasked", previous_action=True, previous_reward=True, previous_reward_scale=2.0,
                            previous_reward_clip=1.5), summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    try:
        b = trainer.buffer
        last = None
        for rollout in range(2):  # the second rollout's first step continues the first one's last
            trainer.collect(PhaseTimes())
            starts = np.zeros_like(b.terminated)  # (W, T) the step begins an episode
            starts[:, 1:] = (b.terminated | b.truncated)[:, :-1]
            starts[:, 0] = True if last is None else last[1]
            one_hot = np.eye(2, dtype=np.float32)[b.actions[..., 0]]  # (W, T, 2)
            expected = np.concatenate([np.roll(one_hot, 1, axis=1), np.full(b.rewards.shape + (1,), 1.5)], axis=2)
            if last is not None:
                expected[:, 0] = last[0]
            expected[starts] = 0.0
            np.testing.assert_array_equal(b.previous, expected)
            assert starts[:, 1:].any()
            last = (np.concatenate([one_hot[:, -1], np.full((4, 1), 1.5)], axis=1),
                    b.terminated[:, -1] | b.truncated[:, -1])
            np.testing.assert_array_equal(trainer.previous.numpy(), np.where(last[1][:, None], 0.0, last[0]))
    finally:
        trainer.close()
