"""Speed of whole train.py processes: the working tree alone, or alternated with a git ref's.

    python tools/benchmark.py --config configs/cartpole_masked.yaml --config configs/poc_memory_env.yaml
    python tools/benchmark.py --against main --config configs/minigrid.yaml --set updates=3 --require-idle
    python tools/benchmark.py --vary recurrence.layer_type=gru,lstm,mingru,lru --config configs/minigrid.yaml

Each run is `<tree>/train.py --config C --cpu --set ...` in a new empty folder, with its tree first on
PYTHONPATH so that each side imports its own modules; both sides train the working tree's config unless
--own-configs. With --against REF, REF is checked out in a temporary worktree and the runs go old, new,
old, new, ...: the machine's speed drifts, and alternating makes the drift hit both sides alike. With
--vary KEY=A,B,... the sides are the working tree with each value of KEY, taking turns the same way.
The report gives each side's medians (wall seconds with start-up, steps/s and the seconds of each phase of
the training loop, from train.py's `timings:` line), the ratios new/old, and the median ratio of the
alternated pairs with its distribution-free interval. Every run records the CPU that other processes
used beside it; --require-idle refuses a busy machine and fails a run measured beside other work.
Writes PREFIX.json and PREFIX.md (--out; default results/benchmark or results/benchmark_against).
"""
from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its plumbing, and the other tools as tools.<name>

from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)

PHASES = ("env", "inference", "buffer", "update")
MIN_REPEATS = 3  # fewer runs per side give no usable median on a drifting machine
BUSY_CORES = 0.1  # other processes using more cores than this on average make a measurement busy


class UsageError(Exception):
    """Bad input: one line on stderr, exit code 2, before anything starts."""


class RunError(script.Failed):
    """A run failed, or was measured beside other work under --require-idle: exit code 1."""


def machine() -> dict:
    """The CPU's model and cores, torch's and Python's versions (torch imported here only: the runs import theirs)."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        names = [line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")]
        model = names[0].split(":", 1)[1].strip() if names else model
    import torch
    return {"cpu": model, "cores": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version()}


# ---------------------------------------------------------------- how busy the machine is

def _processes() -> dict[int, tuple[int, float]]:
    """{pid: (parent pid, CPU seconds so far)} of every live process, from /proc/<pid>/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            found[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)  # ppid, utime+stime
    return found


def _descendants(processes: dict[int, tuple[int, float]], root: int) -> set[int]:
    tree = {root}
    while more := {pid for pid, (parent, _) in processes.items() if parent in tree} - tree:
        tree |= more
    return tree


def other_cpu(before: dict, after: dict) -> dict[int, float]:
    """{pid: CPU seconds between two process tables} of every process outside this one's tree."""
    ours = _descendants(after, os.getpid()) | _descendants(before, os.getpid())
    return {pid: cpu - before.get(pid, (0, 0.0))[1] for pid, (_, cpu) in after.items() if pid not in ours}


def load_snapshot(before: dict | None = None) -> dict:
    """Without `before`, a starting point; with it, the cores other processes used on average since.

    A process that started and ended between the two snapshots is not seen: the figure is a lower bound."""
    now, processes, load = time.perf_counter(), _processes(), os.getloadavg()[0]
    if before is None:
        return {"time": now, "processes": processes, "load_average": load}
    seconds = now - before["time"]
    cores = max(0.0, sum(other_cpu(before["processes"], processes).values())) / max(seconds, 1e-9)
    busy = cores > BUSY_CORES
    summary = (f"{'busy' if busy else 'idle'}: other processes used {cores:.2f} cores on average over {seconds:.0f} s "
               f"(load average {before['load_average']:.2f} -> {load:.2f})")
    return {"seconds": seconds, "other_cores": cores, "load_average_start": before["load_average"],
            "load_average_end": load, "busy": busy, "summary": summary}


def require_idle(seconds: float = 3.0) -> None:
    sample = load_snapshot()
    time.sleep(seconds)  # the interval sampled, not a wait for an event
    load = load_snapshot(sample)
    if load["busy"]:
        raise UsageError(f"--require-idle: the machine is {load['summary']}; stop that work or measure without "
                         "--require-idle (the report then marks the busy runs)")


# ---------------------------------------------------------------- one train.py process

