"""Wrappers that make_env() applies from the config, for any family, and the families share."""
import gymnasium as gym
import numpy as np

from spaces import MASK_KEY, SpaceError, layout, pack


def hide_entries(env: gym.Env, hidden: list[int]) -> gym.Env:
    """Drops the listed entries of a vector observation (environment.observation_mask): Pendulum's velocity, say."""
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise SpaceError(f"environment.observation_mask needs a vector (1-D Box) observation, not {space}")
    size = space.shape[0]
    bad = [i for i in hidden if not -size <= i < size]
    if bad:
        raise SpaceError(f"environment.observation_mask: indices {bad} are outside the observation's {size} entries")
    keep = np.setdiff1d(np.arange(size), np.asarray(hidden) % size)
    if keep.size == 0:
        raise SpaceError("environment.observation_mask hides every entry of the observation")
    kept = gym.spaces.Box(space.low[keep], space.high[keep], (keep.size,), space.dtype)
    return gym.wrappers.TransformObservation(env, lambda obs: obs[keep], kept)


class PackObservation(gym.Wrapper):
    """Any observation but a single Box -> one float32 vector (spaces.pack); a Dict's `action_mask` goes to
    the info. `original_space` keeps the environment's own space, for spaces.layout()."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.original_space = env.observation_space
        self._masked = isinstance(self.original_space, gym.spaces.Dict) and MASK_KEY in self.original_space.spaces
        size = layout(self.original_space).shape[0]
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)

    def _convert(self, obs, info):
        if self._masked:
            info = {**info, MASK_KEY: np.asarray(obs[MASK_KEY], dtype=bool)}
        return pack(obs, self.original_space), info

    def reset(self, **kwargs):
        return self._convert(*self.env.reset(**kwargs))

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs, info = self._convert(obs, info)
        return obs, reward, terminated, truncated, info
