"""Rollout storage, GAE, the sequence index map and minibatches of whole sequences.

Storage is allocated once with a fixed (W, T) shape. Each field lives in a flat
tensor of W*T + 1 rows whose last row stays zero: padding a sequence is then
just pointing its unused slots at that row, so one gather with the (N, L) index
map builds every padded field, and no field is ever copied to be padded.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

import torch


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, final_values: torch.Tensor,
                terminated: torch.Tensor, truncated: torch.Tensor, last_values: torch.Tensor,
                gamma: float, lamda: float) -> torch.Tensor:
    """Generalised advantage estimates for all W workers at once; (W, T) in, (W, T) out.

    What follows step t is worth 0 after a termination, V(final observation) after
    a truncation (the episode was cut, not finished), and V(s_{t+1}) otherwise;
    last_values (W,) is V of the observation after the rollout's last step.
    """
    W, T = rewards.shape
    advantages = torch.zeros_like(rewards)
    next_values, next_advantage = last_values, torch.zeros_like(last_values)
    for t in reversed(range(T)):
        following = torch.where(truncated[:, t], final_values[:, t], next_values)
        following = following.masked_fill(terminated[:, t], 0.0)
        delta = rewards[:, t] + gamma * following - values[:, t]
        continues = ~(terminated[:, t] | truncated[:, t])
        next_advantage = delta + gamma * lamda * continues * next_advantage
        advantages[:, t] = next_advantage
        next_values = values[:, t]
    return advantages


class SequenceIndex(NamedTuple):
    index: torch.Tensor  # (N, L) flat step index w*T + t; padding slots hold W*T (the zero row)
    mask: torch.Tensor  # (N, L) True on real steps
    starts: torch.Tensor  # (N,) flat index of each sequence's first step


def sequence_index(dones: torch.Tensor, sequence_length: int) -> SequenceIndex:
    """Cuts each worker's row into episodes, and episodes into sequences of at most L steps.

    dones (W, T): the episode ended at this step (terminated or truncated). Episodes
    crossing the rollout's start or end are cut there. sequence_length <= 0 keeps
    whole episodes (L is then the longest episode piece in this rollout).
    """
    W, T = dones.shape
    device = dones.device
    steps = torch.arange(W * T, device=device)
    episode_start = torch.zeros(W, T, dtype=torch.bool, device=device)
    episode_start[:, 0] = True
    episode_start[:, 1:] = dones[:, :-1]
    episode_start = episode_start.reshape(-1)  # (W, T) -> (W*T,)
    episode_id = episode_start.cumsum(0) - 1
    position = steps - steps[episode_start][episode_id]  # steps since the episode (piece) began
    sequence_start = position % sequence_length == 0 if sequence_length > 0 else episode_start
    starts = steps[sequence_start]
    sequence_id = sequence_start.cumsum(0) - 1
    offset = steps - starts[sequence_id]
    N = starts.shape[0]
    L = sequence_length if sequence_length > 0 else int(offset.max()) + 1
    index = torch.full((N, L), W * T, dtype=torch.long, device=device)
    index[sequence_id, offset] = steps
    return SequenceIndex(index, index < W * T, starts)


class Minibatch(NamedTuple):
    obs: torch.Tensor  # (n, L, *obs_shape)
    states: torch.Tensor  # (n, S) recurrent state before each sequence's first step
    actions: torch.Tensor  # (n, L, k)
    log_probs: torch.Tensor  # (n, L) of the rollout policy
    values: torch.Tensor  # (n, L) of the rollout policy
    advantages: torch.Tensor  # (n, L)
    returns: torch.Tensor  # (n, L) value targets: advantages + values
    mask: torch.Tensor  # (n, L) True on real steps, False on padding


class RolloutBuffer:
    def __init__(self, workers: int, steps: int, obs_shape: tuple, obs_dtype: torch.dtype,
                 action_size: int, state_size: int, device: torch.device):
        W, T = workers, steps
        self.W, self.T = W, T

        def field(*shape, dtype=torch.float32):
            return torch.zeros((W * T + 1, *shape), dtype=dtype, device=device)

        self._flat = {
            "obs": field(*obs_shape, dtype=obs_dtype),
            "states": field(state_size),  # the state the policy used at each step
            "actions": field(action_size, dtype=torch.long),
            "log_probs": field(), "values": field(), "advantages": field(), "returns": field(),
        }
        for name, storage in self._flat.items():  # (W*T + 1, ...) -> (W, T, ...) views
            setattr(self, name, storage[:W * T].view(W, T, *storage.shape[1:]))
        self.rewards = torch.zeros(W, T, device=device)
        self.terminated = torch.zeros(W, T, dtype=torch.bool, device=device)
        self.truncated = torch.zeros(W, T, dtype=torch.bool, device=device)
        self.final_values = torch.zeros(W, T, device=device)  # V(final obs) where truncated
        self.index: SequenceIndex | None = None

    def finish(self, last_values: torch.Tensor, gamma: float, lamda: float, sequence_length: int) -> None:
        """After the rollout: advantages, returns and the sequence index map."""
        self.advantages[:] = compute_gae(self.rewards, self.values, self.final_values, self.terminated,
                                         self.truncated, last_values, gamma, lamda)
        self.returns[:] = self.advantages + self.values
        self.index = sequence_index(self.terminated | self.truncated, sequence_length)

    @property
    def padding_fraction(self) -> float:
        return 1.0 - self.index.mask.float().mean().item()

    def minibatches(self, n_mini_batch: int, generator: torch.Generator | None = None) -> Iterator[Minibatch]:
        """One epoch: the sequences shuffled and split into n_mini_batch groups."""
        index, mask, starts = self.index
        order = torch.randperm(index.shape[0], generator=generator).to(index.device)
        for ids in order.tensor_split(n_mini_batch):
            rows = index[ids]  # (n, L) flat step indices; padding points at the zero row
            f = self._flat
            yield Minibatch(
                obs=f["obs"][rows], states=f["states"][starts[ids]], actions=f["actions"][rows],
                log_probs=f["log_probs"][rows], values=f["values"][rows],
                advantages=f["advantages"][rows], returns=f["returns"][rows], mask=mask[ids])
