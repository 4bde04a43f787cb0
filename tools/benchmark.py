"""End-to-end speed of train.py: one tree's configs, or this tree against an older commit.

Plain mode: each config is trained `--repeats` times as its own process, and the
wall time includes start-up (imports, environment and model construction) as a
user sees it. Reports wall seconds (median, min, max), environment steps per
second, peak resident memory, and the share of the training loop spent stepping
environments, in rollout inference, preparing the buffer (GAE and the sequence
index) and optimising. Writes results/benchmark.json and .md (`--name`, `--out`).

    python tools/benchmark.py --config configs/cartpole_masked.yaml --config configs/poc_memory_env.yaml
    python tools/benchmark.py --config configs/minigrid.yaml --repeats 1 --set updates=3 --name benchmark_minigrid

(`make bench` adds --ceiling, the env-only steps/s with random actions, and
--sb3, sb3-contrib's RecurrentPPO alternated with masked CartPole.)

Against mode, the project's speed regression check: the same runs for REF's
train.py (any git ref: a hash, a branch, HEAD~3; checked out in a temporary
detached worktree that is removed again at the end, also on an error or Ctrl-C)
and for this working tree's, uncommitted changes included.

    python tools/benchmark.py --against 5176396 --config configs/minigrid.yaml --set updates=3

Why alternate: the speed of these machines drifts by 2-3x from day to day and
within a day (other work shares the cores), so two numbers taken at different
times are not comparable; a speed claim is only a ratio measured in one run. The
runs go old, new, old, new, ... (at least 3 each unless --allow-few-repeats), so
drift hits both sides alike, and the report gives per side the medians (wall
seconds with start-up, training-loop steps/s, the per-phase seconds of train.py's
`timings:` line, peak memory of the whole process tree) and the ratios new/old of
steps/s and old/new of wall seconds; also the best runs' steps/s ratio, a second
view when other work slowed some runs (it slows runs, never speeds them). Writes results/benchmark_against.json and .md
(`--out PREFIX`) with the machine, both commits, the command line and the date.

Every run is `python <tree>/train.py --config <config> --cpu --set ...` (without --cpu where a --set
names the device) with the
same interpreter (sys.executable), in its own new empty working directory (its
models/ and summaries/ land there), with PYTHONPATH set to <tree> so that each
side imports its own modules. Both sides train the working tree's config file,
so the two sides run the same experiment (the report says if REF's copy
differs). Each tree's bytecode is compiled before the first run, so a fresh
checkout does not pay for it in its first measurement. Output goes to a file,
not a terminal: there train.py prints one `update ...` line per update and the
final `timings: {...}` line (a version that shows a progress bar does so only on
a terminal; carriage returns are split on all the same).

--busy N (either mode) keeps N other training runs of the same config (this
tree's train.py, many updates) going during each measured run: started before
it, killed after it, each in its own process group and working directory, so a
row shows how the trainer fares on a busy machine. Such rows say "busy N".

Every measured run also records how busy the machine was beside it: the CPU time
that processes outside the benchmark's own tree used meanwhile (from /proc) and
the 1-minute load average. A run beside more than BUSY_CORES cores of other work
is marked in the report ("Load:" line, and per row), so a figure taken beside
other work is never read as one taken alone. --require-idle refuses to start when
the machine is busy (exit code 2) and fails when a measured run was (exit code 1).

Errors a user can cause (unknown ref, no git or no repository, a config that does
not exist, too few repeats) end in one line on stderr and exit code 2, before
anything is created; a failing train.py ends with exit code 1 and its stderr's end.
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
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

PHASES = ("env", "inference", "buffer", "update")
SIDES = ("old", "new")  # the order of the alternation: REF first, then the working tree
MIN_REPEATS = 3  # fewer runs per side give no usable median on a drifting machine
BUSY_UPDATES = 1_000_000  # a load that never finishes on its own; it is killed after each measurement


class UsageError(Exception):
    """Bad input: one line on stderr, exit code 2."""


class RunError(Exception):
    """A train.py process failed: its message and stderr's end, exit code 1."""


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


BUSY_CORES = 0.1  # other processes using more than this many cores on average make a measurement "busy"


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
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, (parent, _) in processes.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


