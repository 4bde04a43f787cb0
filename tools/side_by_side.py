"""Runs beside other work: train.py alone, two train.py runs started together, and one beside a busy loop per core,
for the working tree and (with --against) a git ref, alternated round after round.

    python tools/side_by_side.py --against HEAD --config configs/cartpole_masked.yaml --set updates=10 \
        --out results/speed/side_by_side_cartpole

Each round runs, for each side: one run alone; two runs started at the same moment (the round's wall time is the
later one's); one run beside --loops processes that spin until it ends. The report gives each side's median wall
seconds per condition and their ratios to alone: the price of sharing the cores. Writes PREFIX.json and PREFIX.md.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import statistics
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.benchmark import (RunError, compile_tree, describe_tree, machine, ref_worktree,  # noqa: E402
                             resolve_ref, run_train)

CONDITIONS = ("alone", "twin", "loop")
SPIN = "while True: pass"


def together(tree: Path, config: Path, overrides: list[str], label: str) -> list[dict]:
    """Two runs started at the same moment: both their results."""
    results, errors = [None, None], []

    def one(i: int) -> None:
        try:
            results[i] = run_train(tree, config, overrides, label)
        except RunError as error:
            errors.append(error)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def beside_loops(tree: Path, config: Path, overrides: list[str], label: str, count: int) -> dict:
    loops = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        return run_train(tree, config, overrides, label)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def measure(tree: Path, config: Path, overrides: list[str], label: str, condition: str, loops: int) -> dict:
    """The condition's wall seconds (two runs together: the later one's) and the measured run's steps/s."""
    if condition == "alone":
        run = run_train(tree, config, overrides, label)
        return {"wall_seconds": run["wall_seconds"], "steps_per_second": run["steps_per_second"]}
    if condition == "twin":
        runs = together(tree, config, overrides, label)
        return {"wall_seconds": max(r["wall_seconds"] for r in runs),
                "steps_per_second": min(r["steps_per_second"] for r in runs)}
    run = beside_loops(tree, config, overrides, label, loops)
    return {"wall_seconds": run["wall_seconds"], "steps_per_second": run["steps_per_second"]}


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"# Side by side: {report['config']}", "", f"Command: `{report['command']}`  ",
             f"Date: {report['date']}  ", f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']}, "
             f"Python {m['python']}  "]
    lines += [f"{side}: {info['label']}  " for side, info in report["sides"].items()]
    lines += ["", f"{report['repeats']} rounds, each side and condition once a round, alternated. Medians of the wall "
              "seconds (start-up included): alone; two runs started together (the later to finish); one run beside "
              f"{report['loops']} busy loops. The ratios are each condition's median over alone's."
              + (f" The old side ran together and beside loops in the first {report['old_sharing_rounds']} round(s) "
                 "only." if report.get("old_sharing_rounds") else ""), "",
              "| side | alone s | two together s | beside busy loops s | together / alone | loops / alone "
              "| steps/s alone |", "|---|---:|---:|---:|---:|---:|---:|"]
    for side, s in report["results"].items():
        lines.append(f"| {side} | {s['alone']['median']:.2f} | {s['twin']['median']:.2f} | {s['loop']['median']:.2f} "
                     f"| {s['twin']['median'] / s['alone']['median']:.2f} | {s['loop']['median'] / s['alone']['median']:.2f} "
                     f"| {s['alone']['steps_per_second_median']:.0f} |")
    if "old" in report["results"]:
        old, new = (report["results"][side]["alone"]["steps_per_second_median"] for side in ("old", "new"))
        lines += ["", f"Alone, steps/s new / old: {new / old:.3f} (medians)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="tools/side_by_side.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the config to train")
    parser.add_argument("--set", action="append", default=[], help="config override for every run, key=value")
    parser.add_argument("--against", metavar="REF", help="a git ref whose train.py takes turns with the working tree's")
    parser.add_argument("--repeats", type=int, default=3, help="rounds")
    parser.add_argument("--loops", type=int, default=1, help="busy loops beside a run")
    parser.add_argument("--old-sharing-rounds", type=int, metavar="N",
                        help="the rounds in which --against's side also runs together and beside loops (default: "
                             "all); alone it runs every round. Where the old side shares the cores badly, each of "
                             "those runs can take many minutes")
    parser.add_argument("--out", required=True, metavar="PREFIX", help="writes PREFIX.json and PREFIX.md")
    args = parser.parse_args(argv)
    if args.old_sharing_rounds is not None and not 1 <= args.old_sharing_rounds <= args.repeats:
        print("error: --old-sharing-rounds must be from 1 to --repeats", file=sys.stderr)
        return 2
    config = Path(args.config).resolve()
    if not config.is_file():
        print(f"error: config not found: {args.config}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        sides = {"new": describe_tree(ROOT)}
        trees = {"new": ROOT}
        if args.against:
            commit = resolve_ref(ROOT, args.against)
            sides = {"old": {"label": f"{args.against} = {commit}"}, **sides}
            trees = {"old": stack.enter_context(ref_worktree(ROOT, commit)), **trees}
        for tree in trees.values():
            compile_tree(tree)
        runs = {side: {c: [] for c in CONDITIONS} for side in trees}
        for round_ in range(args.repeats):
            for side, tree in trees.items():
                sharing = side == "new" or args.old_sharing_rounds is None or round_ < args.old_sharing_rounds
                for condition in CONDITIONS if sharing else ("alone",):
                    run = measure(tree, config, args.set, sides[side]["label"], condition, args.loops)
                    runs[side][condition].append(run)
                    print(f"round {round_ + 1} {side} {condition}: wall {run['wall_seconds']:.2f} s", flush=True)
    results = {side: {c: {"median": statistics.median(r["wall_seconds"] for r in rs),
                          "steps_per_second_median": statistics.median(r["steps_per_second"] for r in rs),
                          "runs": rs} for c, rs in conditions.items()} for side, conditions in runs.items()}
    report = {"command": shlex.join(["python", "tools/side_by_side.py", *argv]), "config": args.config,
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "sides": sides, "repeats": args.repeats, "loops": args.loops,
              "old_sharing_rounds": args.old_sharing_rounds, "results": results}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(report, indent=2) + "\n")
    Path(f"{out}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
