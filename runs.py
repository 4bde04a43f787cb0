"""train.py's run safety: the run id, what a run starts from (a config, or a checkpoint it resumes or branches), its
claim on its files before it trains, and the words a failed or stopped run ends with: the checkpoint it kept."""
import re
import signal
from datetime import datetime
from pathlib import Path

from checkpoint import RunLock, load_checkpoint, same_checkpoint
from config import check_resume_overrides, config_from_dict, load_config
from plumbing.errors import CheckpointError, ConfigError
from plumbing.files import kind, reason, writable

MODELS, SUMMARIES = Path("models"), Path("summaries")
DEFAULT_CONFIG = "configs/poc_memory_env.yaml"
MAX_RUN_ID = 200  # characters: a run id becomes file and folder names, with suffixes and a time stamp


def check_run_id(run_id, what: str) -> None:
    """A run (or sweep) id names models/<run-id>.pt, .lock, -best.pt and summaries/<run-id>/: a plain name."""
    if not isinstance(run_id, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", run_id):
        rule = "letters, digits, '.', '_' and '-', starting with a letter or digit (no folders)"
    elif len(run_id) > MAX_RUN_ID:
        rule = f"at most {MAX_RUN_ID} characters, not {len(run_id)}"
    elif run_id.endswith((".pt", ".lock")):
        rule = "a run id, not a file name (the files made from it are models/<run-id>.pt and .lock): drop the suffix"
    elif run_id.endswith("-best"):
        rule = "names ending in '-best' are those of the best evaluation's checkpoint (models/<run-id>-best.pt)"
    else:
        return
    raise ConfigError(f"{what} {run_id!r} is not allowed: {rule}")


def default_run_id(config: str | Path) -> str:
    """The config's name and the time, in a run id's characters (a file name may hold any)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(config).stem).lstrip("._-") or "run"
    return f"{name[:MAX_RUN_ID - 16]}-{datetime.now():%Y%m%d-%H%M%S}"


def read_run(args):
    """(config, run id, checkpoint or None) from train.py's command line; refuses bad input."""
    if args.run_id is not None:
        check_run_id(args.run_id, "--run-id")
    if not args.resume:
        path = args.config or DEFAULT_CONFIG  # no argparse default: --resume refuses a --config that was given
        config = load_config(path, args.set)
        config.seed = config.seed if args.seed is None else args.seed
        return config, default_run_id(path) if args.run_id is None else args.run_id, None
    if given := [flag for flag, value in (("--config", args.config), ("--seed", args.seed)) if value is not None]:
        raise ConfigError(f"{', '.join(given)} cannot be combined with --resume (the checkpoint holds them)")
    checkpoint = load_checkpoint(args.resume)
    if not checkpoint.get("resumable"):
        raise CheckpointError(f"{args.resume} holds the model only (exported with --inference-only): it cannot "
                              "resume training; resume from the run's own checkpoint")
    check_run_id(checkpoint["run_id"], f"{args.resume}'s run_id")
    if args.run_id is not None and args.run_id != checkpoint["run_id"]:
        checkpoint = {**checkpoint, "branch_of": checkpoint["run_id"], "run_id": args.run_id,
                      "summaries_path": None, "best": None}
    summaries = checkpoint["summaries_path"]  # None for a branch: it writes a new folder, wherever its source wrote
    if summaries is not None and not Path(summaries).resolve().is_relative_to(SUMMARIES.resolve()):
        raise CheckpointError(f"{args.resume} keeps its summaries in {summaries}, outside {SUMMARIES}/ here: resume "
                              "it from the folder its run started in")
    config = config_from_dict(checkpoint["config"], args.set)
    check_resume_overrides(checkpoint["config"], config)
    if config.updates <= checkpoint["update"]:
        raise ConfigError(f"{args.resume} is at update {checkpoint['update']} of updates {config.updates}: "
                          "nothing to resume (raise it, e.g. --set updates=...)")
    return config, checkpoint["run_id"], checkpoint


def claim(lock: RunLock, run_id: str, checkpoint: dict | None, resume: str | None, overwrite: bool) -> Path | None:
    """Refuses a run that could not save or would replace a checkpoint it did not start from, after taking the run
    id's lock (the caller releases it). Returns the best evaluation that --overwrite replaces, or None."""
    resume = None if checkpoint and "branch_of" in checkpoint else resume  # a branch is a new run
    for folder in (MODELS, SUMMARIES):
        if problem := writable(folder):
            raise ConfigError(f"{folder}/ is not writable ({problem}): the run could not save its work")
    lock.acquire()
    target, best = MODELS / f"{run_id}.pt", MODELS / f"{run_id}-best.pt"
    for path in (target, best):  # a save would fail there only once the run had trained
        if (what := kind(path)) == "a folder":
            raise CheckpointError(f"{path} is a folder, where the run would save a checkpoint: move it away, "
                                  "or choose another --run-id")
        if what not in ("a file", "missing") and not overwrite:  # a dangling link or a loop: a save replaces it
            raise CheckpointError(f"{path} is {what}: move it away, or choose another --run-id (or pass "
                                  "--overwrite to replace it)")
    if (what := kind(SUMMARIES / run_id)) not in ("a folder", "missing"):
        raise CheckpointError(f"{SUMMARIES / run_id} is {what}, where the run would write its summaries: move it "
                              "away, or choose another --run-id")
    if target.exists() and not overwrite and (resume is None or not same_checkpoint(resume, target)):
        if resume is None:
            raise CheckpointError(f"{target} exists: continue it with --resume {target}, or choose another "
                                  "--run-id (or pass --overwrite to replace it)")
        raise CheckpointError(f"{target} is not the checkpoint being resumed ({resume}) and would be replaced: "
                              f"resume from {target} (the run's newest), or pass --overwrite")
    if not best.exists():
        return None
    recorded = checkpoint and checkpoint.get("best")  # the best evaluation of the run being resumed
    try:
        saved = recorded and load_checkpoint(best)
    except CheckpointError:
        if not overwrite:
            raise
        saved = None  # unreadable: --overwrite replaces it all the same
    own = bool(saved) and saved["run_id"] == run_id and saved["update"] == recorded["update"]
    if not own and not overwrite:
        raise CheckpointError(f"{best} exists and is not this run's best evaluation: choose another --run-id "
                              "(or pass --overwrite to replace it)")
    return None if own else best


def kept(trainer) -> str:
    """What a failed or stopped run leaves: its last good checkpoint."""
    if trainer is None or trainer.saved_update is None:
        return "no checkpoint was saved in this run"
    return f"the last good checkpoint is {trainer.checkpoint_path} (update {trainer.saved_update})"


def failure(trainer, error: Exception) -> str:
    """The line of a run that failed while it trained: what failed, and its last good checkpoint."""
    if isinstance(error, OSError):  # e.g. summaries on a full disk
        error = f"could not write {error.filename or trainer.summaries.path} ({reason(error)})"
    elif isinstance(error, CheckpointError):  # a save that failed: its line says what happened to the last one
        other = getattr(error, "path", None) != trainer.checkpoint_path  # e.g. models/<run-id>-best.pt
        return f"{error}; {kept(trainer)}" if other and trainer.saved_update is not None else str(error)
    return f"{error}; {kept(trainer)}"


def stopped(trainer) -> str:
    """The line of a run that a stop signal ended after an update: what it saved, and how to go on."""
    name, path = signal.Signals(trainer.stop_signal).name, trainer.checkpoint_path
    if trainer.update < trainer.config.updates:
        return (f"stopped by {name} after update {trainer.update}; saved {path}; resume with: "
                f"python train.py --resume {path}")
    return (f"stopped by {name} after the last update ({trainer.update}): the run is complete; saved {path} "
            f"(to train on: python train.py --resume {path} --set updates=N)")  # a plain resume would be refused