def other_cpu(before: dict[int, tuple[int, float]], after: dict[int, tuple[int, float]]) -> dict[int, float]:
    """{pid: CPU seconds between the two process tables} of every process outside this one's tree."""
    ours = _descendants(after, os.getpid()) | _descendants(before, os.getpid())
    return {pid: cpu - (before[pid][1] if pid in before else 0.0) for pid, (_, cpu) in after.items()
            if pid not in ours}


def load_snapshot(before: dict | None = None) -> dict:
    """How busy the machine is, without this process and its descendants (the measured runs).

    Without `before`: a starting point (every process's CPU seconds, the 1-minute load average).
    With it: what other processes did since, as {seconds, other_cpu_seconds, other_cores (their
    average over the interval), load_average_start, load_average_end, busy (other_cores above
    BUSY_CORES), summary}. A process that started and ended between the two snapshots is not seen,
    so the figure is a lower bound; a stopped one (SIGSTOP) counts nothing."""
    now, processes, load = time.perf_counter(), _processes(), os.getloadavg()[0]
    if before is None:
        return {"time": now, "processes": processes, "load_average": load}
    other = sum(other_cpu(before["processes"], processes).values())
    seconds = now - before["time"]
    cores = max(0.0, other) / max(seconds, 1e-9)
    busy = cores > BUSY_CORES
    summary = (f"{'busy' if busy else 'idle'}: other processes used {cores:.2f} cores on average over {seconds:.0f} s "
               f"(load average {before['load_average']:.2f} -> {load:.2f})")
    return {"seconds": seconds, "other_cpu_seconds": max(0.0, other), "other_cores": cores,
            "load_average_start": before["load_average"], "load_average_end": load, "busy": busy,
            "summary": summary}


def require_idle(seconds: float = 3.0) -> None:
    """Refuses (UsageError) when other processes keep the machine busy over a short sample."""
    sample = load_snapshot()
    time.sleep(seconds)  # the interval measured, not a wait for an event
    load = load_snapshot(sample)
    if load["busy"]:
        raise UsageError(f"--require-idle: the machine is {load['summary']}; stop that work or measure without "
                         "--require-idle (the figures are then marked busy)")


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


# ---------------------------------------------------------------- one train.py process

def train_command(tree: Path, config: Path, overrides: list[str], run_id: str = "bench") -> list[str]:
    """train.py on the CPU (--cpu), unless an override names the device (`device=cuda`: precision.py on a GPU)."""
    device = [] if any(o.startswith("device=") for o in overrides) else ["--cpu"]
    return [sys.executable, str(tree / "train.py"), "--config", str(config), "--run-id", run_id, *device,
            *(a for o in overrides for a in ("--set", o))]


def tree_environment(tree: Path) -> dict:
    """os.environ with `tree` first on PYTHONPATH, and no other checkout of this project on it."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                 if p and not (Path(p) / "train.py").exists()]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree.resolve()), *inherited])}


def start_group(command: list[str], cwd: Path, env: dict, out: Path, err: Path | None = None) -> subprocess.Popen:
    """Starts `command` as the leader of a new session and process group (its env workers join it).

    Output goes to files, not pipes, so a long run never blocks on a full pipe; stderr joins
    stdout when no `err` file is given."""
    with open(out, "w") as stdout, open(err or os.devnull, "w") as stderr:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=stdout,
                                stderr=stderr if err else subprocess.STDOUT, start_new_session=True)


def exited(process: subprocess.Popen) -> bool:
    """Whether the process has ended, without reaping it: until it is reaped its pid, and so its
    process group id, cannot be reused, so killing the group can only reach our own processes."""
    if process.returncode is not None:
        return True
    return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def end_group(process: subprocess.Popen) -> None:
    """Kills what is left of the process's own group (the leader, env workers), then reaps the leader."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def parse_output(out: str) -> dict:
    """The `timings: {...}` JSON line and the last `update ...` line's reward, from any version's output.

    Splits on carriage returns too, so a progress bar's redraws cannot hide a line."""
    lines = re.split(r"[\r\n]+", out)
    timings = None
    for line in lines:
        found = re.search(r"timings: (\{.*\})\s*$", line)
        if found:
            timings = json.loads(found.group(1))
    if timings is None:
        raise RunError("train.py printed no 'timings: {...}' line")
    rewards = [found.group(1) for line in lines if re.match(r"\s*update\b", line)
               and (found := re.search(r"\breward\s+(\S+)", line))]
    try:
        final = float(rewards[-1]) if rewards else None
    except ValueError:  # "-": no episode ended yet
        final = None
    return {"final_reward": final, **timings}


