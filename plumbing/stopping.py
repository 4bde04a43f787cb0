"""How every script answers SIGINT (Ctrl-C), SIGTERM and SIGHUP (its terminal closed), through script.begin and
script.life. Leaving at once ends the processes the script started, says one line and exits 128 + the signal's
number. Only the standard library and psutil are imported here, before the scripts' imports: a handler must not
import, since the signal may land while that module is half imported."""
import contextlib
import os
from multiprocessing import resource_tracker
import select
import signal
import sys
import threading
from typing import Callable

import psutil

# SIGHUP (a closed terminal, a dropped ssh) is answered as SIGTERM is, unless the script started with it ignored:
# nohup asks it to outlive its terminal
NOHUP = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) if NOHUP else (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def leave(number: int, when: str = "during start-up") -> None:
    end_children()
    with contextlib.suppress(OSError):  # a closed or full stderr: the exit code says it
        os.write(2, f"stopped by {signal.Signals(number).name} {when}\n".encode())
    os._exit(128 + number)


def end_children() -> None:
    """Kills every process this one started, and theirs (the forkserver, its resource tracker and the
    workers block the stop signals), and returns once each has ended."""
    ending = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(OSError):  # ended meanwhile
            ending.append(os.pidfd_open(child.pid))
            signal.pidfd_send_signal(ending[-1], signal.SIGKILL)
    for pidfd in ending:
        select.select([pidfd], [], [])  # readable once the process has ended
        os.close(pidfd)


def leave_at_once_on_stop_signals() -> None:
    for number in STOP_SIGNALS:
        signal.signal(number, lambda number, frame: leave(number))


class Stop:
    """A script's answer to the stop signals, for the block (main thread): a signal leaves at once until working();
    then the first calls on_first (without one, raises KeyboardInterrupt), the next raises KeyboardInterrupt, one
    more leaves at once. `leaving` runs before it leaves."""
    # The one whose handlers are in place (a process has one set): found here by what holds a copy of it, such
    # as sweep.py's Tune callback, which a resumed sweep unpickles from Tune's state
    in_place: "Stop | None" = None

    def __init__(self, leaving: Callable[[], None] = lambda: None):
        self.signal: int | None = None  # the first signal of the work
        self.leaving, self.on_first = leaving, None
        self._working = self._interrupted = False
        self._previous: dict = {}

    def __enter__(self) -> "Stop":
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handle) for number in STOP_SIGNALS}
            Stop.in_place = self
        return self

    def __exit__(self, *exc) -> None:
        if Stop.in_place is self:
            Stop.in_place = None
        _restore(self._previous)

    def working(self, on_first: Callable[[int], None] | None = None) -> None:
        """The work begins (the handlers are taken again: a library may have replaced them)."""
        self.on_first, self._working = on_first, True
        if self._previous:
            for number in STOP_SIGNALS:
                signal.signal(number, self._handle)

    def _handle(self, number, frame) -> None:
        if not self._working or self._interrupted:
            self.leaving()
            leave(number, "at once" if self._working else "during start-up")
        if self.signal is None:
            self.signal = number
            if self.on_first is not None:
                return self.on_first(number)
        self._interrupted = True
        raise KeyboardInterrupt

    def report(self, how: str = "") -> int:
        number = self.signal or signal.SIGINT
        print(f"stopped by {signal.Signals(number).name}{how}", file=sys.stderr)
        return 128 + number


@contextlib.contextmanager
def blocked():
    """The stop signals blocked in this thread for the block: a process started inside begins with them
    blocked (the mask survives fork and exec), so a signal to the whole process group reaches the parent
    alone, which stops its children itself; the parent loses none."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@contextlib.contextmanager
def starting_processes():
    """For a block that starts processes: the stop signals held back (deferred) and blocked, so that the processes
    begin with them blocked. Multiprocessing's resource tracker unblocks them as it starts (bpo-33613): it starts
    first."""
    with deferred(), blocked():
        resource_tracker.ensure_running()
        with blocked():
            yield


@contextlib.contextmanager
def deferred():
    """The stop signals held back for a step that must not be cut (a file's write, a worker's start-up data),
    then handed in order to the handler in place before; Python runs handlers in the main thread alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {number: signal.signal(number, lambda number, frame: caught.append(number)) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        _restore(previous)
        for number in caught:
            signal.raise_signal(number)


def _restore(previous: dict) -> None:
    for number, handler in previous.items():
        signal.signal(number, signal.SIG_DFL if handler is None else handler)
