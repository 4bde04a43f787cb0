"""make_env(): builds one environment of a family from its config.

Every environment comes back wrapped in EpisodeStats (the raw episode return,
length and success, before any training-only reward scaling) so the trainer and
enjoy.py can report scores in the environment's own units.
"""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np

from config import ConfigError, EnvironmentConfig


class EpisodeStats(gym.Wrapper):
    """Adds info["episode"] = {reward, length[, success]} at the end of each episode,
    in the environment's own reward units, and scales the reward for training.

    It also makes the environment's state plain data, for checkpoints that load
    weights-only (no pickled objects): every episode is reset with a seed drawn from
    a generator of this wrapper's own (seeded by the first seeded reset), and the
    actions since that reset are kept. get_state() is that generator's state, the
    episode's seed and its actions; set_state() resets with the seed and replays the
    actions. Any environment whose episode is a function of its reset seed and its
    actions (Gymnasium's contract for reset(seed=...)) resumes exactly.

    One wrapper does all this because each wrapper layer costs a Python call per step.
    """

    def __init__(self, env: gym.Env, reward_scale: float = 1.0):
        super().__init__(env)
        self._scale = reward_scale
        self._return, self._length = 0.0, 0
        self._seeds = np.random.default_rng()  # replaced at the first seeded reset
        self._episode_seed: int | None = None
        self._actions: list = []  # since the last reset; arrays are copies (workers pass views)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._seeds = np.random.default_rng(seed)
        self._episode_seed = int(self._seeds.integers(2 ** 31 - 1))
        return self._reset(options)

    def _reset(self, options):
        self._return, self._length, self._actions = 0.0, 0, []
        return self.env.reset(seed=self._episode_seed, options=options)

    def step(self, action):
        self._actions.append(action.copy() if isinstance(action, np.ndarray) else action)
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        if terminated or truncated:
            stats = {"reward": self._return, "length": self._length}
            if "success" in info:
                stats["success"] = float(info["success"])
            info = {**info, "episode": stats}
        return obs, reward * self._scale, terminated, truncated, info

    def get_state(self) -> dict:
        """Plain data: the episode-seed generator's state, this episode's seed and actions."""
        return {"seeds": self._seeds.bit_generator.state, "episode_seed": self._episode_seed,
                "actions": np.array(self._actions)}

    def set_state(self, state: dict) -> None:
        """Puts the environment back where get_state() found it (replaying the episode so far)."""
        self._episode_seed = state["episode_seed"]
        if self._episode_seed is not None:
            self._reset(None)
            for action in np.asarray(state["actions"]):
                self.step(action.item() if action.ndim == 0 else action)
        self._seeds.bit_generator.state = state["seeds"]


def _poc(config: EnvironmentConfig, render_mode):
    from environments.poc_memory import PocMemoryEnv
    return PocMemoryEnv(render_mode=render_mode, **config.kwargs)


def _cartpole(masked: bool):
    def build(config: EnvironmentConfig, render_mode):
        from environments.cartpole import CartPole
        return CartPole(masked=masked, render_mode=render_mode, **config.kwargs)
    return build


def _minigrid(config: EnvironmentConfig, render_mode):
    from environments.minigrid import make_minigrid
    try:
        return make_minigrid(config.name or "MiniGrid-MemoryS9-v0", render_mode=render_mode, **config.kwargs)
    except ModuleNotFoundError:
        raise ConfigError("environment.type 'Minigrid' needs the minigrid package: "
                          "pip install -r requirements.txt") from None
    except (gym.error.Error, TypeError, ValueError) as error:
        raise ConfigError(f"environment.name '{config.name}' cannot be made: {' '.join(str(error).split())}") \
            from None


def _memory_gym(config: EnvironmentConfig, render_mode):
    from environments.memory_gym import make_memory_gym
    try:
        return make_memory_gym(config.name or "MortarMayhem-Grid-v0", reset_params=config.reset_params,
                               render_mode=render_mode, **config.kwargs)
    except ModuleNotFoundError as error:
        raise ConfigError(f"environment.type 'MemoryGym' needs the {error.name} module: pip install -r "
                          "requirements.txt && pip install --no-deps -r requirements-nodeps.txt") from None
    except (gym.error.Error, TypeError, ValueError) as error:
        raise ConfigError(f"environment '{config.name}' cannot be made: {' '.join(str(error).split())}") from None


def _atari(config: EnvironmentConfig, render_mode):
    from environments.atari import make_atari
    if config.reset_params:
        raise ConfigError("environment.reset_params is for MemoryGym only; Atari takes its settings in kwargs")
    try:
        return make_atari(config.name or "ALE/Breakout-v5", render_mode=render_mode, **config.kwargs)
    except ModuleNotFoundError as error:
        raise ConfigError(f"environment.type 'Atari' needs the {error.name} module: "
                          "pip install -r requirements.txt") from None
    except (gym.error.Error, TypeError, ValueError) as error:
        raise ConfigError(f"environment.name '{config.name}' cannot be made: {' '.join(str(error).split())}") \
            from None


def _gym(config: EnvironmentConfig, render_mode):
    if not config.name:
        raise ConfigError("environment.type 'gym' needs environment.name, a Gymnasium id such as 'CartPole-v1'")
    kwargs = dict(config.kwargs, **({"render_mode": render_mode} if render_mode else {}))
    try:
        return gym.make(config.name, **kwargs)
    except (gym.error.Error, TypeError, ModuleNotFoundError) as error:
        reason = " ".join(str(error).split())
        raise ConfigError(f"environment.name '{config.name}' cannot be made: {reason}") from None


# family name -> (builder, default training reward scale)
FAMILIES: dict[str, tuple[Callable, float]] = {
    "PocMemoryEnv": (_poc, 1.0),
    "CartPoleMasked": (_cartpole(masked=True), 0.01),
    "CartPole": (_cartpole(masked=False), 0.01),
    "Minigrid": (_minigrid, 1.0),
    "MemoryGym": (_memory_gym, 1.0),
    "Atari": (_atari, 1.0),
    "gym": (_gym, 1.0),
}


def check_family(config: EnvironmentConfig) -> None:
    if config.type not in FAMILIES:
        raise ConfigError(f"config key 'environment.type' = {config.type!r} is not allowed: "
                          f"one of {', '.join(FAMILIES)}")


def make_env(config: EnvironmentConfig, render_mode: str | None = None) -> gym.Env:
    """The family's environment, its observation mask applied, a Dict observation
    packed into one vector (spaces.py), and EpisodeStats outermost."""
    from environments.wrappers import HideEntries, PackDict
    check_family(config)
    builder, default_scale = FAMILIES[config.type]
    scale = default_scale if config.reward_scale is None else config.reward_scale
    env = builder(config, render_mode)
    if config.observation_mask is not None:
        env = HideEntries(env, config.observation_mask)
    if isinstance(env.observation_space, gym.spaces.Dict):
        env = PackDict(env)
    return EpisodeStats(env, scale)


def model_observation_space(env: gym.Env) -> gym.Space:
    """The space the model is built for: a packed Dict's original space, else the env's own."""
    inner = env
    while isinstance(inner, gym.Wrapper):
        if hasattr(inner, "dict_space"):
            return inner.dict_space
        inner = inner.env
    return env.observation_space