def train_command(tree: Path, config: Path, overrides: list[str]) -> list[str]:
    """train.py on the CPU, unless an override names the device (`--set device=cuda` on a GPU machine)."""
    device = [] if any(o.startswith("device=") for o in overrides) else ["--cpu"]
    return [sys.executable, str(tree / "train.py"), "--config", str(config), "--run-id", "bench", *device,
            *(a for o in overrides for a in ("--set", o))]


def tree_environment(tree: Path) -> dict:
    """os.environ with `tree` first on PYTHONPATH and no other checkout of the project on it."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                 if p and not (Path(p) / "train.py").exists()]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree.resolve()), *inherited])}


def parse_output(out: str) -> dict:
    """The `timings: {...}` line and the last `update ...` line's reward ("-": none yet).

    Splits on carriage returns too, so that a progress bar's redraws cannot hide a line."""
    lines = re.split(r"[\r\n]+", out)
    found = [json.loads(m.group(1)) for line in lines if (m := re.search(r"timings: (\{.*\})\s*$", line))]
    if not found:
        raise RunError("train.py printed no 'timings: {...}' line")
    rewards = [m.group(1) for line in lines
               if re.match(r"\s*update\b", line) and (m := re.search(r"\breward\s+(\S+)", line))]
    final = float(rewards[-1]) if rewards and rewards[-1] != "-" else None
    return {"final_reward": final, **found[-1]}


def run_train(tree: Path, config: Path, overrides: list[str], label: str = "") -> dict:
    """`tree`'s train.py once, in a new empty folder: its wall seconds (start-up included) and timings."""
    with tempfile.TemporaryDirectory(prefix="benchmark-run-") as tmp:
        work, log = Path(tmp) / "work", Path(tmp) / "train.log"
        work.mkdir()
        start = time.perf_counter()
        with open(log, "w") as out:  # a file, not a pipe: a long run never blocks on a full pipe
            # a session of its own, so that its process group (the env workers too) can be killed as one
            process = subprocess.Popen(train_command(tree, config, overrides), cwd=work, env=tree_environment(tree),
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            process.wait()
        finally:
            if process.returncode is None:  # interrupted: the group is still ours until the leader is reaped
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        wall = time.perf_counter() - start
        text = log.read_text()
    if process.returncode != 0:
        tail = "\n".join(text.strip().splitlines()[-20:])
        raise RunError(f"train.py of {label or tree} failed on {config} (exit code {process.returncode}):\n{tail}")
    try:
        return {"wall_seconds": wall, **parse_output(text)}
    except RunError as error:
        raise RunError(f"{error} ({tree / 'train.py'} on {config})") from None


def measure(tree: Path, config: Path, overrides: list[str], label: str, idle: bool) -> dict:
    """One run with what other processes did beside it ("load")."""
    before = load_snapshot()
    run = run_train(tree, config, overrides, label)
    load = load_snapshot(before)
    if idle and load["busy"]:
        raise RunError(f"--require-idle: a run of {config.name} was measured beside other work ({load['summary']}); "
                       "stop that work and measure again")
    return {**run, "load": {k: v for k, v in load.items() if k != "summary"}}


def compile_tree(tree: Path) -> None:
    """Writes the bytecode first, so that a fresh checkout's first run does not pay for compiling it."""
    for folder, subfolders, files in os.walk(tree):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]  # not .git, nor a .venv
        for name in files:
            if name.endswith(".py"):
                compileall.compile_file(os.path.join(folder, name), quiet=2)


# ---------------------------------------------------------------- git

def git(repo: Path, *args: str) -> str:
    try:
        result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise UsageError("git is not installed; --against needs it to check out the reference") from None
    if result.returncode != 0:
        message = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        raise UsageError(f"git {args[0]} failed in {repo}: {message}")
    return result.stdout.strip()


def resolve_ref(repo: Path, ref: str) -> str:
    """The full commit hash that `ref` names; refuses a ref that is unknown or has no train.py."""
    try:
        git(repo, "rev-parse", "--show-toplevel")
    except UsageError as error:
        if "not installed" in str(error):
            raise
        raise UsageError(f"{repo} is not in a git repository (--against needs one)") from None
    if ref.startswith("-"):
        raise UsageError(f"unknown git ref {ref!r}")
    try:
        commit = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except UsageError:
        raise UsageError(f"unknown git ref {ref!r} (give a commit hash, a branch, a tag or e.g. HEAD~3)") from None
    try:
        git(repo, "cat-file", "-e", f"{commit}:train.py")
    except UsageError:
        raise UsageError(f"git ref {ref!r} ({commit[:7]}) has no train.py to benchmark") from None
    return commit


