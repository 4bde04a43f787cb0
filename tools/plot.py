"""Learning curves from TensorBoard summaries: mean and min-max band over runs against env steps.

    python tools/plot.py --runs summaries/cartpole_masked_seed* \\
        --reference results/reference/cartpole_masked.csv --title "Masked CartPole" \\
        --out results/cartpole_masked.png

Each run folder holds one run's event files (train.py writes summaries/<run-id>/<time>/).
Repeat `--runs` (with one `--label` each) to draw several groups on one figure.
The curve is `episode/reward_mean_last100`: the mean return of the last 100
episodes, the reference baseline's definition of its reward_mean, so both sets
of curves can be read at equal environment steps. The reference CSV holds the
baseline's published 10-run curves (update, env_steps, mean, min, max).
`--tag eval/reward_mean` draws the held-out evaluations instead, at the updates
that made one.
"""
from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)  # the imports below take seconds

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # headless: write files, never open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plumbing.errors import ConfigError  # noqa: E402
from stats import TAG, read_scalars  # noqa: E402

FIGURES = (".png", ".pdf", ".svg")


def read_run(folder: Path, tag: str = TAG) -> tuple[np.ndarray, np.ndarray]:
    """(env steps, reward) per update of one run that wrote the tag."""
    by_update = read_scalars(folder, {tag: "reward", "time/env_steps": "steps"})
    rows = sorted((u, v["steps"], v["reward"]) for u, v in by_update.items() if {"steps", "reward"} <= v.keys())
    if not rows:
        raise ConfigError(f"{folder}: no '{tag}' summaries found")
    _, steps, rewards = map(np.array, zip(*rows))
    return steps, rewards


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, action="append",
                        help="one summaries folder per run (seed); repeat --runs for another group of runs")
    parser.add_argument("--label", action="append", help="one per --runs group, in order")
    parser.add_argument("--reference", help="the reference baseline's curve (CSV)")
    parser.add_argument("--tag", default=TAG, help=f"the summary drawn (default {TAG}; eval/reward_mean: "
                        "the held-out evaluations)")
    parser.add_argument("--title", default="")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.label and len(args.label) != len(args.runs):
        parser.error(f"{len(args.label)} --label for {len(args.runs)} --runs groups")
    if args.reference and args.tag != TAG:
        parser.error(f"--reference holds the baseline's {TAG}, not {args.tag}")

    def start():
        life.check_out("--out", [Path(args.out)], FIGURES)
        groups = [[read_run(Path(folder), args.tag) for folder in folders] for folders in args.runs]
        return groups, args.reference and life.read_reference(args.reference)
    return script.life(start, lambda started: draw(args, *started))


def draw(args, groups: list[list[tuple[np.ndarray, np.ndarray]]], ref: list[dict] | None) -> int:
    figure, axes = plt.subplots(figsize=(7, 4))
    colors = ["tab:blue", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:gray"]
    for i, runs in enumerate(groups):
        n = min(len(steps) for steps, _ in runs)  # updates every run of the group reached
        steps = runs[0][0][:n]
        rewards = np.stack([r[:n] for _, r in runs])  # (runs, updates)
        label = args.label[i] if args.label else "this repository"
        color = colors[i % len(colors)]
        axes.plot(steps, rewards.mean(0), color=color, label=f"{label} ({len(runs)} run{'s' * (len(runs) > 1)})")
        if len(runs) > 1:
            axes.fill_between(steps, rewards.min(0), rewards.max(0), color=color, alpha=0.25)
    if ref:
        x = np.array([r["env_steps"] for r in ref])
        axes.plot(x, [r["reward_mean_over_runs"] for r in ref], color="tab:orange",
                  label=f"reference baseline ({ref[0]['runs']:.0f} runs)")
        axes.fill_between(x, [r["reward_min_over_runs"] for r in ref],
                          [r["reward_max_over_runs"] for r in ref], color="tab:orange", alpha=0.25)
    axes.set_xlabel("environment steps")
    axes.set_ylabel("mean return, last 100 episodes" if args.tag == TAG else args.tag)
    axes.set_title(args.title)
    axes.legend(loc="lower right")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, dpi=120, format=Path(args.out).suffix[1:].lower())
    life.write_out({Path(args.out): image.getvalue()})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    script.run(main)
