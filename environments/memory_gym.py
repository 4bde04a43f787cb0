"""Memory Gym (Mortar Mayhem, Mystery Path, Searing Spotlights): 84x84 RGB pictures, kept as uint8. Every reset gets
`environment.reset_params` as `options=` but for two keys of ours (as the reference baseline's): each episode's seed
is drawn from [start-seed, start-seed + num-seeds). An episode cut by the hidden `max_steps` limit is truncated."""
import os

import gymnasium as gym
import numpy as np

from environments.seeding import SeedRange

UNLIMITED_SEEDS = 2 ** 31 - 1

_open_envs = 0  # Memory Gym environments alive in this process (they share pygame)


def make_memory_gym(name: str = "MortarMayhem-Grid-v0", reset_params: dict | None = None,
                    render_mode: str | None = None) -> gym.Env:
    params = dict(reset_params or {})
    start = params.pop("start-seed", 0)
    count = params.pop("num-seeds", UNLIMITED_SEEDS - start)
    return SeedRange(MemoryGymEnv(name, params, render_mode), start, count)


class MemoryGymEnv(gym.Wrapper):
    """Every reset gets the reset parameters as options; pictures upright; the hidden time limit a truncation."""

    def __init__(self, name: str, params: dict, render_mode: str | None = None):
        super().__init__(_make(name, render_mode))
        self._params = params
        try:
            _check_params(self.env.unwrapped, params)
        except ValueError:
            self.close()
            raise
        self._steps = 0
        # a time limit the environment applies but does not show
        self._has_time_limit = "max_steps" in self.env.unwrapped.default_reset_parameters

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._steps = 0
        obs, info = self.env.reset(seed=seed, options={**self._params, **(options or {})})
        return _upright(obs), info

    def step(self, action):
        self._steps += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated and self._has_time_limit and not info.get("success"):
            if self._steps == self.env.unwrapped.reset_params["max_steps"]:
                terminated, truncated = False, True
        return _upright(obs), reward, terminated, truncated, info

    def close(self):
        global _open_envs
        if self.env is None:
            return
        _open_envs -= 1
        if _open_envs == 0:
            self.env.close()  # pygame.quit(): only once no other environment in this process needs pygame
        self.env = None


def _make(name: str, render_mode: str | None) -> gym.Env:
    global _open_envs
    if render_mode != "human":  # no window, no sound card needed
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import memory_gym  # noqa: F401  (registers the Memory Gym ids)
    if not str(gym.spec(name).entry_point).startswith("memory_gym"):
        ids = [i for i, s in gym.registry.items() if str(s.entry_point).startswith("memory_gym")]
        raise ValueError(f"'{name}' is not a Memory Gym id; one of {', '.join(ids)}")
    env = gym.make(name, render_mode=render_mode, disable_env_checker=True)
    _open_envs += 1
    return env


def _check_params(env: gym.Env, params: dict) -> None:
    """Wrong reset parameters fail here, once, rather than as a bare assert inside the first reset."""
    valid = env.default_reset_parameters
    unknown = [key for key in params if key not in valid]
    if unknown:
        raise ValueError(f"unknown reset_params {', '.join(map(repr, unknown))} for this id; "
                         f"valid: start-seed, num-seeds, {', '.join(valid)}")
    try:
        type(env).process_reset_params(params)
    except AssertionError:
        raise ValueError(f"reset_params {params} are out of the ranges the environment accepts") from None


def _upright(obs):
    """pygame's pixel arrays are indexed [x, y]; return [y, x] pictures, as render() shows them."""
    if isinstance(obs, dict):  # the MortarMayhemB ids: picture + command vector
        return {**obs, "visual_observation": _upright(obs["visual_observation"])}
    return np.ascontiguousarray(obs.transpose(1, 0, 2))

