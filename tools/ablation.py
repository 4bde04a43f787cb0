"""Flips each PPO switch away from its default on one config, over several seeds.

    python tools/ablation.py --config configs/cartpole_masked.yaml --seeds 0 1 2

Every variant is the config with one `--set`-style override (or a pair that
belongs together); "default" is the config as it ships. Runs go two at a time,
each with one torch thread (the fastest use of a 2-core machine for many small
runs), so wall times compare variants with each other, not with a lone run.
Writes results/ablation_<config name>.json, .md (the table) and .png (the plot).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

# name -> (overrides, what the default is)
VARIANTS: dict[str, tuple[list[str], str]] = {
    "default": ([], "the config as shipped"),
    "observation normalisation on": (["normalization.observations=true"], "off"),
    "reward scaling on": (["normalization.rewards=true"], "off"),
    "value-target normalisation on": (["normalization.value_targets=true"], "off"),
    "advantage normalisation off": (["normalization.advantages=false"], "on"),
    "value clipping off": (["value_clip=false"], "on, at the policy clip range"),
    "value clip range 1.0": (["value_clip_range=1.0"], "the policy clip range (0.2)"),
    "target KL 0.01": (["target_kl=0.01"], "none"),
    "orthogonal init off": (["initialization.orthogonal=false"], "on"),
    "separate critic core": (["recurrence.separate_critic_core=true"], "one shared core"),
    "2 recurrent layers": (["recurrence.num_layers=2"], "1"),
    "constant learning rate": (["learning_rate_schedule.shape=constant"], "polynomial decay"),
    "no entropy bonus": (["beta_schedule.initial=0", "beta_schedule.final=0"], "0.001 -> 0.0001"),
    "no grad-norm clip": (["max_grad_norm=1000"], "0.5"),
}


def run_one(job) -> dict:
    import tempfile

    import torch

    from config import load_config
    from trainer import Trainer
    config_path, name, overrides, seed = job
    config = load_config(config_path, [*overrides, f"seed={seed}", "torch_threads=1"])
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        trainer = Trainer(config, run_id=f"ablation_{seed}", summaries_dir=tmp, models_dir=tmp, verbose=False)
        history = trainer.run()
        wall = time.perf_counter() - start
    rewards = [h.reward_mean for h in history if h.reward_mean is not None]
    return {"variant": name, "seed": seed, "last5_reward": sum(rewards[-5:]) / len(rewards[-5:]),
            "curve": [[h.steps, h.reward_mean] for h in history], "wall_s": wall,
            "early_stops": sum(h.metrics.get("early_stop", 0.0) for h in history)}


def plot(rows: list[dict], names: list[str], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, (bars, curves) = plt.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [1, 1.3]})
    means, lows, highs = [], [], []
    for name in names:
        values = [r["last5_reward"] for r in rows if r["variant"] == name]
        means.append(np.mean(values))
        lows.append(np.mean(values) - min(values))
        highs.append(max(values) - np.mean(values))
    y = np.arange(len(names))[::-1]
    colors = plt.get_cmap("tab20")(np.arange(len(names)) % 20)
    for i, name in enumerate(names):
        bars.errorbar(means[i], y[i], xerr=[[lows[i]], [highs[i]]], fmt="o", capsize=3,
                      color="black" if name == "default" else colors[i])
    bars.axvline(means[0] if names[0] == "default" else np.nan, color="black", linewidth=0.5, linestyle=":")
    bars.set_yticks(y, names, fontsize=8)
    bars.set_xlabel("mean return of the last 5 updates (dot: mean of seeds; whiskers: min-max)")
    for i, name in enumerate(names):
        runs = [r["curve"] for r in rows if r["variant"] == name]
        steps = [s for s, _ in runs[0]]
        smooth = []
        for run in runs:  # a trailing 5-update mean; updates where no episode ended are skipped
            values = np.array([np.nan if v is None else v for _, v in run], dtype=float)
            smooth.append([np.nanmean(values[max(0, i - 4):i + 1]) for i in range(len(values))])
        style = ({"color": "black", "linewidth": 2.5} if name == "default"
                 else {"color": colors[i], "linewidth": 1.2, "linestyle": ("-", "--")[i % 2]})
        curves.plot(steps, np.mean(smooth, axis=0), label=name, **style)
    curves.set_xlabel("environment steps")
    curves.set_ylabel("episode return (mean of seeds, 5-update moving mean)")
    curves.legend(fontsize=7, loc="lower right")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/cartpole_masked.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "results"))
    parser.add_argument("--replot", metavar="JSON", help="only redraw the plot from a results JSON")
    args = parser.parse_args()
    if args.replot:
        report = json.loads(Path(args.replot).read_text())
        names = list(dict.fromkeys(r["variant"] for r in report["runs"]))
        seeds = sorted({r["seed"] for r in report["runs"]})
        plot(report["runs"], names, Path(args.replot).with_suffix(".png"), f"Ablation on {report['config']}, seeds {seeds}")
        return
    from tools.benchmark import machine

    jobs = [(args.config, name, VARIANTS[name][0], seed) for name in args.variants for seed in args.seeds]
    rows = []
    with mp.get_context("spawn").Pool(args.processes) as pool:
        for row in pool.imap(run_one, jobs):
            print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
            rows.append(row)

    name = Path(args.config).stem
    m = machine()
    machine_text = f"{m['cpu']}, {m['cores']} cores, torch {m['torch']} on the CPU"
    command = (f"python tools/ablation.py --config {args.config} --seeds {' '.join(map(str, args.seeds))}"
               + ("" if args.variants == list(VARIANTS) else " --variants " + " ".join(f'"{v}"' for v in args.variants)))
    out = Path(args.out)
    (out / f"ablation_{name}.json").write_text(json.dumps(
        {"config": args.config, "machine": machine_text, "command": command, "runs": rows}, indent=1) + "\n")
    lines = [f"# Ablation: {args.config}", "", f"Command: `{command}`  ",
             f"Machine: {machine_text}; two runs at a time, one torch thread each.", "",
             "Final return: the mean episode return of each run's last 5 updates; mean and min over the seeds.", "",
             "| variant | override | default | final return, mean | min | wall s, mean |",
             "|---|---|---|---:|---:|---:|"]
    for variant in args.variants:
        runs = [r for r in rows if r["variant"] == variant]
        values = [r["last5_reward"] for r in runs]
        overrides, default = VARIANTS[variant]
        lines.append(f"| {variant} | {' '.join(f'`{o}`' for o in overrides) or '-'} | {default} | "
                     f"{sum(values) / len(values):.1f} | {min(values):.1f} | "
                     f"{sum(r['wall_s'] for r in runs) / len(runs):.1f} |")
    (out / f"ablation_{name}.md").write_text("\n".join(lines) + "\n")
    plot(rows, args.variants, out / f"ablation_{name}.png", f"Ablation on {args.config}, seeds {args.seeds}")


if __name__ == "__main__":
    main()
