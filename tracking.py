"""Experiment tracking for `train.py --track` and `sweep.py --track`: the run's resolved config, its git commit and
every scalar summaries.py writes to TensorBoard, under the same names, sent to Weights & Biases (docs/tracking.md).
Tracking never costs the run: a tracker that cannot start or send says so in one line, and training goes on."""
import contextlib
import hashlib
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from plumbing import stopping
from plumbing.errors import ConfigError
from plumbing.files import reason, writable

ROOT = Path(__file__).resolve().parent


@dataclass
class Tracking:
    """Where a run is tracked; None: wandb's own default (its WANDB_* environment variables, then its settings)."""
    project: str = "recurrent-ppo"
    entity: str | None = None  # a W&B user or team
    name: str | None = None  # the run's display name (train.py: the run id; sweep.py: the trial's name)
    group: str | None = None  # sweep.py: the sweep id, which groups its trials


def add_flags(parser, run: str) -> None:
    """--track and its --wandb-* settings, on train.py's or sweep.py's parser; `run` says what a W&B run is there."""
    parser.add_argument("--track", action="store_true", help=f"send {run} to Weights & Biases too: the config, the "
                        "git commit and every TensorBoard scalar; WANDB_MODE=offline keeps it on this machine for "
                        "`wandb sync`. If W&B fails, one line says so and training goes on (docs/tracking.md)")
    parser.add_argument("--wandb-project", metavar="NAME", help=f"with --track: the project ({Tracking.project})")
    parser.add_argument("--wandb-entity", metavar="NAME", help="with --track: the W&B user or team (default: yours)")


def from_flags(args, name: str | None = None) -> Tracking | None:
    """--track's settings, or None; a --wandb-* flag without --track is refused (it would do nothing)."""
    given = [f"--{key.replace('_', '-')}" for key, value in vars(args).items()
             if key.startswith("wandb_") and value is not None]
    if given and not args.track:
        raise ConfigError(f"{', '.join(given)} is for --track: add --track, or leave it out")
    return Tracking(args.wandb_project or Tracking.project, args.wandb_entity, name) if args.track else None


def git_commit() -> str | None:
    """The checkout's commit, with "-dirty" when tracked files differ from it; None outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "") if head.returncode == 0 else None


def _warn(what: str) -> str:
    print(f"warning: tracking is off: {what}; the run trains on with TensorBoard", file=sys.stderr, flush=True)
    return what


@contextlib.contextmanager
def _quiet_logging():
    """No traceback per record that wandb's log file fails to write (a full disk): wandb's own error says it once."""
    raising, logging.raiseExceptions = logging.raiseExceptions, False
    try:
        yield
    finally:
        logging.raiseExceptions = raising


class Tracker:
    """One W&B run; log() and finish() turn it off in one line if W&B fails, `off` saying why (a sweep says it)."""

    def __init__(self, run, off: str | None = None):
        self._run, self.off = run, off

    def log(self, scalars: dict[str, float], step: int) -> None:
        if self._run is not None:
            try:
                with _quiet_logging():
                    self._run.log(scalars, step=step)
            except Exception as error:  # wandb's own failures come in many types
                self._run = None
                self.off = _warn(f"W&B stopped taking the scalars ({reason(error)})")

    def finish(self) -> None:
        if self._run is not None:
            run, self._run = self._run, None
            try:
                with _quiet_logging():
                    run.finish()
                    import wandb
                    wandb.teardown()  # its service process would outlive the run here (a sweep's trial worker)
            except Exception as error:
                self.off = _warn(f"W&B could not finish the run ({reason(error)})")


def wandb_id(folder: Path) -> str:
    """The W&B run id of the run whose summaries are in `folder`, from its last three parts (summaries/<run-id>/<start
    time>, a sweep's <sweep-id>/<trial>/<start time>): a resume keeps them, also in a checkout moved elsewhere."""
    return hashlib.sha256("/".join(Path(folder).resolve().parts[-3:]).encode()).hexdigest()[:16]


def start(tracking: Tracking, config: dict, folder: Path) -> Tracker:
    """A W&B run for the run whose summaries are in `folder` (its files go to folder/wandb); a tracker that is off
    if it cannot start. A resumed run continues its W&B run (wandb_id)."""
    os.environ.setdefault("WANDB_SILENT", "true")  # its banners and login notes: our one line says where it goes
    if problem := writable(Path(folder) / "wandb"):
        return Tracker(None, _warn(f"W&B did not start ({Path(folder) / 'wandb'}: {problem})"))
    try:
        import wandb
        with stopping.blocked(), _quiet_logging():  # its service process: a Ctrl-C to the terminal is ours to answer
            run = wandb.init(
                project=tracking.project, entity=tracking.entity, name=tracking.name, group=tracking.group,
                id=wandb_id(folder), resume="allow", dir=str(folder), config={**config, "git_commit": git_commit()},
                # wandb's console capture would wrap stdout under our own line per update
                settings=wandb.Settings(console="off", silent=True))
    except Exception as error:  # no login, no network, a bad entity: each raises its own type
        off = _warn(f"W&B did not start ({reason(error)})")
        if "wandb" in sys.modules:  # the service process it started
            with _quiet_logging():
                sys.modules["wandb"].teardown()
        return Tracker(None, off)
    if run.disabled:  # WANDB_MODE=disabled or `wandb disabled`: a run that records nothing
        wandb.teardown()  # its settings, kept for the next start in this process (a test's)
        return Tracker(None, _warn("W&B is disabled here (WANDB_MODE=disabled or `wandb disabled`)"))
    folder = Path(run.dir).parent
    where = f"offline in {folder} (upload it with: wandb sync {folder})" if run.offline else run.url
    print(f"tracking with W&B: {where}", flush=True)
    return Tracker(run)
