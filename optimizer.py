"""AdamW (Loshchilov and Hutter, 2019), the reference baseline's optimizer.

Written here rather than taken from torch.optim because constructing any
torch.optim optimizer imports torch._dynamo, which cost 1.79 s more per run,
32% of the PoC config's whole run and 7.4% of masked CartPole's, above the 5%
we accept (results/speed/optimizer.md, alternated fresh processes on 2 cores).
A step of torch.optim's fused AdamW is faster (3.0 against 9.9 ms for the
MiniGrid model): 32 steps save about 0.22 s of a MiniGrid update's 6.8 s, so
long image runs would gain a little from it; the start-up cost decides for
the fast configs.

The update is the textbook one with torch.optim.AdamW's defaults (betas 0.9
and 0.999, eps 1e-8, weight decay 0.01), in public tensor operations only, one
parameter at a time; tests/test_optimizer.py checks that both give the same
parameters.
Parameter groups work as in torch.optim: pass a list of dicts, each with its
"params" and any of lr, betas, eps, weight_decay.
"""
from __future__ import annotations

import math

import torch

DEFAULTS = {"lr": 3e-4, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}


class AdamW:
    def __init__(self, params, lr: float = DEFAULTS["lr"], betas: tuple[float, float] = DEFAULTS["betas"],
                 eps: float = DEFAULTS["eps"], weight_decay: float = DEFAULTS["weight_decay"]):
        groups = list(params)
        if not groups or not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        self.param_groups = [{**defaults, **group, "params": [p for p in group["params"] if p.requires_grad]}
                             for group in groups]
        self.steps = 0
        # per parameter: the first and second moments
        self.exp_avg = [torch.zeros_like(p) for g in self.param_groups for p in g["params"]]
        self.exp_avg_sq = [torch.zeros_like(p) for g in self.param_groups for p in g["params"]]

    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        """Sets every group's learning rate (the schedules drive one rate)."""
        for group in self.param_groups:
            group["lr"] = value

    def _params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self) -> None:
        for p in self._params():
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        moments = iter(zip(self.exp_avg, self.exp_avg_sq))
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            bias1, bias2 = 1 - beta1 ** self.steps, 1 - beta2 ** self.steps
            for p in group["params"]:
                m, v = next(moments)
                if p.grad is None:
                    continue
                p.mul_(1 - lr * group["weight_decay"])  # decoupled weight decay
                m.lerp_(p.grad, 1 - beta1)  # m = beta1 m + (1 - beta1) g
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)  # v = beta2 v + (1 - beta2) g^2
                denominator = v.sqrt().div_(math.sqrt(bias2)).add_(eps)
                p.addcdiv_(m, denominator, value=-lr / bias1)  # p -= lr m_hat / (sqrt(v_hat) + eps)

    def state_dict(self) -> dict:
        return {"param_groups": [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups],
                "steps": self.steps, "exp_avg": [t.clone() for t in self.exp_avg],
                "exp_avg_sq": [t.clone() for t in self.exp_avg_sq]}

    def load_state_dict(self, state: dict) -> None:
        if len(state["exp_avg"]) != len(self.exp_avg) or len(state["param_groups"]) != len(self.param_groups):
            raise ValueError("optimizer state does not match the model's parameters")
        for group, saved in zip(self.param_groups, state["param_groups"]):
            group.update({**saved, "betas": tuple(saved["betas"])})
        self.steps = state["steps"]
        for mine, saved in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"]):
            mine.copy_(saved)
