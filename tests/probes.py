"""Probe suite: train.py, enjoy.py, checkpoint.py, sweep.py and Agent.act tried as a new, a careless and a
hostile user would.

    make probes                                 # python tests/probes.py --jobs 2

runs every probe and writes results/probes.md and results/probes.json (the table, the
totals and every wrong outcome with its exact command), prints the totals, and exits 1
if any probe ended wrong. Other forms:

    python tests/probes.py --fast               # the subset tests/test_probes.py runs (well under 60 s)
    python tests/probes.py --only 4,6           # the probes of issue points 4 and 6 ('extra': the rest;
                                                # '23.2': the outside round of issue 23, point 2;
                                                # '58.2' .. '58.10', '58.b': issue 58's round;
                                                # '72.1' .. '72.10', '72.r', '72.e', '72.b': issue 72's;
                                                # '87.1' .. '87.8', '87.b': issue 87's)
    python tests/probes.py --name flip -v       # probes whose name holds 'flip', with their stdout and stderr
    python tests/probes.py --list               # the probes, one line each, without running them

A subset writes no report unless --md or --json names a file.

Each probe is one entry of PROBES: a name, the issue point it covers (1-12 as the team
filed them, '23.2' for the kinds an outside round found wrong (issue 23, point 2), or 'extra'),
a kind (what it tries; several probes share one), the command
(or an action that starts processes, signals them, starts a second run ...), a setup
that prepares the scratch folder, and the expected outcome. Every probe runs as real
processes of the repository's scripts, with the working folder in a fresh copy of the
repository ($PROBE/repo; $PROBE is the probe's own temporary folder, the "outside").

Recorded for each probe: the exit code, the first line of stderr (or of stdout when
stderr is empty), whether a traceback appeared, files that existed before and changed
or vanished (lost or overwritten), files written outside models/ and summaries/ (or
anything at all written by a refused run), processes left behind (found by a marker in
their environment), *.tmp and *.lock files left behind, and a verdict, right or wrong,
with the reasons.

What is right, in general (DESIGN.md, Trust): bad input is refused before any process
starts (a refused run must not have had a child process: forkserver or worker), in one
line on stderr, with exit code 2 and no traceback; a run never replaces a checkpoint it did
not start from; files are written under a unique temporary name and renamed; an
interrupted run saves and exits 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP); nothing is left behind.
Exit codes are recorded as a shell shows them: a process killed by signal N is 128 + N.

A full disk is made two ways: RLIMIT_FSIZE (a write past it fails with EFBIG) and a small
tmpfs mounted over a folder of the copy (models/, summaries/, a video's or a sweep's folder)
for the probe, filled up front where it must be full (ENOSPC; a probe that cannot mount is
reported as skipped). Unwritable folders are mode 0555 with the run started without
CAP_DAC_OVERRIDE (setpriv), since permission bits do not bind root.

The scripts probed are those of the checkout that holds this file (copied per probe,
with the shipped models but models/minigrid.pt). The whole suite takes about 13 minutes
with --jobs 2 on two busy cores; the probes that time or signal things run alone.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import itertools
import json
import os
import pickle
import resource
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# Permission bits do not bind root; without these capabilities they do (as for any user).
NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]

# The smallest run worth the name: two updates of 2 x 16 steps, a tiny model.
TINY_SETTINGS = {"n_workers": 2, "worker_steps": 16, "n_mini_batch": 1, "updates": 2, "hidden_layer_size": 8,
                 "recurrence.hidden_state_size": 4}


def sets(**changes) -> list[str]:
    """--set flags for TINY_SETTINGS with `changes` (a__b means a.b) over them."""
    values = {**TINY_SETTINGS, **{key.replace("__", "."): value for key, value in changes.items()}}
    return [flag for key, value in values.items() for flag in ("--set", f"{key}={value}")]


TINY = sets()
ENDLESS = ["--set", "environment.type=gym", "--set", "environment.name=probe_envs:Probe-v0",
           "--set", "environment.kwargs.endless=true"]

# What a user's checkout holds that the scripts need (models/minigrid.pt, 16 MiB, is left out).
COPIED = ["*.py", "environments/*.py", "plumbing/*.py", "tools/*.py", "examples/*.py", "configs/*.yaml",
          "tests/faulty_envs.py",
          "tests/memory_tasks.py", "models/.gitkeep", "models/poc_memory_env.pt", "models/cartpole_masked.pt",
          "results/reference/*.csv"]  # a sweep's statistics plot the reference curves

# Environments of the probes' own, written into each copy as probe_envs.py:
# Probe-v0 leaves a file <touch>.<pid> when it is built (kwargs touch=<path>), so a probe can
# tell that a refusal came before any environment was built, or at least before any worker
# process built one (a pid other than train.py's); sleep=<s>
# makes every step slow, so that a signal surely lands inside an update; endless=true never ends
# an episode (and it has no time limit: only evaluation's step cap ends one).
PROBE_ENVS = '''"""Environments for tests/probes.py."""
import os
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Probe(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(self, touch="", sleep=0.0, image=False, endless=False, render_mode=None, side=84, nest=""):
        if touch:  # one file per process that builds the environment
            Path(f"{touch}.{os.getpid()}").touch()
        self.sleep, self.t, self.endless, self.render_mode = sleep, 0, endless, render_mode
        vector = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Box(0, 255, (side, side, 3), np.uint8) if image else vector
        if nest:  # the image in a Dict or a Tuple, beside a vector
            self.observation_space = (spaces.Dict({"view": self.observation_space, "where": vector})
                                      if nest == "dict" else spaces.Tuple((vector, self.observation_space)))
        self.action_space = spaces.Discrete(2)

    def _zeros(self):
        space = self.observation_space
        if isinstance(space, spaces.Dict):
            return {key: np.zeros(part.shape, part.dtype) for key, part in space.spaces.items()}
        if isinstance(space, spaces.Tuple):
            return tuple(np.zeros(part.shape, part.dtype) for part in space.spaces)
        return np.zeros(space.shape, space.dtype)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._zeros(), {}

    def step(self, action):
        if self.sleep:
            time.sleep(self.sleep)
        self.t += 1
        return self._zeros(), float(action), self.t >= 8 and not self.endless, False, {}

    def render(self):
        return np.zeros((8, 8, 3), np.uint8)


gym.register("Probe-v0", entry_point=Probe)
'''


# ------------------------------------------------------------------ processes

def processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds the marker (a probe's runs and their workers)."""
    needle, found = marker.encode(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def parent_of(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


class Proc:
    """One script run as a child process in its own session (as a terminal's foreground job),
    its output read line by line as it comes."""

    def __init__(self, ctx: "Ctx", args: list[str], cwd: Path, preexec=None, no_dac: bool = False):
        self.args, self.ctx = args, ctx
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [*(NO_DAC if no_dac else []), PYTHON, *args], cwd=cwd, env=ctx.environment(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True,
            preexec_fn=preexec)
        self.out: list[str] = []
        self.err: list[str] = []
        self.children: set[int] = set()  # every child process seen while it ran (forkserver, workers)
        self.timed_out = False
        self._readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                         for stream, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))]
        self._readers.append(threading.Thread(target=self._watch, daemon=True))
        for reader in self._readers:
            reader.start()

    def _watch(self):
        """Notes the run's child processes every 20 ms: a refusal must come before any exists."""
        pid = self.process.pid
        while self.process.poll() is None:
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    self.children.update(int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
            except (OSError, ValueError):
                pass
            time.sleep(0.02)

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.append(line)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def wait_line(self, prefix: str, timeout: float = 90) -> bool:
        """True once stdout has a line starting with prefix; False if the run ends or time is up first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(line.startswith(prefix) for line in list(self.out)):
                return True
            if self.process.poll() is not None:
                time.sleep(0.1)  # let the readers catch up
                return any(line.startswith(prefix) for line in list(self.out))
            time.sleep(0.02)
        return False

    def signal(self, number: int, group: bool = False) -> None:
        try:
            if group:
                os.killpg(self.process.pid, number)
            else:
                self.process.send_signal(number)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> int | None:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
            self.signal(signal.SIGKILL, group=True)
            self.process.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        return None if self.timed_out else self.process.returncode


def limits(fsize: int | None = None, address_space: int | None = None):
    """A preexec_fn: SIGHUP at its default, as a terminal's job starts (this harness may run under nohup, whose
    ignored SIGHUP the scripts keep), RLIMIT_FSIZE (a write past it fails with EFBIG: Python ignores SIGXFSZ) and
    RLIMIT_AS (an allocation past it fails at once)."""
    def apply():
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    return apply


# ------------------------------------------------------------------ files

def snapshot(top: Path) -> dict[str, str]:
    """relative path -> sha256 of each file (a symlink: its target, not followed) under top."""
    files = {}
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, top)
            if os.path.islink(path):
                files[rel] = "link:" + os.readlink(path)
            elif not os.path.isfile(path):  # a fifo: reading it would wait for a writer
                files[rel] = f"special:{os.stat(path).st_mode:o}"
            else:
                try:
                    files[rel] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                except OSError as error:
                    files[rel] = f"unreadable:{error.errno}"
    return files


def show_path(rel: str) -> str:
    """'repo/models/r.pt' -> 'models/r.pt'; anything else is outside the copy: '$PROBE/...'."""
    return rel[len("repo/"):] if rel.startswith("repo/") else f"$PROBE/{rel}"


def flip_bit(path: Path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def member_span(path: Path, suffix: str) -> tuple[int, int]:
    """(offset, size) of the bytes of the first non-empty zip member whose name ends with suffix."""
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(suffix) and i.file_size > 0)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_length + extra_length, info.compress_size


class Evil:
    """Unpickling it runs a shell command (what a crafted checkpoint would do)."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


_project_lock = threading.Lock()


def project():
    """The repository's checkpoint module (digest, save and load), imported once."""
    with _project_lock:
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        import checkpoint
        return checkpoint


def load_ok(path: Path) -> dict | None:
    try:
        return project().load_checkpoint(path)
    except Exception:
        return None


# ------------------------------------------------------------------ fixtures

class SetupError(RuntimeError):
    """A probe's setup could not be made (a fixture run failed): the probe is wrong."""


class Fixtures:
    """Checkpoints made once per suite by the scripts themselves, copied into probes:
    r_u1 (run r after update 1), r (the same run resumed to update 2), other (another run
    with the run id r, seed 1), small (r exported with --inference-only), lstm (run r
    with an LSTM core), endless (run r on Probe-v0 endless=true: episodes that never end),
    slow (run r on Probe-v0 with slow steps: a signal lands inside an update)."""

    def __init__(self, base: Path):
        self.folder = base / "_fixtures"
        self._lock = threading.Lock()
        self._made: dict[str, Path] = {}

    def _run(self, work: Path, args: list[str]):
        result = subprocess.run([PYTHON, *args], cwd=work, capture_output=True, text=True, timeout=300,
                                env={**os.environ, "PYTHONPATH": str(work)})
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            raise SetupError(f"fixture run `python {shlex.join(args)}` exited {result.returncode}: {last}")

    def get(self, name: str) -> Path:
        with self._lock:
            return self._get(name)

    def _get(self, name: str) -> Path:
        if name in self._made:
            return self._made[name]
        target = self.folder / f"{name}.pt"
        if name in ("r_u1", "r"):
            work = self.folder / "run"
            if name == "r_u1":
                copy_repository(work)
                self._run(work, ["train.py", "--run-id", "r", *sets(updates=1)])
            else:
                self._get("r_u1")
                self._run(work, ["train.py", "--resume", "models/r.pt", "--set", "updates=2"])
            shutil.copy2(work / "models/r.pt", target)
        elif name == "other":
            work = self.folder / "other"
            copy_repository(work)
            self._run(work, ["train.py", "--run-id", "r", "--seed", "1", *TINY])
            shutil.copy2(work / "models/r.pt", target)
        elif name == "lstm":
            work = self.folder / "lstm"
            copy_repository(work)
            self._run(work, ["train.py", "--run-id", "r", *sets(recurrence__layer_type="lstm")])
            shutil.copy2(work / "models/r.pt", target)
        elif name == "endless":
            work = self.folder / "endless"
            copy_repository(work)
            self._run(work, ["train.py", "--run-id", "r", *TINY, *ENDLESS])
            shutil.copy2(work / "models/r.pt", target)
        elif name == "slow":
            work = self.folder / "slow"
            copy_repository(work)
            self._run(work, ["train.py", "--run-id", "r", *TINY, *SLOW])
            shutil.copy2(work / "models/r.pt", target)
        elif name == "small":
            source = self._get("r")
            self._run(self.folder / "run", ["checkpoint.py", "--inference-only", str(source), str(target)])
        else:
            raise KeyError(name)
        self._made[name] = target
        return target


def copy_repository(work: Path) -> None:
    for pattern in COPIED:
        for source in ROOT.glob(pattern):
            destination = work / source.relative_to(ROOT)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
    (work / "probe_envs.py").write_text(PROBE_ENVS)


# ------------------------------------------------------------------ probes

@dataclass
class Probe:
    name: str
    point: str  # the issue point: "1" .. "12", or "extra"
    kind: str  # what is tried; several probes share a kind
    what: str  # the setup and the expectation, in words
    args: list[str] | None = None  # the script and its arguments ($PROBE: the probe's folder)
    setup: Callable[["Ctx"], None] | None = None
    action: Callable[["Ctx"], "Proc"] | None = None  # starts the processes itself; returns the judged one
    code: tuple[int, ...] = (2,)  # allowed exit codes
    words: tuple = ()  # each must be in the first line (a tuple item: any one of them), case-insensitive
    stdout_has: tuple[str, ...] = ()
    stdout_lacks: tuple[str, ...] = ()
    stderr_has: tuple[str, ...] = ()
    one_line: bool | None = None  # stderr exactly one line; default: when the expected code is 2
    traceback_ok: bool = False
    exists: tuple[str, ...] = ()  # globs relative to the probe's folder ('repo/...' inside the copy)
    absent: tuple[str, ...] = ()
    may_change: tuple[str, ...] = ()  # globs of existing files the probe may change
    may_write: tuple[str, ...] = ()  # globs of new files allowed outside models/ and summaries/
    check: Callable[["Ctx", "Proc"], str | None] | None = None  # any other condition: a reason, or None
    expect: str = ""  # what the action or the check also expects, in words (for the report)
    cwd: str = "repo"
    no_dac: bool = False  # run without the capabilities that let root ignore permission bits (NO_DAC)
    fsize: int | None = None  # RLIMIT_FSIZE of the runs: a write past it fails with EFBIG
    tmpfs: dict[str, int] = field(default_factory=dict)  # folder of the copy -> size of a tmpfs mounted there
    address_space: int | None = None
    timeout: float = 120
    serial: bool = False  # times or signals things, or sets limits: runs alone
    fast: bool = False  # in the --fast subset

    @property
    def codes(self) -> tuple[int, ...]:
        return self.code if isinstance(self.code, tuple) else (self.code,)

    @property
    def refusal(self) -> bool:
        return self.codes == (2,)


class Ctx:
    """A probe's scratch folder ($PROBE, with the repository copy in $PROBE/repo) and its processes."""

    def __init__(self, probe: Probe, base: Path, fixtures: Fixtures):
        self.probe, self.fixtures = probe, fixtures
        self.outer = base / probe.name
        self.repo = self.outer / "repo"
        self.marker = f"PROBE_{uuid.uuid4().hex}"
        self.procs: list[Proc] = []
        self.mounts: list[Path] = []
        self.notes: list[str] = []  # reasons found by an action (a second run that misbehaved, ...)
        self.data: dict = {}

    # files
    def path(self, rel: str) -> Path:
        return self.repo / rel

    def out(self, rel: str = "") -> Path:
        return self.outer / rel

    def write(self, rel: str, data: str | bytes, outside: bool = False) -> Path:
        path = (self.outer if outside else self.repo) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        return path

    def fixture(self, name: str = "r", rel: str = "models/r.pt") -> Path:
        path = self.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.fixtures.get(name), path)
        return path

    # processes
    def environment(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "PYTHONPATH")}
        env.update({self.marker: "1", "PYTHONPATH": str(self.repo), "SDL_VIDEODRIVER": "dummy",
                    "PYTHONDONTWRITEBYTECODE": "1"})
        return env

    def popen(self, args: list[str], cwd: str | None = None) -> Proc:
        p = self.probe
        args = [a.replace("$PROBE", str(self.outer)) for a in args]
        proc = Proc(self, args, self.outer / (cwd or p.cwd), limits(p.fsize, p.address_space), p.no_dac)
        self.procs.append(proc)
        return proc

    def run(self, args: list[str], timeout: float | None = None, cwd: str | None = None) -> Proc:
        proc = self.popen(args, cwd)
        proc.wait(timeout or self.probe.timeout)
        return proc


# ------------------------------------------------------------------ judging

@dataclass
class Result:
    name: str
    point: str
    kind: str
    what: str
    command: str
    code: int | None = None  # as a shell shows it: 128 + N when killed by signal N
    killed_by: str = ""  # the signal that ended the process, if one did
    first_line: str = ""
    traceback: bool = False
    changed: list[str] = field(default_factory=list)  # existing files changed or gone
    written: list[str] = field(default_factory=list)  # new files where none should be
    leftover_processes: int = 0
    leftover_tmp: list[str] = field(default_factory=list)
    leftover_locks: list[str] = field(default_factory=list)
    seconds: float = 0.0
    verdict: str = "right"
    reasons: list[str] = field(default_factory=list)
    expected: str = ""
    stdout: str = ""
    stderr: str = ""


def first_line(proc: Proc) -> str:
    for text in (proc.stderr, proc.stdout):
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return ""


def expectation(p: Probe) -> str:
    parts = [f"exit {' or '.join(map(str, p.codes))}"]
    if p.words:
        parts.append("first line naming " + ", ".join(" / ".join(w) if isinstance(w, tuple) else w
                                                      for w in p.words))
    if p.one_line if p.one_line is not None else p.refusal:
        parts.append("one line on stderr")
    if not p.traceback_ok:
        parts.append("no traceback")
    parts += [f"stdout has '{s}'" for s in p.stdout_has] + [f"stdout lacks '{s}'" for s in p.stdout_lacks]
    parts += [f"stderr has '{s}'" for s in p.stderr_has]
    parts += [f"{show_path(g)} exists" for g in p.exists] + [f"no {show_path(g)}" for g in p.absent]
    if p.expect:
        parts.append(p.expect)
    parts.append("existing files unchanged" + (f" (but {', '.join(map(show_path, p.may_change))})"
                                                if p.may_change else "") + ", nothing left behind")
    return "; ".join(parts)


def matches(rel: str, globs) -> bool:
    return any(fnmatch.fnmatchcase(rel, g) for g in globs)


def run_probe(p: Probe, base: Path, fixtures: Fixtures) -> Result:
    ctx = Ctx(p, base, fixtures)
    try:
        return _run_probe(p, ctx)
    finally:
        for path in reversed(ctx.mounts):
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def mount_tmpfs(ctx: Ctx, rel: str, size: int) -> None:
    """A small file system at rel in the copy: a disk that fills up (ENOSPC), unmounted after the probe."""
    path = ctx.path(rel)
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise Skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")
    ctx.mounts.append(path)


class Skip(Exception):
    """The probe cannot run on this machine (e.g. no permission to mount): reported as skipped."""


def _run_probe(p: Probe, ctx: Ctx) -> Result:
    command = shlex.join(["python", *(p.args or [])]) if p.args else "(see what)"
    if p.cwd != "repo":
        command = f"(cd {p.cwd.replace('repo', '$PROBE/repo', 1)} && {command})"
    result = Result(p.name, p.point, p.kind, p.what, command, expected=expectation(p))
    start = time.monotonic()
    proc = None
    try:
        copy_repository(ctx.repo)
        for rel, size in p.tmpfs.items():
            mount_tmpfs(ctx, rel, size)
        if p.setup:
            p.setup(ctx)
        before = snapshot(ctx.outer)
    except Skip as why:
        result.verdict, result.reasons = "skipped", [str(why)]
        return result
    except Exception as error:  # a fixture run failed (SetupError), or the probe itself is broken
        result.verdict = "wrong"
        result.reasons = [f"setup failed: {error}" if isinstance(error, SetupError)
                          else f"probe setup error: {type(error).__name__}: {error}"]
        result.seconds = time.monotonic() - start
        return result
    try:
        proc = p.action(ctx) if p.action else ctx.run(p.args)
    finally:
        for other in ctx.procs:  # nothing a probe started may outlive it
            if other.process.poll() is None:
                other.signal(signal.SIGKILL, group=True)
                other.wait(10)

    reasons = list(ctx.notes)
    returncode = proc.process.returncode
    # As a shell reports it: killed by signal N is 128 + N (a Python that dies of an uncaught
    # KeyboardInterrupt kills itself with SIGINT: 130 to the shell, like exit(130)).
    result.code = None if proc.timed_out else (128 - returncode if returncode < 0 else returncode)
    if returncode < 0 and not proc.timed_out:
        result.killed_by = signal.Signals(-returncode).name
    result.first_line = first_line(proc)
    result.stdout, result.stderr = proc.stdout[-4000:], proc.stderr[-4000:]
    output = "".join(q.stdout + q.stderr for q in ctx.procs)
    result.traceback = "Traceback (most recent call last)" in output
    if proc.timed_out:
        reasons.append(f"did not finish within {p.timeout:.0f} s (killed)")
    elif result.code not in p.codes:
        reasons.append(f"exit {result.code}, expected {' or '.join(map(str, p.codes))}")
    line = result.first_line.lower()
    for word in p.words:
        options = word if isinstance(word, tuple) else (word,)
        if not any(o.lower() in line for o in options):
            reasons.append(f"first line does not name {' / '.join(options)!r}")
    for text in p.stdout_has:
        if text not in proc.stdout:
            reasons.append(f"stdout lacks {text!r}")
    for text in p.stdout_lacks:
        if text in proc.stdout:
            reasons.append(f"stdout has {text!r}")
    for text in p.stderr_has:
        if text not in proc.stderr:
            reasons.append(f"stderr lacks {text!r}")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if (p.one_line if p.one_line is not None else p.refusal) and len(lines) != 1:
        reasons.append(f"stderr has {len(lines)} lines, expected one")
    if result.traceback and not p.traceback_ok:
        reasons.append("traceback")
    if p.refusal and proc.children:
        reasons.append(f"started {len(proc.children)} child process(es) (forkserver, workers) before it ended")

    # leftovers: processes, then files
    deadline = time.monotonic() + 5
    while processes_with(ctx.marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_with(ctx.marker)
    result.leftover_processes = len(left)
    for pid in left:  # ours: started by this probe
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if left:
        reasons.append(f"{len(left)} process(es) left running")

    after = snapshot(ctx.outer)
    for rel, digest in before.items():
        if matches(rel, p.may_change):
            continue
        if rel not in after:
            result.changed.append(f"{show_path(rel)} removed")
        elif after[rel] != digest:
            result.changed.append(f"{show_path(rel)} changed")
    if result.changed:
        reasons.append("lost or overwritten: " + ", ".join(result.changed))
    new = [rel for rel in after if rel not in before]
    models, summaries = (os.path.join(p.cwd, "models", ""), os.path.join(p.cwd, "summaries", ""))
    named = tuple(p.exists) + tuple(p.absent) + tuple(p.may_write)
    for rel in new:
        base_name = os.path.basename(rel)
        if base_name.endswith(".tmp"):
            result.leftover_tmp.append(show_path(rel))
        elif base_name.endswith(".lock"):
            result.leftover_locks.append(show_path(rel))
        elif matches(rel, named):
            continue
        elif p.refusal:
            result.written.append(show_path(rel))
        elif not (rel.startswith(models) or rel.startswith(summaries)):
            result.written.append(show_path(rel))
    if result.leftover_tmp:
        reasons.append("temporary file(s) left: " + ", ".join(result.leftover_tmp))
    if result.leftover_locks:
        reasons.append("lock file(s) left: " + ", ".join(result.leftover_locks))
    if result.written:
        where = "a refused run wrote" if p.refusal else "written outside models/ and summaries/:"
        reasons.append(f"{where} " + ", ".join(result.written))
    for glob in p.exists:
        if not any(fnmatch.fnmatchcase(rel, glob) for rel in after):
            reasons.append(f"{show_path(glob)} missing")
    for glob in p.absent:
        if any(fnmatch.fnmatchcase(rel, glob) for rel in after):
            reasons.append(f"{show_path(glob)} appeared")
    if p.check and not proc.timed_out:
        reason = p.check(ctx, proc)
        if reason:
            reasons.append(reason)

    result.reasons = reasons
    result.verdict = "wrong" if reasons else "right"
    result.seconds = time.monotonic() - start
    return result


# ------------------------------------------------------------------ setups and checks

def with_fixture(name: str = "r", rel: str = "models/r.pt", then: Callable | None = None):
    def setup(ctx: Ctx):
        ctx.fixture(name, rel)
        if then:
            then(ctx)
    return setup


def all_of(*setups):
    def setup(ctx: Ctx):
        for s in setups:
            s(ctx)
    return setup


def write_file(rel: str, data: str | bytes, outside: bool = False):
    return lambda ctx: ctx.write(rel, data, outside)


def symlink(rel: str, target: str):
    """rel (in the copy) -> target ($PROBE/... allowed)."""
    def setup(ctx: Ctx):
        path = ctx.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target.replace("$PROBE", str(ctx.outer)))
    return setup


def copy_to_outside(name: str, rel: str):
    def setup(ctx: Ctx):
        shutil.copy2(ctx.fixtures.get(name), ctx.out(rel))
    return setup


