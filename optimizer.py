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
and 0.999, eps 1e-8, weight decay 0.01), in public tensor operations only;
tests/test_optimizer.py checks that both give the same parameters.

It runs on one flat tensor per group, not one parameter at a time: the group's
parameters become views into one flat tensor (as are their two moments), the
gradients are gathered with one torch.cat, and the update is seven operations
whatever the number of parameters, instead of seven per parameter. Only for a
group of at most FLAT_MAX_VALUES values, where it was measured faster (results/
speed/optimizer_flat.md, one thread): the PoC model (12 parameters, 14,179
values) 89 against 356 us a step, masked CartPole's (59,651 values) 159 against
434 us; but MiniGrid's (4.2M values) 33.7 against 11.1 ms, where gathering the
gradients costs more than the dispatches it saves. The arithmetic is
elementwise and the same, so the steps are the same to the bit. A larger group,
one whose parameters differ in device or dtype, a group on a GPU, or a step where some
parameter has no gradient, is updated one parameter at a time. On a GPU the dispatches
that flattening saves are cheap, and views into our flat tensor take a GRU's or LSTM's
weights out of cuDNN's own flat buffer, which it then compacts again at every call
(torch warned so in the masked-Pendulum configs' tests on an H200, results/gpu/README.md).
The gradients of a flat group are views of one flat tensor too: zero_grad()
zeroes it and points each parameter's .grad at its view, and backward() adds
into those views in place, so step() reads the flat gradient as it is (no
torch.cat), and clip_grad_norm() scales it by the total norm with one norm
and one multiplication, where torch.nn.utils.clip_grad_norm_ takes a norm per
parameter, a stack and its grouping of the tensors: the clipping went from
266 to 67 us a minibatch step (PoC) and 313 to 79 us (masked CartPole), the
step 6-8% faster, 5.9% and 3.4% of the whole minibatch step (results/speed/
update_step.md, one thread, idle; backward() adding into the views cost about
what handing over a new gradient did). As with
torch.optim's zero_grad(set_to_none=False), a parameter
of a flat group that the loss does not reach gets a zero gradient and is
still decayed; a .grad replaced from outside (None, or another tensor) makes
that step take the path without the flat gradient.
Parameter groups work as in torch.optim: pass a list of dicts, each with its
"params" and any of lr, betas, eps, weight_decay.
"""
from __future__ import annotations

import math

import torch

DEFAULTS = {"lr": 3e-4, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
FLAT_MAX_VALUES = 100_000  # a group flattened at most this large: measured faster at 14k and 60k values, slower at 4.2M


class AdamW:
    def __init__(self, params, lr: float = DEFAULTS["lr"], betas: tuple[float, float] = DEFAULTS["betas"],
                 eps: float = DEFAULTS["eps"], weight_decay: float = DEFAULTS["weight_decay"], flat: bool = True):
        """flat: update each group as one flat tensor (the class docstring); False: one parameter at a time."""
        groups = list(params)
        if not groups or not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        self.param_groups = [{**defaults, **group, "params": [p for p in group["params"] if p.requires_grad]}
                             for group in groups]
        self.steps = 0
        # per group: (parameters, first moments, second moments, gradients) as flat tensors, or None (the docstring)
        self._flat = [self._flatten(group["params"]) if flat else None for group in self.param_groups]
        # per flat group: its parameters' gradients as views of its flat gradient (zero_grad() sets them)
        self._grad_views = [None if f is None else _views(f[3], group["params"])
                            for group, f in zip(self.param_groups, self._flat)]
        # per parameter: the first and second moments (views into the flat ones where a group has them)
        self.exp_avg, self.exp_avg_sq = [], []
        for group, flat in zip(self.param_groups, self._flat):
            if flat is None:
                self.exp_avg += [torch.zeros_like(p) for p in group["params"]]
                self.exp_avg_sq += [torch.zeros_like(p) for p in group["params"]]
            else:
                self.exp_avg += _views(flat[1], group["params"])
                self.exp_avg_sq += _views(flat[2], group["params"])

    @staticmethod
    def _flatten(params: list[torch.Tensor]) -> tuple[torch.Tensor, ...] | None:
        """Moves the parameters' values into one flat tensor and makes each parameter a view of it;
        -> it, its two moments and its gradient, zeros, of the same length."""
        if (not params or len({(p.device, p.dtype) for p in params}) > 1 or params[0].device.type != "cpu"
                or sum(p.numel() for p in params) > FLAT_MAX_VALUES):
            return None
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in params])
        for p, view in zip(params, _views(flat, params)):
            p.data = view
        return flat, torch.zeros_like(flat), torch.zeros_like(flat), torch.zeros_like(flat)

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
        """No gradient (None), or for a flat group zeros in its flat gradient, which backward() adds into."""
        for group, flat, views in zip(self.param_groups, self._flat, self._grad_views):
            if flat is None:
                for p in group["params"]:
                    p.grad = None
                continue
            flat[3].zero_()
            for p, view in zip(group["params"], views):
                p.grad = view

    def _flat_grad(self, index: int) -> torch.Tensor | None:
        """Group `index`'s flat gradient when each of its parameters' .grad is still its view of it, else None."""
        views = self._grad_views[index]
        if views is None or any(p.grad is not view for p, view in zip(self.param_groups[index]["params"], views)):
            return None
        return self._flat[index][3]

    @torch.no_grad()
    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """Scales every gradient by min(1, max_norm / (total norm + 1e-6)), as torch.nn.utils.clip_grad_norm_
        does; -> the total norm before it. On the flat gradients alone when every group has one (the docstring)."""
        flats = [self._flat_grad(i) for i in range(len(self.param_groups))]
        if any(g is None for g in flats):
            return torch.nn.utils.clip_grad_norm_(self._params(), max_norm, foreach=True)
        total = torch.linalg.vector_norm(flats[0]) if len(flats) == 1 else torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g) for g in flats]))
        # the scale as a Python number: flat groups live on the CPU, where reading it waits for nothing, and
        # three operations on a 0-dim tensor cost more than the multiplication itself; scaling by 1 is skipped
        scale = max_norm / (total.item() + 1e-6)
        if scale < 1.0:
            for g in flats:
                g.mul_(scale)
        return total

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        moments = iter(zip(self.exp_avg, self.exp_avg_sq))
        for index, (group, flat) in enumerate(zip(self.param_groups, self._flat)):
            grads = [p.grad for p in group["params"]]
            if flat is not None and all(g is not None for g in grads):
                for _ in grads:
                    next(moments)
                flat_grad = self._flat_grad(index)
                if flat_grad is None:  # a .grad set from outside: gathered into one tensor
                    flat_grad = torch.cat([g.reshape(-1) for g in grads])
                self._update(group, flat[0], flat[1], flat[2], flat_grad)
                continue
            for p, g in zip(group["params"], grads):
                m, v = next(moments)
                if g is not None:
                    self._update(group, p, m, v, g)

    def _update(self, group: dict, p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        bias1, bias2 = 1 - beta1 ** self.steps, 1 - beta2 ** self.steps
        p.mul_(1 - lr * group["weight_decay"])  # decoupled weight decay
        m.lerp_(g, 1 - beta1)  # m = beta1 m + (1 - beta1) g
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)  # v = beta2 v + (1 - beta2) g^2
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


def _views(flat: torch.Tensor, params: list[torch.Tensor]) -> list[torch.Tensor]:
    """Views of `flat`, one per parameter, in order, each of its parameter's shape."""
    views, start = [], 0
    for p in params:
        views.append(flat[start:start + p.numel()].view_as(p))  # (n,) slice -> the parameter's shape
        start += p.numel()
    return views
