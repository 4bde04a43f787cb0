"""Why minGRU does not learn masked CartPole (docs/results.md, "Memory models side by side"): experiments, not
switches. Each variant changes one thing and keeps masked CartPole's config, the LSTM's hyperparameters and the
seeds:
- default: the shipped core. With torch's default initialisation every unit starts with its gate z near 0.5,
  one time constant for all, and a velocity is the difference of two.
- spread: the z gates' biases set before training so that the units' time constants 1/z start spread
  log-uniformly over [1, T_MAX] steps.
- skip: the layer's output is h_t + D x_t, a linear skip from its input, as the LRU's y_t has (D x_t) and as the
  minGRU paper's blocks have (a residual around each layer, sec. 4 and its appendix); the heads see x_t then.
- skip_spread: both.

    python tools/mingru_variants.py --variants default spread --seeds 0 1 2 3 4 --out results/cores/mingru_timescales
    python tools/mingru_variants.py --variants skip skip_spread --seeds 0 1 2 3 4 --out results/cores/mingru_skip

Writes PREFIX.json (every update's reward_mean_last100 per variant and seed) and PREFIX.md.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import threads  # noqa: E402

threads.share_cores()  # before torch loads, as train.py

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.utils.rnn import PackedSequence  # noqa: E402

import cores  # noqa: E402
from config import load_config  # noqa: E402
from model import CORES  # noqa: E402
from trainer import Trainer  # noqa: E402

T_MAX = 100.0
THRESHOLD = 190.0


class Variant(NamedTuple):
    skip: bool  # the layer is MinGRUSkip
    spread: bool  # spread_time_constants() before training
    description: str


VARIANTS = {
    "default": Variant(False, False, "the shipped core (z near 0.5 in every unit)"),
    "spread": Variant(False, True, f"z's biases set so that 1/z starts log-uniform over [1, {T_MAX:g}] steps"),
    "skip": Variant(True, False, "the output h_t + D x_t, D a bias-free Linear from the layer's input"),
    "skip_spread": Variant(True, True, "both"),
}


class MinGRUSkip(cores.MinGRU):
    """minGRU whose output adds a linear skip from its input: y_t = h_t + D x_t (the state stays h_t)."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size)
        self.skip = nn.Linear(input_size, hidden_size, bias=False)

    def forward(self, x, h):
        y, h = super().forward(x, h)
        if isinstance(y, PackedSequence):
            return y._replace(data=y.data + self.skip(x.data)), h
        return y + self.skip(x), h


def spread_time_constants(model: nn.Module) -> None:
    """z_j = sigmoid(b_j) = 1 / T_j, T_j log-uniform on [1, T_MAX]: b_j = -log(T_j - 1), the z weights as they are."""
    for core in (m for m in model.modules() if isinstance(m, cores.MinGRU)):
        hidden = core.linear.out_features // 2  # (2H,): z's biases, then h~'s
        steps = torch.exp(torch.empty(hidden).uniform_(0.0, math.log(T_MAX))).clamp(min=1.0 + 1e-3)
        with torch.no_grad():
            core.linear.bias[:hidden] = -torch.log(steps - 1.0)


def train(variant: str, seed: int, folder: Path) -> list[float]:
    config = load_config(ROOT / "configs/cartpole_masked.yaml",
                         ["recurrence.layer_type=mingru", f"seed={seed}", "checkpoint_interval=0"])
    shipped = CORES["mingru"]
    if VARIANTS[variant].skip:
        CORES["mingru"] = shipped._replace(layer=MinGRUSkip)
    try:
        trainer = Trainer(config, run_id=f"{variant}_seed{seed}", summaries_dir=folder, models_dir=folder,
                          verbose=False)
    finally:
        CORES["mingru"] = shipped
    if VARIANTS[variant].spread:
        torch.manual_seed(seed)
        spread_time_constants(trainer.model)
    rewards = []
    trainer.run(on_update=lambda _, __, scalars: rewards.append(scalars["episode/reward_mean_last100"]))
    return rewards


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["default", "spread"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", required=True, metavar="PREFIX")
    args = parser.parse_args()
    curves = {variant: {} for variant in args.variants}
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            for variant in curves:
                curves[variant][seed] = train(variant, seed, Path(folder))
                print(f"{variant} seed {seed}: final {curves[variant][seed][-1]:.1f}", flush=True)
    lines = ["# minGRU on masked CartPole: " + ", ".join(args.variants), "",
             f"`python tools/mingru_variants.py --variants {' '.join(args.variants)} "
             f"--seeds {' '.join(map(str, args.seeds))} --out {args.out}`; configs/cartpole_masked.yaml with "
             "recurrence.layer_type=mingru, nothing else changed. "
             + "; ".join(f"{variant}: {VARIANTS[variant].description}" for variant in args.variants)
             + f". reward_mean_last100 at the last update, and the first update at {THRESHOLD:g}.", "",
             "| seed | " + " | ".join(f"{v} final | {v} first at {THRESHOLD:g}" for v in args.variants) + " |",
             "|---:|" + "---:|---:|" * len(args.variants)]
    for seed in args.seeds:
        cells = []
        for variant in curves:
            curve = curves[variant][seed]
            first = next((i + 1 for i, r in enumerate(curve) if r >= THRESHOLD), None)
            cells += [f"{curve[-1]:.1f}", "never" if first is None else str(first)]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    Path(f"{args.out}.json").write_text(json.dumps(curves, indent=1) + "\n")
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
