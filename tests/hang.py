"""The one bound the tests put on a child process or on a wait: a guard against a hang, never a time limit.

A step that takes seconds on an idle machine takes minutes beside other work: `make test` with one
spinning process per core (tools/test_tally.py --load busy, 2-core Xeon, 2026-11-26) took 30 min
against 8.5 alone, and three sweep tests failed because their bounds (120-240 s) had become limits: a
two-seed sweep had not started its first trial 180 s after launch. So no test waits on a clock it
could outrun by being slow: a child process or an awaited event gets HANG_S, far above anything seen
under load, and only a test that has really hung reaches it.
"""
from __future__ import annotations

import subprocess
import time
from typing import Callable

HANG_S = 1200.0  # seconds; beside two spinning cores the slowest sweep test took 423 s, its three waits together
# (before sweep.py ran its trials at its own priority; 62 s since)


def wait_until(condition: Callable[[], bool], what: str, process: subprocess.Popen | None = None,
               poll: float = 0.05) -> None:
    """Returns as soon as condition() holds; raises AssertionError naming `what` if `process` ends
    first (with its stderr) or HANG_S passes. The poll is how often the event is looked at, not a
    guess at how long it takes."""
    deadline = time.monotonic() + HANG_S
    while not condition():
        if process is not None and process.poll() is not None:
            if condition():  # it happened as the process ended
                return
            err = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"the process ended (exit {process.returncode}) before {what}: {err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"hung: no {what} after {HANG_S:.0f} s")
        time.sleep(poll)