def run_train(tree: Path, config: Path, overrides: list[str], label: str = "") -> dict:
    """Runs `tree`'s train.py once in a new empty directory; returns its wall seconds (start-up
    included), the peak memory of its whole process tree, and its `timings:` line."""
    with tempfile.TemporaryDirectory(prefix="benchmark-run-") as tmp:
        work, log, errors = Path(tmp) / "work", Path(tmp) / "train.log", Path(tmp) / "train.err"
        work.mkdir()
        start = time.perf_counter()
        process = start_group(train_command(tree, config, overrides), work, tree_environment(tree), log, errors)
        try:
            peak = 0.0
            while not exited(process):  # sample the whole process tree's memory while it runs
                peak = max(peak, tree_rss_mb(process.pid))
                sample = time.perf_counter() + 0.2
                while not exited(process) and time.perf_counter() < sample:
                    time.sleep(0.01)  # notices the end within 10 ms, so the wall time is not rounded up
            wall = time.perf_counter() - start
        finally:
            end_group(process)
        out, err = log.read_text(), errors.read_text()
    if process.returncode != 0:
        tail = "\n".join(err.strip().splitlines()[-20:])
        raise RunError(f"train.py{' of ' + label if label else ''} failed on {config} "
                       f"(exit code {process.returncode}):\n{tail}")
    try:
        parsed = parse_output(out)
    except RunError as error:
        raise RunError(f"{error} ({tree / 'train.py'} on {config})") from None
    return {"wall_seconds": wall, "peak_rss_all_processes_mb": peak, **parsed}


@contextlib.contextmanager
def busy_load(n: int, tree: Path, config: Path, overrides: list[str]):
    """N training runs of `config` that keep the cores busy while the block runs, then are killed."""
    loads = []
    with contextlib.ExitStack() as stack:
        try:
            for i in range(n):
                tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="benchmark-busy-")))
                (tmp / "work").mkdir()
                command = train_command(tree, config, [*overrides, f"updates={BUSY_UPDATES}",
                                                       "checkpoint_interval=0"], run_id=f"busy{i}")
                loads.append((start_group(command, tmp / "work", tree_environment(tree), tmp / "load.log"),
                              tmp / "load.log"))
            for process, log in loads:  # measure only once every load is in its training loop
                while not re.search(r"^(training|update) ", log.read_text(), re.MULTILINE):
                    if exited(process):
                        tail = "\n".join(log.read_text().strip().splitlines()[-20:])
                        raise RunError(f"the busy load ({config}) ended before training:\n{tail}")
                    time.sleep(0.05)
            yield
        finally:
            for process, _ in loads:
                end_group(process)


def compile_tree(tree: Path) -> None:
    """Writes `tree`'s bytecode before any measured run: a fresh checkout has none, and the REF side's
    first run would otherwise pay for compiling every module (about half a second here)."""
    for folder, subfolders, files in os.walk(tree):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]  # not .git, nor a .venv
        for name in files:
            if name.endswith(".py"):
                compileall.compile_file(os.path.join(folder, name), quiet=2)


def measure(tree: Path, config: Path, overrides: list[str], busy: int, load_tree: Path, label: str = "",
            idle: bool = False) -> dict:
    """One measured run of `tree`'s train.py, with `busy` loads of `load_tree`'s train.py around it, and
    what other processes did meanwhile ("load"); with idle, a run beside other work is a RunError."""
    with busy_load(busy, load_tree, config, overrides):
        before = load_snapshot()
        run = run_train(tree, config, overrides, label)
        load = load_snapshot(before)
    if idle and load["busy"]:
        raise RunError(f"--require-idle: a run of {config.name} was measured beside other work ({load['summary']}); "
                       "stop that work and measure again")
    return {**run, "busy": busy, "load": {k: v for k, v in load.items() if k != "summary"}}


# ---------------------------------------------------------------- plain-mode extras

def random_actions(space, workers: int, steps: int):
    """(steps, workers, k) stored action rows (spaces.py) drawn from the action space, seeded."""
    import numpy as np
    from spaces import action_format
    space.seed(0)
    return np.array([[np.asarray(space.sample(), dtype=np.float64).reshape(-1) for _ in range(workers)]
                     for _ in range(steps)]).astype(action_format(space).dtype)