def describe_tree(repo: Path) -> dict:
    """The working tree's HEAD, and whether uncommitted changes are measured with it."""
    try:
        commit, dirty = git(repo, "rev-parse", "HEAD"), bool(git(repo, "status", "--porcelain"))
    except UsageError:
        return {"commit": None, "uncommitted_changes": None, "label": "the working tree (not a git checkout)"}
    return {"commit": commit, "uncommitted_changes": dirty,
            "label": f"the working tree at {commit[:7]}" + (" + uncommitted changes" if dirty else "")}


@contextlib.contextmanager
def ref_worktree(repo: Path, commit: str):
    """A temporary detached checkout of `commit`, removed and unregistered on the way out, whatever happens."""
    tmp = Path(tempfile.mkdtemp(prefix="benchmark-ref-"))
    path = tmp / commit[:7]
    try:
        git(repo, "worktree", "add", "--detach", str(path), commit)
        yield path
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(path)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)


# ---------------------------------------------------------------- statistics and report

def alternate(sides: list[str], repeats: int) -> list[str]:
    """old, new, old, new, ...: drift in the machine's speed then hits both sides alike."""
    return [side for _ in range(repeats) for side in sides]


def summarize(runs: list[dict]) -> dict:
    """Medians and ranges of one side's runs."""
    walls, rates = [r["wall_seconds"] for r in runs], [r["steps_per_second"] for r in runs]
    return {"runs": len(runs), "env_steps": runs[0]["env_steps"],
            "wall_seconds_median": statistics.median(walls), "wall_seconds_min": min(walls),
            "wall_seconds_max": max(walls), "steps_per_second_median": statistics.median(rates),
            "steps_per_second_min": min(rates), "steps_per_second_max": max(rates),
            **{f"{p}_seconds_median": statistics.median(r[f"{p}_seconds"] for r in runs) for p in PHASES},
            "peak_rss_mb_max": max(r["peak_rss_mb"] for r in runs),
            "runs_beside_other_work": sum(r["load"]["busy"] for r in runs if "load" in r)}


def ratios(old: dict, new: dict) -> dict:
    """Above 1: the working tree is faster."""
    return {"steps_per_second_new_over_old": new["steps_per_second_median"] / old["steps_per_second_median"],
            "wall_old_over_new": old["wall_seconds_median"] / new["wall_seconds_median"]}


def paired(old_runs: list[dict], new_runs: list[dict], coverage: float = 0.95) -> dict:
    """Each old run with the new run right after it: the pairs the new tree won, and the median pair ratio of
    steps/s with the sign test's interval (order statistics; None with too few pairs for `coverage`).
    Drift that slows both runs of a pair cancels in its ratio."""
    ratios = sorted(n["steps_per_second"] / o["steps_per_second"] for o, n in zip(old_runs, new_runs))
    count = len(ratios)
    # the largest k with P(Binomial(count, 1/2) < k) <= (1 - coverage) / 2: [ratios[k - 1], ratios[count - k]]
    tail, k = 0.0, 0
    while k < count and tail + math.comb(count, k) / 2 ** count <= (1 - coverage) / 2:
        tail += math.comb(count, k) / 2 ** count
        k += 1
    low, high = (ratios[k - 1], ratios[count - k]) if k else (None, None)
    return {"pairs": count, "pairs_new_faster": sum(r > 1 for r in ratios),
            "pair_ratio_median": statistics.median(ratios), "pair_ratio_low": low, "pair_ratio_high": high,
            "pair_ratio_coverage": 1 - 2 * tail if k else None}


def load_line(report: dict) -> str:
    """Idle, or how many measured runs had other work beside them."""
    loads = [r["load"] for entry in report["configs"].values() for runs in entry["runs"].values() for r in runs]
    busy, worst = sum(load["busy"] for load in loads), max(load["other_cores"] for load in loads)
    if not busy:
        return f"idle: during every run other processes used at most {worst:.2f} cores on average (below {BUSY_CORES})"
    return (f"BUSY: {busy} of {len(loads)} runs had other work beside them, up to {worst:.2f} cores on average: "
            "these figures are not taken alone")


def describe(sides: dict) -> str:
    """The working tree's label without the varied value, and the values the sides take turns over."""
    label = next(iter(sides.values()))["label"].rsplit(", ", 1)[0]
    return f"{label}; sides: {', '.join(sides)}"


