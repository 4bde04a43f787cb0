"""Actor-critic with a recurrent core: encoder -> GRU/LSTM -> hidden layer -> policy and value heads.

This is the only module that knows a GRU from an LSTM. Everyone else sees the
recurrent state as one tensor of shape (B, S) (`state_size`), made by
`initial_state(B)`, returned by `act()` and taken by `act()`, `value()` and
`evaluate()`: for a GRU S = H, for an LSTM S = 2H (h and c side by side).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from config import ConfigError, RecurrenceConfig

# layer class for sequences, its one-step function, tensors in its state
CORES = {"gru": (nn.GRU, torch.gru_cell, 1), "lstm": (nn.LSTM, torch.lstm_cell, 2)}


class ActOutput(NamedTuple):
    actions: torch.Tensor  # (B, k) int64, one entry per categorical branch
    log_probs: torch.Tensor  # (B,)
    values: torch.Tensor  # (B,)
    state: torch.Tensor  # (B, S) the state after this step


class EvaluateOutput(NamedTuple):
    log_probs: torch.Tensor  # (N, L)
    entropy: torch.Tensor  # (N, L)
    values: torch.Tensor  # (N, L)


def _init(layer: nn.Module, gain: float) -> nn.Module:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def _is_image(space: gym.spaces.Box) -> bool:
    return len(space.shape) == 3


class _ImageEncoder(nn.Module):
    """The three-layer CNN of the reference baseline (seed 000) on HWC images."""

    def __init__(self, space: gym.spaces.Box):
        super().__init__()
        H, W, C = space.shape
        self._scale = 1.0 / 255.0 if space.dtype == np.uint8 else 1.0
        gain = math.sqrt(2)
        self.conv = nn.Sequential(
            _init(nn.Conv2d(C, 32, 8, stride=4), gain), nn.ReLU(),
            _init(nn.Conv2d(32, 64, 4, stride=2), gain), nn.ReLU(),
            _init(nn.Conv2d(64, 64, 3, stride=1), gain), nn.ReLU(),
            nn.Flatten())
        with torch.no_grad():
            self.out_features = self.conv(torch.zeros(1, C, H, W)).shape[1]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # (B, H, W, C) -> (B, C, H, W); uint8 images become float only here
        x = obs.permute(0, 3, 1, 2).float() * self._scale
        return self.conv(x)


class _VectorEncoder(nn.Module):
    """A Linear+ReLU layer of `width` units; width 0 feeds the observation to the
    recurrent core as it is (the reference baseline's choice for vectors)."""

    def __init__(self, space: gym.spaces.Box, width: int):
        super().__init__()
        size = int(np.prod(space.shape))
        self.net = (nn.Sequential(_init(nn.Linear(size, width), math.sqrt(2)), nn.ReLU()) if width > 0
                    else nn.Identity())
        self.out_features = width if width > 0 else size

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.flatten(1).float())  # (B, *shape) -> (B, obs)


def _categorical(logits: torch.Tensor, nvec: list[int]):
    """Per-branch log-softmax of the concatenated logits (B, sum(nvec))."""
    if len(nvec) == 1:
        return [logits.log_softmax(-1)]
    return [branch.log_softmax(-1) for branch in logits.split(nvec, dim=-1)]


