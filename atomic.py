"""Writes that a failure cannot leave half done: the file is written under a temporary name beside
its place and renamed over it, so a full disk or a crash leaves the old file (or none), never a
half one. The one rule for the temporary name (checkpoint.py, summaries.py, stats.py, enjoy.py's videos,
sweep.py's sweep.json) and the one helper.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Callable


def temporary_beside(path: Path, keep_suffix: bool = False) -> Path:
    """A hidden name beside `path` that no other process or earlier attempt uses:
    .<name>.<pid>.<8 hex digits>.tmp, and path's suffix after it with keep_suffix (for writers that
    choose the format by the suffix: enjoy.py's GIF and MP4)."""
    suffix = path.suffix if keep_suffix else ""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp{suffix}")


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """write(tmp) to a temporary name beside path, then renamed over it: a failed write (a full disk)
    leaves neither a half file nor the temporary one, and its error is raised."""
    tmp = temporary_beside(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
