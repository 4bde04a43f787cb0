"""make_env(): one environment of a family, in EpisodeStats (episode reports, frames for a video, state to save)."""
import reprlib
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, NamedTuple

import gymnasium as gym
import numpy as np

from environments.atari import CONTINUES, make_atari
from environments.cartpole import CartPole
from environments.memory_gym import make_memory_gym
from environments.minigrid import make_minigrid
from environments.poc_memory import PocMemoryEnv
from environments.wrappers import PackObservation, hide_entries
from spaces import MASK_KEY, EnvSpaces, action_format, layout


class SetupError(ValueError):
    """An environment that cannot be made as asked; the message is one line."""


def _one_line(error: BaseException, limit: int = 200) -> str:
    return " ".join(str(error).split())[:limit]


# Training's environments draw episode seeds below HELD_OUT, evaluation's above: no held-out episode is a training one
HELD_OUT = 2 ** 31
# Evaluation's step cap where the environment has no time limit: it only ends episodes that would never end
DEFAULT_MAX_STEPS = 100_000


class EpisodeStats(gym.Wrapper):
    """Adds info["episode"] = {reward, length[, success]} at each episode's end, in the environment's units. Each
    episode is reset with a seed from this wrapper's generator and its actions are kept: set_state() replays it.
    A step whose info holds CONTINUES ends the training episode only; max_steps cuts a scored episode ("capped").
    filmed: the episode's frames come with its stats ("frames": one at the start, one per step, before any reset)."""

    def __init__(self, env: gym.Env, max_steps: int | None = None, filmed: bool = False):
        super().__init__(env)
        self.max_steps, self.filmed, self._frames = max_steps, filmed, []
        self._return, self._length = 0.0, 0
        self._seeds = np.random.default_rng()
        self._half = 0  # where the episode seeds' half begins: 0 or HELD_OUT
        self._episode_seed: int | None = None
        self._actions: list = []  # since the episode's reset; arrays are copies (workers pass views)
        self._continues = False  # the last step ended a training episode inside this one (CONTINUES)
        self._goes_on: list[int] = []  # how many actions had been taken at each seedless reset since

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is None and self._continues:  # the same episode goes on after a training episode's end
            self._continues = False
            self._goes_on.append(len(self._actions))
            return self.env.reset(options=options)
        if seed is not None:
            self._seeds = np.random.default_rng(seed)
            self._half = HELD_OUT if seed >= HELD_OUT else 0
        # 31 random bits, drawn raw: cheaper than integers(), at every episode's start
        self._episode_seed = self._half + (int(self._seeds.bit_generator.random_raw()) >> 33)
        return self._reset(options)

    def _reset(self, options):
        self._return, self._length, self._actions, self._goes_on, self._continues = 0.0, 0, [], [], False
        out = self.env.reset(seed=self._episode_seed, options=options)
        self._frames = [self.env.render()] if self.filmed else []
        return out

    def step(self, action):
        self._actions.append(action.copy() if type(action) is np.ndarray else action)
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.filmed:
            self._frames.append(self.env.render())
        self._return += float(reward)
        self._length += 1
        capped = self.max_steps is not None and self._length >= self.max_steps
        if terminated or truncated or capped:
            if info.get(CONTINUES) and not capped:
                self._continues = True
            else:
                stats = {"reward": self._return, "length": self._length}
                if "success" in info:
                    stats["success"] = float(info["success"])
                if capped and (info.get(CONTINUES) or not (terminated or truncated)):
                    truncated, stats["capped"] = True, True
                if self.filmed:
                    stats["frames"] = self._frames
                info = {**info, "episode": stats}
        return obs, reward, terminated, truncated, info

    # get_state()'s values as checkpoint.py counts them (a PCG64 state's 13, four entries, its own 6; tested)
    STATE_VALUES = 23

    def get_state(self) -> dict:
        return {"seeds": self._seeds.bit_generator.state, "episode_seed": self._episode_seed,
                "actions": np.array(self._actions), "half": self._half,
                "goes_on": np.array(self._goes_on, dtype=np.int64)}

    def set_state(self, state: dict) -> None:
        """Puts the environment back where get_state() found it (replaying the episode so far)."""
        self._episode_seed = state["episode_seed"]
        if self._episode_seed is not None:
            self._reset(None)
            goes_on = [int(n) for n in state["goes_on"]]
            for taken, action in enumerate(np.asarray(state["actions"])):
                while goes_on and goes_on[0] == taken:
                    goes_on.pop(0)
                    self.reset()
                self.step(action.item() if action.ndim == 0 else action)
            if goes_on:  # the episode went on after its last action: nothing taken since
                self.reset()
        self._seeds.bit_generator.state = state["seeds"]
        self._half = state["half"]


class Allowed(NamedTuple):
    """The values a setting takes: a test, and the words that name them in a refusal."""
    test: Callable[[object], bool]
    words: str


def integer(low: int) -> Allowed:
    return Allowed(lambda value: type(value) is int and value >= low, f"an integer >= {low}")  # not a bool


FLAG = Allowed(lambda value: type(value) is bool, "true or false")


@dataclass(frozen=True)
class Family:
    build: Callable  # (render_mode=, **kwargs, [name=, reset_params=]) -> gym.Env
    reward_scale: float = 1.0  # training's reward scale when the config gives none (EnvironmentConfig)
    named: bool = False  # takes a Gymnasium id in environment.name
    kwargs: dict[str, Allowed] = field(default_factory=dict)  # the constructor's kwargs, and their values
    reset_params: dict[str, Allowed] = field(default_factory=dict)  # environment.reset_params' keys likewise
    more_kwargs: bool = False  # takes other kwargs too, checked where they are used (gym.make's)
    more_reset_params: bool = False  # takes other reset_params too, checked by the environment
    install: str = "pip install -r requirements.txt"  # what provides its modules


