"""The masked PPO loss. Padding enters no term and no statistic."""
from __future__ import annotations

from typing import NamedTuple

import torch

from buffer import Minibatch
from model import EvaluateOutput


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1)


def masked_normalize(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / std over the real steps only."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) / (var.sqrt() + eps)


class Losses(NamedTuple):
    total: torch.Tensor  # what is minimised
    pg_loss: torch.Tensor
    v_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    clip_frac: torch.Tensor


def ppo_loss(out: EvaluateOutput, mb: Minibatch, clip_range: float, beta: float,
             value_coefficient: float) -> Losses:
    mask = mb.mask
    advantages = masked_normalize(mb.advantages, mask)
    log_ratio = out.log_probs - mb.log_probs
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * advantages)
    pg_loss = -masked_mean(surrogate, mask)

    # Clipped value loss (as the reference): the new value may not move further than
    # clip_range from the rollout's value without paying the unclipped error.
    values_clipped = mb.values + (out.values - mb.values).clamp(-clip_range, clip_range)
    v_error = torch.max((out.values - mb.returns) ** 2, (values_clipped - mb.returns) ** 2)
    v_loss = masked_mean(v_error, mask)

    entropy = masked_mean(out.entropy, mask)
    total = pg_loss + value_coefficient * v_loss - beta * entropy
    with torch.no_grad():
        approx_kl = masked_mean(ratio - 1 - log_ratio, mask)  # the k3 estimator of KL(old || new)
        clip_frac = masked_mean(((ratio - 1).abs() > clip_range).float(), mask)
    return Losses(total, pg_loss, v_loss, entropy, approx_kl, clip_frac)
