"""Writes that nothing leaves half done: the file is written under a temporary name beside its place and
renamed over it, so a full disk, a crash or a stop signal leaves the old file (or none), never a half one."""
from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path
from typing import Callable

import stopping


def temporary_beside(path: Path, keep_suffix: bool = False) -> Path:
    """.<name>.<pid>.<8 hex digits>.tmp beside `path` (then path's suffix, for writers that read it)."""
    suffix = path.suffix if keep_suffix else ""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp{suffix}")


def write_atomically(path: Path, write: Callable[[Path], None], keep_suffix: bool = False,
                     replace: bool = True) -> None:
    """write(tmp), then tmp renamed over `path`; without `replace`, a file at `path` is never replaced, even one
    that appeared meanwhile (FileExistsError). Stop signals wait until it is done (stopping.deferred)."""
    tmp = temporary_beside(path, keep_suffix)
    with stopping.deferred():
        try:
            write(tmp)
            if replace:
                os.replace(tmp, path)
                return
            try:
                os.link(tmp, path)  # fails if anything is there
            except OSError as error:  # a file system without hard links: the caller's check stands
                if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP) or os.path.lexists(path):
                    raise
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
