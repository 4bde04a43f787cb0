"""A trained agent for use outside training (a notebook, another program, enjoy.py).

    agent = Agent.load("models/cartpole_masked.pt")
    state, start = None, np.ones(n_envs, dtype=bool)
    actions, state = agent.act(obs, state, episode_start=start, deterministic=True)

Like sb3-contrib's predict(): the caller carries the recurrent state from step to
step and says which environments begin an episode; the agent resets their state
exactly as training did (when the config's reset_hidden_state is on).
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
            deterministic: bool = False, action_mask: np.ndarray | None = None) -> AgentStep:
        """obs (n, *obs_shape) as the environment gives it (a Dict packed as make_env() does),
        state (n, S) or None (a fresh start), episode_start (n,) bool, action_mask (n, A) bool or None."""
        n = obs.shape[0]
        if state is None:
            state = self.initial_state(n)
        elif self.config.recurrence.reset_hidden_state:
            state = self.model.reset_state(state, np.asarray(episode_start, dtype=bool))
        n = self.normalizers
        if n is not None:
            obs = n.observation(np.asarray(obs), update=False)
        mask = None if action_mask is None else torch.as_tensor(np.asarray(action_mask, dtype=bool), device=self.device)
        out = self.model.act(torch.as_tensor(obs, device=self.device), state, deterministic, mask)
        actions = out.actions.cpu().numpy()
        if isinstance(self.action_space, gym.spaces.Discrete):
            actions = actions[:, 0]  # (n, 1) -> (n,)
        values = out.values.cpu().numpy()
        if n is not None:
            values = n.value_units(values)
        return AgentStep(actions, out.state, out.log_probs.cpu().numpy(), values)
