"""A trained agent for other programs (a notebook, enjoy.py), as sb3-contrib's predict(): the caller carries the
recurrent state and says which environments begin an episode; the agent resets their state as training did. A model
trained with recurrence.previous_action / previous_reward also takes the actions act() returned last and the raw
rewards given for them (None at the first step); any other model refuses them. Box actions come back unclipped: clip
them for the environment (spaces.env_actions), but pass them back as they came. A wrong argument is one ValueError
naming it (docs/reliability.md), never a torch error or a silently wrong action.

    agent = Agent.load("models/cartpole_masked.pt")
    step = agent.act(obs[None], state, start, deterministic=True)  # state None, start [True] at first
    state, start = step.state, np.array([terminated or truncated])  # step.actions (1,) for a Discrete space"""
from pathlib import Path
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch

from checkpoint import arrays, fitted, load_checkpoint, load_model
from config import Config, config_from_dict
from environments import spaces_of
from model import ActorCritic, build_model
from normalization import Normalizers
from plumbing.files import reason
from spaces import action_format

class AgentStep(NamedTuple):
    actions: np.ndarray  # (n,) for a Discrete action space, else (n, k) (Box actions not yet clipped to bounds)
    state: torch.Tensor  # (n, S): pass it back in at the next step
    log_probs: np.ndarray  # (n,) of the chosen actions
    values: np.ndarray  # (n,)


