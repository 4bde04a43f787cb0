"""How many torch threads the update should use, alone and beside another job: the default's evidence.

    python tools/speed/threads.py --config configs/cartpole_masked.yaml --set updates=20 \\
        --config configs/minigrid.yaml --set updates=2 --repeats 3

For each config, alternates train.py runs with torch_threads 1 and 2 (this machine's cores),
first alone, then with one other training run of the same config going (benchmark.py's
--busy), median of --repeats each. Steps/s counts the whole run, start-up included. Each
--set applies to the --config before it. Writes results/speed/threads.md and .json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import machine, measure  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument("--set", action="append", default=[], help="an override of the --config before it")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    configs, current = {}, None  # each --config with the --set items that follow it
    argv = sys.argv[1:]
    for flag, value in zip(argv, argv[1:]):
        if flag == "--config":
            current = value
            configs[current] = []
        elif flag == "--set" and current:
            configs[current].append(value)
    cores = len(os.sched_getaffinity(0))
    threads = sorted({1, cores})
    rows = []
    for config, sets in configs.items():
        for busy in (0, 1):
            runs = {n: [] for n in threads}
            for _ in range(args.repeats):
                for n in threads:  # alternated: the machine's speed drifts
                    run = measure(ROOT, (ROOT / config).resolve(), [*sets, f"torch_threads={n}"], busy, ROOT)
                    runs[n].append(run["steps_per_second"])
                    print(config, f"busy {busy} threads {n}: {run['steps_per_second']:.0f} steps/s", flush=True)
            rows.append({"config": config, "sets": sets, "busy": busy,
                         **{f"threads_{n}": statistics.median(v) for n, v in runs.items()}, "runs": runs})
    report = {"command": command(), "machine": machine(), "repeats": args.repeats, "rows": rows}
    lines = ["# torch threads for the update, alone and beside another run", "",
             f"`{report['command']}` on {report['machine']['cpu']} ({cores} cores); steps/s of whole runs, "
             f"median of {args.repeats}, alternated.", ""]
    lines += table(["config", "other runs going", *(f"{n} thread{'s' * (n > 1)}" for n in threads),
                    f"{threads[-1]} / 1"], "lr" + "r" * (len(threads) + 1),
                   [[f"{r['config']} {' '.join(r['sets'])}", str(r["busy"]),
                     *(f"{r[f'threads_{n}']:.0f}" for n in threads),
                     f"{r[f'threads_{threads[-1]}'] / r['threads_1']:.2f}"] for r in rows])
    write("threads", report, lines)


if __name__ == "__main__":
    main()
