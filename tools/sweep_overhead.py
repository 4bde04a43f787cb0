"""What Ray Tune costs a trial: the same seeds through sweep.py one trial at a time, against train.py one after another.

    python tools/sweep_overhead.py --config configs/poc_memory_env.yaml --seeds 10 --repeats 3 \
        --out results/sweeps/poc10_overhead

Both sides run the same seeds with the same threads (--cpus-per-trial of them, one trial at a
time with --max-concurrent 1, so nothing runs side by side), alternated sweep, sequential,
sweep, ... Each side's wall time counts everything a user waits for: for sweep.py, starting and
stopping Ray and the statistics at the end; for the sequential side, each train.py's start-up
(tools/sequential.py). The overhead per trial is (sweep - sequential) / seeds, from the medians.
Writes OUT.json and OUT.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import machine  # noqa: E402


def timed(command: list[str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[1:3])} failed: {(done.stderr or done.stdout).strip()[-500:]}")
    return wall


def sweep(config: Path, seeds: int, threads: int, repeat: int) -> float:
    with tempfile.TemporaryDirectory() as work:
        return timed([sys.executable, str(ROOT / "sweep.py"), "--config", str(config), "--seeds", str(seeds),
                      "--sweep-id", f"overhead{repeat}", "--cpus-per-trial", str(threads), "--max-concurrent", "1",
                      "--storage", str(Path(work) / "sweeps")], work)


def sequential(config: Path, seeds: int, threads: int) -> float:
    with tempfile.TemporaryDirectory() as work:
        return timed([sys.executable, str(ROOT / "tools/sequential.py"), "--config", str(config), "--seeds",
                      str(seeds), "--set", f"torch_threads={threads}", "--out", str(Path(work) / "sequential")], work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of every run (sweep.py's --cpus-per-trial)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    config = args.config.resolve()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    walls: dict[str, list[float]] = {"sweep": [], "sequential": []}
    for repeat in range(args.repeats):
        walls["sweep"].append(sweep(config, args.seeds, args.threads, repeat))
        walls["sequential"].append(sequential(config, args.seeds, args.threads))
        print(f"repeat {repeat}: sweep {walls['sweep'][-1]:.1f} s, sequential {walls['sequential'][-1]:.1f} s",
              flush=True)
    median = {side: statistics.median(values) for side, values in walls.items()}
    per_trial = (median["sweep"] - median["sequential"]) / args.seeds
    command = "python " + " ".join(sys.argv)
    result = {"command": command, "date": started, "machine": machine(), "config": str(args.config),
              "seeds": args.seeds, "threads": args.threads, "walls": walls, "medians": median,
              "overhead_per_trial_seconds": per_trial}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    rows = "\n".join(f"| {side} | {median[side]:.1f} | {', '.join(f'{w:.1f}' for w in walls[side])} |"
                     for side in walls)
    args.out.with_suffix(".md").write_text(
        f"# sweep.py's overhead per trial: {args.config}\n\n"
        f"Command: `{command}`  \nDate: {started}  \n"
        f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, torch {result['machine']['torch']}\n\n"
        f"{args.seeds} seeds, {args.threads} torch threads each, one run at a time; alternated, "
        f"{args.repeats} times each.\n\n"
        f"| side | wall s, median | every repeat |\n|---|---:|---|\n{rows}\n\n"
        f"Overhead per trial: ({median['sweep']:.1f} - {median['sequential']:.1f}) / {args.seeds} = "
        f"**{per_trial:+.2f} s**.\n")
    print(args.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
