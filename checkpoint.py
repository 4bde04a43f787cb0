"""The checkpoint file: written atomically with a digest of its contents, read weights-only with the digest checked,
and the run's lock. `python checkpoint.py --inference-only SRC DST` keeps what Agent.load and enjoy.py use."""
from plumbing import script

script.begin(__name__)  # the imports below take a second

import contextlib
import errno
import fcntl
import hashlib
import io
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import torch

from config import MAX_WORKERS
from environments import EpisodeStats
from plumbing.atomic import write_atomically
from plumbing.errors import CheckpointError, ConfigError
from plumbing.files import kind, reason
from plumbing.yaml_input import MAX_CONFIG_VALUES, require_small

FORMAT = 2  # 1: pickled Python objects, no digest (before weights-only loading)
# The most values (require_small's count) a checkpoint of a config within config.py's bounds holds (room for 9,000
# parameter tensors at about 11 values each); save_checkpoint refuses more, so every checkpoint written is read again.
MAX_CHECKPOINT_VALUES = MAX_CONFIG_VALUES + MAX_WORKERS * EpisodeStats.STATE_VALUES + 100_000
INFERENCE = ("format", "model", "config", "update", "steps", "run_id", "normalization")  # what acting needs
# and what only a resumed run needs besides (Trainer.state_dict)
RESUME = ("summaries_path", "summaries", "optimizer", "rng", "environments", "obs", "state", "previous", "best")


def load_model(model: torch.nn.Module, saved: dict) -> None:
    """The saved parameters into the model; non-finite ones are refused (ValueError), as the writer refuses them."""
    model.load_state_dict(saved)
    if not all(torch.isfinite(p).all() for p in model.parameters()):
        raise ValueError("the model's parameters hold NaN or inf")


@contextlib.contextmanager
def fitted(path: str | Path):
    """A checkpoint whose contents do not fit its config (edited, its digest made to match): one CheckpointError."""
    try:
        yield
    except CheckpointError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{path} does not fit the model and environments its config describes "
                              f"({reason(error)})") from None


def _leaves(tree, leaf, done: dict | None = None):
    """leaf(x) for every x that is not a dict, list or tuple, the structure kept: parts shared by reference stay so."""
    done = {} if done is None else done
    if id(tree) not in done:
        if isinstance(tree, dict):
            done[id(tree)] = {key: _leaves(value, leaf, done) for key, value in tree.items()}
        elif isinstance(tree, (list, tuple)):
            done[id(tree)] = type(tree)(_leaves(value, leaf, done) for value in tree)
        else:
            return leaf(tree)
    return done[id(tree)]


def _tensor(leaf):
    """numpy arrays -> tensors, numpy scalars -> numbers: what weights-only loading takes."""
    if isinstance(leaf, np.ndarray):
        return torch.from_numpy(np.array(leaf, dtype=np.int64 if leaf.dtype == np.uint32 else leaf.dtype))
    return leaf.item() if isinstance(leaf, np.generic) else leaf


def arrays(tree):
    """Tensors -> numpy arrays all the way down (for the normalisers and environment states)."""
    return _leaves(tree, lambda leaf: leaf.numpy() if isinstance(leaf, torch.Tensor) else leaf)


def digest(tree) -> str:
    """SHA-256 over every key, number, string and tensor (dtype, shape and bytes) of a payload."""
    h = hashlib.sha256()

    def feed(node):
        if isinstance(node, dict):
            h.update(b"{%d" % len(node))
            for key, value in node.items():
                feed(key)
                feed(value)
        elif isinstance(node, (list, tuple)):
            h.update(b"[%d" % len(node))
            for value in node:
                feed(value)
        elif isinstance(node, torch.Tensor):
            tensor = node.detach().cpu()
            h.update(f"T{tensor.dtype}{tuple(tensor.shape)}".encode())
            raw = tensor.reshape(-1).clone(memory_format=torch.contiguous_format).view(torch.uint8)  # any dtype
            h.update(raw.numpy())
        else:
            h.update(repr((type(node).__name__, node)).encode())
    feed(tree)
    return h.hexdigest()


