"""What is at a path, and whether a folder takes files, in the words of a one-line refusal."""
import errno
import os
import secrets
import stat
from pathlib import Path


def reason(error: BaseException, limit: int = 200) -> str:
    """An exception in a few words: an OSError's own (No space left on device), else its text on one line."""
    return getattr(error, "strerror", None) or " ".join(str(error).split())[:limit]


def kind(path: str | Path) -> str:
    """What is at `path`, in the words of a refusal: "a file", "a folder", "a pipe", "missing", or what else it is."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if os.path.islink(path):
            return ("a loop of symbolic links" if error.errno == errno.ELOOP else
                    f"a symbolic link to {os.readlink(path)}, which does not exist")
        return "missing" if error.errno in (errno.ENOENT, errno.ENOTDIR) else f"unreadable ({reason(error)})"
    return ("a file" if stat.S_ISREG(mode) else "a folder" if stat.S_ISDIR(mode) else
            "a pipe" if stat.S_ISFIFO(mode) else "a device or socket")


def writable(folder: str | Path) -> str | None:
    """None if files can be written under `folder`, else why not: a byte is written in its nearest existing
    folder (an empty file passes on a full disk), and removed."""
    existing = next(p for p in [Path(folder), *Path(folder).parents] if os.path.lexists(p))
    if (what := kind(existing)) != "a folder":
        return f"{existing} is {what}, not a folder"
    probe = existing / f".write-test-{os.getpid()}-{secrets.token_hex(4)}"
    made = False
    try:
        with open(probe, "xb") as file:
            made = True
            file.write(b"\0")
    except OSError as error:
        return reason(error)
    finally:
        if made:  # only then: a read-only file system refuses to unlink even a name that is not there
            probe.unlink(missing_ok=True)
    return None

