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
import sys
import threading

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


@contextlib.contextmanager
def deferred():
    """SIGINT and SIGTERM held back for the block: one that arrives meanwhile is handed, when the block
    ends, to the handler that was in place before it. For a step that must not be cut in the middle:
    starting a worker hands the forkserver's new child its start-up data through a pipe, and a handler
    that exits at once (leave()) while the parent writes it left the child reading half of it, which
    printed its EOFError traceback (test_trust's start-up test, once in a CI run on 2026-11-26).
    Python runs signal handlers in the main thread alone, so elsewhere (a Ray trial's thread) this
    holds nothing back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {number: signal.signal(number, lambda number, frame: caught.append(number))
                for number in STOP_SIGNALS}
    try:
        yield
    finally:
        _restore(previous)
        for number in dict.fromkeys(caught):  # each signal once, in the order it came
            signal.raise_signal(number)


@contextlib.contextmanager
def raising(caught: list):
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread for the block, and each appends
    its number to `caught` first (which one came: 130 or 143). Set here whatever the process
    inherited: a shell without job control starts a background job with SIGINT ignored, and Python
    then installs no handler of its own, so enjoy.py ran all its episodes through a Ctrl-C sent to
    its group (a probe round started from a script, 2026-11-26). The previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers are the main thread's
        yield
        return

    def stop(number, frame):
        caught.append(number)
        raise KeyboardInterrupt
    previous = {number: signal.signal(number, stop) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        _restore(previous)


def _restore(previous: dict) -> None:
    """Puts back the handlers signal.signal() returned, {number: handler}; None (a handler not set
    from Python) as the default."""
    for number, handler in previous.items():
        signal.signal(number, signal.SIG_DFL if handler is None else handler)


def report(caught: list) -> int:
    """For a KeyboardInterrupt out of a raising() block: its one line on stderr, and the exit code,
    128 + the signal's number (SIGINT when none was caught: Python's own handler raised it)."""
    number = caught[0] if caught else signal.SIGINT
    print(f"stopped by {signal.Signals(number).name}", file=sys.stderr)
    return 128 + number
