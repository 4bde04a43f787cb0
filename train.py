"""Trains a recurrent PPO agent from the command line: `python train.py --help` says how."""
from __future__ import annotations

import signal

from plumbing import script

script.begin(__name__)  # the imports below take seconds

import re
from datetime import datetime
from pathlib import Path

from checkpoint import RunLock, fitted, load_checkpoint, same_checkpoint
from config import SEEDS, check_resume_overrides, config_from_dict, load_config
from plumbing.cli import ArgumentParser, failed, number
from plumbing.errors import CheckpointError, ConfigError, NonFiniteError, WorkerError
from plumbing.files import kind, reason, writable
from spaces import SpaceError
import tracking

MODELS, SUMMARIES = Path("models"), Path("summaries")
DEFAULT_CONFIG = "configs/poc_memory_env.yaml"
MAX_RUN_ID = 200  # characters: a run id becomes file and folder names, with suffixes and a time stamp


def parser() -> ArgumentParser:
    parser = ArgumentParser(description="Train a recurrent PPO agent.", epilog=(
        "Ctrl-C (SIGINT), SIGTERM or SIGHUP finishes the current update, saves and exits 130, 143 or 129; a "
        "second one stops at once without saving. Exit codes: 0 done, 1 the run failed (the last good "
        f"checkpoint is kept), 2 refused before starting (bad config, flag or file), {script.STOPPED}."))
    parser.add_argument("--config", metavar="PATH", help=f"the yaml config to train (default: {DEFAULT_CONFIG})")
    parser.add_argument("--run-id", metavar="NAME", help="names models/<run-id>.pt and summaries/<run-id>/<time>: "
                        "letters, digits, '.', '_' and '-' (default: the config's name and the start time)")
    parser.add_argument("--seed", type=number(int, 0, SEEDS - 1), help="the run seed; overrides the config's seed")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU even when a GPU is available")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                        help="override one config key, e.g. --set recurrence.sequence_length=16 (repeatable)")
    parser.add_argument("--resume", metavar="CHECKPOINT", help="continue a run from its checkpoint (its config, run "
                        "id, seed and summaries); overrides apply (e.g. a larger updates) unless they change the "
                        "model or the environments. With --run-id, a branch: a new run from where the checkpoint "
                        "stands, with its own files, leaving the checkpoint's run as it was")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing models/<run-id>.pt (never done without this flag)")
    tracking.add_flags(parser, "the run")
    parser.add_argument("--wandb-name", metavar="NAME", help="with --track: the W&B run's name (default: the run id)")
    return parser


def resolve_device(requested: str, force_cpu: bool) -> str:
    import torch
    if force_cpu:
        return "cpu"
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"config key 'device' = {requested!r} is not allowed: no GPU is available here "
                          "(use auto or cpu, or pass --cpu)")
    return requested


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
    """(config, run id, checkpoint or None) from the command line; refuses bad input."""
    if not args.resume:
        path = args.config or DEFAULT_CONFIG  # no argparse default: --resume refuses a --config that was given
        config = load_config(path, args.set)
        config.seed = config.seed if args.seed is None else args.seed
        run_id = default_run_id(path) if args.run_id is None else args.run_id
        check_run_id(run_id, "--run-id")
        return config, run_id, None
    given = [flag for flag, value in (("--config", args.config), ("--seed", args.seed)) if value is not None]
    if given:
        raise ConfigError(f"{', '.join(given)} cannot be combined with --resume (the checkpoint holds them)")
    if args.run_id is not None:
        check_run_id(args.run_id, "--run-id")
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
    """Refuses a run that could not save or would replace a checkpoint it did not start from (its own, or its
    best evaluation's); takes the run id's lock first (the caller releases it). Returns the best evaluation
    of the run that --overwrite replaces, for the caller to remove once the run starts, or None."""
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
    try:
        own = is_own_best(best, run_id, checkpoint)
    except CheckpointError:
        if not overwrite:
            raise
        own = False  # unreadable: --overwrite replaces it all the same
    if not own and not overwrite:
        raise CheckpointError(f"{best} exists and is not this run's best evaluation: choose another --run-id "
                              "(or pass --overwrite to replace it)")
    return None if own else best


def is_own_best(best: Path, run_id: str, checkpoint: dict | None) -> bool:
    """Whether `best` is the best evaluation of the run `checkpoint` continues: the one it recorded."""
    recorded = checkpoint and checkpoint.get("best")
    if not recorded:
        return False
    saved = load_checkpoint(best)
    return saved["run_id"] == run_id and saved["update"] == recorded["update"]


