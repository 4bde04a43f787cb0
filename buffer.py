"""Rollout storage, GAE, the sequence index map and minibatches of whole sequences.

The rollout is written step by step into host (numpy) arrays allocated once with
a fixed (W, T) shape: a numpy store costs a fraction of a torch one, and the
rollout writes ten fields per step. finish() computes advantages and the
sequence index map, and hands every field to torch on the training device in
one move per update.

Each field lives in a flat array of W*T + 1 rows whose last row stays zero:
padding a sequence is then just pointing its unused slots at that row, so one
gather with the (N, L) index map builds every padded field.

Truncated BPTT starts each sequence from the state stored at its start, which
the rollout's parameters made. Two switches of the recurrence section make it
fresher: burn_in (each sequence also gets up to K steps of its episode before
it, unrolled without gradient from the state stored there: burn_in_index) and
refresh_states (before each epoch the model recomputes every stored state with
its current parameters: refresh_states).
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

import numpy as np
import torch

from config import ConfigError, RecurrenceConfig
from model import ActorCritic, BurnIn
from normalization import ValueNormalizer
from spaces import ActionFormat


def compute_gae(rewards: np.ndarray, values: np.ndarray, final_values: np.ndarray,
                terminated: np.ndarray, truncated: np.ndarray, last_values: np.ndarray,
                gamma: float, lamda: float) -> np.ndarray:
    """Generalised advantage estimates for all W workers at once; (W, T) in, (W, T) out.

    What follows step t is worth 0 after a termination, V(final observation) after
    a truncation (the episode was cut, not finished), and V(s_{t+1}) otherwise;
    last_values (W,) is V of the observation after the rollout's last step.
    """
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
    """dones (W, T): the episode ended at this step -> (W, T) True where an episode begins inside the
    rollout (step 0 of each row is not one: the state stored there came from the last rollout)."""
    starts = np.zeros_like(dones, dtype=bool)
    starts[:, 1:] = dones[:, :-1]
    return starts


def _episode_position(dones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W*T,) steps since the episode began (or its piece in this row, for an episode that crosses
    the rollout's start), and (W*T,) True where it (or its piece) begins."""
    W, T = dones.shape
    steps = np.arange(W * T)
    episode_start = episode_starts(dones)
    episode_start[:, 0] = True
    episode_start = episode_start.reshape(-1)  # (W, T) -> (W*T,)
    episode_id = np.cumsum(episode_start) - 1
    return steps - steps[episode_start][episode_id], episode_start


def sequence_index(dones: np.ndarray, sequence_length: int) -> SequenceIndex:
    """Cuts each worker's row into episodes, and episodes into sequences of at most L steps.

    dones (W, T): the episode ended at this step (terminated or truncated). Episodes
    crossing the rollout's start or end are cut there. sequence_length <= 0 keeps
    whole episodes (L is then the longest episode piece in this rollout).
    """
    W, T = dones.shape
    steps = np.arange(W * T)
    position, episode_start = _episode_position(dones)  # steps since the episode (piece) began
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
    first: np.ndarray  # (N,) flat index of the first step unrolled (the first burn-in step, else the start)


def burn_in_index(dones: np.ndarray, starts: np.ndarray, k: int) -> BurnInIndex:
    """Up to k steps before each sequence (starts (N,) flat indices of their first steps), taken
    only from the same episode in the same worker's row of this rollout: fewer, or none, near an
    episode's start or the rollout's start. The unroll begins from the stored state at `first`."""
    W, T = dones.shape
    position, _ = _episode_position(dones)
    before = np.minimum(position[starts], k)  # (N,) the burn-in steps each sequence has
    slots = np.arange(-k, 0)  # (K,) offsets from the start: slot K - 1 is the step just before it
    mask = slots >= -before[:, None]  # (N, K)
    index = np.where(mask, starts[:, None] + slots, W * T)  # padding points at the zero row
    return BurnInIndex(index, mask, starts - before)


class Minibatch(NamedTuple):
    obs: torch.Tensor  # (R, *obs_shape) the R real steps' observations alone, in mask's row-major order
    states: torch.Tensor  # (n, S) recurrent state before each sequence's first step (or its first burn-in step)
    actions: torch.Tensor  # (n, L, k) int64, or float32 for continuous actions
    log_probs: torch.Tensor  # (n, L) of the rollout policy
    values: torch.Tensor  # (n, L) of the rollout policy
    advantages: torch.Tensor  # (n, L)
    returns: torch.Tensor  # (n, L) value targets: advantages + values
    mask: torch.Tensor  # (n, L) True on real steps, False on padding
    action_mask: torch.Tensor | None = None  # (n, L, A) the actions allowed at each step; None: no masking
    previous: torch.Tensor | None = None  # (n, L, P) the previous action/reward the core saw; None: P = 0
    burn_in: BurnIn | None = None  # the steps before each sequence; None: no burn-in


