"""Action distributions over the policy head's output (B, n_params), one per kind of action space: each
samples action rows (B, k), gives log-prob and entropy, and turns actions into features (B, n_features).
A masked action gets probability zero; a row that allows nothing (padding) allows everything."""
import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from spaces import action_format


def one_hot(indices: torch.Tensor, categories: list[int]) -> torch.Tensor:
    """(B, k) indices -> (B, sum of the categories), one one-hot block per index."""
    return torch.cat([nn.functional.one_hot(i.long(), n) for i, n in zip(indices.unbind(1), categories)], dim=1)


def _masked_logits(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return logits
    mask = mask | ~mask.any(-1, keepdim=True)  # nothing allowed (padding): allow everything
    return logits.masked_fill(~mask, -math.inf)


class Categorical(nn.Module):
    """Discrete (one branch) and MultiDiscrete (one independent categorical per branch)."""

    def __init__(self, nvec: list[int]):
        super().__init__()
        self.nvec = nvec
        self.n_params = self.n_features = sum(nvec)

    def features(self, actions: torch.Tensor) -> torch.Tensor:
        """(B, k) indices -> (B, sum(nvec)) float: one one-hot block per branch."""
        return one_hot(actions, self.nvec).float()

    def _log_softmax(self, logits: torch.Tensor, mask: torch.Tensor | None) -> list[torch.Tensor]:
        # (B, sum(nvec)) -> one (B, n_i) block per branch; a mask is laid out the same way
        masks = [None] * len(self.nvec) if mask is None else mask.split(self.nvec, dim=-1)
        return [_masked_logits(b, m).log_softmax(-1) for b, m in zip(logits.split(self.nvec, dim=-1), masks)]

    def sample(self, params, mask, deterministic: bool):
        actions, log_probs = [], []
        for lp in self._log_softmax(params, mask):
            if deterministic:
                a = lp.argmax(-1, keepdim=True)
            else:
                # Gumbel-max: argmax(log p - log E), E ~ Exp(1), samples from p; a masked action never wins
                a = (lp - torch.empty_like(lp).exponential_().log()).argmax(-1, keepdim=True)
            actions.append(a)
            log_probs.append(lp.gather(-1, a))
        # k branches: (B, 1) each -> (B, k); the joint log-prob is their sum
        return torch.cat(actions, dim=-1), torch.cat(log_probs, dim=-1).sum(-1)

    def evaluate(self, params, actions, mask):
        log_probs, entropies = [], []
        for i, lp in enumerate(self._log_softmax(params, mask)):
            log_probs.append(lp.gather(-1, actions[:, i:i + 1]).squeeze(-1))
            # p log p of a masked action is 0 (p = 0), not 0 * -inf
            finite = lp if mask is None else lp.clamp(min=torch.finfo(lp.dtype).min)
            entropies.append(-(lp.exp() * finite).sum(-1))
        return torch.stack(log_probs).sum(0), torch.stack(entropies).sum(0)


class Bernoulli(nn.Module):
    """MultiBinary: one independent Bernoulli per entry, from its logit."""

    def __init__(self, n: int):
        super().__init__()
        self.n_params = self.n_features = n

    def features(self, actions: torch.Tensor) -> torch.Tensor:
        return actions.float()

    def sample(self, params, mask, deterministic: bool):
        p = torch.sigmoid(params)
        actions = ((params > 0) if deterministic else (torch.rand_like(p) < p)).long()
        return actions, self.evaluate(params, actions, mask)[0]

    def evaluate(self, params, actions, mask):
        # log sigmoid(x) for a 1, log sigmoid(-x) for a 0
        log_prob = nn.functional.logsigmoid(params * (2 * actions - 1)).sum(-1)
        entropy = (nn.functional.softplus(params) - torch.sigmoid(params) * params).sum(-1)
        return log_prob, entropy


class Gaussian(nn.Module):
    """Box: a diagonal Gaussian around the head's means with one learned log-std vector; samples are
    unclipped (the environment's bounds apply in spaces.env_actions)."""

    def __init__(self, n: int):
        super().__init__()
        self.n_params = self.n_features = n
        self.log_std = nn.Parameter(torch.zeros(n))

    def features(self, actions: torch.Tensor) -> torch.Tensor:
        return actions.float()

    def sample(self, params, mask, deterministic: bool):
        actions = params if deterministic else params + self.log_std.exp() * torch.randn_like(params)
        return actions, self.evaluate(params, actions, mask)[0]

    def evaluate(self, params, actions, mask):
        log_std = self.log_std.expand_as(params)
        z = (actions - params) * torch.exp(-log_std)
        log_prob = (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        entropy = (log_std + 0.5 * (1 + math.log(2 * math.pi))).sum(-1)
        return log_prob, entropy


def make_distribution(space: gym.Space) -> nn.Module:
    action_format(space)  # unsupported spaces fail here with one line
    if isinstance(space, gym.spaces.Discrete):
        return Categorical([int(space.n)])
    if isinstance(space, gym.spaces.MultiDiscrete):
        return Categorical([int(n) for n in np.asarray(space.nvec).ravel()])
    if isinstance(space, gym.spaces.MultiBinary):
        return Bernoulli(int(np.prod(space.shape)))
    return Gaussian(int(space.shape[0]))
