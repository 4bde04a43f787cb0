"""cli.py's parts, in this process: the writable-folder check, paths named by what they are, and a console
that may close or fail under a run."""
import errno
import pathlib

import cli


def test_a_read_only_file_system_is_a_reason_not_a_traceback(tmp_path, monkeypatch):
    """On a read-only file system the probe file cannot be made, and unlinking its name fails too (EROFS,
    not ENOENT): that cleanup's traceback ended train.py with exit 1 (issue 58 point 9)."""
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(cli, "open", read_only, raising=False)
    monkeypatch.setattr(pathlib.Path, "unlink", read_only)
    assert cli.writable(tmp_path / "models") == "Read-only file system"