def checkpoint_update(rel: str, update: int):
    """The checkpoint at rel loads (weights-only, digest) and is at `update`."""
    def check(ctx: Ctx, proc: Proc):
        saved = load_ok(ctx.path(rel))
        if saved is None:
            return f"{rel} does not load"
        if saved["update"] != update:
            return f"{rel} is at update {saved['update']}, expected {update}"
    return check


def loads(rel: str, at_least: int = 1):
    def check(ctx: Ctx, proc: Proc):
        saved = load_ok(ctx.path(rel))
        if saved is None:
            return f"{rel} missing or does not load"
        if saved["update"] < at_least:
            return f"{rel} is at update {saved['update']}, expected >= {at_least}"
    return check


def flipped(where: str, name: str = "r", rel: str = "models/r.pt"):
    """A copy of a fixture with one bit flipped: in the tensor data, the pickle (an opcode or a
    string), the digest, or the zip's central directory."""
    def setup(ctx: Ctx):
        path = ctx.fixture(name, rel)
        if where == "tensor":
            offset, size = member_span(path, "/data/0")
            flip_bit(path, offset + size // 2, 3)
        elif where == "last-tensor":
            with zipfile.ZipFile(path) as archive:
                numbered = [i.filename for i in archive.infolist() if "/data/" in i.filename and i.file_size]
            last = max(numbered, key=lambda n: int(n.rsplit("/", 1)[1]))
            offset, size = member_span(path, "/data/" + last.rsplit("/", 1)[1])
            flip_bit(path, offset + size - 1, 0)
        elif where == "pickle-opcode":
            offset, _ = member_span(path, "data.pkl")
            flip_bit(path, offset + 2, 1)  # the first opcode after PROTO
        elif where == "pickle-string":
            offset, size = member_span(path, "data.pkl")
            data = path.read_bytes()
            at = data.index(b"config", offset, offset + size)  # a key of the payload
            flip_bit(path, at + 1, 0)
        elif where == "digest":
            import torch
            digest = torch.load(path, weights_only=True)["digest"]
            flip_bit(path, path.read_bytes().index(digest.encode()) + 10, 0)
        elif where == "directory":
            data = path.read_bytes()
            flip_bit(path, data.index(b"PK\x01\x02") + 46, 1)  # a name in the central directory
        else:
            raise KeyError(where)
    return setup


def crafted(change: Callable[[dict], None], name: str = "r", rel: str = "models/r.pt", outside: bool = False):
    """A fixture's payload changed by `change`, written by the project's own save_checkpoint, so its
    digest is right: what a careless or hostile author could hand over."""
    def setup(ctx: Ctx):
        ck = project()
        payload = ck.load_checkpoint(ctx.fixtures.get(name))
        change(payload)
        target = (ctx.outer if outside else ctx.repo) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        ck.save_checkpoint(target, payload)
    return setup


def evil(how: str, rel: str = "models/r.pt"):
    """A checkpoint whose unpickling would run `touch $PROBE/MARKER`."""
    def setup(ctx: Ctx):
        import torch
        command = f"touch {ctx.out('MARKER')}"
        target = ctx.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        if how == "torch.save":
            torch.save({"format": 2, "model": {}, "config": {"gamma": Evil(command)}, "digest": "0"}, target)
        elif how == "inside-real":
            payload = torch.load(ctx.fixtures.get("r"), weights_only=True)
            payload["normalization"] = {"hook": Evil(command)}
            torch.save(payload, target)
        elif how == "legacy":
            torch.save({"model": {}, "config": Evil(command)}, target, _use_new_zipfile_serialization=False)
        elif how == "zip":  # a real checkpoint's zip, its data.pkl replaced by a plain pickle
            source = ctx.fixtures.get("r")
            with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as new:
                for info in old.infolist():
                    data = old.read(info)
                    if info.filename.endswith("data.pkl"):
                        data = pickle.dumps({"model": {}, "config": {}, "x": Evil(command)}, protocol=2)
                    new.writestr(info, data)
        elif how == "pickle":
            target.write_bytes(pickle.dumps({"model": {}, "config": Evil(command)}, protocol=2))
        else:
            raise KeyError(how)
    return setup


def readonly(*folders: str):
    """Folders of the copy made read-only (mode 0555; the probe runs with no_dac, so it counts)."""
    def setup(ctx: Ctx):
        for rel in folders:
            path = ctx.path(rel)
            path.mkdir(exist_ok=True)
            path.chmod(0o555)
    return setup


def touch_env(*extra: str, image: bool = False) -> list[str]:
    """--set flags for the probes' own environment, which leaves $PROBE/env-built when it is
    built, stepped by 2 worker processes: a refusal must come before it."""
    flags = ["--set", "environment.type=gym", "--set", "environment.name=probe_envs:Probe-v0",
             "--set", "environment.kwargs.touch=$PROBE/env-built", "--set", "worker_processes=2"]
    if image:
        flags += ["--set", "environment.kwargs.image=true"]
    return [*TINY, *flags, *extra]


BUILT = ("env-built.*",)


def train_refused(name, point, kind, what, extra: list[str], words=(), fast=False, touch="none", **kw) -> Probe:
    """A train.py run refused before any environment is built (touch="none"), or with the
    environment built in train.py's own process but before any worker process starts
    (touch="main": the check needs the environment's spaces; every refusal is checked for child
    processes), or with PocMemoryEnv (touch="")."""
    args = ["train.py", "--run-id", "p", *(touch_env(*extra) if touch else [*TINY, *extra])]
    if touch == "main":
        kw.update(may_write=BUILT)
    return Probe(name, point, kind, what, args, words=words, absent=BUILT if touch == "none" else (), fast=fast,
                 **kw)


# ------------------------------------------------------------------ actions (signals, concurrency)

def interrupt_at(delay: float, number: int, args: list[str], group: bool = True):
    """Starts args, sends `number` (to the process group, as a terminal does) `delay` s later."""
    def action(ctx: Ctx) -> Proc:
        proc = ctx.popen(args)
        time.sleep(max(0.0, delay - (time.monotonic() - proc.started)))
        proc.signal(number, group)
        proc.wait(60)
        return proc
    return action


def interrupt_after_line(numbers: list[int], args: list[str], line: str = "update    1/", gap: float = 0.3,
                         group: bool = False, at_once: float | None = None):
    """Starts args; once stdout has `line`, sends the signals `gap` s apart; with at_once, the
    run must end within that many seconds of the last signal."""
    def action(ctx: Ctx) -> Proc:
        proc = ctx.popen(args)
        if not proc.wait_line(line):
            ctx.notes.append(f"stdout never had a line starting {line!r}")
        last = time.monotonic()
        for i, number in enumerate(numbers):
            if i:
                time.sleep(gap)
            last = time.monotonic()
            proc.signal(number, group)
        proc.wait(90)
        took = time.monotonic() - last
        if at_once is not None and took > at_once:
            ctx.notes.append(f"took {took:.1f} s to stop after the last signal (expected < {at_once} s)")
        return proc
    return action


def interrupt_at_cpu(seconds: float, number: int, args: list[str]):
    """Starts args and sends `number` once the process has used `seconds` of CPU time: a point of its work that a
    busy machine does not move, as a wall clock's would."""
    def action(ctx: Ctx) -> Proc:
        proc = ctx.popen(args)
        tick = os.sysconf("SC_CLK_TCK")
        while proc.process.poll() is None:
            try:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                break
            if (int(fields[11]) + int(fields[12])) / tick >= seconds:  # utime + stime
                proc.signal(number)
                break
            time.sleep(0.05)
        else:
            ctx.notes.append(f"it ended before using {seconds} s of CPU time")
        proc.wait(120)
        return proc
    return action


def kill_worker(args: list[str]):
    """SIGKILL one environment worker process (a grandchild of train.py) after update 1."""
    def action(ctx: Ctx) -> Proc:
        proc = ctx.popen(args)
        if not proc.wait_line("update    1/"):
            ctx.notes.append("stdout never had 'update    1/'")
        mine = processes_with(ctx.marker)
        children = [pid for pid in mine if parent_of(pid) == proc.pid]
        workers = [pid for pid in mine if parent_of(pid) in children]
        if not workers:
            ctx.notes.append("found no worker process to kill")
        else:
            os.kill(workers[0], signal.SIGKILL)
        proc.wait(60)
        return proc
    return action


def while_running(first: list[str], second: list[str], first_code: int = 143):
    """Starts `first`, waits for its first update line, runs `second` (the judged run), then stops the
    first with SIGTERM, which must end it with first_code."""
    def action(ctx: Ctx) -> Proc:
        a = ctx.popen(first)
        if not a.wait_line("update "):
            ctx.notes.append(f"the first run never finished an update: {first_line(a)}")
        b = ctx.run(second, timeout=90)
        a.signal(signal.SIGTERM)
        code = a.wait(60)
        if code != first_code:
            ctx.notes.append(f"the first run exited {code} after SIGTERM, expected {first_code}")
        return b
    return action


def stale_lock_after_sigkill(args: list[str]):
    """A run killed with SIGKILL after update 1 (its lock file stays); then the same run id again."""
    def action(ctx: Ctx) -> Proc:
        a = ctx.popen(["train.py", "--run-id", "r", *sets(updates=100000, checkpoint_interval=0)])
        if not a.wait_line("update    1/"):
            ctx.notes.append("the killed run never reached update 1")
        a.signal(signal.SIGKILL, group=True)
        a.wait(30)
        if not ctx.path("models/r.lock").exists():
            ctx.notes.append("(the killed run left no lock file: nothing stale to take over)")
        return ctx.run(args)
    return action


def two_at_once(first: list[str], second: list[str]):
    """Starts both at the same moment; the second is judged, the first must exit 0 as well."""
    def action(ctx: Ctx) -> Proc:
        a, b = ctx.popen(first), ctx.popen(second)
        for proc in (a, b):
            proc.wait(120)
        if a.process.returncode != 0:
            ctx.notes.append(f"the first run exited {a.process.returncode}: {first_line(a)}")
        return b
    return action


def twice_same(args: list[str], prefix: str = "episode"):
    """Runs args twice; the lines starting with prefix must be the same both times."""
    def action(ctx: Ctx) -> Proc:
        one = ctx.run(args)
        two = ctx.run(args)
        a = [l for l in one.out if l.startswith(prefix)]
        b = [l for l in two.out if l.startswith(prefix)]
        if not a:
            ctx.notes.append(f"no '{prefix}' lines")
        elif a != b:
            diff = next(i for i, (x, y) in enumerate(zip(a + [""], b + [""])) if x != y)
            x, y = (lines[diff].strip() if diff < len(lines) else "(no line)" for lines in (a, b))
            ctx.notes.append(f"the two runs differ: {x!r} vs {y!r}")
        return two
    return action


def sigint_then_resume(args: list[str]):
    """SIGINT after update 2, then --resume with 2 more updates: it must finish (exit 0)."""
    def action(ctx: Ctx) -> Proc:
        a = ctx.popen(args)
        a.wait_line("update    2/")
        a.signal(signal.SIGINT)
        if a.wait(60) != 130:
            ctx.notes.append(f"the interrupted run exited {a.process.returncode}, expected 130")
        saved = load_ok(ctx.path("models/r.pt"))
        if saved is None:
            ctx.notes.append("the interrupted run left no loadable models/r.pt")
            return a
        ctx.data["target"] = saved["update"] + 2
        return ctx.run(["train.py", "--resume", "models/r.pt", "--set", f"updates={saved['update'] + 2}"])
    return action


def sweep_interrupted(delay: float, args: list[str], after_ray: bool = False):
    """Starts a sweep, sends SIGINT to its process group `delay` s later (as a terminal's Ctrl-C), or
    with after_ray `delay` s after Ray has started (the sweep writes sweeps/s/sweep.json then); when the
    sweep had begun (its sweep.json exists), `sweep.py --resume` must then finish it (exit 0)."""
    def action(ctx: Ctx) -> Proc:
        proc = ctx.popen(args)
        begun = time.monotonic()
        if after_ray:
            while not ctx.path("sweeps/s/sweep.json").exists() and proc.process.poll() is None:
                time.sleep(0.05)
            if proc.process.poll() is not None:
                ctx.notes.append("the sweep ended before Ray had started")
            begun = time.monotonic()
        time.sleep(max(0.0, delay - (time.monotonic() - begun)))
        proc.signal(signal.SIGINT, group=True)
        proc.wait(180)
        folder = ctx.path("sweeps/s")
        if (folder / "sweep.json").exists():
            again = ctx.run(["sweep.py", "--resume", "sweeps/s"], timeout=200)
            if again.process.returncode != 0:
                ctx.notes.append(f"--resume exited {again.process.returncode}: {first_line(again)}")
        return proc
    return action


def resumed_to_target(ctx: Ctx, proc: Proc):
    if "target" in ctx.data:
        return checkpoint_update("models/r.pt", ctx.data["target"])(ctx, proc)


def huge_memory(**kw) -> dict:
    return {"address_space": 12 * 2 ** 30, "serial": True, **kw}


# ------------------------------------------------------------------ the probes

SLOW = ["--set", "environment.type=gym", "--set", "environment.name=probe_envs:Probe-v0",
        "--set", "environment.kwargs.sleep=0.05"]
LONG = sets(updates=100000, checkpoint_interval=0)
FLAKY = "tests.faulty_envs:Flaky-v0"


def build_probes() -> list[Probe]:
    P = []
    add = P.append
    R = with_fixture()  # models/r.pt: run r at update 2

    # ---------------------------------------------------------------- 1: never replace a checkpoint
    add(Probe("existing-checkpoint-new-run", "1", "existing checkpoint, new run",
              "models/r.pt exists; a new run with --run-id r: refused, naming --resume, --run-id and --overwrite",
              ["train.py", "--run-id", "r", *TINY], setup=R, words=("--resume", "--run-id", "--overwrite")))
    add(Probe("shipped-checkpoint-name", "1", "a shipped checkpoint's name as run id",
              "--run-id poc_memory_env (the shipped models/poc_memory_env.pt): refused, the file untouched",
              ["train.py", "--run-id", "poc_memory_env", *TINY], words=("--resume", "--overwrite"), fast=True))
    add(Probe("make-train", "1", "make train",
              "`make train` as the Makefile runs it (tiny sizes): a new models/poc_memory_env-<time>.pt, "
              "every tracked file unchanged", ["train.py", "--config", "configs/poc_memory_env.yaml", *TINY],
              code=(0,), exists=("repo/models/poc_memory_env-*.pt",)))
    add(Probe("default-run-id-cartpole", "1", "default run id of a shipped config",
              "--config configs/cartpole_masked.yaml without --run-id: models/cartpole_masked.pt untouched",
              ["train.py", "--config", "configs/cartpole_masked.yaml", *TINY], code=(0,),
              exists=("repo/models/cartpole_masked-*.pt",)))
    add(Probe("overwrite-replaces", "1", "--overwrite replaces",
              "models/r.pt exists; --run-id r --overwrite: replaced, exit 0",
              ["train.py", "--run-id", "r", "--overwrite", *TINY], setup=R, code=(0,),
              may_change=("repo/models/r.pt",), check=checkpoint_update("models/r.pt", 2)))
    add(Probe("resume-older-copy", "1", "resume an older copy",
              "models/r.pt is at update 2; --resume backup/r.pt (the same run at update 1): refused naming "
              "models/r.pt, both files untouched",
              ["train.py", "--resume", "backup/r.pt", "--set", "updates=3"],
              setup=all_of(R, with_fixture("r_u1", "backup/r.pt")), words=("models/r.pt",)))
    add(Probe("resume-older-copy-in-models", "1", "resume an older copy",
              "models/r.pt at update 2, models/r-old.pt the same run at update 1: --resume models/r-old.pt "
              "refused", ["train.py", "--resume", "models/r-old.pt", "--set", "updates=3"],
              setup=all_of(R, with_fixture("r_u1", "models/r-old.pt")), words=("models/r.pt",)))
    add(Probe("resume-older-copy-overwrite", "1", "older copy with --overwrite",
              "as resume-older-copy with --overwrite: the user chose to replace: exit 0",
              ["train.py", "--resume", "backup/r.pt", "--set", "updates=3", "--overwrite"],
              setup=all_of(R, with_fixture("r_u1", "backup/r.pt")), code=(0,), may_change=("repo/models/r.pt",),
              check=checkpoint_update("models/r.pt", 3)))
    add(Probe("resume-other-run-same-id", "1", "resume another run onto an existing checkpoint",
              "models/r.pt is run r (seed 0); --resume backup/r.pt, a different run also named r (seed 1): "
              "refused", ["train.py", "--resume", "backup/r.pt", "--set", "updates=3"],
              setup=all_of(R, with_fixture("other", "backup/r.pt")), words=("models/r.pt",)))
    add(Probe("resume-newest", "1", "resume the newest",
              "--resume models/r.pt --set updates=3: continues to update 3", 
              ["train.py", "--resume", "models/r.pt", "--set", "updates=3"], setup=R, code=(0,),
              may_change=("repo/models/r.pt",), check=checkpoint_update("models/r.pt", 3)))
    add(Probe("resume-identical-copy", "1", "resume an identical copy",
              "backup/r.pt is a byte-identical copy of models/r.pt: --resume backup/r.pt continues",
              ["train.py", "--resume", "backup/r.pt", "--set", "updates=3"],
              setup=all_of(R, with_fixture("r", "backup/r.pt")), code=(0,), may_change=("repo/models/r.pt",),
              check=checkpoint_update("models/r.pt", 3)))
    add(Probe("existing-unreadable-checkpoint", "1", "existing unreadable checkpoint",
              "models/r.pt is garbage; a new run r without --overwrite: refused, the file untouched",
              ["train.py", "--run-id", "r", *TINY], setup=write_file("models/r.pt", b"not a checkpoint")))
    add(Probe("existing-folder-at-checkpoint", "1", "a folder at the checkpoint's name",
              "models/r.pt is a folder: refused", ["train.py", "--run-id", "r", *TINY],
              setup=lambda ctx: ctx.path("models/r.pt").mkdir(parents=True), words=("models/r.pt",)))
    add(Probe("existing-symlink-outside", "1", "a symlink at the checkpoint's name",
              "models/r.pt -> $PROBE/victim.pt (a checkpoint outside): refused, the victim untouched",
              ["train.py", "--run-id", "r", *TINY],
              setup=all_of(copy_to_outside("r", "victim.pt"), symlink("models/r.pt", "$PROBE/victim.pt"))))
    add(Probe("overwrite-through-symlink", "1", "--overwrite through a symlink",
              "models/r.pt -> $PROBE/victim.pt; --overwrite: the link may be replaced, never the file outside",
              ["train.py", "--run-id", "r", "--overwrite", *TINY], code=(0, 2),
              setup=all_of(copy_to_outside("r", "victim.pt"), symlink("models/r.pt", "$PROBE/victim.pt")),
              may_change=("repo/models/r.pt",)))
    add(Probe("dangling-symlink-at-checkpoint", "1", "a dangling symlink at the checkpoint's name",
              "models/r.pt -> $PROBE/new.pt (missing): nothing may be written at $PROBE/new.pt",
              ["train.py", "--run-id", "r", *TINY], code=(0, 2), setup=symlink("models/r.pt", "$PROBE/new.pt"),
              may_change=("repo/models/r.pt",), absent=("new.pt",)))

    # ---------------------------------------------------------------- 2: unwritable, disk full
    add(Probe("models-not-writable", "2", "models/ not writable",
              "models/ read-only (run without CAP_DAC_OVERRIDE), worker_processes=2: refused naming models/, "
              "before any "
              "environment is built", ["train.py", "--run-id", "p", *touch_env()], no_dac=True,
              setup=readonly("models"), words=("models",), absent=BUILT))
    add(Probe("summaries-not-writable", "2", "summaries/ not writable",
              "summaries/ read-only (run without CAP_DAC_OVERRIDE): refused naming summaries/, before any environment",
              ["train.py", "--run-id", "p", *touch_env()], no_dac=True, setup=readonly("summaries"),
              words=("summaries",), absent=BUILT))
    add(Probe("folder-not-writable", "2", "working folder not writable",
              "the working folder is read-only and has no models/ (run without CAP_DAC_OVERRIDE): refused, before any "
              "environment", ["train.py", "--run-id", "p", *touch_env()], no_dac=True,
              setup=lambda ctx: (shutil.rmtree(ctx.path("models")), ctx.repo.chmod(0o555)),
              words=("models",), absent=BUILT))
    add(Probe("resume-models-not-writable", "2", "resume into a read-only models/",
              "--resume models/r.pt with models/ read-only (without CAP_DAC_OVERRIDE): refused naming models/",
              ["train.py", "--resume", "models/r.pt", "--set", "updates=3"], no_dac=True,
              setup=all_of(R, readonly("models")), words=("models",)))
    add(Probe("control-run-without-dac", "2", "control: a run bound by permission bits",
              "a writable copy, run without CAP_DAC_OVERRIDE: trains (so the read-only probes test permissions)",
              ["train.py", "--run-id", "p", *TINY], no_dac=True, code=(0,), exists=("repo/models/p.pt",)))
    add(Probe("models-is-a-file", "2", "models is a file",
              "models is a regular file: refused naming models", ["train.py", "--run-id", "p", *touch_env()],
              setup=lambda ctx: (shutil.rmtree(ctx.path("models")), ctx.write("models", "x")),
              words=("models",), absent=BUILT))
    add(Probe("summaries-is-a-file", "2", "summaries is a file",
              "summaries is a regular file: refused naming summaries",
              ["train.py", "--run-id", "p", *touch_env()], setup=write_file("summaries", "x"),
              words=("summaries",), absent=BUILT))
    add(Probe("disk-full-resume-save", "2", "disk full while saving",
              "RLIMIT_FSIZE 20000 (the checkpoint is ~29 kB): --resume models/r.pt to update 4, saving every "
              "update: exit 1, one line saying models/r.pt could not be written and is intact; models/r.pt "
              "unchanged, no *.tmp left",
              ["train.py", "--resume", "models/r.pt", "--set", "updates=4", "--set", "checkpoint_interval=1"],
              setup=R, fsize=20000, serial=True, code=(1,), words=("models/r.pt", "intact"), fast=True))
    add(Probe("disk-full-first-save", "2", "disk full at the first save",
              "RLIMIT_FSIZE 20000, a new run: exit 1, one line saying the checkpoint could not be written, "
              "no models/p.pt, no *.tmp", ["train.py", "--run-id", "p", *TINY], fsize=20000, serial=True,
              code=(1,), words=("models/p.pt",), absent=("repo/models/p.pt",)))
    add(Probe("disk-full-summaries", "2", "disk full while writing summaries",
              "summaries/ is a full disk (a 4 KiB tmpfs): a new run: exit 1 with one line naming summaries, no "
              "traceback", ["train.py", "--run-id", "p", *TINY], tmpfs={"summaries": 4096}, code=(1, 2),
              one_line=True, words=(("summaries", "no space"),)))
    add(Probe("disk-full-models-enospc", "2", "disk full while saving",
              "models/ is a 48 KiB tmpfs holding models/r.pt (29 kB): --resume to update 4, saving every update: "
              "the second copy does not fit (ENOSPC): exit 1, one line saying models/r.pt is intact; models/r.pt "
              "unchanged, no *.tmp left",
              ["train.py", "--resume", "models/r.pt", "--set", "updates=4", "--set", "checkpoint_interval=1"],
              setup=R, tmpfs={"models": 48 * 1024}, code=(1,), words=("models/r.pt", "intact")))
    add(Probe("disk-full-inference-only", "2", "disk full in checkpoint.py",
              "RLIMIT_FSIZE 4000: checkpoint.py --inference-only: non-zero, one line, no target, no *.tmp",
              ["checkpoint.py", "--inference-only", "models/r.pt", "small.pt"], setup=R, fsize=4000,
              serial=True, code=(1, 2), one_line=True, words=("small.pt",), absent=("repo/small.pt",)))
    add(Probe("disk-full-video", "2", "disk full while writing a video",
              "RLIMIT_FSIZE 300 bytes (less than any GIF): enjoy.py --video out.gif: non-zero, one line, no "
              "traceback", ["enjoy.py", "--model", "models/r.pt", "--episodes", "1", "--video", "out.gif"], setup=R,
              fsize=300, serial=True, code=(1, 2), one_line=True, words=("out.gif",),
              may_write=("repo/out.gif",)))
    add(Probe("file-size-limit-scores", "2", "a file-size limit where nothing is written",
              "RLIMIT_FSIZE 300 bytes: enjoy.py scores its episodes (its environments' step arrays were a shared-"
              "memory file, refused: a traceback before the first episode)",
              ["enjoy.py", "--model", "models/r.pt", "--episodes", "2"], setup=R, fsize=300, serial=True, code=(0,),
              stdout_has=("2 episodes: return",)))

    # ---------------------------------------------------------------- 3: concurrency, locks, temporary names
    add(Probe("same-run-id-at-once", "3", "same run id at once",
              "run r trains; a second run r starts: refused (lock held by the first, naming it in use); the "
              "first then stops on SIGTERM with 143",
              action=while_running(["train.py", "--run-id", "r", *LONG], ["train.py", "--run-id", "r", *TINY]),
              args=["train.py", "--run-id", "r", *TINY], words=("in use",), serial=True, fast=True,
              may_write=("repo/models/*", "repo/summaries/*"), one_line=True))
    add(Probe("overwrite-against-live-run", "3", "--overwrite against a live run",
              "run r trains; a second run r with --overwrite: still refused (in use)",
              action=while_running(["train.py", "--run-id", "r", *LONG],
                                   ["train.py", "--run-id", "r", "--overwrite", *TINY]),
              args=["train.py", "--run-id", "r", "--overwrite", *TINY], words=("in use",), serial=True,
              may_write=("repo/models/*", "repo/summaries/*"), one_line=True))
    add(Probe("two-resumes-at-once", "3", "two resumes at once",
              "--resume models/r.pt runs; a second --resume models/r.pt: refused (in use)",
              action=while_running(["train.py", "--resume", "models/r.pt", "--set", "updates=10000000"],
                                   ["train.py", "--resume", "models/r.pt", "--set", "updates=10000000"]),
              args=["train.py", "--resume", "models/r.pt", "--set", "updates=10000000"], setup=R, words=("in use",),
              serial=True, may_change=("repo/models/r.pt",), may_write=("repo/models/*", "repo/summaries/*"),
              one_line=True))
    add(Probe("stale-lock-after-sigkill", "3", "stale lock after SIGKILL",
              "run r killed with SIGKILL after update 1 (its models/r.lock stays); run r again: takes the lock "
              "over and trains", action=stale_lock_after_sigkill(["train.py", "--run-id", "r", *TINY]),
              args=["train.py", "--run-id", "r", *TINY], code=(0,), serial=True, exists=("repo/models/r.pt",)))
    add(Probe("stale-lock-file", "3", "stale lock file",
              "models/r.lock holds the pid of a process long gone: run r trains",
              ["train.py", "--run-id", "r", *TINY], setup=write_file("models/r.lock", "999999"), code=(0,),
              may_change=("repo/models/r.lock",), exists=("repo/models/r.pt",)))
    add(Probe("lock-symlink-outside", "3", "a lock file that is a symlink",
              "models/r.lock -> $PROBE/victim.txt (a user's file): the run must not write into the victim",
              ["train.py", "--run-id", "r", *TINY], code=(0, 2),
              setup=all_of(write_file("victim.txt", "precious\n", outside=True),
                           symlink("models/r.lock", "$PROBE/victim.txt")),
              may_change=("repo/models/r.lock",)))
    add(Probe("planted-temporary-names", "3", "planted temporary names",
              "models/r.pt.tmp, models/.r.pt.tmp and models/r.tmp are symlinks to $PROBE/victim.txt: a run "
              "saving every update must neither follow nor remove them",
              ["train.py", "--run-id", "r", *sets(checkpoint_interval=1)], code=(0,),
              setup=all_of(write_file("victim.txt", "precious\n", outside=True),
                           symlink("models/r.pt.tmp", "$PROBE/victim.txt"),
                           symlink("models/.r.pt.tmp", "$PROBE/victim.txt"),
                           symlink("models/r.tmp", "$PROBE/victim.txt"))))
    add(Probe("old-temporary-file", "3", "an old temporary file",
              "a temporary file of a killed run (models/.r.pt.12345.deadbeef.tmp) is there: the run trains "
              "and leaves it alone", ["train.py", "--run-id", "r", *sets(checkpoint_interval=1)], code=(0,),
              setup=write_file("models/.r.pt.12345.deadbeef.tmp", b"partial")))
    add(Probe("two-runs-at-once", "3", "two runs at once",
              "runs a and b (different run ids) start together: both train",
              action=two_at_once(["train.py", "--run-id", "a", *TINY], ["train.py", "--run-id", "b", *TINY]),
              args=["train.py", "--run-id", "b", *TINY], code=(0,), serial=True,
              exists=("repo/models/a.pt", "repo/models/b.pt")))

    # ---------------------------------------------------------------- 4: flipped bits
    corrupt = ("corrupt checkpoint",)
    for where, fast in (("tensor", True), ("pickle-opcode", False), ("pickle-string", False),
                        ("digest", False), ("directory", False), ("last-tensor", False)):
        kind = f"bit flip in the {where.replace('-', ' ')}"
        setup = flipped(where)
        add(Probe(f"flip-{where}-resume", "4", kind,
                  f"one bit flipped in models/r.pt ({where}): train.py --resume: 'corrupt checkpoint', one line",
                  ["train.py", "--resume", "models/r.pt", "--set", "updates=3"], setup=setup, words=corrupt,
                  fast=where == "tensor"))
        if where in ("tensor", "pickle-opcode", "pickle-string", "digest"):
            add(Probe(f"flip-{where}-enjoy", "4", kind,
                      f"one bit flipped in models/r.pt ({where}): enjoy.py: 'corrupt checkpoint', one line",
                      ["enjoy.py", "--model", "models/r.pt", "--episodes", "1"], setup=setup, words=corrupt,
                      ))
        if where in ("tensor", "pickle-opcode"):
            add(Probe(f"flip-{where}-export", "4", kind,
                      f"one bit flipped in models/r.pt ({where}): checkpoint.py --inference-only: 'corrupt "
                      "checkpoint', one line, no target",
                      ["checkpoint.py", "--inference-only", "models/r.pt", "small.pt"], setup=setup,
                      words=corrupt, absent=("repo/small.pt",)))
    half = lambda ctx: ctx.path("models/r.pt").write_bytes(ctx.fixtures.get("r").read_bytes()[:15000])
    add(Probe("truncated-checkpoint-enjoy", "4", "truncated checkpoint",
              "models/r.pt cut at 15000 bytes: enjoy.py: 'corrupt checkpoint'",
              ["enjoy.py", "--model", "models/r.pt"], setup=half, words=corrupt))
    add(Probe("truncated-checkpoint-export", "4", "truncated checkpoint",
              "models/r.pt cut at 15000 bytes: checkpoint.py: 'corrupt checkpoint'",
              ["checkpoint.py", "--inference-only", "models/r.pt", "small.pt"], setup=half, words=corrupt))
    add(Probe("empty-checkpoint-resume", "4", "empty checkpoint",
              "models/r.pt is empty: --resume: 'corrupt checkpoint'", ["train.py", "--resume", "models/r.pt"],
              setup=write_file("models/r.pt", b""), words=corrupt))
    add(Probe("empty-checkpoint-enjoy", "4", "empty checkpoint",
              "models/r.pt is empty: enjoy.py: 'corrupt checkpoint'", ["enjoy.py", "--model", "models/r.pt"],
              setup=write_file("models/r.pt", b""), words=corrupt))

    # ---------------------------------------------------------------- 5: run ids
    for name, run_id, fast in (("dotdot", "../../x", True), ("absolute", "$PROBE/abs", False),
                               ("slash", "a/b", False), ("empty", "", True), ("leading-dot", ".hidden", False),
                               ("leading-dash", "-x", False), ("ends-pt", "x.pt", False),
                               ("ends-lock", "x.lock", False), ("overlong", "x" * 300, False),
                               ("space", "a b", False), ("non-ascii", "r\u00fcn", False),
                               ("newline", "x\n", False), ("only-dots", "..", False),
                               ("tilde", "~x", False), ("backslash", "a\\b", False)):
        add(Probe(f"run-id-{name}", "5", f"run id: {name}",
                  f"--run-id={run_id!r}: refused in one line naming --run-id; nothing written anywhere",
                  ["train.py", f"--run-id={run_id}", *touch_env()], words=("--run-id",), absent=BUILT,
                  fast=fast))
    add(Probe("run-id-longest-allowed", "5", "run id: longest allowed",
              "--run-id of 200 letters (the documented limit): trains",
              ["train.py", "--run-id", "r" * 200, *TINY], code=(0,), exists=("repo/models/" + "r" * 200 + ".pt",)))
    add(Probe("run-id-inner-dots", "5", "run id: inner dots",
              "--run-id a..b (valid): trains, writes models/a..b.pt", ["train.py", "--run-id", "a..b", *TINY],
              code=(0,), exists=("repo/models/a..b.pt",)))
    add(Probe("run-id-from-crafted-checkpoint", "5", "run id from a crafted checkpoint",
              "a checkpoint (right digest) whose run_id is '../../evil': --resume must refuse it; nothing "
              "written outside models/ and summaries/",
              ["train.py", "--resume", "models/r.pt", "--set", "updates=3"],
              setup=crafted(lambda c: c.__setitem__("run_id", "../../evil")), words=(("run_id", "run id"),),
              absent=("evil*", "repo/evil*")))
    add(Probe("summaries-path-from-crafted-checkpoint", "5", "summaries path from a crafted checkpoint",
              "a checkpoint (right digest) whose summaries_path is $PROBE/elsewhere: --resume must not write "
              "there", ["train.py", "--resume", "models/r.pt", "--set", "updates=3"], code=(0, 2),
              setup=lambda ctx: crafted(lambda c: c.__setitem__("summaries_path", str(ctx.out("elsewhere"))))(ctx),
              may_change=("repo/models/r.pt",), absent=("elsewhere/*",)))

    # ---------------------------------------------------------------- 6: checkpoints that would run code
    marker = ("MARKER",)
    for how, fast in (("torch.save", True), ("inside-real", False), ("zip", False), ("pickle", False),
                      ("legacy", False)):
        kind = {"torch.save": "__reduce__ saved with torch.save", "inside-real": "__reduce__ inside a real checkpoint",
                "zip": "plain pickle in a checkpoint zip", "pickle": "plain pickle file",
                "legacy": "legacy torch format"}[how]
        scripts = [("resume", ["train.py", "--resume", "models/r.pt", "--set", "updates=3"]),
                   ("enjoy", ["enjoy.py", "--model", "models/r.pt", "--episodes", "1"]),
                   ("export", ["checkpoint.py", "--inference-only", "models/r.pt", "small.pt"])]
        if how in ("pickle", "legacy", "inside-real"):
            scripts = scripts[:2]
        for script, args in scripts:
            add(Probe(f"code-{how.replace('.', '-')}-{script}", "6", kind,
                      f"models/r.pt would run `touch $PROBE/MARKER` when unpickled ({kind}): {args[0]} refuses "
                      "in one line, exit 2, no MARKER", args, setup=evil(how), words=("models/r.pt",),
                      absent=marker + ("repo/small.pt",), fast=fast and script == "resume"))
    add(Probe("yaml-python-tag", "6", "yaml python tag",
              "a config with `!!python/object/apply:os.system [touch $PROBE/MARKER]`: refused, no MARKER",
              ["train.py", "--config", "evil.yaml", *TINY],
              setup=lambda ctx: ctx.write("evil.yaml", f"gamma: !!python/object/apply:os.system "
                                                       f"['touch {ctx.out('MARKER')}']\n"),
              words=("evil.yaml",), absent=marker))

    # ---------------------------------------------------------------- 7: values refused before any worker
    def value(name, kv, key, kind=None, fast=False, words=None, **kw):
        add(train_refused(f"value-{name}", "7", kind or f"bad value: {key}",
                          f"--set {kv}: refused before any "
                          f"{'worker process starts' if kw.get('touch') == 'main' else 'environment is built'}, "
                          f"in one line naming {key}",
                          ["--set", kv], words=words or (key,), fast=fast, **kw))

    cores = len(os.sched_getaffinity(0))
    add(Probe("value-torch-threads-many", "7", "torch_threads far above the cores",
              "--set torch_threads=1000: trains on the cores here and says so on its training line",
              ["train.py", "--run-id", "p", *TINY, "--set", "torch_threads=1000"], code=(0,),
              stdout_has=("1000 asked for are more than the cores here",), exists=("repo/models/p.pt",), fast=True))
    value("torch-threads-negative", "torch_threads=-1", "torch_threads")
    value("torch-threads-float", "torch_threads=2.5", "torch_threads", "wrong type: float for int")
    value("seed-negative", "seed=-1", "seed", "negative seed")
    value("seed-2-32", f"seed={2 ** 32}", "seed", "seed >= 2**32")
    value("seed-float", "seed=1.0", "seed", "wrong type: float for int")
    value("seed-string", "seed='7'", "seed", "wrong type: string for int")
    for key, special in (("gamma", ".nan"), ("max_grad_norm", ".inf"), ("learning_rate_schedule.initial", ".nan"),
                         ("environment.reward_scale", ".inf"), ("value_clip_range", ".nan"), ("target_kl", "-.inf"),
                         ("initialization.hidden_gain", ".nan"), ("normalization.observation_clip", ".inf")):
        value(f"{key.replace('.', '-').replace('_', '-')}-{special.strip('-.')}", f"{key}={special}", key,
              f"non-finite float ({special.strip('-')})")
    add(train_refused("value-image-buffer-too-large", "7", "buffer cannot fit in memory",
                      "an 84x84x3 image environment, n_workers=64 x worker_steps=10**8 (a 135 TB buffer): "
                      "refused before any worker process starts, naming n_workers / worker_steps / memory",
                      ["--set", "n_workers=64", "--set", "worker_steps=100000000", "--set",
                       "environment.kwargs.image=true"], words=(("worker_steps", "n_workers", "memory"),),
                      touch="main", **huge_memory()))
    add(train_refused("value-vector-buffer-too-large", "7", "buffer cannot fit in memory",
                      "a vector environment, worker_steps=10**12: refused before any worker process starts, "
                      "naming worker_steps / memory", ["--set", "worker_steps=1000000000000"],
                      words=(("worker_steps", "memory"),), touch="main", **huge_memory()))
    add(train_refused("value-model-too-large", "7", "model cannot fit in memory",
                      "hidden_layer_size=10**9: refused before any worker process starts, naming "
                      "hidden_layer_size / memory", ["--set", "hidden_layer_size=1000000000"],
                      words=(("hidden_layer_size", "memory"),), touch="main", **huge_memory()))
    poc = ["--set", "worker_processes=2"]
    add(train_refused("value-kwargs-poc", "7", "kwargs for a family that takes none",
                      "PocMemoryEnv with environment.kwargs.size=3: refused in one line naming environment.kwargs",
                      [*poc, "--set", "environment.kwargs.size=3"], words=("environment.kwargs",), touch="",
                      fast=True))
    add(train_refused("value-kwargs-cartpole", "7", "kwargs a family does not take",
                      "CartPoleMasked with environment.kwargs.bogus=1: refused naming environment.kwargs",
                      [*poc, "--set", "environment.type=CartPoleMasked", "--set", "environment.kwargs.bogus=1"],
                      words=("environment.kwargs",), touch=""))
    add(train_refused("value-kwargs-gym", "7", "kwargs a gym environment does not take",
                      "gym CartPole-v1 with environment.kwargs.bogus=1: refused naming the environment",
                      ["--set", "environment.type=gym", "--set", "environment.name=CartPole-v1",
                       "--set", "environment.kwargs.bogus=1"], words=("environment",), touch=""))
    for key, kv, family in (("environment.name", "environment.name=CartPole-v1", "PocMemoryEnv"),
                            ("environment.reset_params", "environment.reset_params.x=1", "PocMemoryEnv"),
                            ("environment.evaluation_kwargs", "environment.evaluation_kwargs.x=1", "PocMemoryEnv"),
                            ("environment.name", "environment.name=CartPole-v1", "CartPoleMasked"),
                            ("environment.reset_params", "environment.reset_params.x=1", "CartPoleMasked"),
                            ("environment.reset_params", "environment.reset_params.x=1", "gym")):
        extra = ["--set", f"environment.type={family}", "--set", kv]
        if family == "gym":
            extra += ["--set", "environment.name=CartPole-v1"]
        add(train_refused(f"value-ignored-{key.split('.')[1].replace('_', '-')}-{family.lower()}", "7",
                          f"a key {family} ignores", f"{family} with --set {kv}: the family ignores it: refused "
                          f"naming {key}", extra, words=(key,), touch=""))
    value("observation-mask-out-of-range", "environment.observation_mask=[7]", "environment.observation_mask",
          "observation mask index out of range", touch="main")
    value("observation-mask-empty", "environment.observation_mask=[]", "environment.observation_mask")
    value("observation-mask-bool", "environment.observation_mask=[true]", "environment.observation_mask")
    value("unknown-key", "gama=0.9", "gama", "unknown key")
    value("unknown-nested-key", "recurrence.hidden=4", "recurrence.hidden", "unknown nested key")
    value("updates-string", "updates=ten", "updates", "wrong type: string for int")
    value("updates-float", "updates=1.5", "updates", "wrong type: float for int")
    value("updates-bool", "updates=true", "updates", "wrong type: bool for int")
    value("section-scalar", "recurrence=gru", "recurrence", "a section given a scalar")
    value("kwargs-list", "environment.kwargs=[1]", "environment.kwargs", "wrong type: list for dict")
    value("gamma-bool", "gamma=yes", "gamma", "wrong type: bool for float")
    value("n-workers-zero", "n_workers=0", "n_workers")
    value("n-workers-negative", "n_workers=-3", "n_workers")
    value("n-workers-float", "n_workers=2.0", "n_workers", "wrong type: float for int")
    value("worker-steps-zero", "worker_steps=0", "worker_steps")
    value("epochs-zero", "epochs=0", "epochs")
    value("n-mini-batch-too-many", "n_mini_batch=1000", "n_mini_batch", "more minibatches than sequences")
    value("sequence-length-too-long", "recurrence.sequence_length=1000", "recurrence.sequence_length")
    value("hidden-layer-zero", "hidden_layer_size=0", "hidden_layer_size")
    value("hidden-state-zero", "recurrence.hidden_state_size=0", "recurrence.hidden_state_size")
    value("num-layers-zero", "recurrence.num_layers=0", "recurrence.num_layers")
    value("layer-type-rnn", "recurrence.layer_type=rnn", "recurrence.layer_type")
    value("gamma-above-one", "gamma=1.5", "gamma")
    value("lamda-negative", "lamda=-0.1", "lamda")
    value("value-coefficient-negative", "value_loss_coefficient=-1", "value_loss_coefficient")
    value("max-grad-norm-zero", "max_grad_norm=0", "max_grad_norm")
    value("worker-processes-above-workers", "worker_processes=3", "worker_processes")
    value("worker-processes-negative", "worker_processes=-1", "worker_processes")
    value("checkpoint-interval-negative", "checkpoint_interval=-1", "checkpoint_interval")
    value("device-tpu", "device=tpu", "device")
    value("device-cuda-without-gpu", "device=cuda", "device", "a device not present")
    value("learning-rate-zero", "learning_rate_schedule.initial=0", "learning_rate_schedule.initial")
    value("schedule-shape", "learning_rate_schedule.shape=cosine", "learning_rate_schedule.shape")
    value("schedule-power-zero", "beta_schedule.power=0", "beta_schedule.power")
    value("schedule-decay-zero", "clip_range_schedule.max_decay_steps=0", "clip_range_schedule.max_decay_steps")
    value("clip-range-zero", "clip_range_schedule.final=0", "clip_range_schedule.final")
    value("target-kl-zero", "target_kl=0", "target_kl")
    value("value-clip-range-negative", "value_clip_range=-0.1", "value_clip_range")
    value("reward-clip-zero", "normalization.reward_clip=0", "normalization.reward_clip")
    value("reward-scale-zero", "environment.reward_scale=0", "environment.reward_scale")
    value("vector-encoder-negative", "vector_encoder_size=-1", "vector_encoder_size")
    value("updates-null", "updates=", "updates", "a key set to nothing")
    value("not-a-section", "gamma.x=1", "gamma", "--set into a number")
    add(train_refused("value-environment-type", "7", "unknown environment family",
                      "environment.type=Pong: refused naming environment.type",
                      ["--set", "environment.type=Pong"], words=("environment.type",), touch=""))
    add(train_refused("value-gym-without-name", "7", "gym family without a name",
                      "environment.type=gym, no name: refused naming environment.name",
                      ["--set", "environment.type=gym"], words=("environment.name",), touch=""))
    add(train_refused("value-gym-unknown-id", "7", "unknown Gymnasium id",
                      "environment.name=NoSuchEnv-v0: refused naming environment.name",
                      ["--set", "environment.type=gym", "--set", "environment.name=NoSuchEnv-v0"],
                      words=("environment.name",), touch=""))
    add(train_refused("value-gym-missing-module", "7", "Gymnasium id in a missing module",
                      "environment.name=no_such_module:X-v0: refused naming environment.name",
                      ["--set", "environment.type=gym", "--set", "environment.name=no_such_module:X-v0"],
                      words=("environment.name",), touch=""))
    add(Probe("value-gym-tuple-observation", "7", "a Tuple observation trains",
              "gym Blackjack-v1 (a Tuple of Discrete observations): trains, every observation space is supported",
              ["train.py", "--run-id", "p", *TINY, "--set", "environment.type=gym",
               "--set", "environment.name=Blackjack-v1", "--set", "worker_processes=2"], code=(0,)))
    for name, flag, kind in (("set-without-equals", "updates", "--set without '='"),
                             ("set-empty-key", "=3", "--set with an empty key")):
        add(train_refused(f"value-{name}", "7", kind, f"--set {flag}: refused naming --set", ["--set", flag],
                          words=("--set",)))
    for name, seed in (("negative", "-1"), ("2-32", str(2 ** 32)), ("text", "abc")):
        add(Probe(f"seed-flag-{name}", "7", f"--seed {name}", f"--seed={seed}: refused naming --seed",
                  ["train.py", "--run-id", "p", f"--seed={seed}", *touch_env()], words=("--seed",), absent=BUILT))

    def config_file(name, kind, what, data, words=(), code=(2,), fast=False, touch=True, point="7", **kw):
        add(Probe(f"config-{name}", point, kind, what, ["train.py", "--config", "c.yaml", "--run-id", "p",
                                                        *(touch_env() if touch else TINY)],
                  setup=write_file("c.yaml", data), words=words, code=code, absent=BUILT if touch else (),
                  fast=fast, **kw))

    config_file("not-utf8", "config not UTF-8", "c.yaml in Latin-1 (a comment with e-acute): refused naming it",
                "# caf\u00e9\ngamma: 0.99\n".encode("latin-1"), words=("c.yaml",))
    config_file("duplicate-key", "duplicate yaml keys", "c.yaml sets gamma twice: refused naming gamma",
                "gamma: 0.99\ngamma: 0.9\n", words=("gamma",))
    config_file("duplicate-nested-key", "duplicate nested yaml keys",
                "c.yaml sets recurrence.layer_type twice: refused naming layer_type",
                "recurrence:\n  layer_type: gru\n  layer_type: lstm\n", words=("layer_type",))
    config_file("unknown-key", "unknown key in the file", "c.yaml has lerning_rate: refused naming it",
                "lerning_rate: 0.1\n", words=("lerning_rate",))
    config_file("a-list", "config that is a list", "c.yaml is a yaml list: refused", "- gamma: 0.9\n",
                words=(("c.yaml", "mapping"),))
    config_file("a-scalar", "config that is a scalar", "c.yaml is the number 5: refused", "5\n",
                words=(("c.yaml", "mapping"),))
    config_file("invalid-yaml", "invalid yaml", "c.yaml has an unclosed bracket: refused naming it",
                "gamma: [0.9\n", words=("c.yaml",))
    config_file("int-key", "non-string key", "c.yaml has a key 1: refused", "1: 2\n", words=("1",))
    config_file("null-section", "a section left empty", "c.yaml has `recurrence:` with nothing: refused "
                "naming recurrence (or taken as defaults)", "recurrence:\n", code=(0, 2),
                words=(("recurrence", "training"),), one_line=False, touch="")
    config_file("empty", "empty config file", "c.yaml is empty (tiny --set values): the defaults, or refused; "
                "never a traceback", "", code=(0, 2), one_line=False, touch="")
    levels = ["&a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [
        f"&{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]" for i in range(8)]
    config_file("alias-bomb", "yaml alias bomb",
                "c.yaml's environment.observation_mask nests aliases 9 deep (a billion leaves): refused at once, "
                "naming observation_mask or the expansion", "environment:\n  observation_mask: [" + ", ".join(levels)
                + "]\n", words=(("observation_mask", "expands"),), timeout=30, **huge_memory())
    add(Probe("config-folder", "7", "a folder as --config", "--config configs (a folder): refused naming it",
              ["train.py", "--config", "configs", *touch_env()], words=("configs",), absent=BUILT))
    add(Probe("config-missing", "7", "missing config", "--config missing.yaml: refused, 'not found'",
              ["train.py", "--config", "missing.yaml", *touch_env()], words=("missing.yaml",), absent=BUILT))
    add(Probe("config-binary", "7", "a binary file as --config",
              "--config models/poc_memory_env.pt: refused naming it",
              ["train.py", "--config", "models/poc_memory_env.pt", *touch_env()],
              words=("poc_memory_env.pt",), absent=BUILT))

    # ---------------------------------------------------------------- 8: resume with changes
    resume = ["train.py", "--resume", "models/r.pt"]

    def resume_refused(name, extra, words, kind=None, fast=False, what=None):
        add(Probe(f"resume-{name}", "8", kind or f"resume changing {words[0]}",
                  what or f"--resume models/r.pt {' '.join(extra)}: refused naming {', '.join(words)}",
                  [*resume, *extra], setup=R, words=words, fast=fast))

    resume_refused("hidden-layer", ["--set", "hidden_layer_size=16", "--set", "updates=3"],
                   ("hidden_layer_size",))
    resume_refused("layer-type", ["--set", "recurrence.layer_type=lstm", "--set", "updates=3"],
                   ("recurrence.layer_type",))
    resume_refused("hidden-state", ["--set", "recurrence.hidden_state_size=8", "--set", "updates=3"],
                   ("recurrence.hidden_state_size",))
    resume_refused("num-layers", ["--set", "recurrence.num_layers=2", "--set", "updates=3"],
                   ("recurrence.num_layers",))
    resume_refused("vector-encoder", ["--set", "vector_encoder_size=8", "--set", "updates=3"],
                   ("vector_encoder_size",))
    resume_refused("environment", ["--set", "environment.type=CartPoleMasked", "--set", "updates=3"],
                   ("environment",))
    resume_refused("reward-scale", ["--set", "environment.reward_scale=2", "--set", "updates=3"],
                   ("environment",), kind="resume changing the environment's settings")
    resume_refused("n-workers", ["--set", "n_workers=4", "--set", "updates=3"], ("n_workers",), fast=True)
    resume_refused("normalisation", ["--set", "normalization.observations=true", "--set", "updates=3"],
                   ("normalization.observations",))
    resume_refused("initialization", ["--set", "initialization.orthogonal=false", "--set", "updates=3"],
                   ("initialization",))
    resume_refused("seed-set", ["--set", "seed=5", "--set", "updates=3"], ("seed",))
    resume_refused("seed-flag", ["--seed", "5", "--set", "updates=3"], ("--seed",), kind="--seed with --resume")
    resume_refused("config-flag", ["--config", "configs/poc_memory_env.yaml", "--set", "updates=3"],
                   ("--config",), kind="--config with --resume")
    add(Probe("resume-run-id-flag", "8", "--run-id with --resume (a branch)",
              "--resume models/r.pt --run-id z --set updates=3: a new run z from r's checkpoint, to update 3; "
              "models/r.pt unchanged", [*resume, "--run-id", "z", "--set", "updates=3"], setup=R, code=(0,),
              exists=("repo/models/z.pt",), check=checkpoint_update("models/z.pt", 3)))
    resume_refused("updates-equal", ["--set", "updates=2"], ("updates",), kind="resume with nothing left to do")
    resume_refused("updates-fewer", ["--set", "updates=1"], ("updates",), kind="resume with nothing left to do")
    resume_refused("updates-default", [], ("updates",), kind="resume with nothing left to do",
                   what="--resume models/r.pt with no --set (the run is complete): refused naming updates")
    resume_refused("device-cuda", ["--set", "device=cuda", "--set", "updates=3"], ("device",),
                   kind="resume on a device not present")
    add(Probe("resume-worker-processes", "8", "resume changing worker_processes",
              "--resume models/r.pt --set worker_processes=2 --set updates=3: works (update 3) or is refused "
              "naming worker_processes", [*resume, "--set", "worker_processes=2", "--set", "updates=3"], setup=R,
              code=(0, 2), one_line=False, may_change=("repo/models/r.pt",),
              check=lambda ctx, proc: checkpoint_update("models/r.pt", 3)(ctx, proc) if proc.process.returncode == 0
              else (None if "worker_processes" in first_line(proc) else "refused without naming worker_processes")))
    add(Probe("resume-sequence-length", "8", "resume changing a training-only key",
              "--set recurrence.sequence_length=4 --set updates=3: allowed, continues to update 3",
              [*resume, "--set", "recurrence.sequence_length=4", "--set", "updates=3"], setup=R, code=(0,),
              may_change=("repo/models/r.pt",), check=checkpoint_update("models/r.pt", 3)))
    add(Probe("resume-worker-steps", "8", "resume changing the rollout length",
              "--set worker_steps=8 --set updates=3: allowed, continues to update 3",
              [*resume, "--set", "worker_steps=8", "--set", "updates=3"], setup=R, code=(0,),
              may_change=("repo/models/r.pt",), check=checkpoint_update("models/r.pt", 3)))
    add(Probe("resume-inference-only", "8", "resume an inference-only checkpoint",
              "--resume small.pt (written by checkpoint.py --inference-only): refused, 'cannot resume'",
              ["train.py", "--resume", "small.pt", "--set", "updates=3"], setup=with_fixture("small", "small.pt"),
              words=("cannot resume",)))
    add(Probe("resume-missing-keys", "8", "checkpoint missing keys",
              "a checkpoint (right digest) without its 'update' and 'run_id': refused in one line",
              [*resume, "--set", "updates=3"], setup=crafted(lambda c: (c.pop("update"), c.pop("run_id"))),
              words=("models/r.pt",)))
    add(Probe("resume-invalid-config", "8", "checkpoint with an invalid config",
              "a checkpoint (right digest) whose config has gamma 2.0: refused naming gamma",
              [*resume, "--set", "updates=3"], setup=crafted(lambda c: c["config"].__setitem__("gamma", 2.0)),
              words=("gamma",)))
    add(Probe("resume-unknown-config-key", "8", "checkpoint with an unknown config key",
              "a checkpoint (right digest) whose config has a key 'bogus': refused naming it",
              [*resume, "--set", "updates=3"], setup=crafted(lambda c: c["config"].__setitem__("bogus", 1)),
              words=("bogus",)))
    add(Probe("resume-old-format", "8", "checkpoint of an older format",
              "a format-1 checkpoint (pickled, no digest): refused, 'older version'",
              [*resume, "--set", "updates=3"],
              setup=lambda ctx: __import__("torch").save({"model": {}, "config": {}, "update": 1},
                                                         ctx.path("models/r.pt")),
              words=("older version",)))
    add(Probe("resume-foreign-file", "8", "a foreign torch file",
              "models/r.pt holds a bare tensor (torch.save): refused, 'not a checkpoint'",
              [*resume, "--set", "updates=3"],
              setup=lambda ctx: (lambda torch: torch.save(torch.zeros(3), ctx.path("models/r.pt")))(
                  __import__("torch")), words=("models/r.pt",)))
    add(Probe("resume-missing", "8", "resume a missing file", "--resume models/none.pt: refused, 'not found'",
              ["train.py", "--resume", "models/none.pt"], words=("not found",)))
    add(Probe("resume-folder", "8", "resume a folder", "--resume models: refused, 'folder'",
              ["train.py", "--resume", "models"], words=("folder",)))
    add(Probe("resume-yaml", "8", "resume a yaml file",
              "--resume configs/poc_memory_env.yaml: refused as not a checkpoint (no claim that it holds code)",
              ["train.py", "--resume", "configs/poc_memory_env.yaml"],
              words=("poc_memory_env.yaml", ("not a checkpoint", "corrupt", "cannot be read"))))
    add(Probe("resume-summaries-removed", "8", "resume after summaries were removed",
              "summaries/ deleted after the run; --resume models/r.pt --set updates=3: continues",
              [*resume, "--set", "updates=3"], setup=R, code=(0,), may_change=("repo/models/r.pt",),
              check=checkpoint_update("models/r.pt", 3)))
    add(Probe("resume-copy-from-elsewhere", "8", "resume a copy kept elsewhere",
              "no models/r.pt; --resume $PROBE/kept.pt: continues, writes models/r.pt at update 3",
              ["train.py", "--resume", "$PROBE/kept.pt", "--set", "updates=3"], setup=copy_to_outside("r", "kept.pt"),
              code=(0,), check=checkpoint_update("models/r.pt", 3)))
    add(Probe("resume-read-only-checkpoint", "8", "resume a read-only checkpoint file",
              "models/r.pt is mode 0444: --resume continues to update 3 (the file is replaced by rename)",
              [*resume, "--set", "updates=3"],
              setup=with_fixture(then=lambda ctx: ctx.path("models/r.pt").chmod(0o444)),
              code=(0,), may_change=("repo/models/r.pt",), check=checkpoint_update("models/r.pt", 3)))

    # ---------------------------------------------------------------- 9: enjoy.py and checkpoint.py
    enjoy = ["enjoy.py", "--model", "models/r.pt"]
    add(Probe("enjoy-config-weights-mismatch", "9", "checkpoint whose config does not fit its weights",
              "models/r.pt (right digest) whose config says hidden_layer_size 16 for weights of 8: enjoy.py "
              "refuses in one line", [*enjoy, "--episodes", "1"],
              setup=crafted(lambda c: c["config"].__setitem__("hidden_layer_size", 16)), words=("models/r.pt",)))
    add(Probe("enjoy-layer-type-mismatch", "9", "checkpoint whose config does not fit its weights",
              "models/r.pt (right digest): GRU weights, config says lstm: enjoy.py refuses in one line",
              [*enjoy, "--episodes", "1"],
              setup=crafted(lambda c: c["config"]["recurrence"].__setitem__("layer_type", "lstm")),
              words=("models/r.pt",)))
    add(Probe("enjoy-video-missing-folder", "9", "--video in a missing folder",
              "enjoy.py --model models/poc_memory_env.pt --video nowhere/out.gif: refused before the first episode",
              ["enjoy.py", "--model", "models/poc_memory_env.pt", "--video", "nowhere/out.gif"],
              words=("nowhere",), stdout_lacks=("episode",), fast=True))
    add(Probe("enjoy-video-bad-extension", "9", "--video with a bad extension",
              "--video out.avi: refused before the first episode", [*enjoy, "--video", "out.avi"], setup=R,
              words=("out.avi",), stdout_lacks=("episode",)))
    add(Probe("enjoy-video-no-extension", "9", "--video with a bad extension",
              "--video out: refused before the first episode", [*enjoy, "--video", "out"], setup=R,
              words=("out",), stdout_lacks=("episode",)))
    add(Probe("enjoy-video-is-folder", "9", "--video names a folder",
              "--video clips.gif where clips.gif is a folder: refused before the first episode",
              [*enjoy, "--video", "clips.gif"], setup=with_fixture(then=lambda ctx: ctx.path("clips.gif").mkdir()),
              words=("clips.gif",), stdout_lacks=("episode",)))
    add(Probe("enjoy-video-mp4-without-extra", "9", "--video .mp4 without the video extra",
              "--video out.mp4 (imageio not installed): refused before the first episode, naming the extra",
              [*enjoy, "--video", "out.mp4"], setup=R, code=(0, 2), words=(("out.mp4", "video extra"),),
              stdout_lacks=("episode",), may_write=("repo/out.mp4",),
              check=lambda ctx, proc: None if proc.process.returncode == 2 or ctx.path("out.mp4").exists()
              else "exit 0 without out.mp4"))
    for name, flag, value, word in (("episodes-zero", "--episodes", "0", "--episodes"),
                                    ("episodes-negative", "--episodes", "-1", "--episodes"),
                                    ("episodes-text", "--episodes", "abc", "--episodes"),
                                    ("episodes-float", "--episodes", "1.5", "--episodes"),
                                    ("seed-text", "--seed", "abc", "--seed"),
                                    ("seed-negative", "--seed", "-1", "--seed"),
                                    ("seed-float", "--seed", "1.5", "--seed")):
        add(Probe(f"enjoy-{name}", "9", f"enjoy {flag} {name.split('-')[1]}",
                  f"enjoy.py {flag}={value}: refused in one line naming {word}, before any episode",
                  [*enjoy, f"{flag}={value}"], setup=R, words=(word,), stdout_lacks=("episode",)))
    add(Probe("enjoy-missing-model", "9", "enjoy a missing file", "--model models/none.pt: refused, 'not found'",
              ["enjoy.py", "--model", "models/none.pt"], words=("not found",)))
    add(Probe("enjoy-folder-model", "9", "enjoy a folder", "--model models: refused, 'folder'",
              ["enjoy.py", "--model", "models"], words=("folder",)))
    add(Probe("enjoy-yaml-model", "9", "enjoy a yaml file",
              "--model configs/poc_memory_env.yaml: refused as not a checkpoint (no claim that it holds code)",
              ["enjoy.py", "--model", "configs/poc_memory_env.yaml"],
              words=("poc_memory_env.yaml", ("not a checkpoint", "corrupt", "cannot be read"))))
    add(Probe("enjoy-old-format", "9", "checkpoint of an older format",
              "enjoy.py with a format-1 checkpoint (no digest): refused, 'older version'", enjoy,
              setup=lambda ctx: __import__("torch").save({"model": {}, "config": {}}, ctx.path("models/r.pt")),
              words=("older version",)))
    add(Probe("enjoy-inference-only", "9", "enjoy an inference-only checkpoint",
              "enjoy.py --model small.pt (checkpoint.py --inference-only): plays", ["enjoy.py", "--model", "small.pt",
                                                                                   "--episodes", "2"],
              setup=with_fixture("small", "small.pt"), code=(0,), stdout_has=("2 episodes",)))
    add(Probe("enjoy-render-without-display", "9", "--render without a display",
              "enjoy.py --render, no DISPLAY: refused in one line pointing to --video FILE; no r.gif (nothing "
              "written where the user did not ask)",
              [*enjoy, "--render", "--episodes", "1"], setup=R, words=("--video",), absent=("repo/r.gif",)))
    export = ["checkpoint.py", "--inference-only"]
    add(Probe("export-missing-source", "9", "checkpoint.py: missing source",
              "checkpoint.py --inference-only models/none.pt small.pt: refused, 'not found'",
              [*export, "models/none.pt", "small.pt"], words=("not found",)))
    add(Probe("export-folder-source", "9", "checkpoint.py: a folder as source",
              "checkpoint.py --inference-only models small.pt: refused", [*export, "models", "small.pt"],
              words=("folder",)))
    add(Probe("export-folder-target", "9", "checkpoint.py: a folder as target",
              "checkpoint.py --inference-only models/r.pt models: refused naming models",
              [*export, "models/r.pt", "models"], setup=R, words=("folder",)))
    add(Probe("export-existing-target", "9", "checkpoint.py: existing target",
              "checkpoint.py --inference-only models/r.pt models/poc_memory_env.pt: refused, the shipped "
              "checkpoint untouched", [*export, "models/r.pt", "models/poc_memory_env.pt"], setup=R,
              words=("exists",)))
    add(Probe("export-target-is-source", "9", "checkpoint.py: target is the source",
              "checkpoint.py --inference-only models/r.pt models/r.pt: refused, untouched",
              [*export, "models/r.pt", "models/r.pt"], setup=R, words=("models/r.pt",)))
    add(Probe("export-target-symlink", "9", "checkpoint.py: target is a symlink to a file outside",
              "target models/s.pt -> $PROBE/victim.txt: refused, the victim untouched",
              [*export, "models/r.pt", "models/s.pt"],
              setup=all_of(R, write_file("victim.txt", "precious\n", outside=True),
                           symlink("models/s.pt", "$PROBE/victim.txt")), words=("models/s.pt",)))
    add(Probe("export-target-dangling-symlink", "9", "checkpoint.py: target is a dangling symlink",
              "target models/s.pt -> $PROBE/new.pt (missing): nothing written at $PROBE/new.pt",
              [*export, "models/r.pt", "models/s.pt"], code=(0, 2), one_line=False,
              setup=all_of(R, symlink("models/s.pt", "$PROBE/new.pt")), may_change=("repo/models/s.pt",),
              absent=("new.pt",)))
    add(Probe("export-of-inference-only", "9", "checkpoint.py: export an exported checkpoint",
              "checkpoint.py --inference-only small.pt smaller.pt: works", [*export, "small.pt", "smaller.pt"],
              setup=with_fixture("small", "small.pt"), code=(0,), exists=("repo/smaller.pt",),
              may_write=("repo/smaller.pt",)))
    add(Probe("export-works", "9", "checkpoint.py: control", "checkpoint.py --inference-only models/r.pt small.pt: "
              "writes small.pt", [*export, "models/r.pt", "small.pt"], setup=R, code=(0,),
              exists=("repo/small.pt",), may_write=("repo/small.pt",)))

    # ---------------------------------------------------------------- flags of each script (extra)
    for script, flags in (("train.py", ["--help"]), ("train.py", ["-h"]), ("enjoy.py", ["--help"]),
                          ("checkpoint.py", ["--help"])):
        add(Probe(f"help-{script.split('.')[0]}{flags[0]}", "extra", "--help exits 0",
                  f"{script} {flags[0]}: the usage, exit 0", [script, *flags], code=(0,),
                  stdout_has=("usage:",)))
    for name, args, word in (
            ("train-unknown-flag", ["train.py", "--bogus"], "--bogus"),
            ("train-positional", ["train.py", "configs/poc_memory_env.yaml"], "poc_memory_env.yaml"),
            ("train-flag-twice", ["train.py", "--run-id", "a.pt", "--run-id", "b.pt"], "'b.pt'"),  # the last wins
            ("train-set-without-value", ["train.py", "--set"], "--set"),
            ("train-config-without-value", ["train.py", "--config"], "--config"),
            ("enjoy-no-model", ["enjoy.py"], "--model"),
            ("enjoy-unknown-flag", ["enjoy.py", "--model", "models/poc_memory_env.pt", "--bogus"], "--bogus"),
            ("export-no-arguments", ["checkpoint.py"], "--inference-only"),
            ("export-unknown-flag", ["checkpoint.py", "--inference-only", "a.pt", "b.pt", "--bogus"], "--bogus"),
            ("export-one-path", ["checkpoint.py", "--inference-only", "models/poc_memory_env.pt"], "target")):
        add(Probe(f"flag-{name}", "extra", "bad flag", f"`{shlex.join(['python', *args])}`: refused in one line "
                  f"naming {word}, exit 2", args, words=(word,)))

    # ---------------------------------------------------------------- other working folders (extra)
    def make_sub(ctx: Ctx):
        ctx.path("sub").mkdir()
    add(Probe("train-from-another-folder", "extra", "run from another working folder",
              "from repo/sub: python ../train.py --config ../configs/poc_memory_env.yaml: trains into sub/models",
              ["../train.py", "--config", "../configs/poc_memory_env.yaml", "--run-id", "p", *TINY], setup=make_sub,
              cwd="repo/sub", code=(0,), exists=("repo/sub/models/p.pt",)))
    add(Probe("train-default-config-from-another-folder", "extra", "default config from another folder",
              "from repo/sub: python ../train.py (configs/ is not there): refused, 'not found'",
              ["../train.py", *TINY], setup=make_sub, cwd="repo/sub", words=("not found",)))
    add(Probe("enjoy-from-another-folder", "extra", "run from another working folder",
              "from repo/sub: python ../enjoy.py --model ../models/poc_memory_env.pt --episodes 2: plays",
              ["../enjoy.py", "--model", "../models/poc_memory_env.pt", "--episodes", "2"], setup=make_sub,
              cwd="repo/sub", code=(0,), stdout_has=("2 episodes",)))
    add(Probe("config-symlink-outside", "extra", "config symlink pointing outside",
              "c.yaml -> $PROBE/kept.yaml (a valid config): trains",
              ["train.py", "--config", "c.yaml", "--run-id", "p", *TINY],
              setup=all_of(lambda ctx: shutil.copy2(ROOT / "configs/poc_memory_env.yaml", ctx.out("kept.yaml")),
                           symlink("c.yaml", "$PROBE/kept.yaml")), code=(0,), exists=("repo/models/p.pt",)))
    add(Probe("seed-largest", "extra", "largest allowed seed",
              "--seed 4294967295 (2**32 - 1): trains", ["train.py", "--run-id", "p", "--seed", "4294967295", *TINY],
              code=(0,), exists=("repo/models/p.pt",)))

    # ---------------------------------------------------------------- 10: Ctrl-C during start-up
    startup = ["train.py", "--run-id", "p", *sets(updates=100000, worker_processes=2, checkpoint_interval=0)]
    for delay in (0.2, 0.5, 0.8, 1.2, 1.5):
        add(Probe(f"ctrl-c-startup-{delay}s", "10", "Ctrl-C during start-up",
                  f"SIGINT to the process group {delay} s after launch (worker_processes=2): exit 130, no "
                  "traceback, at most one line on stderr, no process left",
                  startup, action=interrupt_at(delay, signal.SIGINT, startup), code=(130,), one_line=None,
                  serial=True, fast=delay == 0.5, check=at_most_one_line))
    for delay in (0.5, 1.2):
        add(Probe(f"sigterm-startup-{delay}s", "10", "SIGTERM during start-up",
                  f"SIGTERM to the process group {delay} s after launch: exit 143, quiet, nothing left",
                  startup, action=interrupt_at(delay, signal.SIGTERM, startup), code=(143,), serial=True,
                  check=at_most_one_line))
    resume_startup = ["train.py", "--resume", "models/r.pt", "--set", "updates=100000", "--set", "worker_processes=2"]
    add(Probe("ctrl-c-startup-resume", "10", "Ctrl-C during a resume's start-up",
              "SIGINT to the group 0.8 s after `--resume models/r.pt`: exit 130, quiet; models/r.pt still loads",
              resume_startup, action=interrupt_at(0.8, signal.SIGINT, resume_startup), setup=R, code=(130,),
              serial=True, may_change=("repo/models/r.pt",),
              check=lambda ctx, proc: at_most_one_line(ctx, proc) or loads("models/r.pt", 2)(ctx, proc)))
    enjoy_long = ["enjoy.py", "--model", "models/poc_memory_env.pt", "--episodes", "100000"]
    add(Probe("ctrl-c-enjoy", "10", "Ctrl-C in enjoy.py",
              "SIGINT to enjoy.py's group after its first episode: exit 130, no traceback",
              enjoy_long, action=interrupt_after_line([signal.SIGINT], enjoy_long, line="episode", group=True),
              code=(130,), serial=True, check=at_most_one_line))
    # as a background job of a shell without job control (a script's `command &`) starts: SIGINT ignored
    ignored = ["-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
               "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])", *enjoy_long]
    add(Probe("ctrl-c-enjoy-sigint-ignored", "10", "Ctrl-C in enjoy.py started with SIGINT ignored",
              "enjoy.py started with SIGINT ignored (a script's background job); SIGINT to its group after its "
              "first episode: exit 130, no traceback (it takes the signal over, as train.py does)",
              ignored, action=interrupt_after_line([signal.SIGINT], ignored, line="episode", group=True),
              code=(130,), serial=True, check=at_most_one_line))

    # ---------------------------------------------------------------- 11: stops by signal, NaN, faults
    long_run = ["train.py", "--run-id", "r", *LONG]
    add(Probe("sigint-mid-run", "11", "SIGINT mid-run",
              "SIGINT after update 1: finishes the update, saves, exit 130; models/r.pt loads",
              long_run, action=interrupt_after_line([signal.SIGINT], long_run), code=(130,), serial=True,
              stdout_has=("stopped by SIGINT",), check=loads("models/r.pt")))
    add(Probe("sigterm-mid-run", "11", "SIGTERM mid-run",
              "SIGTERM after update 1: saves, exit 143; models/r.pt loads", long_run,
              action=interrupt_after_line([signal.SIGTERM], long_run), code=(143,), serial=True,
              stdout_has=("stopped by SIGTERM",), check=loads("models/r.pt"), fast=True))
    workers_run = ["train.py", "--run-id", "r", *sets(updates=100000, checkpoint_interval=0, worker_processes=2)]
    add(Probe("ctrl-c-mid-run-workers", "11", "Ctrl-C mid-run with worker processes",
              "SIGINT to the group (as a terminal) after update 1, worker_processes=2: saves, exit 130, no "
              "process left", workers_run, action=interrupt_after_line([signal.SIGINT], workers_run, group=True),
              code=(130,), serial=True, check=loads("models/r.pt")))
    slow = ["train.py", "--run-id", "r", *sets(updates=100000, checkpoint_interval=0), *SLOW]
    add(Probe("second-sigint", "11", "a second SIGINT",
              "slow updates (~1.6 s); SIGINT after update 1, again 0.3 s later: stops at once (< 1.5 s) without "
              "saving, exit 130", slow, action=interrupt_after_line([signal.SIGINT, signal.SIGINT], slow,
                                                                      at_once=1.5),
              code=(130,), serial=True, stderr_has=("without saving",), expect="stops within 1.5 s of the second"))
    add(Probe("second-sigterm", "11", "a second SIGTERM",
              "as second-sigint with SIGTERM twice: exit 143 at once", slow,
              action=interrupt_after_line([signal.SIGTERM, signal.SIGTERM], slow, at_once=1.5), code=(143,),
              serial=True))
    add(Probe("sigint-then-sigterm", "11", "SIGINT then SIGTERM",
              "SIGINT then SIGTERM 0.3 s later: stops at once, exit 130 or 143", slow,
              action=interrupt_after_line([signal.SIGINT, signal.SIGTERM], slow, at_once=1.5), code=(130, 143),
              serial=True))
    add(Probe("resume-after-sigint", "11", "resume after SIGINT",
              "SIGINT after update 2, then --resume models/r.pt with 2 more updates: exit 0 at the right update",
              long_run, action=sigint_then_resume(long_run), code=(0,), serial=True,
              may_change=("repo/models/r.pt",), check=resumed_to_target))
    flaky = lambda fault, at, processes=0: ["train.py", "--run-id", "r", *sets(
        updates=50, checkpoint_interval=1, worker_processes=processes, n_workers=2),
        "--set", "environment.type=gym", "--set", f"environment.name={FLAKY}",
        "--set", f"environment.kwargs.at_step={at}", "--set", f"environment.kwargs.fault={fault}"]
    add(Probe("nan-reward", "11", "NaN reward",
              "an environment yields a NaN reward at step 70: the run stops, exit 1, naming the environment and the "
              "value (issue 58: it named a non-finite loss); the last checkpoint (update 2) loads", flaky("nan", 70),
              code=(1,), words=("environment", "#"), stderr_has=("its reward is nan",), one_line=False,
              check=loads("models/r.pt", 2)))
    add(Probe("nan-reward-worker-process", "11", "NaN reward in a worker process",
              "as nan-reward with worker_processes=2: exit 1, naming the worker process, no process left",
              flaky("nan", 40, 2), code=(1,), words=("environment", "worker process"),
              stderr_has=("its reward is nan",), one_line=False))
    add(Probe("environment-raises", "11", "environment raises",
              "an environment raises at step 70: exit 1, its traceback shown, the last checkpoint kept",
              flaky("raise", 70), code=(1,), words=("environment",), traceback_ok=True,
              check=loads("models/r.pt", 2)))
    add(Probe("environment-raises-worker-process", "11", "environment raises in a worker process",
              "as environment-raises with worker_processes=2: exit 1, no process left", flaky("raise", 40, 2),
              code=(1,), words=("environment",), traceback_ok=True))
    add(Probe("worker-killed", "11", "a killed worker process",
              "SIGKILL to one worker process after update 1: exit 1 within seconds naming the dead worker",
              workers_run, action=kill_worker(workers_run), code=(1,), words=("died",), serial=True))

    # ---------------------------------------------------------------- 12: repeatable evaluation
    # A sharp policy (the shipped ones) often samples the same actions by chance: the fresh
    # checkpoint's nearly uniform policy shows unseeded sampling at once.
    shipped_poc = ["enjoy.py", "--model", "models/poc_memory_env.pt", "--episodes", "20", "--seed", "3"]
    add(Probe("enjoy-sampled-twice", "12", "sampled evaluation repeats",
              "enjoy.py --model models/poc_memory_env.pt --episodes 20 --seed 3 (sampled actions) twice: the same "
              "episodes", shipped_poc, code=(0,), action=twice_same(shipped_poc),
              expect="both runs print the same episode lines"))
    add(Probe("enjoy-sampled-twice-fresh", "12", "sampled evaluation repeats",
              "enjoy.py --model models/r.pt (a barely trained, nearly uniform policy) --episodes 6 --seed 3 twice: "
              "the same episodes", [*enjoy, "--episodes", "6", "--seed", "3"], setup=R, code=(0,), fast=True,
              action=twice_same([*enjoy, "--episodes", "6", "--seed", "3"]),
              expect="both runs print the same episode lines"))
    add(Probe("enjoy-sampled-twice-shipped", "12", "sampled evaluation of a shipped model repeats",
              "enjoy.py --model models/cartpole_masked.pt --episodes 4 --seed 1 twice: the same episodes",
              ["enjoy.py", "--model", "models/cartpole_masked.pt", "--episodes", "4", "--seed", "1"], code=(0,),
              action=twice_same(["enjoy.py", "--model", "models/cartpole_masked.pt", "--episodes", "4",
                                 "--seed", "1"]), expect="both runs print the same episode lines"))
    # --overwrite: the second run replaces the first one's video (without it, enjoy.py refuses the file)
    add(Probe("enjoy-video-twice", "12", "sampled recording repeats",
              "enjoy.py --video out.gif --overwrite --episodes 3 --seed 2 twice: the same episodes",
              [*enjoy, "--episodes", "3", "--seed", "2", "--video", "out.gif", "--overwrite"], setup=R, code=(0,),
              action=twice_same([*enjoy, "--episodes", "3", "--seed", "2", "--video", "out.gif", "--overwrite"]),
              expect="both runs print the same episode lines",
              may_write=("repo/out.gif",)))
    add(Probe("enjoy-deterministic-twice", "12", "deterministic evaluation repeats",
              "enjoy.py --deterministic --episodes 4 twice: the same episodes",
              [*enjoy, "--episodes", "4", "--deterministic"], setup=R, code=(0,),
              action=twice_same([*enjoy, "--episodes", "4", "--deterministic"]),
              expect="both runs print the same episode lines"))

    # ---------------------------------------------------------------- 23.2: the outside round of issue 23
    # Each kind below was wrong when someone who had not read this file tried the scripts (issue 23,
    # point 2): a file replaced unasked, a traceback where one line belongs, a warning before the line,
    # a start-up that hung, an evaluation that never ended, an Agent.act that took anything.
    O = "23.2"
    poc_enjoy = ["enjoy.py", "--model", "models/poc_memory_env.pt", "--episodes", "1"]
    users_file = write_file("out.gif", "the user's own file\n")
    add(Probe("enjoy-video-existing-file", O, "--video over an existing file",
              "out.gif is the user's file: enjoy.py --video out.gif is refused before the first episode, naming "
              "--overwrite; out.gif untouched", [*poc_enjoy, "--video", "out.gif"], setup=users_file,
              words=("out.gif", "--overwrite"), stdout_lacks=("episode",), fast=True))
    add(Probe("enjoy-video-existing-overwrite", O, "--video --overwrite replaces",
              "out.gif exists; --video out.gif --overwrite: replaced by the recording, exit 0",
              [*poc_enjoy, "--video", "out.gif", "--overwrite"], setup=users_file, code=(0,),
              may_change=("repo/out.gif",),
              check=lambda ctx, proc: None if ctx.path("out.gif").read_bytes()[:3] == b"GIF" else "out.gif not a GIF"))
    add(Probe("enjoy-video-existing-symlink", O, "--video over a symlink",
              "out.gif -> $PROBE/victim.gif: refused (a link is a file there too), the victim untouched",
              [*poc_enjoy, "--video", "out.gif"],
              setup=all_of(write_file("victim.gif", "precious\n", outside=True),
                           symlink("out.gif", "$PROBE/victim.gif")),
              words=("--overwrite",)))
    add(Probe("enjoy-render-over-model-gif", O, "--render without a display over <model>.gif",
              "poc_memory_env.gif in the working folder is the user's; --render without a display: refused, "
              "pointing to --video; the file untouched (it was replaced by a recording)",
              [*poc_enjoy, "--render"], setup=write_file("poc_memory_env.gif", "the user's own file\n"),
              words=("--video",)))
    add(Probe("enjoy-overwrite-without-video", O, "--overwrite without --video",
              "enjoy.py --overwrite alone: refused, nothing it could replace", [*poc_enjoy, "--overwrite"],
              words=("--overwrite",)))

    # integers: a bound where a huge value crashed inside numpy or torch, or hung start-up
    for name, kv, key, kind in (
            ("n-workers-3e9", "n_workers=3000000000", "n_workers", "n_workers beyond the seeds"),
            ("n-workers-1e30", "n_workers=" + "1" + "0" * 30, "n_workers", "an integer beyond 64 bits"),
            ("worker-steps-1e30", "worker_steps=" + "1" + "0" * 30, "worker_steps", "an integer beyond 64 bits"),
            ("num-layers-1e6", "recurrence.num_layers=1000000", "recurrence.num_layers", "a model too deep to build"),
            ("evaluation-episodes-huge", "evaluation.episodes=1000000000000", "evaluation.episodes",
             "evaluation.episodes beyond its bound"),
            ("evaluation-max-steps-negative", "evaluation.max_steps=-1", "evaluation.max_steps",
             "evaluation.max_steps out of range")):
        add(train_refused(f"value-{name}", O, kind, f"--set {kv} (evaluation.interval=1): refused in one line "
                          f"naming {key}, before any environment is built",
                          ["--set", kv, "--set", "evaluation.interval=1"], words=(key,), timeout=60,
                          touch="main" if name == "worker-steps-1e30" else "none",
                          **huge_memory()))
    add(train_refused("value-hidden-2-62", O, "model sizes whose bytes overflow",
                      "hidden_layer_size=2**62 (fits 64 bits; its weights' bytes do not): refused before any worker "
                      "process, 'do not fit in memory'", ["--set", f"hidden_layer_size={2 ** 62}"],
                      words=(("memory", "hidden_layer_size"),), touch="main"))
    add(Probe("enjoy-episodes-huge", O, "enjoy --episodes beyond its bound",
              "enjoy.py --episodes 10**12 --video out.gif (a MemoryError drawing the seeds): refused in one line",
              [*poc_enjoy[:3], "--episodes", str(10 ** 12), "--video", "out.gif"], words=("--episodes",)))
    for name, value in (("negative", "-1"), ("text", "many"), ("huge", str(2 ** 31))):  # 0 is taken (issue 58)
        add(Probe(f"enjoy-max-steps-{name}", O, "enjoy --max-steps out of range",
                  f"enjoy.py --max-steps {value}: refused in one line naming --max-steps",
                  [*poc_enjoy, "--max-steps", value], words=("--max-steps",)))
    sweep = ["sweep.py", "--config", "configs/poc_memory_env.yaml", "--sweep-id", "s", *TINY]
    for name, extra, word in (
            ("seeds-huge", ["--seeds", str(10 ** 12)], "--seeds"),
            ("samples-huge", ["--search", "gamma=uniform:0.9:0.99", "--samples", "1" + "0" * 30], "--samples"),
            ("grid-huge", ["--seeds", "100", "--grid", "gamma=" + ",".join(f"0.{i:03d}" for i in range(1, 201))],
             "trials"),
            ("max-concurrent-huge", ["--max-concurrent", "9" * 400], "--max-concurrent"),
            ("cpus-per-trial-beyond-machine", ["--cpus-per-trial", str(os.cpu_count() + 1)], "--cpus-per-trial"),
            ("gpus-per-trial-huge", ["--gpus-per-trial", "1e300"], "--gpus-per-trial")):
        add(Probe(f"sweep-{name}", O, f"sweep {word} beyond its bound",
                  f"sweep.py {' '.join(extra)[:60]}: refused in one line naming {word}, before Ray starts (no child "
                  "process)", [*sweep, *extra], words=(word,), fast=name == "seeds-huge"))

    # environment construction: whatever the environment raises
    frozen = ["--set", "environment.type=gym", "--set", "environment.name=FrozenLake-v1"]
    add(train_refused("value-gym-kwarg-keyerror", O, "an environment's own error for a kwarg value",
                      "gym FrozenLake-v1 with environment.kwargs.map_name=bogus (its own KeyError): one line naming "
                      "the environment, its kwargs and the error",
                      [*frozen, "--set", "environment.kwargs.map_name=bogus"],
                      words=("FrozenLake-v1", "map_name", "KeyError"), touch="", fast=True))
    add(train_refused("value-minigrid-kwarg-assert", O, "an environment's own error for a kwarg value",
                      "Minigrid MiniGrid-Empty-5x5-v0 with environment.kwargs.size=2 (its own AssertionError): "
                      "one line",
                      ["--set", "environment.type=Minigrid", "--set", "environment.name=MiniGrid-Empty-5x5-v0",
                       "--set", "environment.kwargs.size=2"], words=("AssertionError", "size"), touch=""))
    evaluated = [*frozen, "--set", "worker_processes=2", "--set", "evaluation.interval=1",
                 "--set", "evaluation.episodes=2"]
    add(train_refused("value-evaluation-kwargs-keyerror", O, "an evaluation environment that cannot be made",
                      "FrozenLake-v1 with evaluation_kwargs.map_name=bogus, evaluation.interval=1, worker_processes=2: "
                      "refused before any worker process (was a traceback at the first evaluation)",
                      [*evaluated, "--set", "environment.evaluation_kwargs.map_name=bogus"],
                      words=("map_name", "KeyError"), touch=""))
    add(train_refused("value-evaluation-kwargs-spaces", O, "an evaluation environment of other spaces",
                      "FrozenLake-v1 4x4 trained, evaluation_kwargs.map_name=8x8 (16 -> 64 states): refused before any "
                      "worker process, naming the spaces", [*evaluated, "--set", "environment.kwargs.map_name=4x4",
                                                            "--set", "environment.evaluation_kwargs.map_name=8x8"],
                      words=("spaces",), touch=""))

    def foreign_env(environment: dict):
        return crafted(lambda c: c["config"].__setitem__("environment", {**c["config"]["environment"], **environment}))
    add(Probe("enjoy-checkpoint-env-keyerror", O, "an environment's own error for a kwarg value",
              "models/r.pt (right digest) whose config asks FrozenLake-v1 map_name=bogus: enjoy.py refuses in one line",
              [*enjoy, "--episodes", "1"], setup=foreign_env({"type": "gym", "name": "FrozenLake-v1",
                                                              "kwargs": {"map_name": "bogus"}}),
              words=("KeyError",)))

    # one line: the warnings of a refused start are dropped with it
    add(train_refused("value-gym-deprecated-id", O, "a library's warning before the line",
                      "environment.name=FrozenLake-v0 (Gymnasium warns it is out of date, then refuses it): exactly "
                      "one line", ["--set", "environment.type=gym", "--set", "environment.name=FrozenLake-v0"],
                      words=("FrozenLake-v0",), touch=""))
    add(train_refused("value-warning-then-model-refusal", O, "a library's warning before the line",
                      "CartPole-v1 with render_mode=bogus (Gymnasium warns) and hidden_layer_size=10**14: exactly one "
                      "line, about the model", ["--set", "environment.type=gym",
                                                "--set", "environment.name=CartPole-v1",
                                                "--set", "environment.kwargs.render_mode=bogus",
                                                "--set", "hidden_layer_size=100000000000000"],
                      words=("memory",), touch="", **huge_memory()))
    add(Probe("enjoy-deprecated-env-checkpoint", O, "a library's warning before the line",
              "models/r.pt (right digest) whose config asks FrozenLake-v0: enjoy.py refuses in exactly one line",
              [*enjoy, "--episodes", "1"], setup=foreign_env({"type": "gym", "name": "FrozenLake-v0"}),
              words=("FrozenLake-v0",)))

    # full disks on every write a run makes
    def filled(rel: str):
        """Fills the tmpfs at rel to the last byte (a file the run must leave alone)."""
        def setup(ctx: Ctx):
            with open(ctx.path(f"{rel}/fill"), "wb", buffering=0) as file:
                try:
                    while file.write(b"\0" * 4096):
                        pass
                except OSError:  # ENOSPC: full
                    pass
        return setup
    add(Probe("disk-full-lock", O, "disk full at the run lock",
              "models/ is a full tmpfs (64 KiB, every byte taken): a new run: refused in one line naming models/, "
              "no lock file left (was a traceback and an empty models/p.lock)", ["train.py", "--run-id", "p", *TINY],
              tmpfs={"models": 64 * 1024}, setup=filled("models"), words=("models", "space")))
    for size in (16, 32):
        add(Probe(f"disk-full-summaries-{size}k", O, "disk full while TensorBoard writes its events",
                  f"summaries/ is a {size} KiB tmpfs (config.json fits, the events fill it within 40 updates): exit 1 "
                  "in one line naming summaries, no traceback (the writer thread printed its own)",
                  ["train.py", "--run-id", "p", *sets(updates=60)], tmpfs={"summaries": size * 1024}, code=(1,),
                  one_line=True, words=("summaries", "space")))
    add(Probe("disk-full-summaries-fsize", O, "disk full while TensorBoard writes its events",
              "RLIMIT_FSIZE 6000 (the events file passes it first), checkpoint_interval 0: exit 1 in one line naming "
              "summaries, no traceback", ["train.py", "--run-id", "p", *sets(updates=200, checkpoint_interval=0)],
              fsize=6000, serial=True, code=(1,), one_line=True, words=("summaries", "too large")))
    add(Probe("disk-full-best-checkpoint", O, "disk full at the best checkpoint",
              "models/ is a 40 KiB tmpfs: models/p.pt (28 kB) fits, models/p-best.pt does not: exit 1 in one line "
              "naming p-best.pt, 'No space left', and the last good checkpoint; no *.tmp",
              ["train.py", "--run-id", "p", *sets(updates=4, checkpoint_interval=1), "--set", "evaluation.interval=2",
               "--set", "evaluation.episodes=2"], tmpfs={"models": 40 * 1024}, code=(1,), one_line=True,
              words=("models/p-best.pt", "space", "last good checkpoint")))
    add(Probe("disk-full-video-enospc", O, "disk full while writing a video",
              "clips/ is a 4 KiB tmpfs: enjoy.py --video clips/out.gif --episodes 10: exit 1, one line naming "
              "clips/out.gif, the scores still printed, no *.tmp", [*poc_enjoy[:3], "--episodes", "10", "--video",
                                                                    "clips/out.gif"],
              tmpfs={"clips": 4096}, code=(1,), one_line=True, words=("clips/out.gif", "space"),
              stdout_has=("10 episodes",)))
    add(Probe("disk-full-export-enospc", O, "disk full in checkpoint.py",
              "out/ is a 4 KiB tmpfs: checkpoint.py --inference-only models/r.pt out/small.pt: one line, 'No space "
              "left', no target, no *.tmp", [*export, "models/r.pt", "out/small.pt"], setup=R, tmpfs={"out": 4096},
              code=(1, 2), one_line=True, words=("out/small.pt", "space"), absent=("repo/out/small.pt",)))
    add(Probe("sweep-storage-full", O, "sweep storage on a full disk",
              "--storage store, a full tmpfs: refused before Ray starts, in one line", [*sweep, "--storage", "store"],
              tmpfs={"store": 64 * 1024}, setup=filled("store"), words=("store", "space")))

    # sweep.py --storage: checked before Ray starts
    a_file = write_file("a-file", "the user's own file\n")
    for name, storage in (("file", "a-file"), ("below-file", "a-file/deeper"),
                          ("file-uri", "file://$PROBE/repo/a-file")):
        add(Probe(f"sweep-storage-{name}", O, "sweep --storage that is a file",
                  f"--storage {storage} (a-file is a file): refused in one line before Ray starts (was pyarrow's "
                  "traceback after it had started); a-file untouched", [*sweep, "--storage", storage], setup=a_file,
                  words=("a-file", "not a folder")))
    add(Probe("sweep-storage-read-only", O, "sweep --storage not writable",
              "--storage store, a read-only folder (run without CAP_DAC_OVERRIDE): refused before Ray starts",
              [*sweep, "--storage", "store"], setup=readonly("store"), no_dac=True, words=("store", "writable")))

    # yaml: merge keys work, expansions past the bound are refused at once
    def config23(name, kind, what, data, **kw):
        config_file(name, kind, what, data, point=O, **kw)

    merged = ("learning_rate_schedule: &schedule\n  initial: 0.001\n  final: 0.0001\n  max_decay_steps: 10\n"
              "beta_schedule:\n  <<: *schedule\n  initial: 0.01\n")

    def merged_as_written(ctx: Ctx, proc: Proc) -> str | None:
        saved = [json.loads(p.read_text()) for p in ctx.path("summaries").rglob("config.json")]
        if not saved:
            return "no config.json written"
        beta = saved[0]["beta_schedule"]
        if (beta["initial"], beta["final"], beta["max_decay_steps"]) != (0.01, 0.0001, 10):
            return f"beta_schedule is {beta}, expected the merged keys with initial overridden to 0.01"
    config23("merge-keys", "yaml merge keys", "c.yaml takes beta_schedule from an anchor with `<<: *schedule` "
                "and overrides its initial: trains with the merged values (was refused as invalid yaml)", merged,
                code=(0,), touch=False, check=merged_as_written, exists=("repo/models/p.pt",))
    config23("merge-key-then-twice", "duplicate yaml keys", "c.yaml merges a schedule and writes final twice: "
                "refused naming final (a key given twice literally stays an error)",
                merged + "  final: 0.1\n  final: 0.2\n", words=("final",))
    bomb = "[" + ", ".join(levels) + "]"
    gym_kwargs = "environment:\n  type: gym\n  name: CartPole-v1\n  kwargs:\n    x: "
    config23("alias-bomb-kwargs", "yaml alias bomb",
                "a billion laughs under environment.kwargs (which takes anything): refused at once (start-up hung)",
                gym_kwargs + bomb + "\n", words=("expands",), timeout=30, touch=False, **huge_memory())
    merge_levels = "a0: &a0 {x: 1, y: 2}\n" + "".join(
        f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 10)}]}}\n" for i in range(1, 9))
    config23("merge-bomb", "yaml alias bomb", "merge keys that merge ten copies of the level below, 8 levels: "
                "refused at once", merge_levels, words=("merge keys",), timeout=30, touch=False, **huge_memory())
    config23("self-alias", "yaml alias inside its own anchor", "environment.kwargs.x: &x [*x]: refused",
                gym_kwargs + "&x [*x]\n", words=("itself",), touch=False)
    config23("deep-nesting", "yaml nested too deep", "3,000 nested lists under environment.kwargs: refused "
                "(a RecursionError inside PyYAML before)", gym_kwargs + "[" * 3000 + "]" * 3000 + "\n",
                words=("nests",), touch=False)
    add(train_refused("value-set-alias-bomb", O, "yaml alias bomb",
                      "--set environment.kwargs.x=<a billion laughs>: refused at once, naming --set",
                      ["--set", "environment.type=gym", "--set", "environment.name=CartPole-v1",
                       "--set", "environment.kwargs.x=" + bomb], words=("--set", "expands"), timeout=30,
                      **huge_memory()))
    add(Probe("sweep-grid-alias-bomb", O, "yaml alias bomb", "sweep.py --grid environment.kwargs.x=<a billion "
              "laughs>: refused at once, before Ray starts", [*sweep, "--grid", "environment.kwargs.x=" + bomb],
              words=("--grid", "expands"), timeout=30, **huge_memory()))

    def shared_parts(ctx: Ctx):
        """A checkpoint whose config repeats a part by reference (pickle's memo), 10**9 values expanded,
        with a digest of its own that its contents cannot match: the digest would walk all of them."""
        import torch
        payload = torch.load(ctx.fixtures.get("r"), weights_only=True)
        leaves = [1] * 10
        for _ in range(8):
            leaves = [leaves] * 10
        payload["config"]["environment"]["kwargs"] = {"x": leaves}
        torch.save(payload, ctx.path("models/r.pt"))
    for script, args in (("enjoy", [*enjoy, "--episodes", "1"]),
                         ("resume", ["train.py", "--resume", "models/r.pt", "--set", "updates=3"])):
        add(Probe(f"checkpoint-shared-parts-{script}", O, "a checkpoint whose parts repeat by reference",
                  f"models/r.pt repeats a list by reference to 10**9 values (62 kB): {script} refuses it at once as "
                  "corrupt (the digest took 15 s per 10**7)", args, setup=shared_parts,
                  words=("corrupt checkpoint",), timeout=30, **huge_memory()))

    # Agent.act from Python: one ValueError naming the argument, never a torch error or a silent action
    act_prelude = ("import sys\nimport numpy as np\nimport torch\nfrom agent import Agent\n"
                   "agent = Agent.load('models/{model}')\nS = agent.model.state_size\n"
                   "ok = agent.act(np.zeros((2, {width}), np.float32), None, None)\nstate = ok.state\n"
                   "try:\n    step = {call}\nexcept ValueError as error:\n"
                   "    print(f'error: {{error}}', file=sys.stderr)\n    sys.exit(2)\nprint('acted', step.actions)\n")
    masked = ("from config import config_from_dict\nfrom environments import spaces_of\n"
              "from model import build_model\nconfig = config_from_dict({'environment': {'type': 'gym', "
              "'name': 'tests.memory_tasks:MaskedChoice-v0'}})\nenv = config.environment.make()\n"
              "spaces = spaces_of(env)\nagent = Agent(build_model(config, spaces), config, env.action_space)\n"
              "obs = np.zeros((2, *agent.model.observation_layout.shape), np.float32)\n")
    for name, call, word, code in (
            ("no-batch-axis", "agent.act(np.zeros(3, np.float32), None, None)", "obs", 2),
            ("zero-environments", "agent.act(np.zeros((0, 3), np.float32), None, None)", "obs", 2),
            ("starts-wrong-length", "agent.act(np.zeros((2, 3), np.float32), state, np.zeros(3, bool))",
             "episode_start", 2),
            ("starts-none-beside-state", "agent.act(np.zeros((2, 3), np.float32), state, None)", "episode_start", 2),
            ("numpy-state", "agent.act(np.zeros((2, 3), np.float32), state.numpy(), np.zeros(2, bool))", "state", 2),
            ("float64-state", "agent.act(np.zeros((2, 3), np.float32), state.double(), np.zeros(2, bool))",
             "state", 2),
            ("list-observation", "agent.act([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], state, [False, False])", "", 0)):
        code_text = act_prelude.format(model="poc_memory_env.pt", width=3, call=call)
        add(Probe(f"agent-act-{name}", O, f"Agent.act: {name.replace('-', ' ')}",
                  f"from Python, the shipped PoC agent: {call}: " + (f"one ValueError naming {word}" if code else
                                                                     "acts (a list is read as an array)"),
                  ["-c", code_text], code=(code,), words=(word,) if word else (), one_line=bool(code),
                  fast=name == "no-batch-axis"))
    for name, call, word in (
            ("mask-wrong-width", "agent.act(obs, None, None, action_mask=np.ones((2, 4), bool))", "action_mask"),
            ("mask-all-false-row", "agent.act(obs, None, None, action_mask=np.array([[True] * 5, [False] * 5]))",
             "row 1")):
        code_text = ("import sys\nimport numpy as np\nfrom agent import Agent\n" + masked +
                     f"try:\n    step = {call}\nexcept ValueError as error:\n"
                     "    print(f'error: {error}', file=sys.stderr)\n    sys.exit(2)\nprint('acted', step.actions)\n")
        add(Probe(f"agent-act-{name}", O, f"Agent.act: {name.replace('-', ' ')}",
                  f"from Python, an agent of a masked Discrete(5) task: {call}: one ValueError naming {word} (an "
                  "all-False row silently acted as if nothing were masked)", ["-c", code_text], words=(word,)))

    # evaluation ends on an environment without a time limit
    endless = with_fixture("endless")
    add(Probe("enjoy-endless-max-steps", O, "a policy that never ends an episode",
              "models/r.pt trained on an environment whose episodes never end (no time limit): enjoy.py "
              "--deterministic --episodes 2 --max-steps 200: ends, each episode cut with a line",
              [*enjoy, "--deterministic", "--episodes", "2", "--max-steps", "200"], setup=endless, code=(0,),
              stdout_has=("cut at the step cap", "2 episodes")))
    add(Probe("enjoy-endless-default-cap", O, "a policy that never ends an episode",
              "the same without --max-steps (ran forever, printing nothing): ends at the default cap, 100,000 steps",
              [*enjoy, "--deterministic", "--episodes", "1"], setup=endless, code=(0,),
              stdout_has=("length 100000  cut at the step cap",), timeout=240))
    add(Probe("enjoy-endless-video", O, "a policy that never ends an episode",
              "the same recorded: --video out.gif --max-steps 50: ends, out.gif written",
              [*enjoy, "--deterministic", "--episodes", "1", "--max-steps", "50", "--video", "out.gif"],
              setup=endless, code=(0,), stdout_has=("cut at the step cap",), exists=("repo/out.gif",),
              may_write=("repo/out.gif",)))
    add(Probe("train-evaluation-endless", O, "a policy that never ends an episode",
              "train.py on that environment with evaluation.interval=1, evaluation.max_steps=100: its evaluations "
              "end (a first evaluation would hang the run)", ["train.py", "--run-id", "p", *TINY, *ENDLESS,
                                                               "--set", "evaluation.interval=1",
                                                               "--set", "evaluation.episodes=2",
                                                               "--set", "evaluation.max_steps=100"],
              code=(0,), exists=("repo/models/p-best.pt",)))

    # sweep.py: Ctrl-C to the process group during the first seconds (fixed before this round; probed now)
    short_sweep = [*sweep, "--seeds", "2", "--set", "updates=200"]
    for delay in (2.0, 3.0, 4.0, 8.0):
        add(Probe(f"sweep-ctrl-c-{delay:.0f}s", O, "Ctrl-C to a sweep's process group",
                  f"SIGINT to sweep.py's process group {delay:.0f} s after launch (2 seeds of 200 updates): exit 130 "
                  "(a lost signal let every trial finish, exit 0), no process left; if the sweep had begun, "
                  "--resume then finishes it (exit 0)", short_sweep, action=sweep_interrupted(delay, short_sweep),
                  code=(130,), one_line=False, serial=True, timeout=240,
                  may_write=("repo/sweeps/*", "repo/summaries/*"), expect="--resume finishes, when there is a sweep"))
    add(Probe("sweep-ctrl-c-after-ray", O, "Ctrl-C to a sweep's process group",
              "SIGINT to sweep.py's process group 3 s after Ray has started (its sweep.json written): the trials "
              "stop, exit 130; --resume then finishes the sweep (exit 0), no process left", short_sweep,
              action=sweep_interrupted(3.0, short_sweep, after_ray=True), code=(130,), one_line=False, serial=True,
              timeout=240, may_write=("repo/sweeps/*", "repo/summaries/*"), expect="--resume finishes"))

    # ---------------------------------------------------------------- 42: the outside round of issue 42
    cores = len(os.sched_getaffinity(0))
    more_cores = crafted(lambda payload: payload["config"].update(torch_threads=cores + 1))
    add(Probe("enjoy-model-from-more-cores", "42.1", "a model made where there were more cores",
              f"models/r.pt's config says torch_threads {cores + 1}, one more than the cores here (a sweep trial's "
              "model on a smaller machine): enjoy.py scores it", [*enjoy, "--episodes", "2"], setup=more_cores,
              code=(0,), stdout_has=("2 episodes",)))
    add(Probe("resume-model-from-more-cores", "42.1", "a model made where there were more cores",
              "the same resumed: --resume models/r.pt --set updates=3 trains on with the cores here and says so",
              ["train.py", "--resume", "models/r.pt", "--set", "updates=3"], setup=more_cores, code=(0,),
              may_change=("repo/models/r.pt",), stdout_has=("are more than the cores here",),
              check=checkpoint_update("models/r.pt", 3)))
    pipe = ("import subprocess, sys\n"
            "run = subprocess.Popen([sys.executable, *sys.argv[1:]], stdout=subprocess.PIPE)\n"
            "run.stdout.readline()\nrun.stdout.close()\nsys.exit(run.wait())\n")
    add(Probe("train-stdout-closed", "42.4", "stdout closed (| head -1)",
              "train.py ... | head -1 (30 updates): trains on, says once on stderr that stdout was closed, exit 0, "
              "models/p.pt at update 30", ["-c", pipe, "train.py", "--run-id", "p", *sets(updates=30)], code=(0,),
              one_line=True, words=("stdout was closed",), check=checkpoint_update("models/p.pt", 30)))

    def ctrl_c_while_workers_start(ctx: Ctx) -> Proc:
        proc = ctx.popen(["train.py", "--run-id", "p", *sets(updates=100000, worker_processes=2)])
        while proc.process.poll() is None and not proc.children:
            time.sleep(0.02)
        proc.signal(signal.SIGINT, group=True)
        proc.process.wait(60)
        left = processes_with(ctx.marker)  # at once, before the output is read to its end
        if left:
            ctx.notes.append(f"{len(left)} process(es) alive as the script exited")
        proc.wait(60)
        return proc
    add(Probe("ctrl-c-while-workers-start", "42.5", "Ctrl-C while the workers start",
              "SIGINT to the group as soon as train.py has a child process (worker_processes 2): exit 130, and no "
              "process of the run alive at the moment it exits (forkserver, resource tracker, workers)",
              ["train.py"], action=ctrl_c_while_workers_start, code=(130,), one_line=False, serial=True,
              expect="nothing alive as it exits"))
    twice_at_rename = ("import os, runpy, signal, sys\nrename = os.replace\n"
                       "def replace(source, target):\n"
                       "    if str(target).endswith('.pt') and not os.environ.get('SIGNALLED'):\n"
                       "        os.environ['SIGNALLED'] = '1'\n"
                       "        os.kill(os.getpid(), signal.SIGINT)\n        os.kill(os.getpid(), signal.SIGINT)\n"
                       "    rename(source, target)\n"
                       "os.replace = replace\nsys.argv = sys.argv[1:]\nrunpy.run_path('train.py', run_name='__main__')\n")
    add(Probe("second-sigint-during-save", "42.6", "a second Ctrl-C while a checkpoint is written",
              "two SIGINTs as the first checkpoint (hidden_layer_size 1024, checkpoint_interval 1) is renamed into "
              "place: exit 130, no temporary file, models/p.pt whole at update 1",
              ["-c", twice_at_rename, "train.py", "--run-id", "p",
               *sets(updates=100000, checkpoint_interval=1, hidden_layer_size=1024)],
              code=(130,), one_line=False, serial=True, check=checkpoint_update("models/p.pt", 1)))
    add(Probe("agent-act-nan", "42.7", "Agent.act: NaN and inf",
              "from Python, the shipped PoC agent: act() with a NaN observation: one ValueError naming obs "
              "(it acted silently, and a NaN state poisoned every later step)",
              ["-c", act_prelude.format(model="poc_memory_env.pt", width=3,
                                        call="agent.act(np.full((2, 3), np.nan, np.float32), None, None)")],
              words=("obs", "finite")))
    for name, change, word in (
            ("tensor-missing", lambda payload: payload["model"].pop(next(iter(payload["model"]))), "does not fit"),
            ("environments-empty", lambda payload: payload.update(environments=[]), "does not fit")):
        add(Probe(f"branch-{name}", "42.10", "a checkpoint whose contents do not fit its config",
                  f"models/r.pt edited ({name.replace('-', ' ')}), its digest right: --resume models/r.pt --run-id br "
                  "refused in one line (a raw traceback)",
                  ["train.py", "--resume", "models/r.pt", "--run-id", "br", "--set", "updates=3"],
                  setup=crafted(change), words=(word,)))

    # issue 42's borderline cases, decided: each refused in one line that names what is wrong
    B = "42.b"
    for name, args, word in (
            ("run-id-pt", ["train.py", "--run-id", "x.pt", *TINY], "not a file name"),
            ("run-id-201", ["train.py", "--run-id", "a" * 201, *TINY], "at most 200 characters"),
            ("export-no-target", ["checkpoint.py", "--inference-only", "models/r.pt"], "required: target"),
            ("flag-twice", [*enjoy, "--model", "models/missing.pt"], "models/missing.pt"),  # the last wins
            ("video-onto-folder", [*enjoy, "--video", "models"], "is a folder"),
            ("update-negative", [*enjoy], "not a count")):
        setup = crafted(lambda payload: payload.update(update=-5)) if name == "update-negative" else R
        add(Probe(f"refused-{name}", B, "a refusal that names the rule", f"{shlex.join(args)}: refused naming {word}",
                  args, setup=setup, words=(word,)))
    add(Probe("render-display-unusable", B, "--render where no window opens",
              "DISPLAY=:99 (nothing there), SDL_VIDEODRIVER unset: enjoy.py --render refused before the episodes "
              "(exit 0 with an SDL error)",
              ["-c", "import os, runpy, sys\nos.environ['DISPLAY'] = ':99'\nos.environ.pop('SDL_VIDEODRIVER')\n"
                     "sys.argv = sys.argv[1:]\nrunpy.run_path('enjoy.py', run_name='__main__')\n",
               *poc_enjoy, "--render"], words=("--render",), stdout_lacks=("episode",)))

    # issue 42, points 2, 3, 8 and 9: environments that fail as a run starts, environment settings out of range,
    # a sweep's grid value that the environment refuses, stats.py's folders and duplicate runs
    def faulty(name: str, *more: str) -> list[str]:
        return ["train.py", "--run-id", "e", *TINY, "--set", "environment.type=gym",
                "--set", f"environment.name=tests.faulty_envs:{name}", *more]
    for name, env, more, what in (
            ("first-reset", "BadReset-v0", [], "its first reset (the one that describes the spaces) raises"),
            ("second-reset", "BadReset-v0", ["--set", "environment.kwargs.at_reset=2"],
             "its second reset (the run's environments) raises"),
            ("wrong-shape", "WrongShape-v0", [], "its step returns an observation of the wrong shape, in-process")):
        # a step's wrong observation draws gymnasium's own warning first: the error line follows it
        add(Probe(f"environment-fails-{name}", "42.2", "an environment that fails as the run starts",
                  f"a gym environment whose {what}: exit 1, the formatted line naming the environment (a raw "
                  "traceback from spaces_of, a WorkerError's, or numpy's 'could not broadcast')", faulty(env, *more),
                  code=(1,), stderr_has=(f"error: environment 'tests.faulty_envs:{env}' #0",), one_line=False,
                  traceback_ok=True))
    cartpole = ["train.py", "--config", "configs/cartpole_masked.yaml", "--run-id", "c", *TINY]
    for name, value in (("zero", "0"), ("negative", "-5"), ("text", "abc"), ("fraction", "2.5")):
        add(Probe(f"environment-setting-{name}", "42.3", "an environment setting out of its range",
                  f"masked CartPole with environment.kwargs.max_steps={value}: refused in one line naming the key "
                  "(every episode one step, or a failure at the first step)",
                  [*cartpole, "--set", f"environment.kwargs.max_steps={value}"], words=("max_steps",)))
    add(Probe("sweep-grid-value-environment-refuses", "42.8", "a grid value the environment refuses",
              "sweep.py --grid environment.observation_mask=[7],[1] on masked CartPole (4 entries): refused in one "
              "line naming observation_mask before Ray starts (a Tune traceback, retried)",
              ["sweep.py", "--config", "configs/cartpole_masked.yaml", "--sweep-id", "s", *TINY,
               "--grid", "environment.observation_mask=[7],[1]"], words=("observation_mask",)))

    def runs(*extra: list[str]):
        def setup(ctx: Ctx):
            for args in (["train.py", "--run-id", "a", *TINY], *extra):
                ctx.run(args)
        return setup

    def damaged(ctx: Ctx):  # b: a seed that ran all its updates (issue 58: a run cut short is never scored)
        runs(["train.py", "--run-id", "b", "--seed", "1", *TINY])(ctx)
        events = next(ctx.path("summaries/a").rglob("events.out.tfevents.*"))
        events.write_bytes(events.read_bytes()[:-7] + b"\xff" * 7)
    stats = ["stats.py", "--runs", "summaries"]
    add(Probe("stats-out-dot", "42.9", "stats.py --out a folder",
              "stats.py --out . (a traceback: the path has no name): stats.md, .json, .png in the folder, exit 0",
              [*stats, "--out", "."], setup=runs(), code=(0,), exists=("repo/stats.md",), may_write=("repo/stats.*",),
              one_line=False))
    add(Probe("stats-out-existing-folder", "42.9", "stats.py --out a folder",
              "stats.py --out out/ (out/ exists; written beside it, and printed paths that did not exist): the files "
              "inside out/", [*stats, "--out", "out/"], setup=all_of(runs(), lambda ctx: ctx.path("out").mkdir()),
              code=(0,), exists=("repo/out/stats.md",), may_write=("repo/out/*",), one_line=False,
              stdout_has=("out/stats.md",)))
    add(Probe("stats-damaged-events", "42.9", "stats.py over a damaged events file",
              "the run's events file has a damaged last record (dropped without a word): a warning line names it",
              [*stats, "--out", "s"], setup=damaged, code=(0,), may_write=("repo/s.*",), one_line=False,
              stderr_has=("events.out.tfevents",)))
    add(Probe("stats-run-trained-again", "42.9", "stats.py over a run trained again with --overwrite",
              "run a trained twice (--overwrite): one seed counted, a warning names the one left out (it counted as "
              "a second seed of the same seed)", [*stats, "--out", "s"],
              setup=runs(["train.py", "--run-id", "a", *TINY, "--overwrite"]), code=(0,), may_write=("repo/s.*",),
              one_line=False, stdout_lacks=("seeds 2",)))
    probes_of_issue_58(add, R, enjoy, export, act_prelude, runs, stats)
    probes_of_issue_72(add, R, runs, stats)
    probes_of_issue_87_tools(add, runs)
    probes_of_issue_87_loading(add, enjoy, act_prelude)
    probes_of_issue_87_signals(add, R)
    return P


