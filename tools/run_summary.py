"""Summarises one train.py run from its TensorBoard summaries: the end of its curve and its time.

    python tools/run_summary.py --run summaries/minigrid --last 10 \\
        --reference results/reference/minigrid_memory_s9.csv \\
        --command "python train.py --config configs/minigrid.yaml --run-id minigrid" --out results/minigrid/run

Writes <out>.json (every update) and <out>.md: over the last N updates the mean episode reward, the
last-100-episodes mean (the reference's reward_mean) and the success rate; the last and the best held-out
evaluation; the curve every 50 updates beside the reference's 10-run mean; and the time. A resumed run has
one event file per process: its wall time sums each file's span, so time stopped between sessions does
not count.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)  # the imports below take seconds

from plumbing.errors import ConfigError  # noqa: E402
from tools.benchmark import machine  # noqa: E402
from stats import TAG, read_events, read_scalars  # noqa: E402

PHASES = ("env", "inference", "buffer", "update", "evaluation")  # evaluation: held-out episodes, when due
# a row's key per summary tag; a phase's seconds go under "<phase>_seconds", apart from the update's number
TAGS = {"episode/reward_mean": "reward", TAG: "reward_last100", "episode/success_mean": "success",
        "episode/length_mean": "length",
        "time/env_steps": "steps", "eval/reward_mean": "eval", **{f"time/{p}": f"{p}_seconds" for p in PHASES}}


def segment_seconds(folder: Path) -> list[float]:
    """Wall seconds of each process that wrote to the run (one event file each)."""
    seconds = []
    for file in sorted(folder.rglob("events.out.tfevents.*")):
        scalars = {}
        for scalar in read_events(file):
            scalars.setdefault(scalar.tag, []).append(scalar)
        if "time/update" not in scalars:  # runs from before evaluation existed have no time/evaluation
            continue
        first = {tag: scalars[tag][0] for tag in (f"time/{p}" for p in PHASES) if tag in scalars}
        times = [e.wall_time for e in scalars["time/env_steps"]]
        seconds.append(times[-1] - times[0] + sum(e.value for e in first.values()))
    return seconds


def reference_at(path: str | None) -> dict[int, float]:
    return {int(r["env_steps"]): r["reward_mean_over_runs"] for r in life.read_reference(path)} if path else {}


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the run's summaries folder")
    parser.add_argument("--last", type=int, default=10, help="average over this many final updates")
    parser.add_argument("--reference", help="the reference baseline's curve (CSV)")
    parser.add_argument("--command", required=True, help="the command that trained the run")
    parser.add_argument("--out", required=True, help="output path without extension")
    args = parser.parse_args(argv)
    out = life.prefixed(args.out)

    def start():
        life.check_out("--out", out)
        by_update = read_scalars(Path(args.run), TAGS)
        updates = sorted(u for u, v in by_update.items() if "steps" in v)
        if not updates:
            raise ConfigError(f"{args.run}: no summaries found")
        if updates != list(range(1, updates[-1] + 1)):
            raise ConfigError(f"{args.run}: updates are missing from the summaries")
        return [{"update": u, **by_update[u]} for u in updates], reference_at(args.reference)
    return script.life(start, lambda started: summarise(args, out, *started))


def summarise(args, out: list[Path], rows: list[dict], reference: dict[int, float]) -> int:
    updates = [r["update"] for r in rows]
    last = rows[-args.last:]
    segments = segment_seconds(Path(args.run))
    evaluations = [{"update": r["update"], "reward_mean": r["eval"]} for r in rows if "eval" in r]
    summary = {
        "machine": machine(), "command": args.command, "run": args.run,
        "updates": updates[-1], "env_steps": int(rows[-1]["steps"]), "last": len(last),
        "reward_mean_last_updates": mean(r.get("reward") for r in last),
        "reward_last100_mean_last_updates": mean(r.get("reward_last100") for r in last),
        "success_mean_last_updates": mean(r.get("success") for r in last),
        "reference_mean_last_updates": mean(reference.get(int(r["steps"])) for r in last),
        # the held-out evaluations (a config's evaluation section), as {"update", "reward_mean"}
        "evaluation_last": evaluations[-1] if evaluations else None,
        "evaluation_best": max(evaluations, key=lambda e: e["reward_mean"], default=None),
        "wall_seconds": sum(segments), "processes": len(segments),
        "loop_seconds": {p: sum(r.get(f"{p}_seconds", 0.0) for r in rows) for p in PHASES},
        "curve": rows,
    }

    def fmt(value, spec=".3f"):
        return "-" if value is None else format(value, spec)

    m, loop = summary["machine"], summary["loop_seconds"]
    total = sum(loop.values())
    lines = [
        f"# Learning: {args.run}", "",
        f"Command: `{args.command}`  ",
        f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} on the CPU, Python {m['python']}", "",
        f"- Updates: {summary['updates']}, environment steps: {summary['env_steps']:,}",
        f"- Over the last {len(last)} updates: mean episode reward {fmt(summary['reward_mean_last_updates'])} "
        f"(per-update mean), {fmt(summary['reward_last100_mean_last_updates'])} (last-100-episodes mean); "
        f"success {fmt(summary['success_mean_last_updates'])}; the reference baseline's 10-run mean over the "
        f"same updates: {fmt(summary['reference_mean_last_updates'])}",
        *([f"- Held-out evaluation: {summary['evaluation_last']['reward_mean']:.3f} at update "
           f"{summary['evaluation_last']['update']} (the last), best {summary['evaluation_best']['reward_mean']:.3f} "
           f"at update {summary['evaluation_best']['update']}, {len(evaluations)} evaluations"] if evaluations else []),
        f"- Wall time: {summary['wall_seconds'] / 3600:.2f} h in {len(segments)} process(es) "
        f"({summary['wall_seconds'] / summary['env_steps'] * 1e3:.2f} ms per step); "
        "training loop: " + ", ".join(f"{p} {loop[p] / max(total, 1e-9):.0%}" for p in PHASES), "",
        "| update | env steps | reward (update mean) | reward (last 100 episodes) | success | episode length "
        "| held-out | reference mean |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:  # held-out: the evaluation after this update, where one was due
        if r["update"] % 50 == 0 or r["update"] in (1, updates[-1]):
            lines.append(f"| {r['update']} | {int(r['steps'])} | {fmt(r.get('reward'))} | "
                         f"{fmt(r.get('reward_last100'))} | {fmt(r.get('success'), '.2f')} | "
                         f"{fmt(r.get('length'), '.1f')} | {fmt(r.get('eval'))} | "
                         f"{fmt(reference.get(int(r['steps'])))} |")
    life.write_out({out[0]: json.dumps(summary, indent=2) + "\n", out[1]: "\n".join(lines) + "\n"})
    print("\n".join(lines[:8]))
    return 0


if __name__ == "__main__":
    script.run(main)
