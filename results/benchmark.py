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


def tree_rss_mb(root: int) -> float:
    """Resident memory of a process and all its descendants (the env workers), from /proc."""
    parents, rss = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines()
                              if ":" in line)
            except OSError:
                continue
            parents[int(entry.name)] = int(fields["PPid"])
            rss[int(entry.name)] = int(fields.get("VmRSS", "0 kB").split()[0])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(rss.get(pid, 0) for pid in tree) / 1024


def run_once(config: str, overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        command = [sys.executable, str(ROOT / "train.py"), "--config", str(ROOT / config), "--run-id", "bench",
                   "--cpu", *(a for o in overrides for a in ("--set", o))]
        process = subprocess.Popen(command, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = 0.0
        while process.poll() is None:  # sample the whole process tree's memory while it runs
            peak = max(peak, tree_rss_mb(process.pid))
            time.sleep(0.2)
        out, err = process.communicate()
        wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"train.py failed on {config}:\n{err}")
    timings = json.loads(next(l for l in out.splitlines() if l.startswith("timings: "))[9:])
    rewards = [l.split("reward")[1].split()[0] for l in out.splitlines() if l.startswith("update")]
    final = rewards[-1]
    return {"wall_seconds": wall, "final_reward": None if final == "-" else float(final),
            "peak_rss_all_processes_mb": peak, **timings}


def random_actions(space, workers: int, steps: int):
    """(steps, workers, k) stored action rows (spaces.py) drawn from the action space, seeded."""
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from spaces import action_format
    space.seed(0)
    return np.array([[np.asarray(space.sample(), dtype=np.float64).reshape(-1) for _ in range(workers)]
                     for _ in range(steps)]).astype(action_format(space).dtype)


def env_ceiling(config_path: str, steps: int) -> float:
    """Env-only steps/s: the config's workers (same count, same processes) stepping random actions."""
    sys.path.insert(0, str(ROOT))
    from config import load_config
    from worker import VecEnv, environment_seeds
    config = load_config(ROOT / config_path)
    W = config.n_workers
    envs = VecEnv(config.environment, environment_seeds(0, W), config.worker_processes)
    actions = random_actions(envs.action_space, W, max(1, steps // W))  # drawn before the clock starts
    envs.reset()
    start = time.perf_counter()
    for a in actions:
        envs.step(a)
    seconds = time.perf_counter() - start
    envs.close()
    return len(actions) * W / seconds


def run_sb3(steps: int) -> dict:
    result = subprocess.run([sys.executable, str(ROOT / "results/sb3_cartpole.py"), "--steps", str(steps)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit("sb3-contrib run failed (install it with: pip install -r requirements-bench.txt):\n"
                         + result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], help="config override for every run, key=value")
    parser.add_argument("--name", default="benchmark", help="output file name (results/<name>.json, .md)")
    parser.add_argument("--out", default=str(ROOT / "results"))
    parser.add_argument("--ceiling", action="store_true", help="also measure the env-only ceiling (random actions)")
    parser.add_argument("--sb3", action="store_true",
                        help="alternate each masked-CartPole run with sb3-contrib's RecurrentPPO (bench extra)")
    args = parser.parse_args()
    report = {"machine": machine(), "command": "python results/benchmark.py " +
              " ".join(f"--config {c}" for c in args.config) + f" --repeats {args.repeats}" +
              "".join(f" --set {o}" for o in args.set) + (f" --name {args.name}" if args.name != "benchmark" else "")
              + (" --ceiling" if args.ceiling else "") + (" --sb3" if args.sb3 else ""),
              "configs": {}, "ceiling": {}, "sb3": []}
    for config in args.config:
        runs = []
        for _ in range(args.repeats):
            runs.append(run_once(config, args.set))
            print(config, json.dumps(runs[-1]), flush=True)
            if args.sb3 and Path(config).stem == "cartpole_masked":
                report["sb3"].append(run_sb3(runs[-1]["env_steps"]))
                print("sb3-contrib", json.dumps(report["sb3"][-1]), flush=True)
        report["configs"][config] = runs
        if args.ceiling:
            report["ceiling"][config] = env_ceiling(config, min(runs[0]["env_steps"], 409_600))
            print(config, "env-only ceiling steps/s", round(report["ceiling"][config]), flush=True)
    out = Path(args.out)
    (out / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")

    m = report["machine"]
    lines = ["# Benchmark", "", f"Command: `{report['command']}`  ",
             f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} on the CPU, Python {m['python']}", "",
             "| config | env steps | wall s (median, min-max) | steps/s (end to end) | env | inference | buffer "
             "| update | peak RSS MB, trainer | peak RSS MB, all processes |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for config, runs in report["configs"].items():
        walls = [r["wall_seconds"] for r in runs]
        med = statistics.median(walls)
        mid = runs[walls.index(med)] if med in walls else runs[0]
        loop = sum(mid[f"{k}_seconds"] for k in ("env", "inference", "buffer", "update"))
        share = {k: 100 * mid[f"{k}_seconds"] / loop for k in ("env", "inference", "buffer", "update")}
        lines.append(f"| {config} | {mid['env_steps']} | {med:.1f} ({min(walls):.1f}-{max(walls):.1f}) | "
                     f"{mid['env_steps'] / med:.0f} | {share['env']:.0f}% | {share['inference']:.0f}% | "
                     f"{share['buffer']:.1f}% | {share['update']:.0f}% | {max(r['peak_rss_mb'] for r in runs):.0f} | "
                     f"{max(r['peak_rss_all_processes_mb'] for r in runs):.0f} |")
    lines += ["", "Phases are shares of the training loop (the median run); the wall time also counts start-up."]
    if report["ceiling"]:
        lines += ["", "| config | env-only ceiling, steps/s (random actions, same workers) | training steps/s "
                  "(training loop, median run) | training / ceiling |", "|---|---:|---:|---:|"]
        for config, ceiling in report["ceiling"].items():
            runs = report["configs"][config]
            loop = statistics.median(r["steps_per_second"] for r in runs)
            lines.append(f"| {config} | {ceiling:.0f} | {loop:.0f} | {100 * loop / ceiling:.1f}% |")
    if report["sb3"]:
        ours = report["configs"]["configs/cartpole_masked.yaml"]
        ours_sps = statistics.median(r["env_steps"] / r["wall_seconds"] for r in ours)
        theirs_sps = statistics.median(r["steps_per_second"] for r in report["sb3"])
        lines += ["", "Side by side on masked CartPole, same environment and budget, runs alternated "
                  "(steps/s end to end, start-up included; final return = mean of the last 100 episodes):", "",
                  "| implementation | steps/s (median) | final return per run |", "|---|---:|---|",
                  f"| this repository | {ours_sps:.0f} | "
                  + ", ".join(f"{r['reward_mean_last100']:.1f}" for r in ours) + " |",
                  f"| sb3-contrib RecurrentPPO 2.9.2 | {theirs_sps:.0f} | "
                  + ", ".join(f"{r['final_reward']:.1f}" for r in report["sb3"]) + " |",
                  "", f"Speed ratio: {ours_sps / theirs_sps:.1f}x."]
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
