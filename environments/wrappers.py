"""Observation wrappers that make_env() applies from the config, for any family."""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from spaces import MASK_KEY, SpaceError, dict_layout, pack, packed_space


class HideEntries(gym.ObservationWrapper):
    """Drops the listed entries of a vector observation (environment.observation_mask),
    turning a fully observed task into a partially observed one: Pendulum without its
    angular velocity needs memory to be balanced."""

    def __init__(self, env: gym.Env, hidden: list[int]):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise SpaceError(f"environment.observation_mask needs a vector (1-D Box) observation, "
                              f"not {space}")
        size = space.shape[0]
        bad = [i for i in hidden if not -size <= i < size]
        if bad:
            raise SpaceError(f"environment.observation_mask: indices {bad} are outside the observation's "
                              f"{size} entries")
        keep = np.setdiff1d(np.arange(size), np.asarray(hidden) % size)
        if keep.size == 0:
            raise SpaceError("environment.observation_mask hides every entry of the observation")
        self._keep = keep
        self.observation_space = gym.spaces.Box(space.low[keep], space.high[keep], (keep.size,), space.dtype)

    def observation(self, obs):
        return obs[self._keep]


class PackDict(gym.Wrapper):
    """A Dict observation -> one float32 vector (see spaces.py); its `action_mask` key,
    if any, goes to info["action_mask"]. `dict_space` keeps the original space for
    the model's per-key encoders."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.dict_space = env.observation_space
        self._layout = dict_layout(self.dict_space)
        self._masked = MASK_KEY in self.dict_space.spaces
        self.observation_space = packed_space(self.dict_space)

    def _convert(self, obs, info):
        if self._masked:
            info = {**info, MASK_KEY: np.asarray(obs[MASK_KEY], dtype=bool)}
        return pack(obs, self._layout), info

    def reset(self, **kwargs):
        return self._convert(*self.env.reset(**kwargs))

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs, info = self._convert(obs, info)
        return obs, reward, terminated, truncated, info