class Agent:
    def __init__(self, model: ActorCritic, config: Config, action_space: gym.Space, device: str = "cpu",
                 normalizers: Normalizers | None = None, masked: bool = False):
        self.model, self.config, self.action_space = model.eval(), config, action_space
        self.masked = masked  # the environment gives an action mask (export.py makes it an input of the graph)
        self.device = torch.device(device)
        self.normalizers = normalizers  # frozen: statistics from training, never updated here
        self._obs_shape = tuple(model.observation_layout.shape)
        self._mask_branches = getattr(model.distribution, "nvec", [])  # categorical branches: the maskable ones

    @classmethod
    def load(cls, path: str | Path, device: str = "cpu") -> "Agent":
        """The model from the checkpoint alone (an environment is made once, for its spaces)."""
        device = cls._checked_device(device)  # else torch's error would call an intact file corrupt
        checkpoint = load_checkpoint(path, map_location=device)
        config = config_from_dict(checkpoint["config"])
        env = config.environment.make()
        try:
            spaces = spaces_of(env)
            model, normalizers = build_model(config, spaces), Normalizers(config, spaces.observation)
            with fitted(path):
                load_model(model, checkpoint["model"])
                normalizers.load_state_dict(arrays(checkpoint["normalization"]))
        finally:
            env.close()
        return cls(model.to(device), config, spaces.action_space, device, normalizers, spaces.masked)

    @staticmethod
    def _checked_device(device) -> torch.device:
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"device: expected a torch device such as 'cpu', 'cuda' or 'cuda:1', got {device!r}") \
                from None
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if device.type == "cuda" and (device.index or 0) >= gpus:
            raise ValueError(f"device: {str(device)!r} is not available here ({gpus} GPUs): load on 'cpu'")
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"device: {str(device)!r} is not one this project runs on: use 'cpu' or 'cuda'")
        return device

    def initial_state(self, n: int) -> torch.Tensor:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n: expected a number of environments >= 1, got {n!r}")
        return self.model.initial_state(int(n), self.device)

    def act(self, obs: np.ndarray, state: torch.Tensor | None, episode_start: np.ndarray,
            deterministic: bool = False, action_mask: np.ndarray | None = None,
            previous_action: np.ndarray | None = None, previous_reward: np.ndarray | None = None) -> AgentStep:
        """obs (n, *obs_shape) as the environment gives it (a Dict packed as make_env() does), n >= 1; state
        (n, S) float32 tensor or None (a fresh start); episode_start (n,) bool (None with state None: all
        start); action_mask (n, A) bool or None; previous_action, previous_reward (n,): see the module."""
        if not isinstance(deterministic, (bool, np.bool_)):
            raise ValueError(f"deterministic: expected True or False, got {deterministic!r}")
        obs = self._checked_obs(obs)
        n = obs.shape[0]
        starts = self._checked_starts(episode_start, n, state is None)
        mask = self._checked_mask(action_mask, n)
        previous = self._previous(n, state is None, starts, previous_action, previous_reward)
        if state is None:
            state = self.initial_state(n)
        else:
            state = self.model.reset_state(self._checked_state(state, n), starts)
        normalizers = self.normalizers
        if normalizers is not None:
            obs = normalizers.observation(obs, update=False)
        out = self.model.act(torch.as_tensor(obs, device=self.device), state, deterministic, mask, previous)
        actions = out.actions.cpu().numpy()
        if isinstance(self.action_space, gym.spaces.Discrete):
            actions = actions[:, 0]  # (n, 1) -> (n,)
        values = out.values.cpu().numpy()
        if normalizers is not None:
            values = normalizers.value_units(values)
        return AgentStep(actions, out.state, out.log_probs.cpu().numpy(), values)

    @staticmethod
    def _array(value, name: str, expected: str, fits, flags: bool = False) -> np.ndarray:
        """value as an array of finite numbers (bools with `flags`) whose shape fits, else a ValueError."""
        try:
            array = np.asarray(value)
        except (ValueError, TypeError) as error:  # a ragged list, ...
            raise ValueError(f"{name}: expected {expected}, got {type(value).__name__} that is no array "
                             f"({reason(error, 100)})") from None
        if array.dtype.kind not in ("biu" if flags else "biuf") or not fits(array.shape):
            raise ValueError(f"{name}: expected {expected}, got shape {array.shape} ({array.dtype})")
        # NaN (which fails <=), inf and 1e39 (inf in the model's float32) would act silently and poison the state
        if array.dtype.kind == "f" and (beyond := ~(np.abs(array) <= float(np.finfo(np.float32).max))).any():
            raise ValueError(f"{name}: expected finite numbers within float32's range, got NaN, inf or a larger "
                             f"number in row {int(np.argwhere(beyond)[0][0])}")
        return array != 0 if flags and array.dtype != bool else array

    def _checked_obs(self, obs) -> np.ndarray:
        shape = self._obs_shape
        expected = f"an array of shape (n, {', '.join(map(str, shape))}) with n >= 1 environments"
        if getattr(obs, "shape", None) == shape:
            expected += " (add the batch axis: obs[None] for one environment)"
        return self._array(obs, "obs", expected, lambda got: got[1:] == shape and got[0] > 0)

    def _checked_starts(self, starts, n: int, fresh: bool) -> np.ndarray:
        if starts is None and fresh:
            return np.ones(n, dtype=bool)
        if starts is None:
            raise ValueError(f"episode_start: expected a bool array of shape ({n},) beside a state (True where an "
                             "episode begins), got None")
        return self._array(starts, "episode_start", f"a bool array of shape ({n},)", lambda got: got == (n,), True)

    def _checked_state(self, state, n: int) -> torch.Tensor:
        S = self.model.state_size
        if not isinstance(state, torch.Tensor) or state.dtype != torch.float32 or state.shape != (n, S):
            got = (f"a {type(state).__name__}" if not isinstance(state, torch.Tensor) else
                   f"a {state.dtype} tensor of shape {tuple(state.shape)}")
            raise ValueError(f"state: expected the torch.float32 tensor of shape ({n}, {S}) that act() returned "
                             f"(or None at the start), got {got}")
        self._array(state.detach().cpu().numpy(), "state", "", lambda got: True)
        return state

    def _checked_mask(self, mask, n: int) -> torch.Tensor | None:
        if mask is None:
            return None
        branches, A = self._mask_branches, sum(self._mask_branches)
        if not A:
            raise ValueError(f"action_mask: this agent's action space {self.action_space} takes no mask; pass None")
        mask = self._array(mask, "action_mask", f"a bool array of shape ({n}, {A})", lambda got: got == (n, A), True)
        # every branch (one for Discrete, one per entry for MultiDiscrete) must allow one of its actions
        allowed = np.logical_or.reduceat(mask, np.cumsum([0, *branches[:-1]]), axis=1).all(axis=1)  # (n,)
        if not allowed.all():
            where = " in one of its branches" if len(branches) > 1 else ""
            raise ValueError(f"action_mask: row {int(np.flatnonzero(~allowed)[0])} allows no action{where} (expected "
                             "at least one True per row: an all-False row would act as if nothing were masked)")
        return torch.as_tensor(mask, device=self.device)

    def _checked_actions(self, actions: np.ndarray, n: int) -> np.ndarray:
        """Indices (Discrete, MultiDiscrete) and 0/1 (MultiBinary) must be whole numbers in their range: one-hot
        encoding would fail on 99 and take 0.5 as index 0."""
        binary = isinstance(self.action_space, gym.spaces.MultiBinary)
        highs = np.asarray(self._mask_branches or [2] * binary)  # per column; none: a Box action
        if not highs.size:
            return actions
        rows = actions.reshape(n, -1)
        bad = (rows != np.floor(rows)) | (rows < 0) | (rows >= highs)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise ValueError(f"previous_action: expected the actions act() returned, whole numbers from 0 to "
                             f"{highs[j if len(highs) > 1 else 0] - 1}, got {rows[i, j].item()!r} in row {i}")
        return actions

    def _previous(self, n: int, fresh: bool, episode_start: np.ndarray, actions, rewards) -> torch.Tensor:
        """The model's previous input (n, P) as training makes it: zeros where an episode starts."""
        P, recurrence = self.model.previous_size, self.config.recurrence
        first = fresh or np.all(episode_start)  # no step before: zeros, as in training
        for name, value in (("previous_action", actions), ("previous_reward", rewards)):
            used = getattr(recurrence, name)
            if not used and value is not None:  # never an input ignored in silence
                raise ValueError(f"{name}: this agent was trained without recurrence.{name}: pass None")
            if used and value is None and not first:  # never zeros by accident
                raise ValueError(f"this agent was trained with recurrence.{name}: pass {name} after the first step")
        if not P or first:
            return torch.zeros(n, P, device=self.device)
        k = action_format(self.action_space).size
        actions = np.zeros((n, 1)) if actions is None else self._checked_actions(self._array(
            actions, "previous_action", f"the actions act() returned, ({n},) or ({n}, {k})",
            lambda got: got in ((n,), (n, k)) if k == 1 else got == (n, k)), n)
        rewards = np.zeros(n, np.float32) if rewards is None else self._array(
            rewards, "previous_reward", f"an array of shape ({n},)", lambda got: got == (n,)).astype(np.float32)
        actions = torch.as_tensor(actions, device=self.device).reshape(n, -1)  # Discrete (n,) -> (n, 1)
        return self.model.previous_input(actions, rewards, episode_start)
