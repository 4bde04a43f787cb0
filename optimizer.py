"""AdamW (Loshchilov and Hutter, 2019), the reference baseline's optimizer.

Written here rather than taken from torch.optim because constructing any
torch.optim optimizer imports torch._dynamo, which costs about two seconds of
start-up on a 2-core CPU: a quarter of a whole proof-of-concept training run.
The update is the textbook one with torch.optim.AdamW's defaults (betas 0.9 and
0.999, eps 1e-8, weight decay 0.01); tests/test_optimizer.py checks that both
produce the same parameters.
"""
from __future__ import annotations

import math

import torch


class AdamW:
    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]  # first moment
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]  # second moment

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        self.steps += 1
        bias1 = 1 - beta1 ** self.steps
        bias2 = 1 - beta2 ** self.steps
        params = [p for p in self.params if p.grad is not None]
        grads = [p.grad for p in params]
        m = [a for a, p in zip(self.exp_avg, self.params) if p.grad is not None]
        v = [a for a, p in zip(self.exp_avg_sq, self.params) if p.grad is not None]
        # One call per operation over all parameters (torch's foreach kernels).
        torch._foreach_mul_(params, 1 - self.lr * self.weight_decay)  # decoupled weight decay
        torch._foreach_lerp_(m, grads, 1 - beta1)  # m = beta1 m + (1 - beta1) g
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, 1 - beta2)  # v = beta2 v + (1 - beta2) g^2
        denominator = torch._foreach_sqrt(v)
        torch._foreach_div_(denominator, math.sqrt(bias2))
        torch._foreach_add_(denominator, self.eps)
        torch._foreach_addcdiv_(params, m, denominator, -self.lr / bias1)  # p -= lr m_hat / (sqrt(v_hat) + eps)

    def state_dict(self) -> dict:
        return {"lr": self.lr, "betas": self.betas, "eps": self.eps, "weight_decay": self.weight_decay,
                "steps": self.steps, "exp_avg": [t.clone() for t in self.exp_avg],
                "exp_avg_sq": [t.clone() for t in self.exp_avg_sq]}

    def load_state_dict(self, state: dict) -> None:
        if len(state["exp_avg"]) != len(self.params):
            raise ValueError("optimizer state does not match the model's parameters")
        self.lr, self.betas, self.eps = state["lr"], tuple(state["betas"]), state["eps"]
        self.weight_decay, self.steps = state["weight_decay"], state["steps"]
        for mine, saved in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"]):
            mine.copy_(saved)
