"""How the command-line scripts answer SIGINT (Ctrl-C) and SIGTERM while they start.

Until a script has anything open or running, a stop signal ends it at once, quietly:
one line and exit code 128 + the signal's number (130, 143). The handler is installed
before the scripts' heavy imports (torch, Ray), which take seconds and would otherwise
end in a KeyboardInterrupt traceback from somewhere inside them; so this module imports
nothing but the standard library.
"""
from __future__ import annotations

import contextlib
import os
import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def leave(number: int, when: str = "during start-up") -> None:
    """One line on stderr, then exit 128 + number at once (nothing to save or close)."""
    os.write(2, f"stopped by {signal.Signals(number).name} {when}\n".encode())
    os._exit(128 + number)


def leave_at_once_on_stop_signals() -> None:
    """SIGINT and SIGTERM end the process at once, quietly (leave()), until a script sets its own."""
    for number in STOP_SIGNALS:
        signal.signal(number, lambda number, frame: leave(number))


@contextlib.contextmanager
def blocked():
    """SIGINT and SIGTERM blocked in this thread for the block: every process started inside it
    begins with them blocked (the mask survives fork and exec), so a Ctrl-C or SIGTERM sent to the
    whole process group reaches the parent alone, which decides how to stop and stops its children
    itself. The parent loses none: a signal sent meanwhile reaches its handler through another
    thread, or waits as pending until the block ends."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
