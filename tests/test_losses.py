"""Padding must not reach any loss term or statistic."""
import torch

from buffer import Minibatch
from losses import masked_normalize, mean_weights, ppo_loss
from model import EvaluateOutput


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


def _batch(seed: int, poison: float | None):
    g = torch.Generator().manual_seed(seed)
    n, L = 6, 5
    mask = torch.ones(n, L, dtype=torch.bool)
    mask[0, 3:] = mask[2, 1:] = mask[5, 4:] = False

    def r(*shape):
        return torch.randn(*shape, generator=g)
    fields = dict(log_probs=r(n, L) - 1, values=r(n, L), advantages=r(n, L), returns=r(n, L))
    out = dict(log_probs=r(n, L) - 1, entropy=r(n, L).abs(), values=r(n, L))
    if poison is not None:  # anything at all in the padded slots
        for t in (*fields.values(), *out.values()):
            t[~mask] = poison
    mb = Minibatch(obs=torch.zeros(n, L, 1), states=torch.zeros(n, 1), actions=torch.zeros(n, L, 1, dtype=torch.long),
                   mask=mask, **fields)
    return EvaluateOutput(**out), mb


def test_ppo_loss_terms_and_statistics_do_not_see_padding():
    clean = ppo_loss(*_batch(0, None), clip_range=0.2, beta=0.01, value_coefficient=0.5, value_clip_range=0.2)
    for poison in (1e3, -1e3, 7.0):
        dirty = ppo_loss(*_batch(0, poison), clip_range=0.2, beta=0.01, value_coefficient=0.5,
                         value_clip_range=0.2)
        for name in clean._fields:
            torch.testing.assert_close(getattr(dirty, name), getattr(clean, name), msg=name)


def test_ppo_loss_gradient_is_zero_on_padding():
    out, mb = _batch(1, None)
    log_probs = out.log_probs.clone().requires_grad_(True)
    values = out.values.clone().requires_grad_(True)
    losses = ppo_loss(EvaluateOutput(log_probs, out.entropy, values), mb, 0.2, 0.01, 0.5, value_clip_range=0.2)
    losses.total.backward()
    assert (log_probs.grad[~mb.mask] == 0).all() and (values.grad[~mb.mask] == 0).all()
    assert log_probs.grad[mb.mask].abs().sum() > 0