def console(how: str) -> list[str]:
    """python -c arguments that start the script after them with its console as a shell leaves it for
    `>&-` (closed), `>&- 2>&-` (both-closed) or `> /dev/full` (full)."""
    change = {"closed": "os.close(1)", "both-closed": "os.close(1); os.close(2)",
              "full": "os.dup2(os.open('/dev/full', os.O_WRONLY), 1)"}[how]
    return ["-c", f"import os, sys; {change}; os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]


def read_only_mount(rel: str):
    """A read-only file system (an empty tmpfs, mounted ro) at rel in the copy, unmounted after the probe."""
    def setup(ctx: Ctx):
        path = ctx.path(rel)
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=65536", "tmpfs", str(path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise Skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")
        ctx.mounts.append(path)
    return setup


def sweep_resumed_then_interrupted(args: list[str]):
    """A sweep stopped by SIGINT once its trial has a checkpoint, then --resume'd and stopped again once the
    resumed trial runs (its second events file): the judged run is the resumed one."""
    def action(ctx: Ctx) -> Proc:
        first = ctx.popen(args)
        while first.process.poll() is None and not ctx.path("sweeps/s/models/seed0.pt").exists():
            time.sleep(0.05)
        first.signal(signal.SIGINT, group=True)
        if first.wait(180) != 130:
            ctx.notes.append(f"the first sweep exited {first.process.returncode}, expected 130")
        again = ctx.popen(["sweep.py", "--resume", "sweeps/s"])
        while again.process.poll() is None and len(list(ctx.path("summaries/s").rglob("events.out.*"))) < 2:
            time.sleep(0.05)
        again.signal(signal.SIGINT, group=True)
        again.wait(180)
        return again
    return action


