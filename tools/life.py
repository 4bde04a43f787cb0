"""What every tool shares, on the scripts' life cycle (plumbing/script.py): begin(__name__) before its imports,
`return script.life(start, work)` in main() and script.run(main) as a program; its inputs read here, a file it cannot
use refused in one line (exit 2); its outputs checked before it measures and written atomically, what it measured kept
where they cannot be written (exit 1)."""
from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
from pathlib import Path

from plumbing import script, stopping
from plumbing.atomic import write_all_atomically
from plumbing.cli import check_output
from plumbing.errors import ConfigError
from plumbing.files import kind, reason

REFERENCE = ("env_steps", "reward_mean_over_runs", "reward_min_over_runs", "reward_max_over_runs", "runs")


def begin(name: str) -> None:
    """script.begin without its OpenMP setting: a tool measures, and starts runs, as it always did; a stop signal
    leaves at once until main() takes over."""
    if name == "__main__":
        stopping.leave_at_once_on_stop_signals()


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of the file at `path`; `what` says what it should be, in the refusal of anything else."""
    if (found := kind(path)) != "a file":
        raise ConfigError(f"{path} is {found}: give {what}")
    try:
        text = Path(path).read_text(encoding="utf-8")
        if "\0" in text:
            raise UnicodeError
        return text
    except UnicodeError:  # undecodable, or holding NUL bytes
        raise ConfigError(f"{path} is not UTF-8 text (a checkpoint or another binary file?): give {what}") from None
    except OSError as error:
        raise ConfigError(f"could not read {path} ({reason(error)})") from None


def read_json(path: str | Path, what: str):
    """The JSON document in the file at `path`, refused as read_text refuses, or where it is not JSON."""
    try:
        return json.loads(read_text(path, what))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not JSON ({error.msg}, line {error.lineno}): give {what}") from None


def read_reference(path: str | Path) -> list[dict[str, float]]:
    """The rows of a reference baseline's curve (results/reference/*.csv), its REFERENCE columns as numbers."""
    columns = ", ".join(REFERENCE)
    what = f"a reference curve with the columns {columns}"
    reader, table = csv.DictReader(io.StringIO(read_text(path, what))), []
    try:
        for row in reader:
            table.append({column: float(row[column]) for column in REFERENCE})
    except csv.Error as error:
        raise ConfigError(f"{path} is not CSV ({error}): give {what}") from None
    except KeyError as error:
        raise ConfigError(f"{path} has no column {error}: give {what}") from None
    except (TypeError, ValueError):  # a missing or empty cell, or a word
        raise ConfigError(f"{path}, line {reader.line_num}: not a number in each of {columns}") from None
    if not table:
        raise ConfigError(f"{path} holds no rows: give {what}")
    return table


def prefixed(prefix: str | Path) -> list[Path]:
    """What a tool writes for `--out PREFIX`: PREFIX.json and PREFIX.md."""
    return [Path(f"{prefix}.json"), Path(f"{prefix}.md")]


def check_out(flag: str, paths: list[Path], suffixes: tuple[str, ...] = ()) -> None:
    """Refuses, before anything is measured, outputs that could not be written: a folder at one of their places,
    a name without one of `suffixes`, or a folder that takes no files (a missing one is made by write_out)."""
    for path in paths:
        check_output(flag, [Path(path)], True, suffixes, example="out" + (suffixes[0] if suffixes else ""))


def write_out(files: dict[Path, str | bytes]) -> None:
    """The files written together, atomically (their folder made). Where they cannot be, what was measured is kept
    in a new temporary folder, or else its text printed on stdout, and the tool fails in one line saying where."""
    files = {Path(path): data for path, data in files.items()}
    try:
        for path in files:
            path.parent.mkdir(parents=True, exist_ok=True)
        write_all_atomically({path: lambda tmp, data=data: _write(tmp, data) for path, data in files.items()})
    except OSError as error:
        raise script.Failed(f"could not write {', '.join(map(str, files))} ({reason(error)}); {_keep(files)}") from None


def _write(path: Path, data: str | bytes) -> None:
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")


def _keep(files: dict[Path, str | bytes]) -> str:
    folder = None
    try:
        folder = Path(tempfile.mkdtemp(prefix="kept-"))
        for path, data in files.items():
            _write(folder / path.name, data)
        return f"what was measured is kept in {folder}/"
    except OSError:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
        texts = [data for data in files.values() if isinstance(data, str)]
        print(*texts, sep="\n")
        return "what was measured is printed on stdout" if texts else "nothing of it could be kept"
