"""Rollout storage, GAE, the sequence index map and minibatches of whole sequences. Each field has W*T + 1 rows, the
last one zero: a padded sequence points its unused slots there, so one gather with the (N, L) map pads every field."""
from typing import Iterator, NamedTuple

import numpy as np
import psutil
import torch

from config import CORES, RecurrenceConfig
from model import ActorCritic, BurnIn
from normalization import Normalizers, ValueNormalizer
from plumbing.errors import ConfigError
from spaces import ActionFormat


def compute_gae(rewards: np.ndarray, values: np.ndarray, final_values: np.ndarray, terminated: np.ndarray,
                truncated: np.ndarray, last_values: np.ndarray, gamma: float, lamda: float) -> np.ndarray:
    """GAE for all W workers at once, (W, T): what follows step t is worth 0 after a termination, V(final
    observation) after a truncation, else V(s_{t+1}) (last_values (W,) after the rollout)."""
    W, T = rewards.shape
    advantages = np.zeros((W, T), dtype=np.float32)
    next_values = last_values.astype(np.float32)
    next_advantage = np.zeros(W, dtype=np.float32)
    for t in reversed(range(T)):
        following = np.where(truncated[:, t], final_values[:, t], next_values)
        following = np.where(terminated[:, t], 0.0, following)
        delta = rewards[:, t] + gamma * following - values[:, t]
        continues = ~(terminated[:, t] | truncated[:, t])
        next_advantage = delta + gamma * lamda * continues * next_advantage
        advantages[:, t] = next_advantage
        next_values = values[:, t]
    return advantages


class SequenceIndex(NamedTuple):
    index: np.ndarray  # (N, L) flat step index w*T + t; padding slots hold W*T (the zero row)
    mask: np.ndarray  # (N, L) True on real steps
    starts: np.ndarray  # (N,) flat index of each sequence's first step


def episode_starts(dones: np.ndarray) -> np.ndarray:
    """(W, T) True where an episode begins after a done; not at step 0, whose state is the last rollout's."""
    starts = np.zeros_like(dones, dtype=bool)
    starts[:, 1:] = dones[:, :-1]
    return starts


def _episode_position(dones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W*T,) steps since each episode piece began in its row, and (W*T,) True where one begins."""
    W, T = dones.shape
    steps = np.arange(W * T)
    episode_start = episode_starts(dones)
    episode_start[:, 0] = True
    episode_start = episode_start.reshape(-1)  # (W, T) -> (W*T,)
    episode_id = np.cumsum(episode_start) - 1
    return steps - steps[episode_start][episode_id], episode_start


def sequence_index(dones: np.ndarray, sequence_length: int) -> SequenceIndex:
    """Cuts each worker's row (dones (W, T)) into episodes, cut at the rollout's edges, and episodes into
    sequences of at most L steps; sequence_length <= 0 keeps whole episode pieces (L: the longest). For example:

    >>> dones = np.zeros((2, 6), dtype=bool); dones[0, 3] = True  # W=2, T=6: worker 0's episode ends at step 3
    >>> index, mask, starts = sequence_index(dones, sequence_length=3)
    >>> index  # flat steps w*T + t, rows 0 1 2 | 3 | 4 5 and 6 7 8 | 9 10 11; padding: the zero row W*T = 12
    array([[ 0,  1,  2],
           [ 3, 12, 12],
           [ 4,  5, 12],
           [ 6,  7,  8],
           [ 9, 10, 11]])
    >>> starts  # sequence n starts from the state stored before step starts[n]
    array([0, 3, 4, 6, 9])
    """
    W, T = dones.shape
    steps = np.arange(W * T)
    position, episode_start = _episode_position(dones)
    sequence_start = position % sequence_length == 0 if sequence_length > 0 else episode_start
    starts = steps[sequence_start]
    sequence_id = np.cumsum(sequence_start) - 1
    offset = steps - starts[sequence_id]
    N = starts.shape[0]
    L = sequence_length if sequence_length > 0 else int(offset.max()) + 1
    index = np.full((N, L), W * T, dtype=np.int64)
    index[sequence_id, offset] = steps
    return SequenceIndex(index, index < W * T, starts)


class BurnInIndex(NamedTuple):
    index: np.ndarray  # (N, K) flat step indices of the steps before each sequence, right-aligned; W*T where fewer
    mask: np.ndarray  # (N, K) True on real burn-in steps
    first: np.ndarray  # (N,) flat index of the first step unrolled


def burn_in_index(dones: np.ndarray, starts: np.ndarray, k: int) -> BurnInIndex:
    """Up to k steps before each sequence (starts (N,) flat indices), from the same episode piece only;
    the model unrolls them without gradient from the state stored at `first`."""
    W, T = dones.shape
    position, _ = _episode_position(dones)
    before = np.minimum(position[starts], k)
    slots = np.arange(-k, 0)  # (K,) offsets from the start: slot K - 1 is the step just before it
    mask = slots >= -before[:, None]  # (N, K)
    index = np.where(mask, starts[:, None] + slots, W * T)
    return BurnInIndex(index, mask, starts - before)


class Minibatch(NamedTuple):
    """n whole sequences padded to L: each field (n, L, ...) unless noted; log-probs and values are the rollout's."""
    obs: torch.Tensor  # (R, *obs_shape): the R real steps only, in mask's row-major order
    states: torch.Tensor  # (n, S): the stored state before each sequence's first (burn-in) step
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor  # value targets: advantages + values
    mask: torch.Tensor
    action_mask: torch.Tensor | None = None  # (n, L, A) the allowed actions; None: no masking
    previous: torch.Tensor | None = None  # (n, L, P) the previous action/reward; None: P = 0
    burn_in: BurnIn | None = None


