"""What the scripts share as they start: their command line, the warnings held meanwhile, the one line an
error becomes, the names they give runs and sweeps, the writable-folder check, a stdout that may close,
and the torch threads a run takes (IdleCores, rollout_threads: the trainer's)."""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import sys
import time
import warnings
from pathlib import Path

from config import ConfigError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_NAME = 200  # characters: a name becomes a file or folder name, with suffixes and a time stamp


def reason(error: BaseException, limit: int = 200) -> str:
    """An exception in a few words for a one-line message: an OSError's own (No space left on device),
    else its text folded onto one line."""
    return getattr(error, "strerror", None) or " ".join(str(error).split())[:limit]


def failed(message, code: int = 2) -> int:
    """`error: message` on stderr; returns the exit code (2: refused before starting)."""
    print(f"error: {message}", file=sys.stderr)
    return code


def check_name(name, what: str) -> None:
    """A run or sweep id names files and folders: a plain name, never a path."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        rule = "letters, digits, '.', '_' and '-', starting with a letter or digit (no folders)"
    elif len(name) > MAX_NAME:
        rule = f"at most {MAX_NAME} characters, not {len(name)}"
    else:
        return
    raise ConfigError(f"{what} {name!r} is not allowed: {rule}")


def writable(folder: str | Path) -> str | None:
    """None if files can be written under `folder`, else why not, in a few words. Checked on its nearest
    existing folder by writing a byte there (an empty file passes on a full disk); nothing stays."""
    existing = next(p for p in [Path(folder), *Path(folder).parents] if os.path.lexists(p))
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    probe = existing / f".write-test-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(probe, "xb") as file:
            file.write(b"\0")
    except OSError as error:
        return reason(error)
    finally:
        probe.unlink(missing_ok=True)
    return None


@contextlib.contextmanager
def start_up_warnings():
    """Holds the warnings raised while a script starts (a deprecated Gymnasium id, torch's): a refusal,
    an exception out of the block, is then its one line alone; a start that succeeds shows them."""
    with warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always")  # record each; the filters apply when they are shown
        yield
    registry: dict = {}  # the "default" filter's one warning per place, over the held ones
    for w in held:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=registry, source=w.source)


def command_line(doc: str, argv: list[str] | None = None) -> dict:
    """docopt's reading of a script's command line; what it cannot read is one ConfigError line that
    names the flag (unknown, given twice) or the missing argument, instead of the usage text."""
    from docopt import DocoptExit, docopt
    given = sys.argv[1:] if argv is None else argv
    try:
        return docopt(doc, argv=given)
    except DocoptExit:
        pass
    takes_value = set(re.findall(r"(--[a-z][a-z-]*)=<", doc))
    repeatable = set(re.findall(r"\[(--[a-z][a-z-]*)=<[^>]*>\]\.\.\.", doc))
    flags, positional, value_next = [], [], False
    for arg in given:
        if value_next:
            value_next = False
        elif arg.startswith("-"):
            flag = arg.split("=")[0]
            flags.append(flag)
            value_next = flag in takes_value and "=" not in arg
        else:
            positional.append(arg)
    usage = doc.split("Usage:")[1].split("\n\n")[0].splitlines()[1]  # the first usage line
    required = re.findall(r"--[a-z][a-z-]*|<[a-z]+>", re.sub(r"\[[^\]]*\]", "", usage))
    needed = [r for r in required if r.startswith("<")]
    unknown = [f for f in flags if f not in takes_value | set(re.findall(r"--[a-z][a-z-]*", doc))]
    twice = [f for f in flags if flags.count(f) > 1 and f not in repeatable]
    missing = [r for r in required if r.startswith("--") and r not in flags] + needed[len(positional):]
    what = (f"unknown option {unknown[0]}" if unknown else f"{twice[0]} is given twice" if twice else
            f"{missing[0]} is missing" if missing else
            f"unexpected argument {positional[len(needed)]!r}" if len(positional) > len(needed) else
            f"cannot read the arguments {' '.join(given)!r}")
    raise ConfigError(f"{what}: see --help")


class Stdout:
    """sys.stdout for a long script: once its reader is gone (`train.py | head -1`), one line on stderr
    says so and the rest goes to /dev/null; the work goes on."""

    def __init__(self, stream):
        self.stream = stream

    def __getattr__(self, name):
        return getattr(self.stream, name)

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._closed()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._closed()

    def _closed(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self.stream.fileno())  # what is still buffered goes there too
        os.close(null)
        print("warning: stdout was closed (Broken pipe); going on without printing", file=sys.stderr, flush=True)


class IdleCores:
    """What torch_threads 0 means: the cores this process may use less those that other processes kept
    busy (rounded), at least 1. Threads that outnumber the free cores wait on each other at every
    parallel step (docs/results.md), so a run takes every core only when nothing else runs as it starts.
    The sample spans the run's own start-up, whose CPU time is taken off, and lasts at least `minimum`
    seconds: ten of the kernel's 10 ms ticks per core tell a busy core from an idle one."""

    def __init__(self):
        import psutil
        psutil.cpu_percent(percpu=True)  # the sample starts: psutil measures from its previous call
        self._start, self._cpu = time.perf_counter(), time.process_time()

    def count(self, minimum: float = 0.1) -> int:
        import psutil
        elapsed = time.perf_counter() - self._start
        if elapsed < minimum:
            time.sleep(minimum - elapsed)  # the rest of the sample's length: measures, waits for no event
        percent = psutil.cpu_percent(percpu=True)
        own = (time.process_time() - self._cpu) / (time.perf_counter() - self._start)  # cores this process used
        cores = sorted(os.sched_getaffinity(0))
        busy = sum(percent[i] for i in cores if i < len(percent)) / 100 - own
        return max(1, len(cores) - round(max(0.0, busy)))


def rollout_threads(threads: int, images: bool) -> int:
    """Torch threads for the rollout's steps: the run's for a CNN; one for a vector model, whose small
    matrix products only wait on a second thread (docs/results.md)."""
    return threads if images else 1