def signals_after_the_end(args: list[str], line: str):
    """SIGINT every 20 ms from the line on until the run exits (a user pressing Ctrl-C as it shuts down)."""
    def action(ctx: Ctx) -> Proc:
        proc = ctx.popen(args)
        if not proc.wait_line(line, timeout=240):
            ctx.notes.append(f"stdout never had a line starting {line!r}")
        while proc.process.poll() is None:
            proc.signal(signal.SIGINT)
            time.sleep(0.02)
        proc.wait(60)
        return proc
    return action


def then(first: list[str], second: list[str], timeout: float = 400):
    """Runs `first` (it must exit 0), then the judged `second`."""
    def action(ctx: Ctx) -> Proc:
        done = ctx.run(first, timeout=timeout)
        if done.process.returncode != 0:
            ctx.notes.append(f"`{shlex.join(first)}` exited {done.process.returncode}: {first_line(done)}")
        return ctx.run(second, timeout=timeout)
    return action


def probes_of_issue_58(add, R, enjoy, export, act_prelude, runs, stats) -> None:
    """Issue 58's outside round: each wrong outcome (points 2-10) and each borderline case decided ('58.b')."""
    # 2: a checkpoint of the most environments a config allows is read again
    most = ["train.py", "--run-id", "big", *sets(n_workers=65536, worker_steps=1, recurrence__sequence_length=1,
                                                  n_mini_batch=1, epochs=1, updates=1)]
    add(Probe("checkpoint-most-environments", "58.2", "a checkpoint of the most environments",
              "train.py with n_workers=65536 (config.py's bound) saves, then checkpoint.py --inference-only reads it "
              "(every reader refused 44,000 environments' file as 'more than 1,000,000 values')",
              [*export, "models/big.pt", "small.pt"], action=then(most, [*export, "models/big.pt", "small.pt"]),
              code=(0,), serial=True, timeout=400, exists=("repo/small.pt",), may_write=("repo/small.pt",)))

    # 3: a resumed sweep stops on Ctrl-C
    resumable = ["sweep.py", "--config", "configs/poc_memory_env.yaml", "--sweep-id", "s",
                 *sets(updates=100000, checkpoint_interval=1)]
    add(Probe("sweep-resume-ctrl-c", "58.3", "Ctrl-C to a resumed sweep",
              "a sweep stopped by Ctrl-C, --resume'd, Ctrl-C again once its trial runs: exit 130 with the line to "
              "resume (the resumed sweep ignored it and ran its trials to their end)", resumable,
              action=sweep_resumed_then_interrupted(resumable), code=(130,), one_line=False, serial=True,
              timeout=400, stdout_has=("stopped with 0 of 1 trials finished",),
              may_write=("repo/sweeps/*", "repo/summaries/*")))

    # 4, 5: --overwrite replaces a run whole; a folder where a checkpoint goes is refused at start
    evaluated = lambda ctx: ctx.run(["train.py", "--run-id", "r", *TINY, "--set", "evaluation.interval=1",
                                     "--set", "evaluation.episodes=2"])
    add(Probe("overwrite-removes-old-best", "58.4", "--overwrite beside the old run's best checkpoint",
              "run r evaluated (models/r-best.pt); a new run r --overwrite without evaluation: exit 0, says it "
              "removed models/r-best.pt, which is gone (enjoy.py scored it under the new run's id)",
              ["train.py", "--run-id", "r", "--overwrite", *TINY], setup=evaluated, code=(0,),
              stdout_has=("removed models/r-best.pt",), absent=("repo/models/r-best.pt",),
              may_change=("repo/models/r.pt", "repo/models/r-best.pt")))
    add(Probe("overwrite-refused-keeps-best", "58.4", "--overwrite beside the old run's best checkpoint",
              "the same with a bad value (gamma=2): refused, models/r-best.pt untouched",
              ["train.py", "--run-id", "r", "--overwrite", *TINY, "--set", "gamma=2"], setup=evaluated,
              words=("gamma",)))
    for name, rel, flags in (("overwrite", "models/r.pt", ["--overwrite"]), ("plain", "models/r.pt", []),
                             ("best", "models/r-best.pt", ["--overwrite"])):
        add(Probe(f"folder-at-checkpoint-{name}", "58.5", "a folder where a checkpoint goes",
                  f"{rel} is a folder; train.py --run-id r {' '.join(flags)}: refused before training, naming the "
                  "folder (it trained the whole run, then failed to save; or said 'continue it with --resume')",
                  ["train.py", "--run-id", "r", *flags, *touch_env()], words=(f"{rel} is a folder",),
                  setup=lambda ctx, rel=rel: ctx.path(rel).mkdir(parents=True), absent=BUILT,
                  fast=name == "overwrite"))

    # 6: a run's work never depends on its console
    for how, shell in (("closed", ">&-"), ("both-closed", ">&- 2>&-"), ("full", "> /dev/full")):
        words = {"closed": ("stdout is closed",), "both-closed": (), "full": ("No space left",)}[how]
        add(Probe(f"train-console-{how}", "58.6", f"train.py {shell}",
                  f"train.py ... {shell}: trains and saves, exit 0 (exit 120 or a traceback, nothing trained)",
                  [*console(how), "train.py", "--run-id", "p", *TINY], code=(0,), words=words,
                  check=checkpoint_update("models/p.pt", 2), fast=how == "closed"))
        add(Probe(f"enjoy-video-console-{how}", "58.6", f"enjoy.py --video {shell}",
                  f"enjoy.py --video out.gif {shell}: the video written, exit 0 (no video)",
                  [*console(how), *enjoy, "--episodes", "2", "--video", "out.gif"], setup=R, code=(0,), words=words,
                  exists=("repo/out.gif",), may_write=("repo/out.gif",)))

    # 7: stats.py never scores a run cut short, and names a run without updates
    def cut_short(ctx: Ctx):
        runs()(ctx)
        for saved in ctx.path("summaries/a").rglob("config.json"):
            saved.write_text(json.dumps({**json.loads(saved.read_text()), "updates": 5}))
    add(Probe("stats-run-cut-short", "58.7", "stats.py over a run cut short",
              "run a stopped at update 2 of its config's 5: no final score (it was the config's, 'stopped early "
              "0'): refused, a warning naming the grid point", [*stats, "--out", "s"], setup=cut_short,
              stderr_has=("reached its config's 5 updates", "error: no run reached"), one_line=False))

    def empty_events(ctx: Ctx):
        runs(["train.py", "--run-id", "b", "--seed", "1", *TINY])(ctx)
        for events in ctx.path("summaries/a").rglob("events.out.tfevents.*"):
            events.write_bytes(b"")
    add(Probe("stats-empty-events", "58.7", "stats.py over an empty events file",
              "run a's events file is empty (dropped without a word): a warning names it, b is scored",
              [*stats, "--out", "s"], setup=empty_events, code=(0,), stderr_has=("its events hold no whole update",),
              one_line=False, may_write=("repo/s.*",)))

    # 8: finite in float64, inf in float32
    add(Probe("agent-act-beyond-float32", "58.8", "Agent.act: beyond float32",
              "Agent.act(np.full((2, 3), 1e39), None, np.ones(2, bool)): one ValueError naming obs (action 0 and "
              "NaN values)", ["-c", act_prelude.format(model="poc_memory_env.pt", width=3,
                                                          call="agent.act(np.full((2, 3), 1e39), None, np.ones(2, bool))")],
              words=("obs", "float32"), fast=True))

    # 9: a read-only file system
    add(Probe("models-read-only-file-system", "58.9", "models/ on a read-only file system",
              "models/ is a read-only tmpfs: refused in one line naming models/ (a traceback from the writability "
              "check's cleanup, exit 1)", ["train.py", "--run-id", "p", *touch_env()],
              setup=read_only_mount("models"), words=("models", "Read-only"), absent=BUILT))
    add(Probe("video-read-only-file-system", "58.9", "--video onto a read-only file system",
              "clips/ is a read-only tmpfs: enjoy.py --video clips/out.gif refused in one line",
              [*enjoy, "--video", "clips/out.gif"], setup=all_of(R, read_only_mount("clips")), words=("clips",)))
    add(Probe("export-read-only-file-system", "58.9", "an export onto a read-only file system",
              "out/ is a read-only tmpfs: checkpoint.py --inference-only models/r.pt out/small.pt: one line",
              [*export, "models/r.pt", "out/small.pt"], setup=all_of(R, read_only_mount("out")), code=(1, 2),
              one_line=True, words=("out/small.pt", "Read-only")))

    # 10: messages that sent the user the wrong way
    last = ["train.py", "--run-id", "r", *sets(updates=2, checkpoint_interval=0), *SLOW]
    add(Probe("sigterm-in-the-last-update", "58.10", "a stop signal in the last update",
              "slow steps (~1.6 s an update), updates=2; SIGTERM after update 1: exit 143, 'the run is complete' (it "
              "said 'resume with', a resume then refused as nothing to resume)", last,
              action=interrupt_after_line([signal.SIGTERM], last), code=(143,), serial=True,
              stdout_has=("the run is complete",), stdout_lacks=("resume with",), check=loads("models/r.pt", 2)))
    branch = ["train.py", "--resume", "models/r.pt", "--run-id", "br", "--set", "updates=100000"]
    add(Probe("branch-stopped-at-once", "58.10", "a branch stopped at once",
              "a branch (slow steps) stopped by two SIGINTs 0.3 s apart after its first update, before its first "
              "save: exit 130, 'no checkpoint was saved in this run' (it named models/br.pt, which did not exist)",
              branch, setup=with_fixture("slow"),
              action=interrupt_after_line([signal.SIGINT, signal.SIGINT], branch, line="update    3/"), code=(130,),
              serial=True, stderr_has=("no checkpoint was saved in this run",), absent=("repo/models/br.pt",)))
    for device in ("cuda:99", "banana"):
        add(Probe(f"agent-load-device-{device.replace(':', '-')}", "58.10", "Agent.load on a device not here",
                  f"Agent.load('models/poc_memory_env.pt', device='{device}'): one ValueError naming the device (it "
                  "called the model a corrupt checkpoint)",
                  ["-c", "import sys\nfrom agent import Agent\ntry:\n    Agent.load('models/poc_memory_env.pt', "
                         f"device='{device}')\nexcept ValueError as error:\n    print(f'error: {{error}}', "
                         "file=sys.stderr)\n    sys.exit(2)\n"], words=("device", device)))
    for name, file in (("space", "my run.yaml"), ("non-ascii", "r\u00fcn.yaml")):
        add(Probe(f"config-name-{name}", "58.10", "a config file name that is no run id",
                  f"--config '{file}', no --run-id: trains under a run id made of its name (refused as if typed)",
                  ["train.py", "--config", file, *TINY], code=(0,), exists=("repo/models/*.pt",),
                  setup=lambda ctx, file=file: shutil.copy(ctx.path("configs/poc_memory_env.yaml"), ctx.path(file))))

    # the borderline cases, decided
    B = "58.b"
    flaky = lambda fault, processes=0: ["train.py", "--run-id", "r", *sets(
        updates=50, checkpoint_interval=1, worker_processes=processes, n_workers=2),
        "--set", "environment.type=gym", "--set", f"environment.name={FLAKY}",
        "--set", "environment.kwargs.at_step=70", "--set", f"environment.kwargs.fault={fault}"]
    for fault, processes, said in (("inf-observation", 0, "its observation holds inf"),
                                   ("inf-observation", 2, "its observation holds inf"),
                                   ("text-reward", 0, "its reward is '1.5', a str")):
        add(Probe(f"environment-{fault}-{processes}", B, "an environment's non-finite or text value",
                  f"an environment returns {fault.replace('-', ' ')} at step 70 (worker_processes={processes}): exit "
                  "1 naming the environment and the value, the last checkpoint kept (blamed on a non-finite loss, or "
                  "taken)", flaky(fault, processes), code=(1,), words=("environment", "#"), stderr_has=(said,),
                  one_line=False, traceback_ok=fault == "text-reward", check=loads("models/r.pt", 2)))
    def edited(name: str):
        def change(payload: dict):
            import torch
            if name == "nan-weights":
                payload["model"] = {key: value * float("nan") for key, value in payload["model"].items()}
            else:
                payload[name.removesuffix("-shape")] = torch.zeros(5, 7)
        return change
    for name, word in (("obs-shape", "its obs"), ("state-shape", "its state"), ("nan-weights", "NaN or inf")):
        change = edited(name)
        for script, args in (("resume", ["train.py", "--resume", "models/r.pt", "--set", "updates=3"]),
                             ("enjoy", [*enjoy, "--episodes", "1"])):
            if script == "enjoy" and name != "nan-weights":
                continue  # enjoy.py reads no stored observation or state
            add(Probe(f"crafted-{name}-{script}", B, "a crafted checkpoint that does not fit",
                      f"models/r.pt edited ({name}), its digest right: {script} refused in one line (a traceback)",
                      args, setup=crafted(change), words=(word,)))
    add(Probe("agent-initial-state-negative", B, "Agent.initial_state(-1)",
              "Agent.initial_state(-1): one ValueError naming n (a torch error)",
              ["-c", act_prelude.format(model="poc_memory_env.pt", width=3, call="agent.initial_state(-1)")],
              words=("n:",)))
    enjoy_long = ["enjoy.py", "--model", "models/poc_memory_env.pt", "--episodes", "100000"]
    add(Probe("ctrl-c-enjoy-summary", B, "Ctrl-C in a long enjoy.py",
              "SIGINT after its third episode: exit 130, and the summary of the episodes played (none before)",
              enjoy_long, action=interrupt_after_line([signal.SIGINT], enjoy_long, line="episode    3"), code=(130,),
              serial=True, stdout_has=("(stopped after",), check=at_most_one_line))
    ended = ["sweep.py", "--config", "configs/poc_memory_env.yaml", "--sweep-id", "s", *TINY]
    add(Probe("sweep-ctrl-c-as-it-ends", B, "Ctrl-C while a finished sweep shuts Ray down",
              "SIGINT every 20 ms from the sweep's last line until it exits: exit 0, no 'stopped by' (a raw SIGINT, "
              "or 130 'during start-up')", ended, action=signals_after_the_end(ended, "sweep s:"), code=(0,),
              serial=True, timeout=300, may_write=("repo/sweeps/*", "repo/summaries/*"),
              check=lambda ctx, proc: "stopped by" in proc.stderr and "a 'stopped by' line" or None))
    add(Probe("set-exponent-float", B, "a number in exponent notation",
              "--set learning_rate_schedule.initial=3e-4: trains (refused: YAML 1.1 reads 3e-4 as text)",
              ["train.py", "--run-id", "p", *TINY, "--set", "learning_rate_schedule.initial=3e-4"], code=(0,),
              exists=("repo/models/p.pt",)))
    for name, args, setup, word in (
            ("config-folder", ["train.py", "--config", "configs", *TINY], None, "is a folder"),
            ("config-link-loop", ["train.py", "--config", "loop.yaml", *TINY], symlink("loop.yaml", "loop.yaml"),
             "loop of symbolic links"),
            ("model-dev-null", ["enjoy.py", "--model", "/dev/null"], None, "a device or socket"),
            ("summaries-dangling-link", ["train.py", "--run-id", "p", *touch_env()],
             symlink("summaries", "$PROBE/gone"), "does not exist"),
            ("config-empty", ["train.py", "--config", "c.yaml", *TINY], write_file("c.yaml", "# nothing yet\n"),
             "holds no keys"),
            ("render-beside-video", [*enjoy, "--video", "out.gif", "--render"], R, "--render")):
        add(Probe(f"named-{name}", B, "a path or a flag named for what it is",
                  f"{shlex.join(args)}: refused in one line naming '{word}'", args, setup=setup, words=(word,),
                  absent=BUILT + ("repo/out.gif",), fast=name == "config-empty"))
    add(Probe("enjoy-max-steps-zero", B, "enjoy --max-steps 0",
              "enjoy.py --max-steps 0: the config's meaning (the time limit, else 100,000): plays (refused)",
              ["enjoy.py", "--model", "models/poc_memory_env.pt", "--episodes", "2", "--max-steps", "0"], code=(0,),
              stdout_has=("2 episodes",)))
    two_seeds = runs(["train.py", "--run-id", "b", "--seed", "1", *TINY])
    add(Probe("stats-existing-out", B, "stats.py over its own files",
              "s.md exists: stats.py --out s refused, naming --overwrite (it replaced them)", [*stats, "--out", "s"],
              setup=all_of(two_seeds, write_file("s.md", "mine\n")), words=("--overwrite",)))
    add(Probe("stats-pool-unknown", B, "stats.py --pool of no key",
              "--pool recurence: refused, naming the closest key (it was taken)",
              [*stats, "--out", "s", "--pool", "recurence"], setup=two_seeds, words=("--pool", "recurrence")))
    add(Probe("stats-two-seeds", B, "stats.py over 2 seeds",
              "2 seeds: the table says their [low, high] is the range of their scores, no 95% interval",
              [*stats, "--out", "s"], setup=two_seeds, code=(0,), stdout_has=("no 95% interval",),
              may_write=("repo/s.*",)))