def save_checkpoint(path: str | Path, payload: dict) -> Path:
    """Writes payload (numpy arrays as tensors: weights-only loading reads no numpy) plus its digest atomically; a
    failed write (full disk, no permission) leaves `path` as it was and raises CheckpointError."""
    path, payload = Path(path), {"format": FORMAT, **_leaves(payload, _tensor)}
    try:
        require_small(payload, "the checkpoint", limit=MAX_CHECKPOINT_VALUES)
    except ConfigError:
        raise CheckpointError(f"could not write {path}: it would hold more than {MAX_CHECKPOINT_VALUES:,} values, "
                              "more than a checkpoint may (checkpoint.MAX_CHECKPOINT_VALUES)") from None
    data = io.BytesIO()  # serialised first: a failed write is then the file's own error (ENOSPC), not torch's
    torch.save({**payload, "digest": digest(payload)}, data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, lambda tmp: tmp.write_bytes(data.getbuffer()))
    except OSError as error:
        kept = f"the previous {path} is intact" if path.exists() else f"no earlier {path} exists"
        failure = CheckpointError(f"could not write {path} ({reason(error, 120)}); {kept}")
        failure.path = path  # runs.py names the run's last good checkpoint beside another file's failure
        raise failure from None
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Reads a checkpoint weights-only and checks its digest and contents; a problem is one CheckpointError."""
    path = Path(path)
    if (what := kind(path)) != "a file":
        raise CheckpointError(f"checkpoint not found: {path}" if what == "missing" else
                              f"{path} is {what}, not a checkpoint file")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        # a class or function the weights-only unpickler refused is an "Unsupported global": code, not damage
        if "Unsupported global" in str(error) or "GLOBAL" in str(error):
            raise CheckpointError(f"{path} refused: it holds Python objects, which could run code when "
                                  "loaded (written by another program, an older version, or crafted)") from None
        raise CheckpointError(f"corrupt checkpoint: {path} cannot be read (damaged, or not a checkpoint)") from None
    except Exception:  # torch's and zipfile's errors for a damaged file are of many types
        raise CheckpointError(f"{path} is another program's zip archive (torch's hold a data.pkl): not a "
                              "checkpoint train.py wrote" if _foreign_zip(path) else
                              f"corrupt checkpoint: {path} cannot be read (truncated, damaged, "
                              "or not written by train.py)") from None
    if not isinstance(payload, dict) or not {"model", "config", "digest"} & payload.keys():
        raise CheckpointError(f"{path} is another program's torch file (it holds no model, config or digest): "
                              "not a checkpoint train.py wrote")
    try:  # before anything walks it: pickle's memo repeats parts by reference, as yaml aliases do
        require_small(payload, f"corrupt checkpoint: {path}", limit=MAX_CHECKPOINT_VALUES)
    except ConfigError as error:
        raise CheckpointError(str(error)) from None
    stored = payload.pop("digest", None)
    if stored is not None and stored != digest(payload):
        raise CheckpointError(f"corrupt checkpoint: {path} (its contents do not match its digest)")
    if stored is None or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} has no digest of this version: written by an older version of this "
                              "project (pickled objects), which cannot be loaded safely")
    missing = [key for key in INFERENCE + (RESUME if payload.get("resumable") else ()) if key not in payload]
    if missing:
        raise CheckpointError(f"{path} lacks {', '.join(missing)}: not a checkpoint train.py wrote")
    for key in ("update", "steps"):
        if type(payload[key]) is not int or payload[key] < 0:
            raise CheckpointError(f"{path}: its {key} is {payload[key]!r}, not a count")
    if not isinstance(payload["config"], dict) or not isinstance(payload["model"], dict):
        raise CheckpointError(f"{path}: its config and model are not mappings: not a checkpoint train.py wrote")
    return payload


def _foreign_zip(path: Path) -> bool:
    """A zip archive without torch's data.pkl: another program's, where a damaged checkpoint still names one."""
    try:
        with zipfile.ZipFile(path) as archive:
            return not any(name.endswith("data.pkl") for name in archive.namelist())
    except (OSError, EOFError, ValueError, zipfile.BadZipFile):
        return False


def same_checkpoint(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b) or Path(a).read_bytes() == Path(b).read_bytes()
    except OSError:
        return False


class RunLock:
    """An exclusive flock on models/<run-id>.lock while the run lives; the kernel drops it however the process
    ends, so a lock file left by a killed run is simply taken. release() removes it (and a folder it made)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd: int | None = None
        self._made = False

    def acquire(self) -> "RunLock":
        self._made = not self.path.parent.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock()
        except CheckpointError:
            self.release()  # no lock file left behind, empty or not
            raise
        return self

    def _lock(self) -> None:
        while True:
            try:  # never through a symbolic link: it could point at any file of the user's
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as error:
                raise CheckpointError(f"{self.path} is a symbolic link, not a lock this project made: remove it"
                                      if error.errno == errno.ELOOP else
                                      f"cannot create the lock {self.path} ({error.strerror})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise CheckpointError(f"run id '{self.path.stem}' is in use by a running process (pid {holder}); "
                                      "wait for it, or choose another --run-id") from None
            with contextlib.suppress(FileNotFoundError):  # its last holder may have removed it as we locked it
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            os.close(fd)
        self._fd = fd
        try:  # the holder's pid, for the next run's message
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError as error:  # a full disk
            raise CheckpointError(f"cannot write the lock {self.path} ({error.strerror or error})") from None

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)  # closing drops the flock
            self._fd = None
        if self._made:
            with contextlib.suppress(OSError):  # not empty: the run saved there
                self.path.parent.rmdir()
            self._made = False


def main(argv=None) -> int:
    from plumbing.cli import ArgumentParser, check_output
    parser = ArgumentParser(description="Writes the inference-only part of a checkpoint (what enjoy.py and "
                            "Agent.load use).", epilog="Exit codes: 0 written, 2 refused (bad flag, source or "
                            f"target), {script.STOPPED}.")
    parser.add_argument("--inference-only", action="store_true", required=True, help="the one export there is")
    parser.add_argument("source", help="a checkpoint written by train.py")
    parser.add_argument("target", type=Path, help="the new checkpoint's file (never an existing one)")

    def start():
        args = parser.parse_args(argv)
        check_output("target", [args.target], False, example="agent.pt", replacing=" (a checkpoint is never replaced)")
        return args.target, load_checkpoint(args.source)

    def work(started) -> int:
        target, source = started
        save_checkpoint(target, {key: source[key] for key in INFERENCE})
        print(f"wrote {target} ({target.stat().st_size / 2 ** 20:.1f} MiB)")
        return 0
    return script.life(start, work)


if __name__ == "__main__":
    script.run(main)
