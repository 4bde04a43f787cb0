"""The PPO loss against hand calculations and plain loops: padding reaches no loss term or statistic;
the masked mean and normalisation at their edges (one real step, a spread below eps); every term
with the defaults, the value clip both ways, the clip fraction at its boundary; the non-finite check
and its message; the update's averaged metrics."""
import math
from dataclasses import replace

import pytest
import torch

from buffer import Minibatch
from config import Config, NormalizationConfig
from losses import (Losses, NonFiniteError, StepStats, masked_normalize, mean_metrics, mean_weights, ppo_loss,
                    require_finite)
from model import EvaluateOutput


def loss_config(value_coefficient: float = 0.5, value_clip_range: float | None = None,
                normalize_advantages: bool = True, activation_penalty: float = 0.0) -> Config:
    """The config keys ppo_loss reads; value_clip_range None: the value loss unclipped."""
    return replace(Config(), value_loss_coefficient=value_coefficient, value_clip=value_clip_range is not None,
                   value_clip_range=value_clip_range, activation_penalty=activation_penalty,
                   normalization=NormalizationConfig(advantages=normalize_advantages))


def test_masked_mean_and_normalize_ignore_padding():
    x = torch.tensor([[1.0, 2.0, 3.0, 1000.0], [4.0, 5.0, -7e6, 9e9]])
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    assert (x * mean_weights(mask)).sum().item() == 3.0  # the masked mean
    normalized = masked_normalize(x, mean_weights(mask))
    real = normalized[mask]
    assert abs(real.mean().item()) < 1e-6
    assert abs(real.var(unbiased=False).sqrt().item() - 1.0) < 1e-5
    expected = (torch.tensor([1.0, 2, 3, 4, 5]) - 3) / torch.tensor([1.0, 2, 3, 4, 5]).var(unbiased=False).sqrt()
    torch.testing.assert_close(real, expected)


def test_mean_weights_of_a_single_real_step_and_of_padding_only():
    """One real step is its own mean (weight 1); a minibatch of padding only gets zero weights, not NaN."""
    one = torch.tensor([[False, True, False], [False, False, False]])
    assert mean_weights(one).tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    assert mean_weights(torch.zeros(2, 3, dtype=torch.bool)).tolist() == [[0.0] * 3] * 2


def test_masked_normalize_keeps_the_sign_of_advantages_that_spread_less_than_eps():
    """Real steps +-1e-9: mean 0 and std 1e-9, so each becomes +-1e-9 / (1e-9 + 1e-8) = +-1/11:
    damped by eps, never blown up or turned round."""
    x = torch.tensor([[1e-9, -1e-9, 5.0]])
    mask = torch.tensor([[True, True, False]])
    normalized = masked_normalize(x, mean_weights(mask))
    torch.testing.assert_close(normalized[mask], torch.tensor([1 / 11, -1 / 11]))


def _batch(seed: int, poison: float | None):
    g = torch.Generator().manual_seed(seed)
    n, L = 6, 5
    mask = torch.ones(n, L, dtype=torch.bool)
    mask[0, 3:] = mask[2, 1:] = mask[5, 4:] = False

    def r(*shape):
        return torch.randn(*shape, generator=g)
    fields = dict(log_probs=r(n, L) - 1, values=r(n, L), advantages=r(n, L), returns=r(n, L))
    out = dict(log_probs=r(n, L) - 1, entropy=r(n, L).abs(), values=r(n, L), core_outputs=r(n, L, 3))
    if poison is not None:  # anything at all in the padded slots
        for t in (*fields.values(), *out.values()):
            t[~mask] = poison
    mb = Minibatch(obs=torch.zeros(int(mask.sum()), 1), states=torch.zeros(n, 1),
                   actions=torch.zeros(n, L, 1, dtype=torch.long), mask=mask, **fields)
    return EvaluateOutput(**out), mb


