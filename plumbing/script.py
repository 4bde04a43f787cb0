"""The life every script shares: begin(__name__) in its first lines, `return life(start, work)` in main(), and
run(main) as a program. Exit codes, as each script's --help says: 0 done, 1 failed after it started (Failed), 2
refused before it started (bad flag, config or file), 128 + the signal's number stopped by a signal."""
import os
import signal
import sys
from typing import Callable

from plumbing import stopping, threads
from plumbing.cli import console, failed, start_up_warnings
from plumbing.errors import CheckpointError, ConfigError

STOPPED = "129 / 130 / 143 stopped by SIGHUP (a closed terminal) / Ctrl-C / SIGTERM"  # for the scripts' --help


class Failed(Exception):
    """The script failed after it started: `error: message`, exit code 1."""


def begin(name: str) -> None:
    """A script's first lines when it runs as a program: OpenMP's spin shortened before torch loads, and a stop
    signal leaves at once until main() takes over."""
    if name == "__main__":
        threads.share_cores()
        stopping.leave_at_once_on_stop_signals()


def life(start: Callable[[], object], work: Callable[[object], int], refused: tuple = (),
         on_first: Callable[[int], None] | None = None, at_once: Callable[[], str] = str,
         leaving: Callable[[], None] = lambda: None, close: Callable[[], None] = lambda: None) -> int:
    """start() with the warnings held (a refusal is then its one line), then work(what start returned) with the stop
    signals answered as stopping.Stop says. ConfigError, CheckpointError and `refused` are refused (2), Failed fails
    (1), work interrupted says at_once()'s words. Then close() and leaving(), which a stop at once runs too (a lock)."""
    with stopping.Stop(leaving) as stop:
        try:
            with start_up_warnings():
                started = start()
            stop.working(on_first)
            return work(started)
        except (ConfigError, CheckpointError, *refused) as error:
            return failed(error)
        except Failed as error:
            return failed(error, 1)
        except KeyboardInterrupt:
            return stop.report(at_once())
        finally:
            close()
            leaving()


def run(main: Callable[[], int], quick_exit: bool = False) -> None:
    """A script's end: a closed or failing console (`| head`, `>&-`, /dev/full) costs it nothing. With quick_exit,
    once main() has saved and closed everything: the processes it left (a forkserver, Ray's) are ended and
    Python's unloading of torch's and Ray's libraries is skipped, a signal then being ignored."""
    console()
    code = main()
    if not quick_exit:
        sys.exit(code)
    for number in stopping.STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    sys.stdout.flush()
    sys.stderr.flush()
    stopping.end_children()
    os._exit(code)
