"""The one bound the tests put on a child process or on a wait: a guard against a hang, never a time limit.

A step that takes seconds on an idle machine takes minutes beside other work, and a bound that was
generous when written becomes a limit there (docs/reliability.md, "How it is tested"). So no test waits
on a clock it could outrun by being slow: a child process or an awaited event gets HANG_S, far above
anything seen under load, and only a test that has really hung reaches it.
"""
from __future__ import annotations

import subprocess
import time
from typing import Callable

HANG_S = 1200.0  # seconds


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
