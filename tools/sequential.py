"""The same seeds as a sweep, run one after another with train.py: the baseline a sweep's wall time is compared with.

    python tools/sequential.py --config configs/cartpole_masked.yaml --seeds 10 --out results/sweeps/cartpole10_sequential

Each seed is `python train.py --config X --seed S --cpu` in its own process and scratch
folder (start-up included, as a user runs it), one after another on the whole machine
(torch_threads as the config says). Writes OUT.json and OUT.md: every run's wall time,
steps/s and final reward_mean_last100, and the total.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import machine  # noqa: E402


def run(config: Path, seed: int, overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, str(ROOT / "train.py"), "--config", str(config), "--seed", str(seed),
                               "--run-id", f"seed{seed}", "--cpu", *(a for o in overrides for a in ("--set", o))],
                              cwd=work, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"seed {seed} failed: {done.stderr.strip().splitlines()[-1]}")
    timings = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("timings: "))[9:])
    return {"seed": seed, "wall_seconds": wall, "steps_per_second": timings["steps_per_second"],
            "reward_mean_last100": timings["reward_mean_last100"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = (ROOT / args.config) if not Path(args.config).is_file() else Path(args.config)
    start = time.perf_counter()
    runs = []
    for seed in range(args.seeds):
        runs.append(run(config.resolve(), seed, args.set))
        print(f"seed {seed}: {runs[-1]['wall_seconds']:.1f} s, reward_mean_last100 "
              f"{runs[-1]['reward_mean_last100']}", flush=True)
    total = time.perf_counter() - start
    report = {"command": "python " + " ".join(sys.argv), "machine": machine(), "config": args.config,
              "total_wall_seconds": total, "median_run_seconds": statistics.median(r["wall_seconds"] for r in runs),
              "runs": runs}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [f"# {args.config}: {args.seeds} seeds one after another with train.py", "",
             f"`{report['command']}` on {report['machine']['cpu']} ({report['machine']['cores']} cores).", "",
             f"Total wall time **{total:.0f} s**; median run {report['median_run_seconds']:.1f} s.", "",
             "| seed | wall s | steps/s | reward_mean_last100 |", "|---:|---:|---:|---:|"]
    lines += [f"| {r['seed']} | {r['wall_seconds']:.1f} | {r['steps_per_second']:.0f} | {r['reward_mean_last100']} |"
              for r in runs]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"total {total:.0f} s; wrote {out}.md")


if __name__ == "__main__":
    main()