class ActorCritic(nn.Module):
    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 hidden_layer_size: int, recurrence: RecurrenceConfig, vector_encoder_size: int = 0):
        super().__init__()
        if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) not in (1, 3):
            raise ConfigError(f"the environment's observation space {observation_space} is not supported "
                              "(Box vectors, or Box images height x width x channels)")
        if isinstance(action_space, gym.spaces.Discrete):
            self.nvec = [int(action_space.n)]
        elif isinstance(action_space, gym.spaces.MultiDiscrete):
            self.nvec = [int(n) for n in np.asarray(action_space.nvec).ravel()]
        else:
            raise ConfigError(f"the environment's action space {action_space} is not supported "
                              "(Discrete, MultiDiscrete)")

        self.encoder = (_ImageEncoder(observation_space) if _is_image(observation_space)
                        else _VectorEncoder(observation_space, vector_encoder_size))
        layer, self._cell, self._parts = CORES[recurrence.layer_type]
        self.hidden_size = recurrence.hidden_state_size
        self.core = layer(self.encoder.out_features, self.hidden_size, batch_first=True)
        for name, param in self.core.named_parameters():
            (nn.init.orthogonal_ if "weight" in name else nn.init.zeros_)(param)

        gain, width = math.sqrt(2), hidden_layer_size
        self.hidden = _init(nn.Linear(self.hidden_size, width), gain)
        # The policy and value branches' hidden layers side by side in one Linear
        # (the same function as two, in one matrix product); each half has its own
        # orthogonal init.
        self.branches = nn.Linear(width, 2 * width)
        for half in self.branches.weight.data.chunk(2, dim=0):
            nn.init.orthogonal_(half, gain)
        nn.init.zeros_(self.branches.bias)
        self.policy_out = _init(nn.Linear(width, sum(self.nvec)), 0.01)
        self.value_out = _init(nn.Linear(width, 1), 1.0)

    # ---------------------------------------------------------- recurrent state
    @property
    def state_size(self) -> int:
        return self._parts * self.hidden_size

    def initial_state(self, batch: int, device=None) -> torch.Tensor:
        return torch.zeros(batch, self.state_size, device=device)

    def _unpack(self, state: torch.Tensor):
        # (B, parts*H) -> parts x (1, B, H), the layout torch's GRU/LSTM take
        parts = state.view(state.shape[0], self._parts, self.hidden_size).transpose(0, 1).contiguous()
        parts = parts.unsqueeze(1)  # (parts, B, H) -> (parts, 1, B, H)
        return parts[0] if self._parts == 1 else (parts[0], parts[1])

    # ------------------------------------------------------------------ forward
    def _step(self, obs: torch.Tensor, state: torch.Tensor):
        """One step for B environments: obs (B, *obs_shape), state (B, S).

        Uses the layer's one-step function on the layer's own weights: the same
        arithmetic as the sequence call in evaluate(), at a third of its overhead
        for a single step.
        """
        x = self.encoder(obs)  # (B, F)
        c = self.core
        weights = (c.weight_ih_l0, c.weight_hh_l0, c.bias_ih_l0, c.bias_hh_l0)
        if self._parts == 1:
            state = self._cell(x, state, *weights)
            h = state
        else:
            H = self.hidden_size
            h, cell = self._cell(x, (state[:, :H], state[:, H:]), *weights)
            state = torch.cat((h, cell), dim=1)  # (B, 2H): h and c side by side
        return h, state

    def _heads(self, h: torch.Tensor):
        """Recurrent output (B, H) -> policy logits (B, sum(nvec)), values (B,)."""
        policy, value = torch.relu(self.branches(torch.relu(self.hidden(h)))).chunk(2, dim=-1)
        return self.policy_out(policy), self.value_out(value).squeeze(-1)

    @torch.inference_mode()
    def act(self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False) -> ActOutput:
        h, state = self._step(obs, state)
        logits, values = self._heads(h)
        actions, log_probs = [], []
        for lp in _categorical(logits, self.nvec):
            if deterministic:
                a = lp.argmax(-1, keepdim=True)
            else:
                # Gumbel-max: argmax(log p - log E), E ~ Exp(1), samples from p in
                # three cheap ops where torch.multinomial costs several times more.
                a = (lp - torch.empty_like(lp).exponential_().log()).argmax(-1, keepdim=True)
            actions.append(a)
            log_probs.append(lp.gather(-1, a))
        if len(actions) == 1:
            return ActOutput(actions[0], log_probs[0].squeeze(-1), values, state)
        # k branches: (B, 1) each -> (B, k); the joint log-prob is their sum
        return ActOutput(torch.cat(actions, dim=-1), torch.cat(log_probs, dim=-1).sum(-1), values, state)

    @torch.inference_mode()
    def value(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """V(obs) for B environments given the state before obs: (B,)."""
        h, _ = self._step(obs, state)
        return self._heads(h)[1]

    def evaluate(self, obs: torch.Tensor, state: torch.Tensor, actions: torch.Tensor) -> EvaluateOutput:
        """Training pass over N sequences of length L with one recurrent call.

        obs (N, L, *obs_shape), state (N, S) before each sequence's first step, actions (N, L, k).
        """
        N, L = obs.shape[:2]
        x = self.encoder(obs.reshape(N * L, *obs.shape[2:]))  # (N, L, *obs) -> (N*L, F)
        x = x.reshape(N, L, -1)  # (N*L, F) -> (N, L, F): batch_first, never (L, N, F)
        y, _ = self.core(x, self._unpack(state))  # (N, L, H)
        logits, values = self._heads(y.reshape(N * L, -1))  # (N, L, H) -> (N*L, H)
        flat_actions = actions.reshape(N * L, -1)  # (N, L, k) -> (N*L, k)
        log_prob = entropy = None
        for i, lp in enumerate(_categorical(logits, self.nvec)):
            branch_log_prob = lp.gather(-1, flat_actions[:, i:i + 1]).squeeze(-1)
            branch_entropy = -(lp.exp() * lp).sum(-1)
            log_prob = branch_log_prob if log_prob is None else log_prob + branch_log_prob
            entropy = branch_entropy if entropy is None else entropy + branch_entropy
        # (N*L,) -> (N, L)
        return EvaluateOutput(log_prob.reshape(N, L), entropy.reshape(N, L), values.reshape(N, L))
