"""Previous action and reward as inputs, burn-in and stored-state refresh (recurrence.previous_*,
burn_in, refresh_states): each against a plain loop that calls the model one step at a time."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from buffer import episode_starts
from config import InitializationConfig, RecurrenceConfig, config_from_dict
from model import CORES, ActorCritic, BurnIn
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
    return ActorCritic(gym.spaces.Box(-1.0, 1.0, (3,), np.float32), action_space, 16, config,
                       initialization=InitializationConfig())


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


# ------------------------------------------------------------------------- burn-in

def loop_burn_in(model, state, burn: BurnIn, padded: torch.Tensor):
    """The oracle: each row on its own, one act() call per real burn-in step; padded (N, K, *obs) holds
    the burn-in observations at their slots."""
    rows = []
    for n in range(state.shape[0]):
        s = state[n:n + 1]
        for i in np.flatnonzero(burn.mask[n].numpy()):
            previous = None if burn.previous is None else burn.previous[n:n + 1, i]
            s = model.act(padded[n:n + 1, i], s, previous=previous).state
        rows.append(s)
    return torch.cat(rows)


@pytest.mark.parametrize("previous", [False, True])
@pytest.mark.parametrize("layer", list(CORES))
def test_burn_in_unroll_equals_a_loop_of_single_steps(layer, previous):
    model = model_for(SPACES["discrete"], layer, num_layers=2, separate_critic_core=True,
                      previous_action=previous, previous_reward=previous)
    N, K, L, P = 6, 4, 3, model.previous_size
    before = torch.tensor([0, 1, 4, 2, 4, 3])  # burn-in steps per sequence, right-aligned as the buffer makes them
    mask = torch.arange(K) >= K - before[:, None]  # (N, K)
    padded = torch.randn(N, K, 3) * mask[..., None]  # (N, K, 3): the burn-in observations, zeros on padding
    burn = BurnIn(padded[mask], torch.randn(N, K, P) * mask[..., None] if P else None, mask)
    state = torch.randn(N, model.state_size)
    warmed = model.burn_in_state(state, burn)
    torch.testing.assert_close(warmed, loop_burn_in(model, state, burn, padded), rtol=0, atol=1e-6)
    assert torch.equal(warmed[0], state[0]) and not warmed.requires_grad  # no burn-in steps: the state as given
    none = BurnIn(padded[:1][mask[:1]], None if burn.previous is None else burn.previous[:1], mask[:1])
    assert torch.equal(model.burn_in_state(state[:1], none), state[:1])  # a minibatch without any burn-in step
    # training_pass(burn_in=...) is training_pass from the warmed state
    obs, actions = torch.randn(N, L, 3), torch.randint(0, 3, (N, L, 1))
    sequence_previous = torch.randn(N, L, P) if P else None
    a = model.training_pass(obs, state, actions, previous=sequence_previous, burn_in=burn)
    b = model.training_pass(obs, warmed, actions, previous=sequence_previous)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-6)


# ------------------------------------------------------------------------- refresh

def loop_unroll(model, obs, previous, state, starts, reset):
    """The oracle: the rollout's own loop, one act() call per step of all rows, reset as collect() does."""
    W, T = starts.shape
    states = []
    for t in range(T):
        if reset and t > 0:
            state = torch.where(starts[:, t, None], torch.zeros_like(state), state)  # (W,) -> (W, 1)
        states.append(state)
        state = model.act(obs[:, t], state, previous=None if previous is None else previous[:, t]).state
    return torch.stack(states, dim=1)