def markdown(report: dict) -> list[str]:
    m, sides = report["machine"], report["sides"]
    title = f"Speed against {sides['old']['ref']}" if "old" in sides else "Speed of the working tree"
    lines = [f"# {title}", "", f"Command: `{report['command']}`  ", f"Date: {report['date']}  ",
             f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']}, Python {m['python']}  ",
             f"Load: {load_line(report)}  "]
    if "old" in sides:
        lines.append(f"Old: {sides['old']['label']}  ")
    if "new" in sides:
        lines.append(f"New: {sides['new']['label']}")
    else:
        lines.append(f"Tree: {describe(sides)}")
    order = ", alternated old, new, old, ..." if "old" in sides else ", alternated" if len(sides) > 1 else ""
    lines += ["", f"{report['repeats']} run(s) per config and side{order}. Medians; the wall time counts start-up, "
              "steps/s and the phases are train.py's training loop (its `timings:` line).", "",
              "| config | side | wall s (min-max) | steps/s (min-max) | env s | inference s | buffer s | update s "
              "| peak RSS MB |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for config, entry in report["configs"].items():
        for side in sides:
            s = entry[side]
            mark = f", {s['runs_beside_other_work']} run(s) beside other work" if s["runs_beside_other_work"] else ""
            lines.append(f"| {config} | {side}{mark} | {s['wall_seconds_median']:.2f} ({s['wall_seconds_min']:.2f}-"
                         f"{s['wall_seconds_max']:.2f}) | {s['steps_per_second_median']:.0f} "
                         f"({s['steps_per_second_min']:.0f}-{s['steps_per_second_max']:.0f}) | "
                         + " | ".join(f"{s[f'{p}_seconds_median']:.3f}" for p in PHASES)
                         + f" | {s['peak_rss_mb_max']:.0f} |")
    if "old" not in sides:
        return lines
    lines += ["", "| config | steps/s new / old (medians) | wall old / new (medians) | pairs the new tree won "
              "| steps/s new / old per pair, median [interval] |", "|---|---:|---:|---:|---|"]
    for config, entry in report["configs"].items():
        r, p = entry["ratio"], entry["paired"]
        interval = (f"[{p['pair_ratio_low']:.3f}, {p['pair_ratio_high']:.3f}] ({p['pair_ratio_coverage']:.1%})"
                    if p["pair_ratio_low"] is not None else "(too few pairs for an interval)")
        lines.append(f"| {config} | {r['steps_per_second_new_over_old']:.3f} | {r['wall_old_over_new']:.3f} | "
                     f"{p['pairs_new_faster']} of {p['pairs']} | {p['pair_ratio_median']:.3f} {interval} |")
    lines += ["", "Above 1: the working tree is faster. A pair is an old run and the new run right after it; its "
              "ratio cancels drift that slows both. Where the interval holds 1.0, the runs do not tell the two "
              "trees apart."]
    if report["own_configs"]:
        lines.append("Each side trained its own tree's copy of each config.")
    elif differs := [c for c, e in report["configs"].items() if e["ref_config_differs"]]:
        lines.append("Both sides trained the working tree's config; REF's own copy differs for: " + ", ".join(differs))
    return lines


# ---------------------------------------------------------------- the run

def ref_copy_differs(config: Path, root: Path, ref_tree: Path) -> bool:
    """Whether REF's copy of a config of the working tree differs from it (or is missing)."""
    if not config.is_relative_to(root.resolve()):
        return False
    theirs = ref_tree / config.relative_to(root.resolve())
    return not theirs.is_file() or theirs.read_bytes() != config.read_bytes()


def varied(vary: str | None) -> dict[str, list[str]]:
    """--vary KEY=A,B: {"KEY=A": ["KEY=A"], ...}, a side for each value; none: the working tree as it is."""
    if vary is None:
        return {"new": []}
    key, _, values = vary.partition("=")
    return {f"{key}={value}": [f"{key}={value}"] for value in values.split(",")}


def benchmark(args, root: Path, configs: dict[str, Path], command: str) -> dict:
    tree = describe_tree(root)  # before this script writes anything into the tree
    overrides = varied(args.vary)
    sides = {side: {**tree, "label": f"{tree['label']}, {side}" if args.vary else tree["label"]} for side in overrides}
    report = {"command": command, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "repeats": args.repeats, "own_configs": args.own_configs, "configs": {}}
    with contextlib.ExitStack() as stack:
        trees = {side: root for side in overrides}
        if args.against is not None:
            commit = resolve_ref(root, args.against)
            sides = {"old": {"ref": args.against, "commit": commit, "label": f"{args.against} = {commit}"}, **sides}
            overrides["old"] = []
            trees = {"old": stack.enter_context(ref_worktree(root, commit)), **trees}
        report |= {"sides": sides, "order": " ".join(alternate(list(trees), args.repeats))}
        for tree in trees.values():
            compile_tree(tree)
        for name, config in configs.items():
            runs = {side: [] for side in trees}
            for side in alternate(list(trees), args.repeats):
                own = trees[side] / config.relative_to(root.resolve()) if args.own_configs else config
                run = measure(trees[side], own, args.set + overrides[side], sides[side]["label"], args.require_idle)
                runs[side].append(run)
                print(f"{name} {side} {len(runs[side])}/{args.repeats}: wall {run['wall_seconds']:.2f} s, "
                      f"{run['steps_per_second']:.0f} steps/s", flush=True)
            entry = {"config": str(config), **{side: summarize(runs[side]) for side in trees}}
            if "old" in trees:
                entry |= {"ratio": ratios(entry["old"], entry["new"]), "paired": paired(runs["old"], runs["new"]),
                          "ref_config_differs": ref_copy_differs(config, root, trees["old"])}
            report["configs"][name] = {**entry, "runs": runs}
    return report


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tools/benchmark.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True, help="a config to train (repeatable)")
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS, help="runs per config and side")
    parser.add_argument("--set", action="append", default=[], help="config override for every run, key=value")
    parser.add_argument("--against", metavar="REF", help="alternate runs of REF's train.py (any git ref) and the "
                        "working tree's")
    parser.add_argument("--vary", metavar="KEY=A,B,...", help="take turns over these values of one config key "
                        "(the working tree only)")
    parser.add_argument("--own-configs", action="store_true",
                        help="with --against, each side trains its own tree's copy of each config")
    parser.add_argument("--allow-few-repeats", action="store_true",
                        help=f"allow --repeats below {MIN_REPEATS} with --against, for a quick check")
    parser.add_argument("--require-idle", action="store_true",
                        help=f"refuse to start when other processes use more than {BUSY_CORES} cores, and fail "
                             "when a run was measured beside such work")
    parser.add_argument("--out", metavar="PREFIX", help="write PREFIX.json and PREFIX.md (default "
                        "results/benchmark, with --against results/benchmark_against)")
    return parser.parse_args(argv)