def env_ceiling(config_path: str | Path, steps: int) -> float:
    """Env-only steps/s: the config's workers (same count, same processes) stepping random actions."""
    from config import load_config
    from worker import VecEnv, environment_seeds
    config = load_config(ROOT / config_path)
    W = config.n_workers
    envs = VecEnv(config.environment, environment_seeds(0, W), config.worker_processes)
    actions = random_actions(envs.spaces.action_space, W, max(1, steps // W))  # drawn before the clock starts
    envs.reset()
    start = time.perf_counter()
    for a in actions:
        envs.step(a)
    seconds = time.perf_counter() - start
    envs.close()
    return len(actions) * W / seconds


def run_sb3(steps: int) -> dict:
    result = subprocess.run([sys.executable, str(ROOT / "tools/sb3_cartpole.py"), "--steps", str(steps)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RunError("sb3-contrib run failed (install it with: pip install -r requirements-bench.txt):\n"
                       + result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


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
    """The working tree's HEAD, and whether uncommitted changes (untracked files too) are measured with it."""
    commit = git(repo, "rev-parse", "HEAD")
    dirty = bool(git(repo, "status", "--porcelain"))
    return {"commit": commit, "uncommitted_changes": dirty,
            "label": commit[:7] + (" + uncommitted changes" if dirty else "")}


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


# ---------------------------------------------------------------- statistics and reports

def alternate(repeats: int) -> list[str]:
    """old, new, old, new, ...: drift in the machine's speed then hits both sides alike."""
    return [side for _ in range(repeats) for side in SIDES]


def summarize(runs: list[dict]) -> dict:
    """Medians (and the range) of one side's runs."""
    def median(key):
        return statistics.median(r[key] for r in runs)
    walls = [r["wall_seconds"] for r in runs]
    rates = [r["steps_per_second"] for r in runs]
    others = [r["load"]["other_cores"] for r in runs if "load" in r]
    return {"runs": len(runs), "busy": runs[0].get("busy", 0), "env_steps": runs[0]["env_steps"],
            "other_cores_max": max(others, default=None),
            "runs_beside_other_work": sum(r["load"]["busy"] for r in runs if "load" in r),
            "wall_seconds_median": statistics.median(walls), "wall_seconds_min": min(walls),
            "wall_seconds_max": max(walls),
            "steps_per_second_median": statistics.median(rates), "steps_per_second_min": min(rates),
            "steps_per_second_max": max(rates),
            "end_to_end_steps_per_second_median": statistics.median(r["env_steps"] / r["wall_seconds"]
                                                                    for r in runs),
            **{f"{p}_seconds_median": median(f"{p}_seconds") for p in PHASES},
            "peak_rss_mb_max": max(r["peak_rss_mb"] for r in runs),
            "peak_rss_all_processes_mb_max": max(r["peak_rss_all_processes_mb"] for r in runs)}


def ratios(old: dict, new: dict) -> dict:
    """Above 1 means the working tree is faster. The medians are the claim; the best runs' ratio is a
    second view for a shared machine, where other work slows some runs many times over, never speeds one up."""
    return {"steps_per_second_new_over_old": new["steps_per_second_median"] / old["steps_per_second_median"],
            "wall_old_over_new": old["wall_seconds_median"] / new["wall_seconds_median"],
            "best_steps_per_second_new_over_old": new["steps_per_second_max"] / old["steps_per_second_max"]}


def paired(old_runs: list[dict], new_runs: list[dict], coverage: float = 0.95) -> dict:
    """Each old run with the new run right after it (the order alternates): how many pairs the new tree
    won, and the median of the pairs' steps/s ratios with its distribution-free interval from order
    statistics (the sign test's: coverage at least `coverage`, None with too few pairs for it). Drift
    that slows both runs of a pair cancels in its ratio, so this tells a small speed-up from noise
    where the two sides' medians cannot."""
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


def against_markdown(report: dict) -> list[str]:
    m, old, new = report["machine"], report["old"], report["new"]
    busy = f", with {report['busy']} busy load(s) running during every measured run" if report["busy"] else ""
    lines = [f"# Speed against {old['ref']}", "", f"Command: `{report['command']}`  ", f"Date: {report['date']}  ",
             f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} on the CPU, Python {m['python']}; "
             f"load average {report['load_average_start']:.2f} at the start, {report['load_average_end']:.2f} "
             "at the end  ", f"Load: {load_line(report)}  ",
             f"Old: `{old['ref']}` = {old['commit']}  ", f"New: the working tree, {new['commit']}"
             + (" + uncommitted changes" if new["uncommitted_changes"] else ""), "",
             f"Runs alternated old, new, old, new, ... ({report['repeats']} each per config{busy}). "
             "Medians; the wall time counts start-up, steps/s and the phases are train.py's training loop "
             "(its `timings:` line).", "",
             "| config | side | commit | wall s, median (min-max) | steps/s, median (min-max) | env s | inference s "
             "| buffer s | update s | peak RSS MB, trainer | peak RSS MB, all processes |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for config, entry in report["configs"].items():
        for side in SIDES:
            s, commit = entry[side], report[side]["commit"][:7]
            commit += "+" if side == "new" and new["uncommitted_changes"] else ""
            mark = f", busy {s['busy']}" if s["busy"] else ""
            if s.get("runs_beside_other_work"):
                mark += f", {s['runs_beside_other_work']} run(s) beside other work (up to {s['other_cores_max']:.2f} cores)"
            lines.append(f"| {config if side == 'old' else ''} | {side}{mark} | {commit} | "
                         f"{s['wall_seconds_median']:.2f} ({s['wall_seconds_min']:.2f}-{s['wall_seconds_max']:.2f}) | "
                         f"{s['steps_per_second_median']:.0f} ({s['steps_per_second_min']:.0f}-"
                         f"{s['steps_per_second_max']:.0f}) | "
                         + " | ".join(f"{s[f'{p}_seconds_median']:.3f}" for p in PHASES)
                         + f" | {s['peak_rss_mb_max']:.0f} | {s['peak_rss_all_processes_mb_max']:.0f} |")
    lines += ["", "| config | busy | steps/s new / old (medians) | wall old / new (medians) "
              "| steps/s new / old (best runs) | pairs the new tree won | steps/s new / old per pair, median "
              "[interval] |", "|---|---:|---:|---:|---:|---:|---|"]
    for config, entry in report["configs"].items():
        r, p = entry["ratio"], entry["paired"]
        interval = (f"[{p['pair_ratio_low']:.3f}, {p['pair_ratio_high']:.3f}] ({p['pair_ratio_coverage']:.1%})"
                    if p["pair_ratio_low"] is not None else "(too few pairs for an interval)")
        lines.append(f"| {config} | {entry['busy']} | {r['steps_per_second_new_over_old']:.3f} | "
                     f"{r['wall_old_over_new']:.3f} | {r['best_steps_per_second_new_over_old']:.3f} | "
                     f"{p['pairs_new_faster']} of {p['pairs']} | {p['pair_ratio_median']:.3f} {interval} |")
    lines += ["", "Above 1: the working tree is faster. Where a side's min-max spans more than a few percent, other "
              "work disturbed the runs: repeat with more --repeats, and trust the ratio only as far as both "
              "columns agree. A pair is an old run and the new run right after it; its ratio cancels drift that "
              "slows both. The interval is the median pair ratio's distribution-free one (order statistics, "
              "its coverage in brackets): where it holds 1.0, the runs do not tell the two trees apart."]
    if report.get("own_configs"):
        lines += ["Each side trained its own tree's copy of each config (as shipped at that commit)."]
    elif any(e["ref_config_differs"] for e in report["configs"].values()):
        lines += ["Both sides trained the working tree's config file; REF's own copy differs for: "
                  + ", ".join(c for c, e in report["configs"].items() if e["ref_config_differs"]) + "."]
    return lines


def load_line(report: dict) -> str:
    """How busy the machine was during the measured runs: idle, or which runs had other work beside them."""
    runs = [r for entry in report["configs"].values()
            for r in (entry["runs"]["old"] + entry["runs"]["new"] if isinstance(entry, dict) and "runs" in entry
                      else entry)]
    loads = [r["load"] for r in runs if "load" in r]
    if not loads:
        return "not recorded"
    busy = [load for load in loads if load["busy"]]
    worst = max(load["other_cores"] for load in loads)
    if not busy:
        return (f"idle: during every measured run other processes used at most {worst:.2f} cores on average "
                f"(below {BUSY_CORES}; CPU time of the processes outside the benchmark's own, from /proc)")
    return (f"BUSY: {len(busy)} of {len(loads)} measured runs had other work beside them, up to {worst:.2f} cores "
            "on average: these figures are not taken alone")


def plain_markdown(report: dict) -> list[str]:
    m = report["machine"]
    lines = ["# Benchmark", "", f"Command: `{report['command']}`  ",
             f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} on the CPU, Python {m['python']}  ",
             f"Load: {load_line(report)}", "",
             "| config | env steps | wall s (median, min-max) | steps/s (end to end) | env | inference | buffer "
             "| update | peak RSS MB, trainer | peak RSS MB, all processes |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for config, runs in report["configs"].items():
        walls = [r["wall_seconds"] for r in runs]
        med = statistics.median(walls)
        mid = runs[walls.index(med)] if med in walls else runs[0]
        loop = sum(mid[f"{k}_seconds"] for k in PHASES)
        share = {k: 100 * mid[f"{k}_seconds"] / loop for k in PHASES}
        mark = f" (busy {report['busy']})" if report["busy"] else ""
        lines.append(f"| {config}{mark} | {mid['env_steps']} | {med:.1f} ({min(walls):.1f}-{max(walls):.1f}) | "
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
    return lines


def write(prefix: Path, report: dict, lines: list[str]) -> None:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.json").write_text(json.dumps(report, indent=2) + "\n")
    Path(f"{prefix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# ---------------------------------------------------------------- the two modes

def plain(args, root: Path, configs: dict[str, Path], prefix: Path, command: str) -> None:
    report = {"machine": machine(), "command": command, "busy": args.busy, "configs": {}, "ceiling": {}, "sb3": []}
    for name, config in configs.items():
        runs = []
        for _ in range(args.repeats):
            runs.append(measure(root, config, args.set, args.busy, root, idle=args.require_idle))
            print(name, json.dumps(runs[-1]), flush=True)
            if args.sb3 and config.stem == "cartpole_masked":
                report["sb3"].append(run_sb3(runs[-1]["env_steps"]))
                print("sb3-contrib", json.dumps(report["sb3"][-1]), flush=True)
        report["configs"][name] = runs
        if args.ceiling:
            report["ceiling"][name] = env_ceiling(config, min(runs[0]["env_steps"], 409_600))
            print(name, "env-only ceiling steps/s", round(report["ceiling"][name]), flush=True)
    write(prefix, report, plain_markdown(report))


def ref_copy_differs(config: Path, root: Path, ref_tree: Path) -> bool:
    """Whether REF's own copy of a config in the working tree differs from it (or is missing)."""
    if not config.is_relative_to(root.resolve()):
        return False  # a config from elsewhere: REF has no copy of its own
    theirs = ref_tree / config.relative_to(root.resolve())
    return not theirs.is_file() or theirs.read_bytes() != config.read_bytes()


def against(args, root: Path, configs: dict[str, Path], prefix: Path, command: str) -> None:
    commit = resolve_ref(root, args.against)
    new = describe_tree(root)  # before this script writes anything into the tree
    report = {"mode": "against", "command": command,
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "load_average_start": os.getloadavg()[0], "repeats": args.repeats, "busy": args.busy,
              "order": " ".join(alternate(args.repeats)),
              "old": {"ref": args.against, "commit": commit}, "new": new, "own_configs": args.own_configs,
              "configs": {}}
    with ref_worktree(root, commit) as ref_tree:
        trees = {"old": ref_tree, "new": root}
        for tree in trees.values():
            compile_tree(tree)
        labels = {"old": f"{args.against} ({commit[:7]})", "new": f"the working tree ({new['label']})"}
        for name, config in configs.items():
            runs = {side: [] for side in SIDES}
            for side in alternate(args.repeats):
                own = trees[side] / config.relative_to(root.resolve()) if args.own_configs else config
                run = measure(trees[side], own, args.set, args.busy, root, labels[side], idle=args.require_idle)
                runs[side].append(run)
                print(f"{name} {side} {len(runs[side])}/{args.repeats}: wall {run['wall_seconds']:.2f} s, "
                      f"{run['steps_per_second']:.0f} steps/s" + (f", busy {args.busy}" if args.busy else ""),
                      flush=True)
            summary = {side: summarize(runs[side]) for side in SIDES}
            report["configs"][name] = {
                "config": str(config), "busy": args.busy, **summary, "ratio": ratios(summary["old"], summary["new"]),
                "paired": paired(runs["old"], runs["new"]),
                "ref_config_differs": ref_copy_differs(config, root, ref_tree), "runs": runs}
    report["load_average_end"] = os.getloadavg()[0]
    write(prefix, report, against_markdown(report))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tools/benchmark.py", description=__doc__.splitlines()[0],
        epilog="the speed regression check: python tools/benchmark.py --against 5176396 "
               "--config configs/minigrid.yaml --set updates=3 (the module docstring says more)")
    parser.add_argument("--config", action="append", required=True, help="a config to train (repeatable)")
    parser.add_argument("--repeats", type=int, default=MIN_REPEATS, help="runs per config (per side with --against)")
    parser.add_argument("--set", action="append", default=[], help="config override for every run, key=value")
    parser.add_argument("--against", metavar="REF",
                        help="alternate runs of REF's train.py (any git ref) and the working tree's")
    parser.add_argument("--own-configs", action="store_true",
                        help="with --against, each side trains its own tree's copy of each config (the config as "
                             "shipped at that commit) instead of the working tree's")
    parser.add_argument("--allow-few-repeats", action="store_true",
                        help=f"allow --repeats below {MIN_REPEATS} with --against, for a quick check")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N other training runs of the same config going during each measured run")
    parser.add_argument("--out", metavar="PREFIX", help="write PREFIX.json and PREFIX.md (default "
                        "results/benchmark, with --against results/benchmark_against; a folder: FOLDER/<name>)")
    parser.add_argument("--name", help="output name in results/ (results/<name>.json, .md)")
    parser.add_argument("--require-idle", action="store_true",
                        help=f"refuse to start when other processes use more than {BUSY_CORES} cores, and fail "
                             "when a measured run had such work beside it")
    parser.add_argument("--ceiling", action="store_true", help="also measure the env-only ceiling (random actions)")
    parser.add_argument("--sb3", action="store_true",
                        help="alternate each masked-CartPole run with sb3-contrib's RecurrentPPO (bench extra)")
    return parser.parse_args(argv)


def check(args, root: Path) -> tuple[dict[str, Path], Path]:
    """Refuses bad input before anything starts; returns the configs' paths and the output prefix."""
    configs = {}
    for name in args.config:
        path = Path(name) if Path(name).is_file() else root / name
        if not path.is_file():
            raise UsageError(f"config not found: {name}")
        configs[name] = path.resolve()
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.busy < 0:
        raise UsageError(f"--busy must be 0 or more, got {args.busy}")
    if args.own_configs and args.against is None:
        raise UsageError("--own-configs goes with --against")
    if args.against is not None:
        if args.ceiling or args.sb3:
            raise UsageError("--ceiling and --sb3 belong to the plain mode, not to --against")
        outside = [name for name, path in configs.items() if not path.is_relative_to(root.resolve())]
        if args.own_configs and outside:
            raise UsageError(f"--own-configs needs configs inside the repository, not {outside[0]}")
        if args.repeats < MIN_REPEATS and not args.allow_few_repeats:
            raise UsageError(f"--against needs --repeats {MIN_REPEATS} or more for a median on a drifting machine "
                             "(add --allow-few-repeats for a quick check)")
    stem = args.name or ("benchmark_against" if args.against is not None else "benchmark")
    prefix = root / "results" / stem if args.out is None else Path(args.out)
    return configs, prefix / stem if prefix.is_dir() else prefix


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    command = shlex.join(["python", "tools/benchmark.py", *argv])

    terminated = []

    def on_sigterm(number, frame):
        terminated.append(number)
        raise KeyboardInterrupt  # unwinds like Ctrl-C: runs are killed, the worktree is removed

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        configs, prefix = check(args, root)
        if args.require_idle:
            require_idle()
        if args.against is not None:
            if args.repeats < MIN_REPEATS:
                print(f"warning: {args.repeats} run(s) per side: a quick check, not a speed claim "
                      f"(use --repeats {MIN_REPEATS} or more)", file=sys.stderr)
            against(args, root, configs, prefix, command)
        else:
            plain(args, root, configs, prefix, command)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: runs stopped, temporary files and worktree removed", file=sys.stderr)
        return 143 if terminated else 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