def _field_specs(obs_shape: tuple, obs_dtype: np.dtype, actions: ActionFormat, masked: bool,
                 state_size: int, previous_size: int) -> dict[str, tuple[tuple, np.dtype]]:
    """The per-step fields stored for training: name -> (shape of one step, dtype)."""
    specs = {
        "obs": (tuple(obs_shape), np.dtype(obs_dtype)),
        "states": ((state_size,), np.dtype(np.float32)),  # the state the policy used at each step
        "actions": ((actions.size,), np.dtype(actions.dtype)),
        **{name: ((), np.dtype(np.float32)) for name in ("log_probs", "values", "advantages", "returns")},
    }
    if masked:  # the allowed actions at each step, so the update samples from the same support
        specs["action_mask"] = ((actions.mask_size,), np.dtype(bool))
    if previous_size:  # the previous action/reward the core saw beside each observation
        specs["previous"] = ((previous_size,), np.dtype(np.float32))
    return specs


class RolloutBuffer:
    """Rollout storage for W workers x T steps: the rollout writes each step with
    store_step() and store_outcome(), finish() prepares training, minibatches() serves it."""

    def __init__(self, workers: int, steps: int, obs_shape: tuple, obs_dtype: np.dtype,
                 actions: ActionFormat, masked: bool, state_size: int, device: torch.device, n_mini_batch: int = 1,
                 previous_size: int = 0):
        """Refuses (ConfigError), before allocating, a rollout that cannot fit in the memory available."""
        W, T = workers, steps
        require_memory(self.bytes_needed(W, T, obs_shape, obs_dtype, actions, masked, state_size, n_mini_batch,
                                         previous_size))
        self.W, self.T, self.device = W, T, device
        # For a GPU the storage is page-locked, so finish() copies it to the device asynchronously.
        pinned = device.type == "cuda"
        self._flat = {name: _zeros((W * T + 1, *shape), dtype, pinned)
                      for name, (shape, dtype) in _field_specs(obs_shape, obs_dtype, actions, masked,
                                                               state_size, previous_size).items()}
        self.masked, self.previous_size = masked, previous_size
        for name, storage in self._flat.items():  # (W*T + 1, ...) -> (W, T, ...) views
            setattr(self, name, storage[:W * T].reshape(W, T, *storage.shape[1:]))
        self.rewards = np.zeros((W, T), dtype=np.float32)
        self.terminated = np.zeros((W, T), dtype=bool)
        self.truncated = np.zeros((W, T), dtype=bool)
        self.final_values = np.zeros((W, T), dtype=np.float32)  # V(final obs) where truncated
        self.index: SequenceIndex | None = None
        self.burn_in: BurnInIndex | None = None
        self.recurrence = RecurrenceConfig()  # finish() takes the run's
        self._train: dict[str, torch.Tensor] = {}

    @staticmethod
    def bytes_needed(workers: int, steps: int, obs_shape: tuple, obs_dtype: np.dtype, actions: ActionFormat,
                     masked: bool, state_size: int, n_mini_batch: int, previous_size: int = 0) -> int:
        """At least what a run's rollout takes: the storage of W x T steps, and one
        minibatch's observations as float32 (the encoder's input)."""
        specs = _field_specs(obs_shape, obs_dtype, actions, masked, state_size, previous_size)
        per_step = sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for shape, dtype in specs.values())
        # + rewards, flags and final values (10 bytes a step) and a part of what finish() derives from them
        storage = (workers * steps + 1) * per_step + workers * steps * 14
        minibatch = workers * steps // n_mini_batch * int(np.prod(obs_shape, dtype=np.int64)) * 4
        return storage + minibatch

    def store_step(self, t: int, obs: np.ndarray, state: torch.Tensor, previous: torch.Tensor,
                   action_mask: np.ndarray | None, actions: np.ndarray, log_probs: torch.Tensor,
                   values: torch.Tensor) -> None:
        """What the policy saw and did at step t: obs (W, ...), the state it used (W, S)
        (saved before any reset), the previous input it saw (W, P), the allowed actions
        (W, A) or None, and its outputs."""
        self.obs[:, t] = obs
        self.states[:, t] = state.cpu().numpy()
        if self.previous_size:
            self.previous[:, t] = previous.cpu().numpy()
        if action_mask is not None:
            self.action_mask[:, t] = action_mask
        self.actions[:, t], self.log_probs[:, t], self.values[:, t] = actions, log_probs.cpu(), values.cpu()

    def store_outcome(self, t: int, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> None:
        """What the environments answered to step t, each (W,)."""
        self.rewards[:, t], self.terminated[:, t], self.truncated[:, t] = rewards, terminated, truncated

    def finish(self, last_values: np.ndarray, gamma: float, lamda: float, recurrence: RecurrenceConfig,
               value_normalizer: ValueNormalizer | None = None) -> None:
        """After the rollout: advantages, returns, the sequence index map (recurrence's
        sequence_length and burn_in), and the move to torch.

        Values (the rollout's, final_values and last_values) come as the value head gave
        them. With a value normalizer they are standardised: they are taken to the
        returns' units for GAE, its statistics take in this rollout's returns, and then
        the value targets and the rollout's values go back to the head's scale, under
        the updated statistics. This is the only place that maps values between scales.
        """
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
        # On the CPU these share memory with the numpy storage; on a GPU, one asynchronous copy each.
        non_blocking = self.device.type == "cuda"
        self._train = {name: torch.from_numpy(a).to(self.device, non_blocking=non_blocking)
                       for name, a in self._flat.items()}
        # first: the step whose stored state begins each sequence's unroll
        sequences = {"index": self.index.index, "mask": self.index.mask, "first": self.index.starts}
        if self.burn_in is not None:
            sequences.update(burn_index=self.burn_in.index, burn_mask=self.burn_in.mask, first=self.burn_in.first)
        for name, a in sequences.items():
            self._train[name] = torch.from_numpy(a).to(self.device)

    @property
    def padding_fraction(self) -> float:
        return 1.0 - float(self.index.mask.mean())

    @property
    def sequences(self) -> int:
        return self.index.index.shape[0]

    def minibatches(self, n_mini_batch: int, model: ActorCritic | None = None) -> Iterator[Minibatch]:
        """One epoch: the sequences shuffled (torch's generator) and split into n_mini_batch groups.
        With recurrence.refresh_states, `model` (the one being trained) first refreshes the stored states."""
        if self.recurrence.refresh_states and model is not None:
            self.refresh_states(model, max(1, self.W * self.T // n_mini_batch))
        f, P = self._train, self.previous_size
        order = torch.randperm(self.sequences).to(self.device)
        for ids in order.tensor_split(n_mini_batch):
            # (n, L) each: flat step indices (padding: the zero row), and True on real steps
            rows, mask = f["index"][ids], f["mask"][ids]
            burn_in = None
            if self.burn_in is not None:
                before, burn_mask = f["burn_index"][ids], f["burn_mask"][ids]  # (n, K) flat step indices, real
                # observations of the real burn-in steps only, (n, K)[burn_mask] -> (R_b, *obs), as the minibatch's
                burn_in = BurnIn(f["obs"][before[burn_mask]], f["previous"][before] if P else None, burn_mask)
            # the observations of the real steps only, (n, L)[mask] -> (R,) -> (R, *obs): no step reads padding's,
            # and the padded gather was the largest copy of a Memory Gym update (660 MB a minibatch)
            yield Minibatch(
                obs=f["obs"][rows[mask]], states=f["states"][f["first"][ids]], actions=f["actions"][rows],
                log_probs=f["log_probs"][rows], values=f["values"][rows],
                advantages=f["advantages"][rows], returns=f["returns"][rows], mask=mask,
                action_mask=f["action_mask"][rows] if self.masked else None,
                previous=f["previous"][rows] if P else None, burn_in=burn_in)

    def refresh_states(self, model: ActorCritic, chunk: int) -> None:
        """Replaces the stored states that training starts sequences from with those the model's
        current parameters give: one pass over the rollout without gradient, from each worker's
        first stored state, reset at episode starts as the rollout did (model.unroll; the encoder
        takes `chunk` steps at a time). The rollout's own states (self.states) stay as they were."""
        W, T, f = self.W, self.T, self._train
        obs = f["obs"][:W * T].reshape(W, T, *f["obs"].shape[1:])  # (W*T, *obs) -> (W, T, *obs)
        previous = f["previous"][:W * T].reshape(W, T, -1) if self.previous_size else None  # (W*T, P) -> (W, T, P)
        starts = torch.from_numpy(episode_starts(self.terminated | self.truncated)).to(self.device)
        states = model.unroll(obs, previous, f["states"][:W * T:T], starts, chunk)  # (W, S) -> (W, T, S)
        f["states"] = torch.cat((states.reshape(W * T, -1), f["states"][W * T:]))  # (W, T, S) -> (W*T + 1, S)


def _zeros(shape: tuple, dtype: np.dtype, pinned: bool) -> np.ndarray:
    """A zeroed numpy array, in page-locked memory when pinned (a torch tensor's storage)."""
    if not pinned:
        return np.zeros(shape, dtype=dtype)
    return torch.zeros(shape, dtype=torch.from_numpy(np.zeros(0, dtype)).dtype, pin_memory=True).numpy()


def require_memory(needed: int) -> None:
    """Refuses (ConfigError) a run whose rollout cannot fit in the memory available now:
    better one line at start than a run killed by the kernel later."""
    import psutil
    available = psutil.virtual_memory().available
    if needed > available:
        raise ConfigError(f"n_workers x worker_steps need at least {needed / 2 ** 30:.1f} GiB for the rollout "
                          f"of these observations, {available / 2 ** 30:.1f} GiB is available: "
                          "lower n_workers or worker_steps")
