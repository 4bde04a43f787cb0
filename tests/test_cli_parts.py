"""The scripts' command-line parts, in this process: the writable-folder check, paths named by what they are,
the run id a config's file name gives."""
import errno
import pathlib
import shutil

import pytest

from plumbing import files
import runs
import train

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_a_read_only_file_system_is_a_reason_not_a_traceback(tmp_path, monkeypatch):
    """On a read-only file system the probe file cannot be made, and unlinking its name fails too (EROFS,
    not ENOENT): that cleanup's traceback ended train.py with exit 1 (issue 58 point 9)."""
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(files, "open", read_only, raising=False)
    monkeypatch.setattr(pathlib.Path, "unlink", read_only)
    assert files.writable(tmp_path / "models") == "Read-only file system"


@pytest.mark.parametrize("name", ["my run.yaml", "r\u00fcn.yaml", "-x.yaml", ".yaml.yaml", "x" * 240 + ".yaml"])
def test_a_config_of_any_file_name_trains_without_a_run_id(tmp_path, name):
    """A config file named with a space or a non-ASCII letter could not be trained without --run-id: the run id
    made from its name was refused as if the user had typed it (issue 58 point 10)."""
    shutil.copy(ROOT / "configs/poc_memory_env.yaml", tmp_path / name)
    _, run_id, _ = runs.read_run(train.parser().parse_args(["--config", str(tmp_path / name)]))
    runs.check_run_id(run_id, "the run id")


def test_paths_are_named_by_what_they_are(tmp_path):
    """A folder given as --config, a symbolic link loop and enjoy.py --model /dev/null were 'not found', a
    dangling summaries link 'a file' (issue 58, borderline)."""
    from checkpoint import CheckpointError, load_checkpoint
    from config import ConfigError, load_config
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "folder").mkdir()
    expected = {"folder": "a folder", "loop": "a loop of symbolic links", "missing": "missing",
                "dangling": f"a symbolic link to {tmp_path / 'gone'}, which does not exist"}
    assert {name: files.kind(tmp_path / name) for name in expected} == expected
    assert files.kind("/dev/null") == "a device or socket"
    for name, words in (("folder", "is a folder, not a config file"), ("loop", "is a loop of symbolic links"),
                        ("missing", "config file not found")):
        with pytest.raises(ConfigError, match=words):
            load_config(tmp_path / name)
    with pytest.raises(CheckpointError, match="^/dev/null is a device or socket, not a checkpoint file$"):
        load_checkpoint("/dev/null")
    assert files.writable(tmp_path / "dangling" / "run") == (f"{tmp_path / 'dangling'} is a symbolic link to "
                                                          f"{tmp_path / 'gone'}, which does not exist, not a folder")
