"""What the scripts share: the command line, start-up warnings, one-line errors and a stdout that may close."""
import argparse
import contextlib
import importlib
import math
import os
import reprlib
import sys
import warnings
from pathlib import Path

from plumbing.errors import ConfigError
from plumbing.files import kind, reason, writable


def failed(message, code: int = 2) -> int:
    """`error: message` on stderr; returns the exit code (2: refused before starting)."""
    print(f"error: {message}", file=sys.stderr)
    return code


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


def check_output(flag: str, paths: list[Path], overwrite: bool, suffixes: tuple[str, ...] = (), example: str = "",
                 replacing: str = ", or pass --overwrite to replace it", folder_made: bool = True) -> None:
    """Refuses, in one ConfigError line before a script starts, the files it would write: paths[0], named by `flag`,
    and the others beside it. A missing folder passes: the script makes it (unless not folder_made)."""
    path, named = paths[0], f"{flag} {paths[0]}" if flag.startswith("-") else str(paths[0])
    if path.is_dir():
        raise ConfigError(f"{named} is a folder: give the file's name, e.g. {path / example}")
    if suffixes and path.suffix.lower() not in suffixes:
        raise ConfigError(f"{named}: use a {' or '.join(suffixes)} file name")
    if not overwrite and (taken := [p for p in paths if os.path.lexists(p)]):
        raise ConfigError(f"{taken[0]} exists: choose another {flag if named != str(path) else 'name'}{replacing}")
    for other in paths if overwrite else ():  # a device, a pipe or a link to one is no file to replace
        if (what := kind(other)) not in ("a file", "missing"):
            raise ConfigError(f"{other} is {what}: --overwrite replaces only a file")
    problem = writable(path.parent) if folder_made or kind(path.parent) == "a folder" else kind(path.parent)
    if problem:
        raise ConfigError(f"{named}: {path.parent}/ is not a writable folder ({problem})")


def require(*modules: str) -> None:
    """A ConfigError naming the packages of requirements.txt that cannot be imported here (onnx, onnxruntime, ...)."""
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ConfigError(f"{' and '.join(missing)} cannot be imported here: install the pinned requirements "
                          "(pip install -r requirements.txt)")


def number(kind, low: float = -math.inf, high: float = math.inf):
    """An argparse type: a finite number of `kind` (int or float) from low to high."""
    def number(text: str):
        value = kind(text)  # a ValueError is argparse's "invalid number value"
        if not low <= value <= high or abs(value) == math.inf:
            raise argparse.ArgumentTypeError(f"must be a number from {low:,} to {high:,}, got {reprlib.repr(text)}")
        return value
    return number


def console() -> None:
    """A script's work never depends on its console: a standard stream closed at start (`>&-`) is opened on /dev/null,
    else the next file opened would take its number (a lock, a worker's output); Stdout answers a later failure."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
            os.open(os.devnull, os.O_RDWR)  # takes the lowest free number: this one
    sys.stderr = Stdout(sys.stderr or open(2, "w", closefd=False), "stderr")  # Python's None for a closed one
    sys.stdout = Stdout(sys.stdout or open(1, "w", closefd=False))
    if 1 in closed:
        print("warning: stdout is closed; going on without printing", file=sys.stderr, flush=True)


class Stdout:
    """sys.stdout (or stderr) whose reader may leave (`| head -1`) or whose file fails (/dev/full): it goes to
    /dev/null, stdout's failure is one line on stderr, and the work goes on."""

    def __init__(self, stream, name: str = "stdout"):
        self.stream, self.name = stream, name

    def __getattr__(self, name):
        return getattr(self.stream, name)

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as error:
            self._failed(error)
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            self._failed(error)

    def _failed(self, error: OSError) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self.stream.fileno())  # what is still buffered goes there too
        os.close(null)
        if self.name == "stdout":
            what = "was closed" if isinstance(error, BrokenPipeError) else "cannot be written"
            print(f"warning: stdout {what} ({reason(error)}); going on without printing", file=sys.stderr, flush=True)
