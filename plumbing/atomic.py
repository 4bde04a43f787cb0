"""Writes that nothing leaves half done: the file is written under a temporary name beside its place and
renamed over it, so a full disk, a crash or a stop signal leaves the old file (or none), never a half one."""
import os
import secrets
from pathlib import Path
from typing import Callable

from plumbing import stopping


def write_atomically(path: Path, write: Callable[[Path], None], keep_suffix: bool = False,
                     replace: bool = True) -> None:
    """write(tmp), then tmp renamed over `path`; without `replace`, a file at `path` is never replaced, even one
    that appeared meanwhile (FileExistsError). Stop signals wait until it is done (stopping.deferred)."""
    write_all_atomically({path: write}, keep_suffix, replace)


def write_all_atomically(files: dict[Path, Callable[[Path], None]], keep_suffix: bool = False,
                         replace: bool = True) -> None:
    """Each file written under its temporary name, then all renamed into place: a write that fails changes none
    of them (a set of files that belong together, such as stats.py's .md, .json and .png)."""
    tmps = {path: _temporary(path, keep_suffix) for path in files}
    with stopping.deferred():
        try:
            for path, write in files.items():
                write(tmps[path])
            for path, tmp in tmps.items():
                (os.replace if replace else os.link)(tmp, path)  # a new link never replaces a file
        finally:
            for tmp in tmps.values():
                tmp.unlink(missing_ok=True)


def _temporary(path: Path, keep_suffix: bool = False) -> Path:
    suffix = path.suffix if keep_suffix else ""  # for writers that choose the format by it
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp{suffix}")
