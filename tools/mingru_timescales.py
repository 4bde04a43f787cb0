"""Why minGRU does not learn masked CartPole (docs/results.md, "Memory models side by side"): an experiment, not a
switch. With torch's default initialisation every minGRU unit starts with its gate z near 0.5, one time constant
for all; a velocity is the difference of two. Here the z gates' biases are set before training so that the units'
time constants 1/z start spread log-uniformly over [1, T_MAX] steps ("spread"), against the shipped core
("default"); nothing else changes: masked CartPole's config, the LSTM's hyperparameters, the same seeds.

    python tools/mingru_timescales.py --seeds 0 1 2 3 4 --out results/cores/mingru_timescales

Writes PREFIX.json (every update's reward_mean_last100 per variant and seed) and PREFIX.md.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import threads  # noqa: E402

threads.share_cores()  # before torch loads, as train.py

import torch  # noqa: E402

from config import load_config  # noqa: E402
from cores import MinGRU  # noqa: E402
from trainer import Trainer  # noqa: E402

T_MAX = 100.0
THRESHOLD = 190.0


def spread_time_constants(model: torch.nn.Module) -> None:
    """z_j = sigmoid(b_j) = 1 / T_j, T_j log-uniform on [1, T_MAX]: b_j = -log(T_j - 1), the z weights as they are."""
    for core in (m for m in model.modules() if isinstance(m, MinGRU)):
        hidden = core.linear.out_features // 2  # (2H,): z's biases, then h~'s
        steps = torch.exp(torch.empty(hidden).uniform_(0.0, math.log(T_MAX))).clamp(min=1.0 + 1e-3)
        with torch.no_grad():
            core.linear.bias[:hidden] = -torch.log(steps - 1.0)


def train(variant: str, seed: int, folder: Path) -> list[float]:
    config = load_config(ROOT / "configs/cartpole_masked.yaml",
                         ["recurrence.layer_type=mingru", f"seed={seed}", "checkpoint_interval=0"])
    trainer = Trainer(config, run_id=f"{variant}_seed{seed}", summaries_dir=folder, models_dir=folder, verbose=False)
    if variant == "spread":
        torch.manual_seed(seed)
        spread_time_constants(trainer.model)
    rewards = []
    trainer.run(on_update=lambda _, __, scalars: rewards.append(scalars["episode/reward_mean_last100"]))
    return rewards


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", required=True, metavar="PREFIX")
    args = parser.parse_args()
    curves = {"default": {}, "spread": {}}
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            for variant in curves:
                curves[variant][seed] = train(variant, seed, Path(folder))
                print(f"{variant} seed {seed}: final {curves[variant][seed][-1]:.1f}", flush=True)
    lines = ["# minGRU on masked CartPole: its gates' time constants at the start", "",
             f"`python tools/mingru_timescales.py --seeds {' '.join(map(str, args.seeds))} --out {args.out}`; "
             f"configs/cartpole_masked.yaml with recurrence.layer_type=mingru, nothing else changed. default: the "
             f"shipped core (z near 0.5 in every unit); spread: z's biases set so that 1/z starts log-uniform over "
             f"[1, {T_MAX:g}] steps. reward_mean_last100 at the last update, and the first update at {THRESHOLD:g}.", "",
             "| seed | default final | default first at 190 | spread final | spread first at 190 |",
             "|---:|---:|---:|---:|---:|"]
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