class RolloutBuffer:
    """W workers x T steps: store_step() and store_outcome() write, finish() prepares, minibatches() serve."""

    def __init__(self, workers: int, steps: int, obs_shape: tuple, obs_dtype: np.dtype, actions: ActionFormat,
                 masked: bool, state_size: int, device: torch.device, previous_size: int = 0):
        W, T = workers, steps
        specs = stored_fields(obs_shape, obs_dtype, actions, masked, state_size, previous_size)
        self.W, self.T, self.device = W, T, device
        self._flat = {name: _zeros((W * T + 1, *shape), dtype, pinned=device.type == "cuda")
                      for name, (shape, dtype) in specs.items()}
        self.masked, self.previous_size = masked, previous_size
        for name, storage in self._flat.items():  # (W*T + 1, ...) -> (W, T, ...) views
            setattr(self, name, storage[:W * T].reshape(W, T, *storage.shape[1:]))
        self.rewards = np.zeros((W, T), dtype=np.float32)
        self.terminated = np.zeros((W, T), dtype=bool)
        self.truncated = np.zeros((W, T), dtype=bool)
        self.final_values = np.zeros((W, T), dtype=np.float32)  # V(final obs) where truncated
        self.index: SequenceIndex | None = None
        self.burn_in: BurnInIndex | None = None
        self.recurrence = RecurrenceConfig()
        self._train: dict[str, torch.Tensor] = {}

    def store_step(self, t: int, obs: np.ndarray, state: torch.Tensor, previous: torch.Tensor,
                   action_mask: np.ndarray | None, actions: np.ndarray, log_probs: torch.Tensor,
                   values: torch.Tensor) -> None:
        """What the policy saw and did at step t, each (W, ...); the state as it was before any reset."""
        self.obs[:, t] = obs
        self.states[:, t] = state.cpu().numpy()
        if self.previous_size:
            self.previous[:, t] = previous.cpu().numpy()
        if action_mask is not None:
            self.action_mask[:, t] = action_mask
        self.actions[:, t], self.log_probs[:, t], self.values[:, t] = actions, log_probs.cpu(), values.cpu()

    def store_outcome(self, t: int, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> None:
        self.rewards[:, t], self.terminated[:, t], self.truncated[:, t] = rewards, terminated, truncated

    def finish(self, last_values: np.ndarray, gamma: float, lamda: float, recurrence: RecurrenceConfig,
               value_normalizer: ValueNormalizer | None = None) -> None:
        """Advantages, returns, the sequence index map and the move to torch. With a value normalizer the
        head's values go to the returns' units for GAE, and targets and values back to the head's scale."""
        if value_normalizer is not None:
            for stored in (self.values, self.final_values):
                stored[:] = value_normalizer.denormalize(stored)
            last_values = value_normalizer.denormalize(last_values)
        self.advantages[:] = compute_gae(self.rewards, self.values, self.final_values, self.terminated,
                                         self.truncated, last_values, gamma, lamda)
        self.returns[:] = self.advantages + self.values
        if value_normalizer is not None:
            value_normalizer.update(self.returns)
            self.returns[:] = value_normalizer.normalize(self.returns)
            self.values[:] = value_normalizer.normalize(self.values)
        dones = self.terminated | self.truncated
        self.recurrence = recurrence
        self.index = sequence_index(dones, recurrence.sequence_length)
        self.burn_in = burn_in_index(dones, self.index.starts, recurrence.burn_in) if recurrence.burn_in else None
        self._train = {name: torch.from_numpy(a).to(self.device, non_blocking=self.device.type == "cuda")
                       for name, a in self._flat.items()}  # pinned: asynchronous to a GPU
        sequences = {"index": self.index.index, "mask": self.index.mask, "first": self.index.starts}
        if self.burn_in is not None:
            sequences.update(burn_index=self.burn_in.index, burn_mask=self.burn_in.mask, first=self.burn_in.first)
        for name, a in sequences.items():
            self._train[name] = torch.from_numpy(a).to(self.device)

    def minibatches(self, n_mini_batch: int, model: ActorCritic | None = None) -> Iterator[Minibatch]:
        """One epoch of shuffled sequences; with recurrence.refresh_states `model` first recomputes the states."""
        if self.recurrence.refresh_states and model is not None:
            self.refresh_states(model, max(1, self.W * self.T // n_mini_batch))
        f, P = self._train, self.previous_size
        order = torch.randperm(len(self.index.starts)).to(self.device)
        for ids in order.tensor_split(n_mini_batch):
            rows, mask = f["index"][ids], f["mask"][ids]
            burn_in = None
            if self.burn_in is not None:
                before, burn_mask = f["burn_index"][ids], f["burn_mask"][ids]
                # (n, K)[burn_mask] -> (R_b, *obs): the real burn-in steps only
                burn_in = BurnIn(f["obs"][before[burn_mask]], f["previous"][before] if P else None, burn_mask)
            # (n, L)[mask] -> (R, *obs): the encoder sees the real steps only
            yield Minibatch(
                obs=f["obs"][rows[mask]], states=f["states"][f["first"][ids]], actions=f["actions"][rows],
                log_probs=f["log_probs"][rows], values=f["values"][rows],
                advantages=f["advantages"][rows], returns=f["returns"][rows], mask=mask,
                action_mask=f["action_mask"][rows] if self.masked else None,
                previous=f["previous"][rows] if P else None, burn_in=burn_in)

    def refresh_states(self, model: ActorCritic, chunk: int) -> None:
        W, T, f = self.W, self.T, self._train
        obs = f["obs"][:W * T].reshape(W, T, *f["obs"].shape[1:])  # (W*T, *obs) -> (W, T, *obs)
        previous = f["previous"][:W * T].reshape(W, T, -1) if self.previous_size else None  # (W*T, P) -> (W, T, P)
        starts = torch.from_numpy(episode_starts(self.terminated | self.truncated)).to(self.device)
        states = model.unroll(obs, previous, f["states"][:W * T:T], starts, chunk)  # (W, S) -> (W, T, S)
        f["states"] = torch.cat((states.reshape(W * T, -1), f["states"][W * T:]))  # (W, T, S) -> (W*T + 1, S)


def _zeros(shape: tuple, dtype: np.dtype, pinned: bool) -> np.ndarray:
    """A zeroed numpy array, page-locked when pinned (a GPU copies it asynchronously)."""
    if not pinned:
        return np.zeros(shape, dtype=dtype)
    return torch.zeros(shape, dtype=torch.from_numpy(np.zeros(0, dtype)).dtype, pin_memory=True).numpy()


def stored_fields(obs_shape: tuple, obs_dtype: np.dtype, actions: ActionFormat, masked: bool, state_size: int,
                  previous_size: int = 0) -> dict[str, tuple[tuple, np.dtype]]:
    """The per-step fields stored for training: name -> (shape of one step, dtype)."""
    fields = {"obs": (tuple(obs_shape), np.dtype(obs_dtype)), "states": ((state_size,), np.dtype(np.float32)),
              "actions": ((actions.size,), np.dtype(actions.dtype)),
              **{name: ((), np.dtype(np.float32)) for name in ("log_probs", "values", "advantages", "returns")}}
    if masked:
        fields["action_mask"] = ((actions.mask_size,), np.dtype(bool))
    if previous_size:
        fields["previous"] = ((previous_size,), np.dtype(np.float32))
    return fields


def rollout_bytes(W: int, T: int, fields: dict, n_mini_batch: int) -> dict[str, int]:
    """What a rollout of W x T steps of these fields takes, by field: the storage with its zero row, one
    minibatch's observations as float32 with "obs", the (W, T) arrays and what finish() derives as "steps"."""
    entries = {name: int(np.prod(shape, dtype=np.int64)) for name, (shape, _) in fields.items()}
    taken = {name: (W * T + 1) * entries[name] * dtype.itemsize for name, (_, dtype) in fields.items()}
    taken["obs"] += W * T // n_mini_batch * entries["obs"] * 4
    return {**taken, "steps": W * T * 14}


def require_rollout_memory(config, spaces, model: ActorCritic) -> None:
    """Refuses (ConfigError) a rollout larger than the memory available, naming what takes most of it; the model
    may be one on the meta device."""
    obs = spaces.observation
    fields = stored_fields(obs.shape, Normalizers(config, obs).stored_dtype, spaces.action, spaces.masked,
                           model.state_size, model.previous_size)
    W, T, layer_type = config.n_workers, config.worker_steps, config.recurrence.layer_type
    taken, available = rollout_bytes(W, T, fields, config.n_mini_batch), psutil.virtual_memory().available
    needed, gib = sum(taken.values()), 2 ** 30
    if needed <= available:
        return
    if taken["states"] > taken["obs"]:
        part, size = f"the recurrent state stored at each step ({model.state_size:,} floats) takes", taken["states"]
        window = "memory_length, " if "memory_length" in CORES[layer_type].keys else ""  # the state holds W steps
        lower = f"recurrence.{window}hidden_state_size or num_layers, or n_workers or worker_steps"
    else:
        part, size, lower = "the observations stored at each step take", taken["obs"], "n_workers or worker_steps"
    raise ConfigError(f"the rollout of n_workers x worker_steps = {W * T:,} steps needs at least {needed / gib:.1f} "
                      f"GiB, {available / gib:.1f} GiB is available: {part} {size / gib:.1f} GiB of it; lower {lower}")