def main(argv=None) -> int:
    run = {}  # what start() made, for the signals and the end to find

    def start():
        args = parser().parse_args(argv)
        config, run_id, checkpoint = read_run(args)
        track = tracking.from_flags(args, args.wandb_name or run_id)
        device = resolve_device(config.device, args.cpu)
        resume = None if checkpoint and "branch_of" in checkpoint else args.resume  # a branch is new
        run["lock"] = RunLock(MODELS / f"{run_id}.lock")
        replaced_best = claim(run["lock"], run_id, checkpoint, resume, args.overwrite)
        from trainer import Trainer
        try:
            run["trainer"] = trainer = Trainer(config, run_id=run_id, device=device, summaries_dir=SUMMARIES,
                                               models_dir=MODELS, tracking=track,
                                               summaries_path=checkpoint and checkpoint["summaries_path"])
            if checkpoint:
                with fitted(args.resume):
                    trainer.load_state_dict(checkpoint)
                if "branch_of" in checkpoint:  # its own checkpoint is not written yet
                    trainer.saved_update = None
        except WorkerError as error:  # an environment that failed as the run started
            raise script.Failed(f"{error}; {script.kept(None, None)}") from None
        if replaced_best is not None:  # else enjoy.py would score the replaced run's model under this id
            replaced_best.unlink(missing_ok=True)
            print(f"removed {replaced_best}, the best evaluation of the run --overwrite replaces", flush=True)
        return trainer, checkpoint

    def finish_update(signum: int) -> None:  # the run's first stop signal
        run["trainer"].stop_signal = signum
        run["trainer"].summaries.say(f"\n{signal.Signals(signum).name}: finishing this update, then saving (send "
                                     "it again to stop at once)")

    def close() -> None:
        if "trainer" in run:
            run["trainer"].close()
        if "lock" in run:
            run["lock"].release()
    return script.life(start, lambda started: train(*started), (SpaceError,), finish_update,
                       lambda: f" at once, without saving; {last_checkpoint(run.get('trainer'))}",
                       leaving=lambda: "lock" in run and run["lock"].release(), close=close)


def last_checkpoint(trainer) -> str:
    return script.kept(trainer and trainer.checkpoint_path, trainer and trainer.saved_update)


def train(trainer, checkpoint: dict | None) -> int:
    if checkpoint:
        source = f" from {checkpoint['branch_of']}" if "branch_of" in checkpoint else ""
        print(f"{'branching' if source else 'resuming'} {trainer.run_id}{source} at update {trainer.update}/"
              f"{trainer.config.updates}", flush=True)
    threads = f"{trainer.threads} torch thread{'s' * (trainer.threads > 1)}"
    if trainer.config.torch_threads > trainer.threads:
        threads += f"; the {trainer.config.torch_threads} asked for are more than the cores here"
    print(f"training {trainer.run_id} on {trainer.device} in {trainer.machine.precision_used} ({threads}); "
          f"summaries in {trainer.summaries.path}", flush=True)
    try:
        trainer.run()
    except CheckpointError as error:  # a save that failed: the line says what happened to the last one
        other = getattr(error, "path", None) != trainer.checkpoint_path  # e.g. models/<run-id>-best.pt
        return failed(f"{error}; {last_checkpoint(trainer)}" if other and trainer.saved_update is not None
                      else error, 1)
    except (WorkerError, NonFiniteError, OSError) as error:
        if isinstance(error, OSError):  # e.g. summaries on a full disk
            error = f"could not write {error.filename or trainer.summaries.path} ({reason(error)})"
        return failed(f"{error}; {last_checkpoint(trainer)}", 1)
    if trainer.stop_signal is not None:
        name, path = signal.Signals(trainer.stop_signal).name, trainer.checkpoint_path
        if trainer.update < trainer.config.updates:
            print(f"stopped by {name} after update {trainer.update}; saved {path}; resume with: "
                  f"python train.py --resume {path}", flush=True)
        else:  # a plain resume would be refused: nothing is left to do
            print(f"stopped by {name} after the last update ({trainer.update}): the run is complete; saved {path} "
                  f"(to train on: python train.py --resume {path} --set updates=N)", flush=True)
        return 128 + trainer.stop_signal
    print(f"saved {trainer.checkpoint_path}")
    return 0


if __name__ == "__main__":
    script.run(main, quick_exit=True)
