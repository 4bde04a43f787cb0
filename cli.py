"""What the scripts share: the command line, start-up warnings, one-line errors, run and sweep names, the
writable-folder check, a stdout that may close, and the torch threads a run takes (the trainer's)."""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shlex
import sys
import time
import warnings
from pathlib import Path

from config import ConfigError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_NAME = 200  # characters: a name becomes a file or folder name, with suffixes and a time stamp


def reason(error: BaseException, limit: int = 200) -> str:
    """An exception in a few words: an OSError's own (No space left on device), else its text on one line."""
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
    """None if files can be written under `folder`, else why not: a byte is written in its nearest existing
    folder (an empty file passes on a full disk), and removed."""
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
    """Holds the warnings raised while a script starts: a refusal is then its one line alone; a start shows them."""
    with warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always")  # record each; the filters apply when they are shown
        yield
    registry: dict = {}  # the "default" filter's one warning per place, over the held ones
    for w in held:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=registry, source=w.source)


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one ConfigError line (the scripts print `error: ...` and exit 2); no abbreviated
    flags: a careless --res is refused, not read as --resume."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        raise ConfigError(f"{message}: see --help")


def command_line(doc: str, argv: list[str] | None = None) -> dict:
    """docopt's reading; what it cannot read is one ConfigError naming the flag or argument at fault."""
    from docopt import DocoptExit, docopt
    given = sys.argv[1:] if argv is None else argv
    try:
        return docopt(doc, argv=given)
    except DocoptExit:
        pass
    known, valued = set(re.findall(r"--[a-z][a-z-]*", doc)), set(re.findall(r"(--[a-z][a-z-]*)=<", doc))
    flags, positional, lacking, waiting = [], [], [], None  # waiting: a flag whose value comes next
    for arg in given:
        if waiting and not arg.startswith("-"):
            waiting = None
        elif arg.startswith("-"):
            lacking += [waiting] if waiting else []
            flags.append(arg.split("=")[0])
            waiting = flags[-1] if flags[-1] in valued and "=" not in arg else None
        else:
            positional.append(arg)
    usage = re.sub(r"\[[^\]]*\]", "", doc.split("Usage:")[1].split("\n\n")[0].splitlines()[1])  # its first line
    needed = re.findall(r"(?<!=)<[a-z]+>", usage)
    problems = ([f"unknown option {f}" for f in flags if f not in known] +
                [f"{f} needs a value" for f in lacking + [waiting] if f] +
                [f"{f} is given twice" for f in flags if flags.count(f) > 1 and f"[{f}=" not in doc] +
                [f"{f} is missing" for f in re.findall(r"--[a-z][a-z-]*", usage) if f not in flags] +
                [f"{n} is missing ({' '.join(usage.split())})" for n in needed[len(positional):]] +
                [f"unexpected argument {a!r}" for a in positional[len(needed):]])
    raise ConfigError(f"{problems[0] if problems else f'cannot read the arguments {shlex.join(given)}'}: see --help")


class Stdout:
    """sys.stdout whose reader may leave (`| head -1`): one line on stderr says so, the work goes on."""

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
    """torch_threads 0: the cores this process may use less those others kept busy while the run started
    (its own CPU time taken off), at least 1; threads beyond the free cores wait on each other at every
    step (docs/results.md). At least `minimum` s: ten kernel ticks per core tell busy from idle."""

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