def test_ppo_loss_terms_and_statistics_do_not_see_padding():
    clean = ppo_loss(*_batch(0, None), clip_range=0.2, beta=0.01, config=loss_config(value_clip_range=0.2))
    for poison in (1e3, -1e3, 7.0):
        dirty = ppo_loss(*_batch(0, poison), clip_range=0.2, beta=0.01, config=loss_config(value_clip_range=0.2))
        for name in clean._fields:
            torch.testing.assert_close(getattr(dirty, name), getattr(clean, name), msg=name)


def test_ppo_loss_gradient_is_zero_on_padding():
    out, mb = _batch(1, None)
    log_probs = out.log_probs.clone().requires_grad_(True)
    values = out.values.clone().requires_grad_(True)
    losses = ppo_loss(out._replace(log_probs=log_probs, values=values), mb, clip_range=0.2, beta=0.01,
                      config=loss_config(value_clip_range=0.2))
    losses.total.backward()
    assert (log_probs.grad[~mb.mask] == 0).all() and (values.grad[~mb.mask] == 0).all()
    assert log_probs.grad[mb.mask].abs().sum() > 0


def test_ppo_loss_terms_and_statistics_equal_a_plain_loop_over_the_real_steps():
    """Defaults: advantages normalised over the real steps, the value error unclipped."""
    out, mb = _batch(3, None)
    losses = ppo_loss(out, mb, clip_range=0.2, beta=0.05, config=loss_config())
    real = [(i, j) for i in range(mb.mask.shape[0]) for j in range(mb.mask.shape[1]) if mb.mask[i, j]]
    advantages = [mb.advantages[i, j].item() for i, j in real]
    mean = sum(advantages) / len(advantages)
    std = (sum((a - mean) ** 2 for a in advantages) / len(advantages)) ** 0.5
    pg = v = entropy = kl = clipped = 0.0
    for (i, j), a in zip(real, advantages):
        a = (a - mean) / (std + 1e-8)
        log_ratio = out.log_probs[i, j].item() - mb.log_probs[i, j].item()
        ratio = math.exp(log_ratio)
        pg -= min(ratio * a, min(max(ratio, 0.8), 1.2) * a)
        v += (out.values[i, j].item() - mb.returns[i, j].item()) ** 2
        entropy += out.entropy[i, j].item()
        kl += ratio - 1 - log_ratio
        clipped += abs(ratio - 1) > 0.2
    n = len(real)
    assert 0 < clipped < n  # some steps inside the clip range, some outside
    expected = dict(pg_loss=pg / n, v_loss=v / n, entropy=entropy / n, approx_kl=kl / n, clip_frac=clipped / n)
    expected["total"] = expected["pg_loss"] + 0.5 * expected["v_loss"] - 0.05 * expected["entropy"]
    for name, value in expected.items():
        torch.testing.assert_close(getattr(losses, name), torch.tensor(value), msg=name)


def test_clipped_value_loss_clips_the_value_move_both_ways():
    """Old values 0.5, clip range 0.2: moves of +1 and -1 are clipped to +0.2 and -0.2, where
    the clipped error is the larger one; a move inside the range and a clipped move with the
    smaller error keep the plain error. The padded last slot counts nowhere."""
    mask = torch.tensor([[True, True, True, True, False]])
    old = torch.full((1, 5), 0.5)
    new = torch.tensor([[1.5, -0.5, 0.6, 1.5, 9.0]])
    returns = torch.tensor([[2.5, -1.5, 1.0, 0.5, -9.0]])
    zeros = torch.zeros(1, 5)
    mb = Minibatch(obs=torch.zeros(int(mask.sum()), 1), states=torch.zeros(1, 1),
                   actions=torch.zeros(1, 5, 1, dtype=torch.long),
                   log_probs=zeros, values=old, advantages=zeros, returns=returns, mask=mask)
    out = EvaluateOutput(log_probs=zeros, entropy=zeros, values=new, core_outputs=zeros[..., None])
    losses = ppo_loss(out, mb, clip_range=0.2, beta=0.0, config=loss_config(value_clip_range=0.2))
    # by hand: max((new - ret)^2, (old + clip(new - old) - ret)^2)
    # +1 move, return above:  max(1, (0.7 - 2.5)^2 = 3.24); -1 move, return below: max(1, (0.3 + 1.5)^2 = 3.24)
    # +0.1 move (unclipped): 0.16; +1 move, return at the old value: max(1, (0.7 - 0.5)^2 = 0.04)
    torch.testing.assert_close(losses.v_loss, torch.tensor((3.24 + 3.24 + 0.16 + 1.0) / 4))


