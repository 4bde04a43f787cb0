"""tools/test_tally.py: what it reads from pytest's output, and that every finished clone is on disk."""
import json
import os
from pathlib import Path

from tests.hang import wait_until
from tools import benchmark, test_tally

FAILED = """\
FAILED tests/test_trust.py::test_ctrl_c[1.5] - AssertionError: traceback
ERROR tests/test_sweep.py::test_resume - OSError
=========== 1 failed, 590 passed, 8 skipped, 1 error in 612.30s (0:10:12) ===========
"""


def test_counts_reads_the_closing_line_and_the_failed_names():
    found = test_tally.counts(FAILED)
    assert (found["passed"], found["failed"], found["skipped"], found["errors"]) == (590, 1, 8, 1)
    assert found["failures"] == ["tests/test_trust.py::test_ctrl_c[1.5]", "tests/test_sweep.py::test_resume"]
    assert test_tally.counts("594 passed, 8 skipped in 600.00s")["failed"] == 0


def test_counts_finds_the_closing_line_before_pips_warnings():
    """.ci/run's stderr (pip's warnings about local indexes) comes after pytest's stdout."""
    output = ("........\n594 passed, 8 skipped in 612.30s (0:10:12)\n\n"
              "WARNING: Location 'file:///opt/pypi/simple/memory-gym/' is ignored: it is neither a file nor a directory.")
    found = test_tally.counts(output)
    assert (found["passed"], found["skipped"]) == (594, 8)
    assert found["closing_line"] == "594 passed, 8 skipped in 612.30s (0:10:12)"


def test_each_clone_is_written_as_it_ends(tmp_path, monkeypatch):
    """A tally stopped half-way (a session's end) keeps the rows of the clones it finished."""
    monkeypatch.setattr(test_tally, "OUT", tmp_path / "tally")
    ends = iter([{"commit": "abc1234", "load": "idle", "exit_code": 0, "wall_seconds": 60.0, "other_cores": 0.0,
                  "load_average_start": 0.1, "load_average_end": 0.2, **test_tally.counts("3 passed in 1.0s"),
                  "date": "today"}])

    def one_clone(commit, load):
        if (tmp_path / "tally.json").exists():
            raise KeyboardInterrupt  # the second clone is stopped
        return next(ends)

    monkeypatch.setattr(test_tally, "one_clone", one_clone)
    try:
        test_tally.main(["--clones", "2"])
    except KeyboardInterrupt:
        pass
    rows = json.loads((tmp_path / "tally.json").read_text())["rows"]
    assert [r["passed"] for r in rows] == [3]
    assert "| 1 | ? | abc1234 | idle |" in (tmp_path / "tally.md").read_text()


def test_a_clone_is_beside_a_heavy_job_by_what_was_measured_not_by_its_label():
    """--load beside starts no job: a clone whose neighbour turned out light is not counted as busy."""
    def row(load, cores):
        return {"commit": "abc1234", "load": load, "exit_code": 0, "wall_seconds": 60.0, "other_cores": cores,
                **test_tally.counts("3 passed in 1.0s")}
    lines = test_tally.markdown([row("idle", 0.01), row("beside", 1.6), row("beside", 0.4), row("busy", 2.0)])
    assert lines[-1] == ("4 clones, 0 with a failure; 2 of them beside a CPU-heavy job "
                         "(a busy loop per core, or other processes used >= 1.0 cores on average), 2 not.")


def test_the_machine_is_described_before_the_first_clone(tmp_path, monkeypatch):
    """machine() imports torch: a tally started with a python that lacks it fails at once, not after a clone."""
    monkeypatch.setattr(test_tally, "OUT", tmp_path / "tally")
    ran = []

    def machine():
        raise ModuleNotFoundError("No module named 'torch'")

    monkeypatch.setattr(test_tally, "machine", machine)
    monkeypatch.setattr(test_tally, "one_clone", lambda commit, load: ran.append(commit))
    try:
        test_tally.main(["--clones", "1"])
    except ModuleNotFoundError:
        pass
    assert ran == []


def test_the_failure_report_is_pytests_own_without_pips_noise():
    output = ("....F.\n=================================== FAILURES ===================================\n"
              "___ test_resume ___\nE   FileNotFoundError: summaries/cut\n"
              "=========================== short test summary info ============================\n"
              + FAILED + "\nWARNING: Location 'file:///opt/pypi/simple/torch/' is ignored: it is neither a file nor "
              "a directory.\n" * 70 + "make: *** [Makefile:30: test] Error 1")
    report = test_tally.failure_report(output)
    assert report[0].strip("= ") == "FAILURES" and "E   FileNotFoundError: summaries/cut" in report
    assert not any(line.startswith("WARNING: Location") for line in report) and report[-1].startswith("make: ***")


def test_the_busy_loops_count_as_other_work_and_end_when_stopped():
    """They stand for a neighbour's job: load_snapshot leaves out the tally's own tree, so they must
    not be in it (as children of the tally they were, and a busy clone recorded 0.04 other cores)."""
    pids = test_tally.busy_job()
    try:
        assert len(pids) == len(os.sched_getaffinity(0))
        ours = benchmark._descendants(benchmark._processes(), os.getpid())
        assert all(Path(f"/proc/{pid}").exists() for pid in pids) and not set(pids) & ours
    finally:
        test_tally.stop(pids)
    wait_until(lambda: not any(alive(pid) for pid in pids), "end of the busy loops")


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False