FAMILIES: dict[str, Family] = {
    "PocMemoryEnv": Family(PocMemoryEnv),
    "CartPoleMasked": Family(partial(CartPole, masked=True), reward_scale=0.01, kwargs={"max_steps": integer(1)}),
    "CartPole": Family(partial(CartPole, masked=False), reward_scale=0.01, kwargs={"max_steps": integer(1)}),
    "Minigrid": Family(make_minigrid, named=True, more_kwargs=True, kwargs={
        "agent_view_size": Allowed(lambda value: type(value) is int and value in (3, 7, 21),
                                   "3, 7 or 21 (odd, and dividing the 84 pixels)"),
        "seed_pool": integer(0), "time_limit": integer(0)}),
    "MemoryGym": Family(make_memory_gym, named=True, reset_params={"start-seed": integer(0), "num-seeds": integer(1)},
                        more_reset_params=True,
                        install="pip install -r requirements.txt && pip install --no-deps -r requirements-nodeps.txt"),
    "Atari": Family(make_atari, named=True, more_kwargs=True,
                    kwargs={"frame_stack": integer(0), "episodic_life": FLAG, "fire_reset": FLAG}),
    "gym": Family(lambda name, **kwargs: gym.make(name, **kwargs), named=True, more_kwargs=True),
}


def check_settings(family: str, name: str = "", kwargs: dict | None = None, reset_params: dict | None = None) -> Family:
    """Refuses, in one line, settings the family does not know, would ignore or does not allow."""
    if family not in FAMILIES:
        raise SetupError(f"config key 'environment.type' = {family!r} is not allowed: one of {', '.join(FAMILIES)}")
    spec = FAMILIES[family]
    if name and not spec.named:
        raise SetupError(f"environment.name {name!r} is not used by environment.type '{family}' "
                         "(only Minigrid, MemoryGym, Atari and gym take a Gymnasium id): remove it")
    if family == "gym" and not name:
        raise SetupError("environment.type 'gym' needs environment.name, a Gymnasium id such as 'CartPole-v1'")
    for key, given, allowed, more in (("environment.kwargs", kwargs, spec.kwargs, spec.more_kwargs),
                                      ("environment.reset_params", reset_params, spec.reset_params,
                                       spec.more_reset_params)):
        for setting, value in (given or {}).items():
            if setting in allowed and not allowed[setting].test(value):
                raise SetupError(f"config key '{key}.{setting}' = {reprlib.repr(value)} is not allowed: "
                                 f"{allowed[setting].words}")
            if setting not in allowed and not more:
                takes = f"it takes {', '.join(allowed)}" if allowed else "it takes none"
                raise SetupError(f"{key} {setting!r} is not taken by environment.type '{family}' ({takes})")
    return spec


def make_env(family: str, name: str = "", kwargs: dict | None = None, reset_params: dict | None = None,
             observation_mask: list[int] | None = None, max_steps: int | None = None, filmed: bool = False) -> gym.Env:
    """The family's environment, its observation mask applied, any observation but a single Box packed into
    one vector, in EpisodeStats; what its constructor raises is a one-line SetupError. max_steps: evaluation's
    step cap; 0: the environment's own time limit, else DEFAULT_MAX_STEPS; None: none. filmed: EpisodeStats'."""
    spec = check_settings(family, name, kwargs, reset_params)
    try:
        args = {**(kwargs or {}), **({"render_mode": "rgb_array"} if filmed else {})}  # kwargs' own kept
        args.update((key, value) for key, value in (("name", name), ("reset_params", reset_params)) if value)
        env = spec.build(**args)  # a name or reset_params not given: the family's defaults
    except ModuleNotFoundError as error:
        if error.name is None:  # gym.make of "package:Id" re-raises with a message of its own
            raise SetupError(f"environment.name {name!r} cannot be made: {_one_line(error)}") from None
        raise SetupError(f"environment.type '{family}' needs the {error.name} module: {spec.install}") from None
    except Exception as error:  # the environment's own code: any type, for a bad value
        what = f"environment.name {name!r}" if name else f"environment.type {family!r}"
        for key, value in (("environment.kwargs", kwargs), ("environment.reset_params", reset_params)):
            what += f" with {key} {reprlib.repr(value)}" if value else ""
        message = f"{type(error).__name__}: {_one_line(error, 300)}".removesuffix(": ")
        raise SetupError(f"{what} cannot be made: {message}") from None
    if observation_mask is not None:
        env = hide_entries(env, observation_mask)
    if not isinstance(env.observation_space, gym.spaces.Box):
        env = PackObservation(env)
    if max_steps == 0:
        max_steps = getattr(env.spec, "max_episode_steps", None) or DEFAULT_MAX_STEPS
    return EpisodeStats(env, max_steps, filmed)


def spaces_of(env: EpisodeStats, seed: int | None = None) -> EnvSpaces:
    """make_env's environment's spaces, its own observation space before packing; resets it. SpaceError: unusable."""
    _, info = env.reset(seed=seed)  # its info says whether it masks actions
    space = getattr(env.env, "original_space", env.observation_space)  # PackObservation's, where packed
    return EnvSpaces(layout(space), space, env.action_space, action_format(env.action_space), MASK_KEY in info)