@pytest.mark.parametrize("reset", [True, False])
@pytest.mark.parametrize("layer", list(CORES))
def test_unroll_equals_a_loop_of_single_steps_with_episode_starts_inside(layer, reset):
    model = model_for(SPACES["multidiscrete"], layer, separate_critic_core=layer == "lstm",
                      previous_action=True, previous_reward=True, reset_hidden_state=reset)
    W, T = 3, 12
    dones = torch.rand(W, T, generator=torch.Generator().manual_seed(1)) < 0.25
    starts = torch.from_numpy(episode_starts(dones.numpy()))
    assert starts.any()
    obs, previous = torch.randn(W, T, 3), torch.randn(W, T, model.previous_size)
    state = torch.randn(W, model.state_size)
    unrolled = model.unroll(obs, previous, state, starts, chunk=5)
    torch.testing.assert_close(unrolled, loop_unroll(model, obs, previous, state, starts, reset), rtol=0, atol=1e-6)
    assert torch.equal(unrolled[:, 0], state)  # the state before the rollout is kept
    if reset:
        assert (unrolled[starts] == 0).all()


# ------------------------------------------------------------------ in the trainer

@pytest.mark.parametrize("layer,reset", [("gru", True), ("lstm", False)])
def test_burn_in_reproduces_the_stored_state_at_each_sequence_start(tmp_path, layer, reset):
    # burn_in 12 > sequence_length 8: sequences get 0 (an episode's first), 8 (its second) or 12 steps
    trainer = Trainer(small(layer_type=layer, reset_hidden_state=reset, burn_in=12, previous_action=True),
                      summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    try:
        for rollout in range(2):
            trainer.collect(PhaseTimes())
            trainer.advantages()
            f = trainer.buffer._train
            burn = BurnIn(f["obs"][f["burn_index"][f["burn_mask"]]], f["previous"][f["burn_index"]], f["burn_mask"])
            counts = burn.mask.sum(1)
            assert set(counts.tolist()) == {0, 8, 12}
            warmed = trainer.model.burn_in_state(f["states"][f["first"]], burn)
            starts = torch.from_numpy(trainer.buffer.index.starts)
            torch.testing.assert_close(warmed, f["states"][starts], rtol=0, atol=1e-5)
    finally:
        trainer.close()


@pytest.mark.parametrize("layer,reset", [("gru", True), ("lstm", True), ("lstm", False)])
def test_refresh_reproduces_the_stored_states_before_the_first_step_and_follows_the_parameters_after(
        tmp_path, layer, reset):
    trainer = Trainer(small(layer_type=layer, reset_hidden_state=reset, refresh_states=True, previous_reward=True),
                      summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    try:
        trainer.collect(PhaseTimes())
        trainer.advantages()
        b, W, T = trainer.buffer, 4, 40
        stored = torch.from_numpy(b.states.copy()).reshape(W * T, -1)  # (W, T, S) -> (W*T, S)
        assert (b.terminated | b.truncated)[:, :-1].any()  # episodes start inside the rollout
        b.refresh_states(trainer.model, chunk=64)
        torch.testing.assert_close(b._train["states"][:W * T], stored, rtol=0, atol=1e-5)
        assert (b._train["states"][W * T] == 0).all()  # the padding row stays zero
        trainer.optimise(3e-3, 0.0, 0.2)  # gradient steps; each epoch refreshed again before its minibatches
        b.refresh_states(trainer.model, chunk=64)
        moved = (b._train["states"][:W * T] - stored).abs().max()
        assert moved > 1e-3
        torch.testing.assert_close(b._train["states"][:W * T:T], stored[::T], rtol=0, atol=0)  # step 0 as stored
        np.testing.assert_array_equal(b.states.reshape(W * T, -1), stored.numpy())  # the rollout's own states kept
    finally:
        trainer.close()


def test_optimise_refreshes_once_per_epoch_and_only_when_switched_on(tmp_path, monkeypatch):
    from buffer import RolloutBuffer
    calls = []
    real = RolloutBuffer.refresh_states
    monkeypatch.setattr(RolloutBuffer, "refresh_states", lambda self, *a: calls.append(1) or real(self, *a))
    for refresh, expected in ((True, 3), (False, 0)):
        calls.clear()
        config = small(refresh_states=refresh)
        config.epochs = 3
        trainer = Trainer(config, summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
        trainer.one_update()
        trainer.close()
        assert len(calls) == expected