def test_clip_fraction_counts_ratios_strictly_outside_the_clip_range():
    """Ratios exactly 1.25 and 0.75 (exact in float32) lie on the boundary of clip range 0.25: the
    clamp leaves them as they are, so of the ratios 1.25, 0.75, 1.5 and 1 only 1.5 counts as clipped."""
    ratios = torch.tensor([[1.25, 0.75, 1.5, 1.0]])
    mb = Minibatch(obs=torch.zeros(4, 1), states=torch.zeros(1, 1), actions=torch.zeros(1, 4, 1, dtype=torch.long),
                   log_probs=torch.zeros(1, 4), values=torch.zeros(1, 4), advantages=torch.ones(1, 4),
                   returns=torch.zeros(1, 4), mask=torch.ones(1, 4, dtype=torch.bool))
    out = EvaluateOutput(log_probs=ratios.log(), entropy=torch.zeros(1, 4), values=torch.zeros(1, 4),
                         core_outputs=torch.zeros(1, 4, 1))
    assert torch.equal((out.log_probs - mb.log_probs).exp(), ratios)  # the loss sees these ratios exactly
    assert ppo_loss(out, mb, clip_range=0.25, beta=0.0, config=loss_config()).clip_frac.item() == 0.25


def _losses(total: float, **terms: float) -> Losses:
    """Losses with the given total, each other term 1.5 unless given."""
    return Losses(**{name: torch.tensor(terms.get(name, 1.5)) for name in Losses._fields[1:]}, total=torch.tensor(total))


@pytest.mark.parametrize("total,grad_norm,stops", [
    (1.0, 2.0, False),
    (-3e38, 3e38, False),  # huge but finite (float32's maximum is 3.4e38): the update goes on
    (math.nan, 2.0, True),
    (-math.inf, 2.0, True),
    (1.0, math.inf, True),
    (1.0, math.nan, True),
])
def test_require_finite_stops_exactly_on_a_non_finite_loss_or_gradient_norm(total, grad_norm, stops):
    if stops:
        with pytest.raises(NonFiniteError):
            require_finite(_losses(total), torch.tensor(grad_norm), 3)
    else:
        require_finite(_losses(total), torch.tensor(grad_norm), 3)  # a raise here fails the test


def test_non_finite_error_names_the_update_every_loss_term_and_the_gradient_norm():
    with pytest.raises(NonFiniteError) as raised:
        require_finite(_losses(math.nan, pg_loss=0.25, entropy=2.0), torch.tensor(3.0), 7)
    message = str(raised.value)
    assert message.startswith("non-finite loss or gradient in update 7 (total nan, pg_loss 0.25, ")
    assert message.endswith(", grad_norm 3); the model was not saved") and "entropy 2, " in message
    assert all(f"{name} " in message for name in Losses._fields)


def test_mean_metrics_average_each_term_and_the_gradient_norm_over_the_steps():
    names = Losses._fields
    steps = [StepStats(Losses(*(torch.tensor(float(i)) for i in range(len(names)))), torch.tensor(7.0)),
             StepStats(Losses(*(torch.tensor(float(i + 2)) for i in range(len(names)))), torch.tensor(9.0))]
    assert mean_metrics(steps) == {**{name: i + 1.0 for i, name in enumerate(names)},
                                   "grad_norm": 8.0, "early_stop": 0.0, "minibatch_steps": 2.0}


def test_mean_metrics_report_the_steps_taken_when_target_kl_stops_the_update():
    """The trainer stops before the first step's optimiser step: the metrics are those of the
    minibatch that was evaluated, but no step was taken."""
    stopped = mean_metrics([], rejected=_losses(1.0))
    assert stopped["early_stop"] == 1.0 and stopped["minibatch_steps"] == 0.0 and stopped["total"] == 1.0
