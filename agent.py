"""A trained agent for use outside training (a notebook, another program, enjoy.py).

    agent = Agent.load("models/cartpole_masked.pt")
    env = agent.config.environment.make()  # the environment it was trained on (here one: n = 1)
    obs, _ = env.reset(seed=0)
    state, start, action, reward = None, np.ones(1, dtype=bool), None, None
    while True:
        step = agent.act(obs[None], state, start, deterministic=True, previous_action=action, previous_reward=reward)
        # step.actions (1,) for a Discrete space, else (1, k); step.state (1, S); step.log_probs, step.values (1,)
        obs, r, terminated, truncated, _ = env.step(step.actions[0])
        if terminated or truncated:
            break
        state, start, action, reward = step.state, np.zeros(1, dtype=bool), step.actions, np.array([r])

Like sb3-contrib's predict(): the caller carries the recurrent state from step to
step and says which environments begin an episode; the agent resets their state
exactly as training did (when the config's reset_hidden_state is on). A model
trained with recurrence.previous_action / previous_reward also needs the actions
act() returned last time and the raw rewards the environments gave for them (None
at the first step; the agent puts zeros where an episode starts, as training did);
other models ignore them. Box actions come back unclipped: clip them to the
bounds for the environment (spaces.env_actions), but pass them back as they came.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch

from checkpoint import CheckpointError, arrays, load_checkpoint
from config import Config, config_from_dict
from environments import spaces_of
from model import ActorCritic, build_model
from normalization import Normalizers


class AgentStep(NamedTuple):
    actions: np.ndarray  # (n,) for a Discrete action space, else (n, k) (Box actions not yet clipped to bounds)
    state: torch.Tensor  # (n, S): pass it back in at the next step
    log_probs: np.ndarray  # (n,) of the chosen actions
    values: np.ndarray  # (n,)


class Agent:
    def __init__(self, model: ActorCritic, config: Config, action_space: gym.Space, device: str = "cpu",
                 normalizers: Normalizers | None = None):
        self.model, self.config, self.action_space = model.eval(), config, action_space
        self.device = torch.device(device)
        self.normalizers = normalizers  # frozen: statistics from training, never updated here

    @classmethod
    def load(cls, path: str | Path, device: str = "cpu") -> "Agent":
        """Rebuilds the model from the checkpoint alone (an environment is made once, for its spaces)."""
        checkpoint = load_checkpoint(path, map_location=device)
        config = config_from_dict(checkpoint["config"])
        env = config.environment.make()
        spaces = spaces_of(env)
        model = build_model(config, spaces)
        try:
            model.load_state_dict(checkpoint["model"])
        except RuntimeError:  # weights of another architecture than the config describes
            env.close()
            raise CheckpointError(f"{path}: its weights do not fit the model its config describes "
                                  "(another architecture or environment)") from None
        normalizers = Normalizers(config, spaces.observation)
        normalizers.load_state_dict(arrays(checkpoint["normalization"]))
        env.close()
        return cls(model.to(device), config, env.action_space, device, normalizers)

    def initial_state(self, n: int) -> torch.Tensor:
        return self.model.initial_state(n, self.device)

    def act(self, obs: np.ndarray, state: torch.Tensor | None, episode_start: np.ndarray,
            deterministic: bool = False, action_mask: np.ndarray | None = None,
            previous_action: np.ndarray | None = None, previous_reward: np.ndarray | None = None) -> AgentStep:
        """obs (n, *obs_shape) as the environment gives it (a Dict packed as make_env() does),
        state (n, S) or None (a fresh start), episode_start (n,) bool, action_mask (n, A) bool or None,
        previous_action: the actions the last call returned, previous_reward (n,): the raw rewards the
        environments gave for them (both None at the first step)."""
        n = obs.shape[0]
        previous = self._previous(n, state is None, episode_start, previous_action, previous_reward)
        if state is None:
            state = self.initial_state(n)
        else:
            state = self.model.reset_state(state, np.asarray(episode_start, dtype=bool))
        n = self.normalizers
        if n is not None:
            obs = n.observation(np.asarray(obs), update=False)
        mask = None if action_mask is None else torch.as_tensor(np.asarray(action_mask, dtype=bool), device=self.device)
        out = self.model.act(torch.as_tensor(obs, device=self.device), state, deterministic, mask, previous)
        actions = out.actions.cpu().numpy()
        if isinstance(self.action_space, gym.spaces.Discrete):
            actions = actions[:, 0]  # (n, 1) -> (n,)
        values = out.values.cpu().numpy()
        if n is not None:
            values = n.value_units(values)
        return AgentStep(actions, out.state, out.log_probs.cpu().numpy(), values)

    def _previous(self, n: int, fresh: bool, episode_start: np.ndarray, actions: np.ndarray | None,
                  rewards: np.ndarray | None) -> torch.Tensor:
        """The model's previous input (n, P) as training makes it: zeros where an episode starts."""
        P, recurrence = self.model.previous_size, self.config.recurrence
        if not P or fresh or np.all(episode_start):  # no step before: zeros, as in training
            return torch.zeros(n, P, device=self.device)
        for name, value, used in (("previous_action", actions, recurrence.previous_action),
                                  ("previous_reward", rewards, recurrence.previous_reward)):
            if used and value is None:  # never zeros by accident
                raise ValueError(f"this agent was trained with recurrence.{name}: pass {name} after the first step")
        actions = torch.as_tensor(np.zeros((n, 1)) if actions is None else np.asarray(actions), device=self.device)
        rewards = np.zeros(n, np.float32) if rewards is None else np.asarray(rewards, dtype=np.float32)
        previous = self.model.previous_input(actions.reshape(n, -1), rewards)  # Discrete (n,) -> (n, 1)
        return self.model.reset_previous(previous, np.asarray(episode_start, dtype=bool))