def check(args, root: Path) -> dict[str, Path]:
    """Refuses bad input before anything starts; returns the configs' paths."""
    configs = {}
    for name in args.config:
        path = Path(name) if Path(name).is_file() else root / name
        if not path.is_file():
            raise UsageError(f"config not found: {name}")
        configs[name] = path.resolve()
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.vary is not None and (args.against is not None or "=" not in args.vary
                                  or not all(args.vary.partition("=")[2].split(","))):
        raise UsageError("--vary takes KEY=A,B,... (values of one config key), without --against")
    if args.own_configs and args.against is None:
        raise UsageError("--own-configs goes with --against")
    if args.own_configs and any(not p.is_relative_to(root.resolve()) for p in configs.values()):
        raise UsageError("--own-configs needs configs inside the repository")
    if args.against is not None and args.repeats < MIN_REPEATS and not args.allow_few_repeats:
        raise UsageError(f"--against needs --repeats {MIN_REPEATS} or more for a median on a drifting machine "
                         "(add --allow-few-repeats for a quick check)")
    return configs


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    command = shlex.join(["python", "tools/benchmark.py", *argv])
    prefix = Path(args.out) if args.out else root / "results" / ("benchmark_against" if args.against else "benchmark")
    out = life.prefixed(prefix)

    def start() -> dict[str, Path]:
        configs = check(args, root)
        life.check_out("--out", out)
        if args.require_idle:
            require_idle()
        if args.against is not None and args.repeats < MIN_REPEATS:
            print(f"warning: {args.repeats} run(s) per side: a quick check, not a speed claim", file=sys.stderr)
        return configs

    def work(configs: dict[str, Path]) -> int:
        report = benchmark(args, root, configs, command)
        lines = markdown(report)
        life.write_out({out[0]: json.dumps(report, indent=2) + "\n", out[1]: "\n".join(lines) + "\n"})
        print("\n".join(lines))
        return 0
    # a stop signal unwinds the work: the run is killed, the worktree removed
    return script.life(start, work, (UsageError,), at_once=lambda: ": runs stopped, temporary files and worktree removed")


if __name__ == "__main__":
    script.run(main)
