"""Compares runs that branch from one checkpoint, window by window: did a change hold a policy that collapsed?

    python tools/branches.py --source summaries/minigrid5/seed0 \\
        --branch bfloat16=summaries/seed0-bf16 --branch float32=summaries/seed0-f32 \\
        --start 290 --window 10 --command "bash results/minigrid/collapse/run.sh" \\
        --out results/minigrid/collapse/branches

A branch is `train.py --resume <checkpoint> --run-id <new> --set ...` (docs/reliability.md): it
starts exactly where the checkpoint stands, so its curve and the source run's differ only by the
change. --source (optional) is the run the checkpoint came from, shown as its own row over the
branches' updates. For each run and each window of updates after --start: the held-out evaluation at the
window's end (eval/reward_mean), the mean training reward of the window's updates
(episode/reward_mean), the smallest policy entropy and the largest approx-KL of an update.

Writes <out>.json and <out>.md.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from stats import read_scalars  # noqa: E402
from tools.benchmark import machine  # noqa: E402
from tools.run_summary import mean  # noqa: E402

TAGS = {"eval/reward_mean": "eval", "episode/reward_mean": "reward", "training/entropy": "entropy",
        "training/approx_kl": "kl"}


def windows(by_update: dict[int, dict[str, float]], start: int, window: int) -> list[dict]:
    """One row per full window (start, start + window], (start + window, start + 2 window], ... ."""
    rows = []
    for end in itertools.count(start + window, window):
        updates = [by_update.get(u) for u in range(end - window + 1, end + 1)]
        if None in updates:
            return rows
        rows.append({"update": end, "eval": updates[-1].get("eval"), "reward": mean(u.get("reward") for u in updates),
                     "entropy_min": min(u["entropy"] for u in updates), "kl_max": max(u["kl"] for u in updates)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branch", action="append", required=True, metavar="NAME=FOLDER",
                        help="a branch's summaries folder (summaries/<run-id>), named; repeatable")
    parser.add_argument("--source", help="the summaries folder of the run the branches start from")
    parser.add_argument("--start", type=int, required=True, help="the update the branches start from")
    parser.add_argument("--window", type=int, default=10, help="updates per row (the evaluation interval)")
    parser.add_argument("--command", required=True, help="the command that made the branches")
    parser.add_argument("--out", required=True, help="output path without extension")
    args = parser.parse_args(argv)

    runs = [("source run", args.source)] if args.source else []
    for item in args.branch:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            parser.error(f"--branch takes NAME=FOLDER, got {item!r}")
        runs.append((name, folder))
    table = {}
    for name, folder in runs:
        if not Path(folder).is_dir():
            parser.error(f"{folder} is not a folder")
        table[name] = windows(read_scalars(Path(folder), TAGS), args.start, args.window)
        if not table[name]:
            parser.error(f"{folder} has no full window of {args.window} updates after update {args.start}")
    Path(args.out + ".json").write_text(json.dumps(
        {"machine": machine(), "command": args.command, "start": args.start, "window": args.window,
         "runs": {name: {"folder": folder, "windows": table[name]} for name, folder in runs}}, indent=2) + "\n")

    def fmt(value, spec=".3f"):
        return "-" if value is None else format(value, spec)

    last = max(row["update"] for name, rows in table.items() if name != "source run" for row in rows)
    table = {name: [row for row in rows if row["update"] <= last] for name, rows in table.items()}  # the branches' span
    ends = sorted({row["update"] for rows in table.values() for row in rows})
    lines = [f"# Branches from update {args.start}", "", f"Command: `{args.command}`", "",
             "Per run, for each window of updates ending at the column's update: held-out evaluation at its end / "
             "mean training reward / smallest entropy / largest approx-KL of an update.", "",
             "| run | " + " | ".join(f"{end}" for end in ends) + " |", "|---|" + "---:|" * len(ends)]
    for name, _ in runs:
        cells = {row["update"]: row for row in table[name]}
        lines.append(f"| {name} | " + " | ".join(
            f"{fmt(c['eval'])} / {fmt(c['reward'])} / {fmt(c['entropy_min'], '.4f')} / {fmt(c['kl_max'])}"
            if (c := cells.get(end)) else "" for end in ends) + " |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