def with_environment(**variables: str) -> list[str]:
    """python -c arguments that start the script after them with these environment variables ($PROBE: the
    probe's folder, as in any argument)."""
    return ["-c", f"import os, sys; os.environ.update({variables!r}); "
                  "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]


def full_wandb_folder(ctx: Ctx) -> None:
    """models/r.pt (run r at update 2), its summaries folder's wandb/ a full tmpfs: a disk that filled."""
    checkpoint = ctx.fixture()
    folder = ctx.path(project().load_checkpoint(checkpoint)["summaries_path"]) / "wandb"
    mount_tmpfs(ctx, str(folder.relative_to(ctx.repo)), 65536)
    try:
        (folder / "fill").write_bytes(b"\0" * 65536)
    except OSError:  # full: as meant
        pass


def probes_of_issue_72(add, R, runs, stats) -> None:
    """Issue 72's round: each defect (points 72.1-72.10), the recurrent gain of a core that is not torch's own
    ('72.r'), evaluations that each play episodes of their own ('72.e') and each borderline case decided ('72.b')."""
    onnx = ["export.py", "--model", "models/poc_memory_env.pt", "--out"]
    example = ["examples/onnx_agent.py", "--model"]
    # 1: a console that closes or fills costs the export nothing
    for how, shell in (("full", "> /dev/full"), ("closed", ">&-")):
        words = {"full": ("No space left",), "closed": ("stdout is closed",)}[how]
        add(Probe(f"export-onnx-console-{how}", "72.1", f"export.py {shell}",
                  f"export.py ... {shell}: the graph written, exit 0 (a traceback and exit 1 after writing it)",
                  [*console(how), *onnx, "a.onnx"], code=(0,), words=words, exists=("repo/a.onnx",),
                  may_write=("repo/a.onnx",), timeout=300))
    # 2: an image smaller than the CNN's kernels
    for nest in ("", "dict", "tuple"):
        flags = ["--set", "environment.kwargs.side=12", *(["--set", f"environment.kwargs.nest={nest}"] if nest else [])]
        add(train_refused(f"image-12x12{'-' + nest if nest else ''}", "72.2", "an image smaller than the CNN's kernels",
                          f"a 12x12 image{' in a ' + nest.title() if nest else ''}: refused naming 36x36 before any "
                          "worker (a conv2d traceback, exit 1)", ["--set", "environment.kwargs.image=true", *flags],
                          words=("12x12", "36x36"), touch="main"))
    # 3: --out in a folder that does not exist
    add(Probe("export-onnx-new-folder", "72.3", "export.py --out in a new folder",
              "export.py --out new/deeper/a.onnx: the folder made, the graph written (exit 1 after the whole export)",
              [*onnx, "new/deeper/a.onnx"], code=(0,), exists=("repo/new/deeper/a.onnx",),
              may_write=("repo/new/*",), timeout=300))
    # 4: a stop signal during the export
    for number in (signal.SIGTERM, signal.SIGINT):
        name = signal.Signals(number).name
        add(Probe(f"export-onnx-{name.lower()}-mid-export", "72.4", "a stop signal during the export",
                  f"{name} once export.py has used 12 s of CPU time (its start-up takes about 6 and the export ends "
                  f"at about 20 on the 2-core Xeon): exit {128 + number}, 'during the export', one line, no file "
                  "(swallowed: exit 0 and the file; or 'cannot be exported', exit 2)", [*onnx, "a.onnx"],
                  action=interrupt_at_cpu(12.0, number, [*onnx, "a.onnx"]), code=(128 + number,),
                  words=(f"stopped by {name} during the export",), one_line=True, absent=("repo/a.onnx",),
                  serial=True, timeout=300))
    # 5, 6, 7: tracking that is off says so, once
    tracked = ["train.py", "--run-id", "p", *TINY, "--track"]
    add(Probe("track-wandb-disabled", "72.5", "WANDB_MODE=disabled train.py --track",
              "trains, one line that tracking is off ('tracking with W&B: None')",
              [*with_environment(WANDB_MODE="disabled", HOME="$PROBE"), *tracked], code=(0,),
              words=("tracking is off",), one_line=True, stdout_lacks=("tracking with W&B",),
              exists=("repo/models/p.pt",)))
    add(Probe("sweep-track-no-key", "72.6", "sweep.py --track without a W&B key",
              "the sweep's own console says tracking is off for its trial (only Ray's worker logs said it), exit 0",
              [*with_environment(WANDB_MODE="online", WANDB_API_KEY="", HOME="$PROBE"), "sweep.py", "--config",
               "configs/poc_memory_env.yaml", "--sweep-id", "s", *TINY, "--track"], code=(0,), one_line=False,
              stderr_has=("warning: seed0: tracking is off: W&B did not start",), timeout=400, serial=True,
              may_write=("repo/sweeps/*", "repo/summaries/*", ".cache/*", ".config/*")))  # HOME is $PROBE
    add(Probe("track-full-wandb-folder", "72.7", "a full disk under the W&B folder",
              "the resumed run's wandb/ is a full tmpfs: one line that tracking is off, the run trains on to update 3 "
              "(about 40 lines of '--- Logging error --- ... No space left')",
              [*with_environment(WANDB_MODE="offline", HOME="$PROBE"), "train.py", "--resume", "models/r.pt",
               "--set", "updates=3", "--track"], setup=full_wandb_folder, code=(0,), one_line=True,
              words=("tracking is off", "No space left"), may_change=("repo/models/r.pt",),
              check=checkpoint_update("models/r.pt", 3)))
    # 8: Agent.act's previous_action
    previous = ("import sys\nimport numpy as np\nfrom agent import Agent\nfrom config import config_from_dict\n"
                "from environments import spaces_of\nfrom model import build_model\n"
                "config = config_from_dict({{'environment': {{'type': 'gym', 'name': 'tests.memory_tasks:CueImage-v0'}}, "
                "'recurrence': {{'previous_action': True}}}})\nenv = config.environment.make()\n"
                "agent = Agent(build_model(config, spaces_of(env)), config, env.action_space)\n"
                "obs = np.zeros((2, 36, 36, 3), np.uint8)\nfirst = agent.act(obs, None, None)\n"
                "try:\n    agent.act(obs, first.state, np.zeros(2, bool), previous_action=np.array([0, {value}]))\n"
                "except ValueError as error:\n    print(f'error: {{error}}', file=sys.stderr)\n    sys.exit(2)\n"
                "print('acted')\n")
    for value in ("99", "-1", "0.5"):
        add(Probe(f"agent-act-previous-action-{value}", "72.8", "Agent.act: a previous action outside the space",
                  f"a Discrete(3) agent trained with previous_action, given {value}: one ValueError naming "
                  "previous_action (a torch RuntimeError; 0.5 used as index 0)",
                  ["-c", previous.format(value=value)], words=("previous_action", "from 0 to 2")))
    # 9: the example without torch
    exported = ["export.py", "--model", "models/poc_memory_env.pt", "--out", "poc.onnx"]
    for name, args, words in (("missing-model", ["none.onnx"], "missing"),
                              ("checkpoint-as-model", ["models/poc_memory_env.pt"], "not an ONNX graph"),
                              ("episodes-negative", ["poc.onnx", "--episodes", "-3"], "--episodes"),
                              ("episodes-zero", ["poc.onnx", "--episodes", "0"], "--episodes")):
        add(Probe(f"onnx-example-{name}", "72.9" if name != "episodes-zero" else "72.b", "examples/onnx_agent.py's input",
                  f"examples/onnx_agent.py --model {' '.join(args)}: one line, exit 2 (a traceback, or 'return nan' "
                  "with exit 0)", [*example, *args], words=(words,)))
    add(Probe("onnx-example-stdout-full", "72.9", "examples/onnx_agent.py > /dev/full",
              "the example's episodes played, one warning line, exit 0 (a traceback)",
              [*console("full"), *example, "poc.onnx", "--episodes", "2"],
              action=then(exported, [*console("full"), *example, "poc.onnx", "--episodes", "2"]), code=(0,),
              words=("No space left",), one_line=True, may_write=("repo/poc.onnx",), timeout=300))
    # 10: stats.py with a full disk at --out
    add(Probe("stats-full-disk-at-out", "72.10", "stats.py with a full disk at --out",
              "out/ is a 32 KiB tmpfs: none of out/x.md, .json, .png written, one line naming them, exit 1 (exit 2, "
              "'could not read or write None', x.md and x.json left)", [*stats, "--out", "out/x"], setup=runs(),
              tmpfs={"out": 32768}, code=(1,), one_line=True, words=("out/x.md", "No space left"),
              absent=("repo/out/x.*",)))
    # the recurrent gain of a core that initialises itself
    add(train_refused("recurrent-gain-lru", "72.r", "initialization.recurrent_gain for a core not torch's own",
                      "--set recurrence.layer_type=lru --set initialization.recurrent_gain=3.0: refused naming the key "
                      "(accepted, and changed nothing)", ["--set", "recurrence.layer_type=lru", "--set",
                                                          "initialization.recurrent_gain=3.0"],
                      words=("initialization.recurrent_gain", "lru")))
    # the borderline cases, decided
    B = "72.b"
    add(train_refused("summaries-run-id-is-a-file", B, "a file at summaries/<run-id>",
                      "summaries/p is a file: refused naming it (the run started, then exit 1)", [],
                      words=("summaries/p is a file",), setup=write_file("summaries/p", "notes\n")))
    add(train_refused("checkpoint-link-loop", B, "a symbolic link loop at models/<run-id>.pt",
                      "models/p.pt -> itself: refused as existing (silently replaced)", [],
                      words=("models/p.pt", "loop"), setup=symlink("models/p.pt", "p.pt")))
    add(Probe("omp-num-threads-holds", B, "OMP_NUM_THREADS=1",
              "OMP_NUM_THREADS=1 train.py: '1 torch thread' ('2 torch threads')",
              [*with_environment(OMP_NUM_THREADS="1"), "train.py", "--run-id", "p", *TINY], code=(0,),
              stdout_has=("(1 torch thread)",), exists=("repo/models/p.pt",)))
    add(Probe("export-onnx-missing-onnxruntime", B, "export.py without onnxruntime",
              "onnxruntime cannot be imported: refused in one line before the model loads (a traceback after the "
              "export)", [*onnx, "a.onnx"], words=("onnxruntime", "cannot be imported"),
              setup=write_file("onnxruntime.py", "raise ModuleNotFoundError(\"No module named 'onnxruntime'\", "
                                                 "name='onnxruntime')\n"), absent=("repo/a.onnx",)))
    # point 5: each evaluation plays episodes of its own, and enjoy.py replays any of them
    evaluated = ["train.py", "--run-id", "p", *TINY, "--set", "evaluation.interval=1", "--set",
                 "evaluation.episodes=6", "--set", "evaluation.deterministic=false"]
    replay = ["enjoy.py", "--model", "models/p.pt", "--episodes", "6", "--seed", str(2 ** 31 + 2)]
    add(Probe("evaluation-replayed-by-enjoy", "72.e", "enjoy.py replays a run's evaluation",
              "a run evaluated after each of its 2 updates; enjoy.py --seed 2**31 + 2 (evaluation.seed 0 + 2**31 + "
              "update 2) scores models/p.pt as the run's evaluation after update 2 did (every evaluation played "
              "evaluation.seed's episodes, so one set's luck lasted through the run)", replay,
              action=evaluation_replayed(evaluated, replay), code=(0,), exists=("repo/models/p.pt",)))


def probes_of_issue_87_tools(add, runs) -> None:
    """Issue 87's round, the instruments in tools/: an --out that cannot be written ('87.4': a traceback, after the
    measurement, which was lost) and inputs they cannot read or a stop signal ('87.5': tracebacks)."""
    speed = ["tools/core_speed.py", "--cores", "gru", "--lengths", "8", "--steps", "64", "--repeats", "1",
             "--workers", "2", "--out"]
    random = ["tools/random_policy.py", "--config", "configs/poc_memory_env.yaml", "--episodes", "2", "--out"]
    plot = ["tools/plot.py", "--runs", "summaries/a", "--out"]
    summary = ["tools/run_summary.py", "--run", "summaries/a", "--command", "c", "--out"]
    read_only = {"setup": all_of(runs(), readonly("ro")), "no_dac": True, "words": ("ro/", "Permission denied")}
    for name, args in (("plot", [*plot, "ro/curve.png"]), ("run-summary", [*summary, "ro/run"]),
                       ("core-speed", [*speed, "ro/speed"]), ("random-policy", [*random, "ro/random"])):
        add(Probe(f"tool-out-read-only-{name}", "87.4", "a tool's --out in a read-only folder",
                  f"{args[0]} --out in a folder mode 0555: refused in one line before measuring (a traceback after "
                  "it)", args, stdout_lacks=("L    8",), **read_only))
    notes = write_file("notes.txt", "notes\n")
    for name, args in (("learning", ["tools/learning.py", "--config", "configs/poc_memory_env.yaml", "--seeds", "0",
                                     "--out", "notes.txt"]),
                       ("benchmark", ["tools/benchmark.py", "--config", "configs/poc_memory_env.yaml", "--repeats",
                                      "1", "--out", "notes.txt/b"])):
        add(Probe(f"tool-out-under-a-file-{name}", "87.4", "a tool's --out under a file",
                  f"{args[0]} writing under notes.txt, a file: refused in one line before any run (a traceback after "
                  "the runs)", args, setup=notes, words=("notes.txt is a file",)))
    add(Probe("tool-out-a-folder-plot", "87.4", "a tool's --out a folder",
              "tools/plot.py --out summaries (a folder): refused in one line (summaries.png written beside it)",
              [*plot, "summaries"], setup=runs(), words=("--out summaries is a folder",)))
    for name, args, stem in (("core-speed", speed, "speed"), ("random-policy", random, "random")):
        add(Probe(f"tool-full-disk-at-out-{name}", "87.4", "a full disk at a tool's --out",
                  f"{args[0]} --out out/{stem} (a tmpfs with room for one of its two files): exit 1, one line naming "
                  "the folder that keeps both (a traceback, the measurement lost)",
                  [*with_environment(TMPDIR="$PROBE"), *args, f"out/{stem}"], tmpfs={"out": 8192},
                  setup=write_file("out/filler", b"\0" * 4096), code=(1,), one_line=True,
                  words=("No space left", "kept in"), exists=(f"kept-*/{stem}.json", f"kept-*/{stem}.md"),
                  may_write=("kept-*",), absent=(f"repo/out/{stem}.*",), serial=True))
    episodes = ["tools/episode_interval.py"]
    for name, file, data, words in (("checkpoint", "models/poc_memory_env.pt", None, "not UTF-8 text"),
                                    ("bad-json", "e.json", '{"episodes": [', "not JSON"),
                                    ("non-utf8", "e.log", b"\xff\xfe episode 1 return 1.0", "not UTF-8 text"),
                                    ("empty-log", "e.log", "", "holds no episodes")):
        add(Probe(f"episode-interval-{name}", "87.5", "episode_interval.py's input",
                  f"tools/episode_interval.py {file} ({name}): refused in one line (a traceback; an empty log exit 0)",
                  [*episodes, file], setup=None if data is None else write_file(file, data), words=(file, words),
                  fast=name == "checkpoint"))
    bad_references = (("missing", None, "is missing"), ("no-column", "update,steps\n1,2048\n", "has no column"),
                      ("not-a-number", "env_steps,reward_mean_over_runs,reward_min_over_runs,reward_max_over_runs,"
                                       "runs\n2048,high,0,1,10\n", "line 2: not a number"))
    for (tool, args, out), (name, data, words) in itertools.product(
            (("plot", plot, "c.png"), ("run-summary", summary, "s")), bad_references):
        add(Probe(f"{tool}-reference-{name}", "87.5", "a tool's --reference curve",
                  f"{args[0]} --reference ref.csv ({name}): refused in one line (a traceback)",
                  [*args, out, "--reference", "ref.csv"], words=("ref.csv", words),
                  setup=runs() if data is None else all_of(runs(), write_file("ref.csv", data))))
    long_speed = ["tools/core_speed.py", "--cores", "gru", "--lengths", "1", "4096", "--steps", "64", "--repeats",
                  "10", "--hidden", "8", "--workers", "2", "--out", "speed"]  # L = 4096 takes a hundred times longer
    for number in (signal.SIGINT, signal.SIGTERM):
        add(Probe(f"tool-stopped-core-speed-{number.name.lower()}", "87.5", "a stop signal to a tool",
                  f"{number.name} to tools/core_speed.py once it has measured L = 1: one line, exit {128 + number}, "
                  "nothing written (a KeyboardInterrupt traceback; SIGTERM killed it)", long_speed,
                  action=interrupt_after_line([number], long_speed, line="L "), code=(128 + number,), one_line=True,
                  words=(f"stopped by {number.name}",), absent=("repo/speed.*",), serial=True))
    long_learning = ["tools/learning.py", "--config", "long.yaml", "--seeds", "0", "--out", "out"]
    add(Probe("tool-ctrl-c-learning", "87.5", "a stop signal to a tool",
              "Ctrl-C (SIGINT to the group) once tools/learning.py runs a seed's process: the seeds' processes end "
              "with it, one line, exit 130 (KeyboardInterrupt tracebacks from the tool and each seed)", long_learning,
              setup=write_file("long.yaml", "environment:\n  type: PocMemoryEnv\nupdates: 100000\nn_workers: 2\n"
                                            "worker_steps: 16\nn_mini_batch: 1\nhidden_layer_size: 8\n"),
              action=interrupt_once_started(long_learning), code=(130,), one_line=True,
              words=("stopped by SIGINT",), absent=("repo/out",), serial=True))


def interrupt_once_started(args: list[str], number: int = signal.SIGINT):
    """Starts args and sends `number` to its process group (as a terminal's Ctrl-C) once it has a child process."""
    def action(ctx: Ctx) -> Proc:
        proc = ctx.popen(args)
        while not proc.children and proc.process.poll() is None:
            time.sleep(0.02)
        proc.signal(number, group=True)
        proc.wait(120)
        return proc
    return action


def edited_graph(**changes: str):
    """poc.onnx as export.py writes it, then edited.onnx: its metadata's environment changed (type, name) or its
    state_size: a graph of another environment, or metadata edited by hand."""
    def setup(ctx: Ctx):
        import onnx
        done = ctx.run(["export.py", "--model", "models/poc_memory_env.pt", "--out", "poc.onnx"], timeout=300)
        if done.process.returncode != 0:
            raise SetupError(f"export.py exited {done.process.returncode}: {first_line(done)}")
        graph = onnx.load(str(ctx.path("poc.onnx")))
        metadata = {p.key: p.value for p in graph.metadata_props}
        config = json.loads(metadata["config"])
        config["environment"].update((key, value) for key, value in changes.items() if key != "state_size")
        state_size = {"state_size": changes["state_size"]} if "state_size" in changes else {}
        onnx.helper.set_model_props(graph, {**metadata, "config": json.dumps(config), **state_size})
        onnx.save(graph, str(ctx.path("edited.onnx")))
    return setup


def config_pipe(text: str) -> list[str]:
    """python -c arguments that start the script after them with `--config /dev/fd/N`, a pipe holding text (as a
    shell's `--config <(...)` gives it)."""
    return ["-c", "import os, sys; r, w = os.pipe(); os.write(w, sys.argv[1].encode()); os.close(w); "
                  "os.set_inheritable(r, True); "
                  "os.execv(sys.executable, [sys.executable, *sys.argv[2:], '--config', f'/dev/fd/{r}'])", text]


def probes_of_issue_87_loading(add, enjoy, act_prelude) -> None:
    """Issue 87's round: the example without torch checks the graph against its metadata (87.6), the loaders check
    what they use (87.8), and the borderline cases decided (87.b)."""
    example = ["examples/onnx_agent.py", "--model", "edited.onnx", "--episodes", "2"]
    graph = ("repo/poc.onnx", "repo/edited.onnx")
    for name, changes, words in (("another-environment", {"type": "CartPoleMasked"}, ("its graph's obs", "(4,)")),
                                 ("other-actions", {"type": "gym", "name": "Pendulum-v1"}, ("its graph's action",)),
                                 ("state-size-edited", {"state_size": "7"}, ("its graph's state", "state size 7"))):
        add(Probe(f"onnx-example-{name}", "87.6", "examples/onnx_agent.py with a graph that does not fit its metadata",
                  f"poc.onnx, its metadata edited ({', '.join(f'{k} {v}' for k, v in changes.items())}): one line "
                  "naming what does not fit, exit 2 (ONNX Runtime's InvalidArgument traceback, exit 1)", example,
                  setup=edited_graph(**changes), words=words, may_write=graph, timeout=300))
    # 8: what a player uses is checked; what only a resumed run reads, only --resume checks
    def normaliser_of_another_shape(payload):
        import torch
        payload["config"]["normalization"]["observations"] = True
        payload["normalization"]["observations"] = {"mean": torch.zeros(1), "var": torch.ones(1), "count": 1.0}
    load = ("import sys\nfrom agent import Agent\nfrom checkpoint import CheckpointError\ntry:\n"
            "    Agent.load('models/r.pt')\nexcept CheckpointError as error:\n"
            "    print(f'error: {error}', file=sys.stderr)\n    sys.exit(2)\nprint('loaded')\n")
    for script, args in (("enjoy", [*enjoy, "--episodes", "1"]), ("agent-load", ["-c", load]),
                         ("resume", ["train.py", "--resume", "models/r.pt", "--set", "updates=3"])):
        add(Probe(f"crafted-normaliser-shape-{script}", "87.8", "normaliser statistics of another shape",
                  f"models/r.pt with observation normaliser statistics of shape (1,) for 3 features, its digest right: "
                  f"{script} refused in one line naming them (taken, and broadcast)", args,
                  setup=crafted(normaliser_of_another_shape), words=("does not fit", "normaliser mean")))
    add(Probe("crafted-environments-empty-enjoy", "87.8", "a part that only a resumed run reads, edited",
              "models/r.pt with environments: [], its digest right: enjoy.py plays it, exit 0 (decided: a player "
              "never reads the environments' states; --resume refuses it: probe branch-environments-empty)",
              [*enjoy, "--episodes", "1"], setup=crafted(lambda payload: payload.update(environments=[])), code=(0,),
              stdout_has=("1 episodes: return",)))
    # the borderline cases, decided
    B = "87.b"
    def another_programs_zip(ctx: Ctx):
        with zipfile.ZipFile(ctx.path("x.pt"), "w") as archive:
            archive.writestr("notes/hello.txt", "hi")
    for name, setup, words in (
            ("torch-file", lambda ctx: __import__("torch").save({"a": 1}, ctx.path("x.pt")),
             "another program's torch file"),
            ("zip", another_programs_zip, "another program's zip archive")):
        add(Probe(f"another-programs-{name}", B, "another program's .pt",
                  f"enjoy.py --model x.pt, another program's {name.replace('-', ' ')}: refused naming it so (called "
                  "'corrupt, or written by an older version of this project', or 'corrupt checkpoint')",
                  ["enjoy.py", "--model", "x.pt"], setup=setup, words=(words,)))
    onnx_out = ["export.py", "--model", "models/poc_memory_env.pt", "--out", "x.onnx", "--overwrite"]
    for name, setup, what in (("dev-null-link", symlink("x.onnx", "/dev/null"), "a device or socket"),
                              ("fifo", lambda ctx: os.mkfifo(ctx.path("x.onnx")), "a pipe")):
        add(Probe(f"export-overwrite-{name}", B, "export.py --overwrite onto what is no file",
                  f"x.onnx is {what}: export.py --overwrite refused, naming it (replaced by the graph)", onnx_out,
                  setup=setup, words=(what, "replaces only a file")))
    add(Probe("agent-act-previous-action-unused", B, "Agent.act: a previous action the model does not take",
              "the shipped PoC agent (trained without recurrence.previous_action), given previous_action: one "
              "ValueError naming it (ignored in silence)",
              ["-c", act_prelude.format(model="poc_memory_env.pt", width=3, call="agent.act(np.zeros((2, 3), "
                                        "np.float32), state, np.zeros(2, bool), previous_action=ok.actions)")],
              words=("previous_action", "trained without")))
    piped = ["train.py", "--run-id", "p", *TINY]
    add(Probe("config-from-a-pipe", B, "train.py --config <(...)",
              "--config /dev/fd/N, a pipe holding 'gamma: 0.9': trains with it, exit 0 (refused as 'a device, pipe or "
              "socket')", [*config_pipe("gamma: 0.9\n"), *piped], code=(0,), exists=("repo/models/p.pt",),
              check=lambda ctx, proc: None if (load_ok(ctx.path("models/p.pt")) or {}).get("config", {}).get(
                  "gamma") == 0.9 else "models/p.pt does not hold the piped config's gamma 0.9"))
    resume = ["train.py", "--resume", "models/p.pt", "--set", "updates=3"]
    add(Probe("config-from-a-pipe-resumed", B, "train.py --config <(...)",
              "a run trained from a piped config, resumed: it never reads the pipe again (trains to update 3, exit 0)",
              resume, action=then([*config_pipe("gamma: 0.9\n"), *piped], resume), code=(0,),
              may_change=("repo/models/p.pt",), check=checkpoint_update("models/p.pt", 3)))


def evaluation_replayed(train: list[str], enjoy: list[str]):
    """Trains (it must exit 0), then the judged enjoy.py: its closing line's return is the run's last eval."""
    def action(ctx: Ctx) -> Proc:
        run = ctx.run(train)
        logged = [line.split(" eval ")[1].split()[0] for line in run.out if " eval " in line]
        played = ctx.run(enjoy)
        closing = [line for line in played.out if " episodes: return " in line]
        if run.process.returncode != 0 or not logged or not closing:
            ctx.notes.append(f"train.py exited {run.process.returncode} with {len(logged)} evaluations logged; "
                             f"enjoy.py printed {len(closing)} closing lines")
        elif f"return {logged[-1]} " not in closing[-1]:
            ctx.notes.append(f"the run's last evaluation scored {logged[-1]}, enjoy.py: {closing[-1].strip()}")
        return played
    return action


def at_most_one_line(ctx: Ctx, proc: Proc) -> str | None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if len(lines) > 1:
        return f"stderr has {len(lines)} lines (a quiet stop has at most one)"
    return None


def probes_of_issue_87_signals(add, R) -> None:
    """Issue 87's round: the memory refusal's words (87.1), a sweep's trial that can never start (87.3), a closed
    terminal (SIGHUP, 87.7), and the borderline cases decided (87.b)."""
    window = ["--set", "recurrence.layer_type=trxl", "--set", "recurrence.memory_length=65536", "--set",
              "recurrence.hidden_state_size=4096"]
    # 1: the refusal names what takes the memory
    add(Probe("trxl-window-too-large", "87.1", "a rollout that cannot fit, named by what takes it",
              "the issue's command with the largest window, 65,536 steps of width 4,096 (2 TiB): one line "
              "naming the recurrent state stored at each step and recurrence.memory_length (it blamed 'the rollout "
              "of these observations: lower n_workers or worker_steps')",
              ["train.py", "--config", "configs/poc_memory_env.yaml", "--set", "updates=1", *window],
              words=("recurrent state stored at each step", "lower recurrence.memory_length")))
    add(train_refused("image-rollout-too-large", "87.1", "a rollout that cannot fit, named by what takes it",
                      "84x84x3 images, n_workers=64 x worker_steps=10**8: one line naming the observations stored "
                      "at each step, and n_workers or worker_steps", ["--set", "n_workers=64", "--set",
                                                                      "worker_steps=100000000", "--set",
                                                                      "environment.kwargs.image=true"],
                      words=("observations stored at each step", "lower n_workers or worker_steps"), touch="main"))
    # 3: a sweep refuses before Ray what no trial could start with
    sweep = ["sweep.py", "--config", "configs/poc_memory_env.yaml", "--seeds", "1", "--sweep-id", "x"]
    add(Probe("sweep-trxl-window-too-large", "87.3", "a sweep whose trial can never start",
              "the issue's sweep with that window: one line, exit 2, before Ray starts (Ray's 'Trial task "
              "failed' traceback four times, three retries, exit 1)", [*sweep, *window],
              words=("recurrent state stored at each step", "recurrence.memory_length"), absent=("repo/sweeps",)))
    add(Probe("sweep-grid-window-too-large", "87.3", "a sweep whose trial can never start",
              "--grid recurrence.memory_length=64,65536 at width 4,096: refused naming that grid point, before Ray starts",
              [*sweep, "--set", "recurrence.layer_type=trxl", "--set", "recurrence.hidden_state_size=4096", "--grid",
               "recurrence.memory_length=64,65536"],
              words=("--grid recurrence.memory_length=65536", "recurrent state"), absent=("repo/sweeps",)))
    # 7: a closed terminal (SIGHUP) is answered as SIGTERM is
    hup = signal.SIGHUP
    long = ["train.py", "--run-id", "r", *LONG]
    add(Probe("sighup-train-mid-run", "87.7", "SIGHUP (a closed terminal)",
              "SIGHUP to train.py after update 1: the update finishes, models/r.pt saved, exit 129, the line to "
              "resume (it died at once, without saving or a word)", long, action=interrupt_after_line([hup], long),
              code=(129,), stdout_has=("stopped by SIGHUP after update",), check=loads("models/r.pt"), serial=True))
    grouped = ["train.py", "--run-id", "r", *sets(updates=100000, checkpoint_interval=0, worker_processes=2)]
    add(Probe("sighup-train-group-workers", "87.7", "SIGHUP (a closed terminal)",
              "SIGHUP to train.py's process group (as a shell passes on a hangup), 2 worker processes: they keep "
              "serving, the run saves, exit 129, nothing left running", grouped,
              action=interrupt_after_line([hup], grouped, group=True), code=(129,),
              stdout_has=("stopped by SIGHUP after update",), check=loads("models/r.pt"), serial=True))
    nohup = ["-c", "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]
    outlives = [*nohup, "train.py", "--run-id", "r", *sets(updates=4)]
    add(Probe("sighup-train-under-nohup", "87.7", "SIGHUP (a closed terminal)",
              "train.py started with SIGHUP ignored (nohup): a hangup after update 1 changes nothing, the run ends "
              "at update 4, exit 0", outlives, action=interrupt_after_line([hup], outlives, group=True), code=(0,),
              check=checkpoint_update("models/r.pt", 4), serial=True))
    enjoy = ["enjoy.py", "--model", "models/poc_memory_env.pt", "--episodes", "100000"]
    add(Probe("sighup-enjoy-mid-episodes", "87.7", "SIGHUP (a closed terminal)",
              "SIGHUP after enjoy.py's third episode: the summary of the episodes played, exit 129, one line",
              enjoy, action=interrupt_after_line([hup], enjoy, line="episode    3"), code=(129,),
              words=("stopped by SIGHUP",), one_line=True, stdout_has=("(stopped after",), serial=True))
    onnx = ["export.py", "--model", "models/poc_memory_env.pt", "--out"]
    # torch.onnx.export says when it begins (its work takes seconds more): the signal lands inside it on any machine
    announced = ["-c", "import os, runpy, sys, torch\nreal = torch.onnx.export\ndef export(*args, **kwargs):\n"
                       "    os.write(1, b'exporting\\n')  # export.py holds sys.stdout meanwhile\n"
                       "    return real(*args, **kwargs)\n"
                       "torch.onnx.export = export\nsys.argv = sys.argv[1:]\n"
                       "runpy.run_path('export.py', run_name='__main__')\n", *onnx, "a.onnx"]
    add(Probe("sighup-export-mid-export", "87.7", "SIGHUP (a closed terminal)",
              "SIGHUP once torch.onnx.export has begun: exit 129, 'during the export', no file", announced,
              action=interrupt_after_line([hup], announced, line="exporting"), code=(129,),
              words=("stopped by SIGHUP during the export",), one_line=True, absent=("repo/a.onnx",), serial=True,
              timeout=300))
    example = ["examples/onnx_agent.py", "--model", "poc.onnx", "--episodes", "100000"]
    add(Probe("sighup-onnx-example", "87.7", "SIGHUP (a closed terminal)",
              "SIGHUP after examples/onnx_agent.py's third episode: exit 129, one line", example,
              action=then_interrupted([*onnx, "poc.onnx"], example, hup, "episode    3"), code=(129,),
              words=("stopped by SIGHUP",), one_line=True, may_write=("repo/poc.onnx",), serial=True, timeout=300))
    trials = ["sweep.py", "--config", "configs/poc_memory_env.yaml", "--sweep-id", "s",
              *sets(updates=100000, checkpoint_interval=1)]
    add(Probe("sighup-sweep-running", "87.7", "SIGHUP (a closed terminal)",
              "SIGHUP to the sweep's process group once its trial has a checkpoint: the trials stop there, exit "
              "129 with the line to resume, no Ray process left (the driver died at once, Ray's processes lived "
              "73-100 s more)", trials, action=hangup_once_checkpointed(trials), code=(129,), one_line=False,
              stdout_has=("stopped with 0 of 1 trials finished; resume with",), serial=True, timeout=300,
              may_write=("repo/sweeps/*", "repo/summaries/*")))
    # the borderline cases, decided
    B = "87.b"
    add(Probe("precision-auto-said", B, "which precision auto picked",
              "--set precision=auto: the start line names the precision in use, config.json records it in place "
              "of auto (neither said it)", ["train.py", "--run-id", "p", *TINY, "--set", "precision=auto"],
              code=(0,), check=precision_recorded))
    killed = ["train.py", "--run-id", "r", *sets(updates=100000, checkpoint_interval=2)]
    resumed = ["train.py", "--resume", "models/r.pt", "--set", "updates=4"]
    add(Probe("resume-after-sigkill-tensorboard", B, "TensorBoard after a resume from a hard kill",
              "SIGKILL to train.py once its events hold update 3 (its checkpoint is update 2's), then --resume to "
              "update 4: each update once in TensorBoard's events, purges applied (update 3 twice)", resumed,
              action=killed_then_resumed(killed, resumed), code=(0,), check=one_point_per_update, serial=True,
              may_change=("repo/models/r.pt", "repo/summaries/*")))


def then_interrupted(first: list[str], second: list[str], number: int, line: str):
    """Runs `first` (it must exit 0), then starts `second` and sends it `number` once stdout has `line`."""
    def action(ctx: Ctx) -> Proc:
        done = ctx.run(first, timeout=300)
        if done.process.returncode != 0:
            ctx.notes.append(f"`{shlex.join(first)}` exited {done.process.returncode}: {first_line(done)}")
        return interrupt_after_line([number], second, line=line)(ctx)
    return action


def hangup_once_checkpointed(args: list[str]):
    """A sweep, SIGHUP to its process group once its trial has a checkpoint (sweeps/s/models/seed0.pt)."""
    def action(ctx: Ctx) -> Proc:
        proc = ctx.popen(args)
        while proc.process.poll() is None and not ctx.path("sweeps/s/models/seed0.pt").exists():
            time.sleep(0.05)
        proc.signal(signal.SIGHUP, group=True)
        proc.wait(180)
        return proc
    return action


def killed_then_resumed(killed: list[str], resumed: list[str]):
    """`killed` gets SIGKILL (to its group) once its events file holds update 3 (its checkpoint is update 2's);
    then the judged `resumed` runs."""
    def action(ctx: Ctx) -> Proc:
        first = ctx.popen(killed)
        while first.process.poll() is None and 3 not in board_steps(ctx.path("summaries/r"), purged=False):
            time.sleep(0.05)
        first.signal(signal.SIGKILL, group=True)
        if first.wait(30) != -signal.SIGKILL:
            ctx.notes.append(f"the run to kill ended first: exit {first.process.returncode}")
        return ctx.run(resumed)
    return action


def board_steps(summaries: Path, purged: bool = True) -> list[int]:
    """The steps of time/env_steps in a run's events files, read in TensorBoard's order; with `purged`, those a
    later writer's purge_step drops (a SessionLog START at step s hides the earlier events from s on) left out."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.compat.proto.event_pb2 import SessionLog
    steps = []
    for file in sorted(summaries.glob("*/events.out.tfevents.*")):
        for event in EventFileLoader(str(file)).Load():
            if purged and event.session_log.status == SessionLog.START:
                steps = [step for step in steps if step < event.step]
            elif any(value.tag == "time/env_steps" for value in event.summary.value):
                steps.append(event.step)
    return steps


def one_point_per_update(ctx: Ctx, proc: Proc) -> str | None:
    steps = board_steps(ctx.path("summaries/r"))
    return None if steps == [1, 2, 3, 4] else f"TensorBoard shows the steps {steps}, expected 1, 2, 3, 4 once each"


def precision_recorded(ctx: Ctx, proc: Proc) -> str | None:
    recorded = [json.loads(c.read_text())["precision"] for c in ctx.path("summaries/p").rglob("config.json")]
    said = [line for line in proc.out if line.startswith("training p on cpu in ")]
    if recorded not in (["float32"], ["bfloat16"]):
        return f"config.json records the precision {recorded}, expected the one in use"
    if not said or not said[0].startswith(f"training p on cpu in {recorded[0]} ("):
        return f"the start line does not name {recorded[0]}: {said[0].strip() if said else '(none)'}"
    return None


PROBES = build_probes()


# ------------------------------------------------------------------ reports

def totals(results: list[Result]) -> dict:
    return {
        "probes": len(results),
        "kinds": len({r.kind for r in results}),
        "right": sum(r.verdict == "right" for r in results),
        "wrong": sum(r.verdict == "wrong" for r in results),
        "skipped": sum(r.verdict == "skipped" for r in results),
        "tracebacks": sum("traceback" in r.reasons for r in results),
        "lost_or_overwritten_files": sum(bool(r.changed) for r in results),
        "written_where_not_allowed": sum(bool(r.written) for r in results),
        "leftover_processes": sum(r.leftover_processes for r in results),
        "leftover_tmp_files": sum(len(r.leftover_tmp) for r in results),
    }


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(results: list[Result], summary: dict, command: str) -> str:
    lines = ["# Probes: the scripts tried as a new, a careless and a hostile user would", "",
             f"Made by `{command}` (tests/probes.py; each probe's folder is `$PROBE`, the repository copy "
             "`$PROBE/repo`, the working folder unless said otherwise).", "",
             "| probes | kinds | right | wrong | skipped | tracebacks | lost or overwritten files | written where not "
             "allowed | processes left | *.tmp left |", "|---|---|---|---|---|---|---|---|---|---|",
             "| " + " | ".join(str(summary[k]) for k in ("probes", "kinds", "right", "wrong", "skipped", "tracebacks",
                                                         "lost_or_overwritten_files", "written_where_not_allowed",
                                                         "leftover_processes", "leftover_tmp_files")) + " |", "",
             "## Every probe", "", "| probe | point | exit | first line | verdict |", "|---|---|---|---|---|"]
    for r in results:
        verdict = r.verdict if r.verdict != "wrong" else "**wrong**: " + "; ".join(r.reasons)
        if r.verdict == "skipped":
            verdict += ": " + "; ".join(r.reasons)
        code = f"{r.code} ({r.killed_by})" if r.killed_by else str(r.code)
        lines.append(f"| {r.name} | {r.point} | {code} | `{cell(r.first_line[:140])}` | {cell(verdict)} |")
    wrong = [r for r in results if r.verdict == "wrong"]
    if wrong:
        lines += ["", "## Wrong outcomes, by issue point", ""]
        for point in sorted({r.point for r in wrong}, key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0)):
            lines += [f"### Point {point}", ""]
            for r in (r for r in wrong if r.point == point):
                lines += [f"- **{r.name}** ({r.kind}): {r.what}",
                          f"  - command: `{r.command}`",
                          f"  - happened: exit {r.code}{f' (killed by {r.killed_by})' if r.killed_by else ''}, "
                          f"first line `{cell(r.first_line[:200])}`",
                          f"  - wrong because: {'; '.join(r.reasons)}",
                          f"  - expected: {r.expected}"]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------ main

def select(args) -> list[Probe]:
    chosen = PROBES
    if args.fast:
        chosen = [p for p in chosen if p.fast]
    if args.only:
        points = set(args.only.split(","))
        chosen = [p for p in chosen if p.point in points]
    if args.name:
        chosen = [p for p in chosen if args.name in p.name]
    return chosen


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="issue points, comma-separated: 1 .. 12, 23.2, 42.1 .. 42.10, 42.b, "
                        "58.2 .. 58.10, 58.b, 72.1 .. 72.10, 72.r, 72.b, 87.1 .. 87.8, 87.b, extra")
    parser.add_argument("--fast", action="store_true", help="the subset tests/test_probes.py runs")
    parser.add_argument("--name", help="probes whose name holds this")
    parser.add_argument("--jobs", type=int, default=1, help="probes at once (serial ones always run alone)")
    parser.add_argument("--md", help="write the markdown report here (default for a full run: results/probes.md)")
    parser.add_argument("--json", help="write the json report here (default for a full run: results/probes.json)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders (their path is printed)")
    parser.add_argument("--list", action="store_true", help="list the chosen probes and stop")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each probe's stdout and stderr")
    args = parser.parse_args(argv)
    # Every script starts with SIGINT and SIGTERM at their defaults, as a terminal's foreground job does,
    # however this harness was started: a background job of a shell without job control has SIGINT
    # ignored, and its children would inherit that. The probe that starts a script with SIGINT ignored
    # does so itself (ctrl-c-enjoy-sigint-ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    probes = select(args)
    if not probes:
        print("no probe matches", file=sys.stderr)
        return 2
    if args.list:
        for p in probes:
            print(f"{p.name:45s} {p.point:>5s}  {p.kind}")
        print(f"{len(probes)} probes, {len({p.kind for p in probes})} kinds")
        return 0
    full = not (args.fast or args.only or args.name)
    md = args.md or (ROOT / "results/probes.md" if full else None)
    js = args.json or (ROOT / "results/probes.json" if full else None)

    base = Path(tempfile.mkdtemp(prefix="probes-"))
    fixtures = Fixtures(base)
    results: dict[str, Result] = {}
    print_lock = threading.Lock()

    def one(p: Probe):
        result = run_probe(p, base, fixtures)
        results[p.name] = result
        with print_lock:
            mark = {"right": "ok   ", "wrong": "WRONG", "skipped": "skip "}[result.verdict]
            print(f"{mark} {p.name:45s} exit {str(result.code):4s} {result.seconds:5.1f}s  "
                  f"{result.first_line[:90]}", flush=True)
            if result.verdict != "right":
                print(f"      {'; '.join(result.reasons)}", flush=True)
            if args.verbose:
                print("      stdout: " + result.stdout.replace("\n", "\n              "))
                print("      stderr: " + result.stderr.replace("\n", "\n              "), flush=True)
        if not args.keep:
            shutil.rmtree(base / p.name, ignore_errors=True)

    start = time.monotonic()
    try:
        parallel = [p for p in probes if not p.serial]
        if args.jobs > 1:
            with ThreadPoolExecutor(args.jobs) as pool:
                list(pool.map(one, parallel))
        else:
            for p in parallel:
                one(p)
        for p in probes:
            if p.serial:
                one(p)
    finally:
        if args.keep:
            print(f"scratch folders kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    ordered = [results[p.name] for p in probes]
    summary = totals(ordered)
    summary["seconds"] = round(time.monotonic() - start, 1)
    command = "python tests/probes.py" + (f" --jobs {args.jobs}" if args.jobs > 1 else "")
    if md:
        Path(md).write_text(markdown(ordered, summary, command))
    if js:
        Path(js).write_text(json.dumps({"command": command, "totals": summary,
                                        "probes": [{k: v for k, v in vars(r).items()} for r in ordered]},
                                       indent=1) + "\n")
    print(f"{summary['probes']} probes of {summary['kinds']} kinds: {summary['right']} right, {summary['wrong']} "
          f"wrong, {summary['skipped']} skipped; tracebacks {summary['tracebacks']}, lost or overwritten files "
          f"{summary['lost_or_overwritten_files']}, written where not allowed "
          f"{summary['written_where_not_allowed']}, processes left {summary['leftover_processes']}, *.tmp left "
          f"{summary['leftover_tmp_files']} ({summary['seconds']} s)")
    return 1 if summary["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
