"""End-to-end speed of train.py on shipped configs, with the per-phase split.

    python results/benchmark.py --config configs/cartpole_masked.yaml --config configs/poc_memory_env.yaml

Each config is trained `--repeats` times as its own process (`python train.py
--config X --cpu`), so the wall time includes start-up (imports, environment and
model construction) as a user sees it. Reports wall seconds (median, min, max),
environment steps per second, peak resident memory, and the share of the
training loop spent stepping environments, in rollout inference, preparing the
buffer (GAE and the sequence index) and optimising. Writes
results/benchmark.json and results/benchmark.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def machine() -> dict:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch
    return {"cpu": model, "cores": os.cpu_count(), "torch": torch.__version__,
            "torch_threads_update": torch.get_num_threads(), "device": "cpu", "python": platform.python_version()}


def run_once(config: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = subprocess.run([sys.executable, str(ROOT / "train.py"), "--config", str(ROOT / config),
                                 "--run-id", "bench", "--cpu"], cwd=tmp, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"train.py failed on {config}:\n{result.stderr}")
    timings = json.loads(next(l for l in result.stdout.splitlines() if l.startswith("timings: "))[9:])
    rewards = [l.split("reward")[1].split()[0] for l in result.stdout.splitlines() if l.startswith("update")]
    return {"wall_seconds": wall, "final_reward": float(rewards[-1]), **timings}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "results"))
    args = parser.parse_args()
    report = {"machine": machine(), "command": "python results/benchmark.py " +
              " ".join(f"--config {c}" for c in args.config) + f" --repeats {args.repeats}", "configs": {}}
    for config in args.config:
        runs = []
        for _ in range(args.repeats):
            runs.append(run_once(config))
            print(config, json.dumps(runs[-1]), flush=True)
        report["configs"][config] = runs
    out = Path(args.out)
    (out / "benchmark.json").write_text(json.dumps(report, indent=2) + "\n")

    m = report["machine"]
    lines = ["# Benchmark", "", f"Command: `{report['command']}`  ",
             f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} on the CPU, Python {m['python']}", "",
             "| config | env steps | wall s (median, min-max) | steps/s (end to end) | env | inference | buffer "
             "| update | peak RSS MB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for config, runs in report["configs"].items():
        walls = [r["wall_seconds"] for r in runs]
        med = statistics.median(walls)
        mid = runs[walls.index(med)] if med in walls else runs[0]
        loop = sum(mid[f"{k}_seconds"] for k in ("env", "inference", "buffer", "update"))
        share = {k: 100 * mid[f"{k}_seconds"] / loop for k in ("env", "inference", "buffer", "update")}
        lines.append(f"| {config} | {mid['env_steps']} | {med:.1f} ({min(walls):.1f}-{max(walls):.1f}) | "
                     f"{mid['env_steps'] / med:.0f} | {share['env']:.0f}% | {share['inference']:.0f}% | "
                     f"{share['buffer']:.1f}% | {share['update']:.0f}% | {max(r['peak_rss_mb'] for r in runs):.0f} |")
    lines += ["", "Phases are shares of the training loop (the median run); the wall time also counts start-up."]
    (out / "benchmark.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
