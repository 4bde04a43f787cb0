"""`make test` on fresh clones, idle and beside a CPU-heavy job: does the suite ever fail by chance?

    python tools/test_tally.py --clones 5 --load idle
    python tools/test_tally.py --clones 5 --load busy --append
    python tools/test_tally.py --clones 5 --load beside --append   # beside a job you started

Each clone of HEAD, in a new temporary folder, runs .ci/run as CI does (install, then `make test`).
--load busy keeps every core busy meanwhile (one `while True: pass` per core); --load beside starts
nothing and records a job you run yourself. Per clone: the machine, the commit, the CPU other processes
used beside it (from /proc), pytest's counts, the failures with pytest's report of them, and the wall
time. Writes results/test_tally.{md,json} after every clone (--append adds to the rows there); exits 1
if any clone's suite failed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)

from tools.benchmark import load_snapshot, machine  # noqa: E402

OUT = ROOT / "results" / "test_tally"
HEAVY_CORES = 1.0  # other processes' average use that makes a clone "beside a CPU-heavy job"


def busy_job() -> list[int]:
    """One busy loop per core this process may use; their pids. Each starts through a shell that exits at once,
    so that it is no descendant of the tally and load_snapshot counts it among the other processes."""
    loop = f"'{sys.executable}' -c 'while True: pass' </dev/null >/dev/null 2>&1 & echo $!"
    return [int(subprocess.run(["sh", "-c", loop], capture_output=True, text=True, check=True).stdout)
            for _ in os.sched_getaffinity(0)]


def stop(pids: list[int]) -> None:
    """Kills the busy loops by pid (not our children: init reaps them)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


SUMMARY = re.compile(r"^=*\s*(?:\d+ (?:passed|failed|skipped|errors?|deselected|warnings?|xfailed|xpassed)"
                     r"(?:, )?)+ in [\d.]+s")  # pytest's closing line, e.g. "2 passed, 1 skipped in 3.10s"


def counts(output: str) -> dict:
    """Passed, failed, skipped and errors from pytest's last closing line (pip's warnings may follow it),
    and the names of the failed tests."""
    tail = next((line.strip() for line in reversed(output.splitlines()) if SUMMARY.match(line.strip())), "")
    found = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail)}
    found["errors"] = found.pop("error", 0) + found.pop("errors", 0)
    return {kind: found.get(kind, 0) for kind in ("passed", "failed", "skipped", "errors")} | {
        "failures": re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE), "closing_line": tail}


NOISE = "WARNING: Location "  # pip's warnings about the local package indexes, after pytest's output
REPORT_LINES = 400


def failure_report(output: str) -> list[str]:
    """What pytest said about the failures (its FAILURES section, then the short summary), without pip's
    noise, at most its first REPORT_LINES lines; the output's last 80 lines where there is no such section."""
    lines = [line for line in output.splitlines() if not line.startswith(NOISE)]
    start = next((i for i, line in enumerate(lines) if re.fullmatch(r"=+ (FAILURES|ERRORS) =+", line.strip())),
                 max(0, len(lines) - 80))
    return lines[start:start + REPORT_LINES]


def one_clone(commit: str, load: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="tally-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], check=True)
        job = busy_job() if load == "busy" else []  # before the first snapshot: counted as other work
        before = load_snapshot()
        start = time.perf_counter()
        try:
            result = subprocess.run(["bash", ".ci/run"], cwd=clone, capture_output=True, text=True)
            output = result.stdout + "\n" + result.stderr
            wall = time.perf_counter() - start
            seen = load_snapshot(before)
        finally:
            stop(job)
    return {"commit": commit[:7], "machine": machine_name(), "load": load, "exit_code": result.returncode,
            "wall_seconds": wall, "other_cores": seen["other_cores"], "load_average_start": seen["load_average_start"],
            "load_average_end": seen["load_average_end"], **counts(output),
            "failure_report": failure_report(output) if result.returncode else [],
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def machine_name() -> str:
    described = machine()
    return f"{described['cpu']}, {described['cores']} cores"


def markdown(rows: list[dict]) -> list[str]:
    lines = ["# make test on fresh clones, idle and beside a CPU-heavy job", "",
             "Commands: `python tools/test_tally.py --clones 5 --load idle`, then `... --load busy --append` "
             "or `... --load beside --append`. "
             "Each clone ran `.ci/run` (install, then `make test`). "
             "busy: one `while True: pass` process per core, at normal priority, during the whole run; beside: "
             "next to a job started outside the tally (named in the note that goes with the rows); other "
             "cores: what processes outside the tally used meanwhile (the busy job counts there, from clone 25 on; "
             "before, it was left out). results/test_tally.json keeps pytest's report of each failure.", "",
             "| clone | machine | commit | load | other cores (average) | passed | failed | skipped | errors | wall "
             "| failures |",
             "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for i, r in enumerate(rows, 1):
        lines.append(f"| {i} | {r.get('machine', '?')} | {r['commit']} | {r['load']} | {r['other_cores']:.2f} | "
                     f"{r['passed']} | {r['failed']} | {r['skipped']} | {r['errors']} | "
                     f"{r['wall_seconds'] / 60:.1f} min | {', '.join(r['failures']) or '-'} |")
    failed = sum(r["failed"] + r["errors"] > 0 or r["exit_code"] != 0 for r in rows)
    heavy = sum(r["load"] == "busy" or r["other_cores"] >= HEAVY_CORES for r in rows)  # busy: a loop per core
    lines += ["", f"{len(rows)} clones, {failed} with a failure; {heavy} of them beside a CPU-heavy job "
              f"(a busy loop per core, or other processes used >= {HEAVY_CORES:.1f} cores on average), "
              f"{len(rows) - heavy} not."]
    return lines


def write(rows: list[dict]) -> None:
    json_path, md_path = life.prefixed(OUT)
    report = {"rows": rows}  # each row names its machine
    life.write_out({json_path: json.dumps(report, indent=1) + "\n", md_path: "\n".join(markdown(rows)) + "\n"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clones", type=int, default=5)
    parser.add_argument("--load", choices=("idle", "busy", "beside"), default="idle")
    parser.add_argument("--append", action="store_true", help="add to results/test_tally.json's rows")
    args = parser.parse_args(argv)

    def start() -> list[dict]:
        life.check_out("results/test_tally", life.prefixed(OUT))
        rows = life.read_json(OUT.with_suffix(".json"), "the tally's rows")["rows"] if args.append else []
        machine_name()  # before the first clone: a python without torch fails here, not 13 min later
        return rows
    return script.life(start, lambda rows: tally(args, rows))


def tally(args, rows: list[dict]) -> int:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    for i in range(args.clones):
        rows.append(one_clone(commit, args.load))
        r = rows[-1]
        print(f"clone {len(rows)} ({args.load}): {r['closing_line']} ({r['wall_seconds'] / 60:.1f} min, other cores "
              f"{r['other_cores']:.2f})", flush=True)
        write(rows)  # after every clone: a tally stopped half-way keeps the clones it finished
    return 1 if any(r["failed"] or r["errors"] or r["exit_code"] for r in rows) else 0


if __name__ == "__main__":
    script.run(main)
