"""The masked PPO loss: clipped surrogate, value loss, entropy bonus, the cores' activation penalty, the observation-
reconstruction loss, their weighted sum, and approx_kl and clip_frac. Padding enters no term and no statistic."""
from typing import NamedTuple

import torch

from buffer import Minibatch
from config import Config
from model import EvaluateOutput
from plumbing.errors import NonFiniteError, StrayParameterError


def mean_weights(mask: torch.Tensor) -> torch.Tensor:
    """mask / (number of real steps): (x * weights).sum() is the mean over the real steps."""
    return mask / mask.sum().clamp(min=1)


def masked_normalize(x: torch.Tensor, weights: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / std over the real steps only; weights from mean_weights()."""
    mean = (x * weights).sum()
    std = ((x - mean).square() * weights).sum().sqrt()
    return (x - mean) / (std + eps)


class Losses(NamedTuple):
    total: torch.Tensor  # what is minimised
    pg_loss: torch.Tensor
    v_loss: torch.Tensor
    entropy: torch.Tensor
    activation: torch.Tensor  # the mean square of the cores' outputs
    reconstruction: torch.Tensor  # the observation-reconstruction loss; 0 when off
    approx_kl: torch.Tensor
    clip_frac: torch.Tensor


def ppo_loss(out: EvaluateOutput, mb: Minibatch, *, config: Config, clip_range: float, beta: float) -> Losses:
    """Each term a mean over the real steps only, and their weighted sum. clip_range and beta: this update's values
    of their schedules; the other weights: config's."""
    w = mean_weights(mb.mask)  # (n, L), 0 on padding
    advantages = masked_normalize(mb.advantages, w) if config.normalization.advantages else mb.advantages
    log_ratio = out.log_probs - mb.log_probs
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * advantages)
    pg_loss = -(surrogate * w).sum()

    v_error = (out.values - mb.returns).square()
    if config.value_clip:
        # the new value may not move further than the clip range from the rollout's without paying for it
        value_clip = config.value_clip_range or clip_range
        values_clipped = mb.values + (out.values - mb.values).clamp(-value_clip, value_clip)
        v_error = torch.max(v_error, (values_clipped - mb.returns).square())
    v_loss = (v_error * w).sum()

    entropy = (out.entropy * w).sum()
    # activation regularisation (Merity et al. 2017, "Revisiting Activation Regularization for Language RNNs")
    activation = (out.core_outputs.float().square().mean(-1) * w).sum()
    # the decoder's loss of each real step, from the model's own head (model.AUXILIARY_HEADS), averaged
    reconstruction = out.auxiliary["reconstruction"].mean() if "reconstruction" in out.auxiliary else w.new_zeros(())
    total = (pg_loss + config.value_loss_coefficient * v_loss - beta * entropy + config.activation_penalty * activation
             + config.reconstruction_coefficient * reconstruction)
    with torch.no_grad():
        approx_kl = ((ratio - 1 - log_ratio) * w).sum()  # the k3 estimator of KL(old || new)
        clip_frac = (((ratio - 1).abs() > clip_range) * w).sum()
    return Losses(total=total, pg_loss=pg_loss, v_loss=v_loss, entropy=entropy, activation=activation,
                  reconstruction=reconstruction, approx_kl=approx_kl, clip_frac=clip_frac)


def reached_parameters(total: torch.Tensor) -> list[torch.Tensor]:
    """The leaves of total's autograd graph that take a gradient: every parameter the loss depends on."""
    leaves, seen, todo = [], set(), [total.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):  # an AccumulateGrad: a leaf tensor
            leaves.append(node.variable)
        todo.extend(child for child, _ in node.next_functions)
    return leaves


def require_model_parameters(total: torch.Tensor, model: torch.nn.Module) -> None:
    """Refuses a loss that reaches a tensor outside the model, which no optimiser step or checkpoint would take."""
    own = {id(p) for p in model.parameters()}
    for leaf in reached_parameters(total):
        if id(leaf) not in own:
            raise StrayParameterError(
                f"the loss reaches a tensor of shape {tuple(leaf.shape)} that is not a parameter of the model, so no "
                "update would train it and no checkpoint hold it: build its module as part of the model (a loss "
                "term's head: model.AUXILIARY_HEADS, docs/extending.md)")


def require_finite(losses: Losses, grad_norm: torch.Tensor, update: int) -> None:
    if not torch.isfinite(losses.total + grad_norm):
        terms = ", ".join(f"{k} {v.item():.4g}" for k, v in losses._asdict().items())
        raise NonFiniteError(f"non-finite loss or gradient in update {update} "
                             f"({terms}, grad_norm {grad_norm.item():.4g}); the model was not saved")


class StepStats(NamedTuple):
    losses: Losses
    grad_norm: torch.Tensor


def mean_metrics(steps: list[StepStats], rejected: Losses | None = None) -> dict:
    """The update's metrics: each loss term and the gradient norm averaged over its minibatch steps (read
    back from the device in one go). rejected: the step target_kl stopped at, reported if no step was taken."""
    taken = len(steps)
    if not steps:
        steps = [StepStats(rejected, torch.tensor(0.0))]
    rows = torch.stack([torch.stack([*(v.detach() for v in s.losses), s.grad_norm]) for s in steps])
    means = rows.mean(0).tolist()
    return {**dict(zip([*Losses._fields, "grad_norm"], means)), "early_stop": float(rejected is not None),
            "minibatch_steps": float(taken)}
