"""Trains a recurrent PPO agent from the command line: `python train.py --help` prints USAGE."""
from __future__ import annotations

import os
import signal
import sys

import stopping

if __name__ == "__main__":
    stopping.leave_at_once_on_stop_signals()  # until main() takes over: the imports below take seconds

import re
from datetime import datetime
from pathlib import Path

from checkpoint import (CheckpointError, RunLock, fitted, load_checkpoint, require_resumable,
                        restore, same_checkpoint)
from cli import Stdout, check_name, command_line, failed, reason, start_up_warnings, writable
from config import ConfigError, check_resume_overrides, config_from_dict, load_config
from spaces import SpaceError
from worker import WorkerError

USAGE = """Train a recurrent PPO agent.

Usage:
  train.py [options] [--set=<kv>]...
  train.py --help

Options:
  --config=<path>         The yaml config to train [default: configs/poc_memory_env.yaml].
  --run-id=<name>         Names models/<run-id>.pt and summaries/<run-id>/<time>: letters, digits,
                          '.', '_' and '-'. Default: the config's name and the start time.
  --seed=<n>              The run seed (0 <= n < 2**32); overrides the config's seed.
  --cpu                   Train on the CPU even when a GPU is available.
  --set=<kv>              Override one config key, e.g. --set recurrence.sequence_length=16 (repeatable).
  --resume=<checkpoint>   Continue a run from its checkpoint (its config, run id, seed and summaries);
                          overrides apply (e.g. a larger updates) unless they change the model or the
                          environments. With --run-id, a branch: a new run from where the checkpoint
                          stands, with its own files, leaving the checkpoint's run as it was.
  --overwrite             Replace an existing models/<run-id>.pt (never done without this flag).

Ctrl-C (SIGINT) or SIGTERM finishes the current update, saves and exits 130 or 143; a second one
stops at once without saving. Exit codes: 0 done, 1 the run failed (the last good checkpoint is
kept), 2 refused before starting (bad config, flag or file), 130 / 143 stopped by a signal.
"""

MODELS, SUMMARIES = Path("models"), Path("summaries")


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
    """A run id names models/<run-id>.pt, .lock, -best.pt and summaries/<run-id>/: never one of those names."""
    check_name(run_id, what)
    if run_id.endswith((".pt", ".lock")):
        raise ConfigError(f"{what} {run_id!r} is not allowed: a run id, not a file name (the files made from it "
                          "are models/<run-id>.pt and .lock): drop the suffix")
    if run_id.endswith("-best"):
        raise ConfigError(f"{what} {run_id!r} is not allowed: names ending in '-best' are those of the best "
                          "evaluation's checkpoint (models/<run-id>-best.pt)")


def check_threads(config, saved: dict | None) -> None:
    """torch_threads belongs to the machine that runs: more than the cores here is refused when asked for,
    and taken down to them when it comes from a checkpoint made elsewhere (train() says so)."""
    cores = len(os.sched_getaffinity(0))
    if config.torch_threads > cores:
        if saved is None or saved.get("torch_threads") != config.torch_threads:
            raise ConfigError(f"config key 'torch_threads' = {config.torch_threads} is not allowed: 0 (the idle "
                              f"cores) to {cores}, the cores this process may use")
        config.torch_threads = cores


def read_run(args: dict, raw_argv: list[str]):
    """(config, run id, checkpoint or None) from the command line; refuses bad input."""
    if not args["--resume"]:
        config = load_config(args["--config"], args["--set"])
        if args["--seed"] is not None:
            if not re.fullmatch(r"\d+", args["--seed"]) or int(args["--seed"]) >= 2 ** 32:
                raise ConfigError(f"--seed must be an integer in [0, 2**32), got {args['--seed']!r}")
            config.seed = int(args["--seed"])
        run_id = args["--run-id"]
        if run_id is None:
            run_id = f"{Path(args['--config']).stem}-{datetime.now():%Y%m%d-%H%M%S}"
        check_run_id(run_id, "--run-id")
        check_threads(config, None)
        return config, run_id, None
    given = [flag for flag in ("--config", "--seed") if any(a == flag or a.startswith(flag + "=") for a in raw_argv)]
    if given:
        raise ConfigError(f"{', '.join(given)} cannot be combined with --resume (the checkpoint holds them)")
    branch = args["--run-id"]
    if branch is not None:
        check_run_id(branch, "--run-id")
    checkpoint = load_checkpoint(args["--resume"])
    require_resumable(checkpoint, args["--resume"])
    check_run_id(checkpoint["run_id"], f"{args['--resume']}'s run_id")
    if branch is not None and branch != checkpoint["run_id"]:
        checkpoint = {**checkpoint, "branch_of": checkpoint["run_id"], "run_id": branch, "summaries_path": None,
                      "best": None}
    summaries = checkpoint["summaries_path"]  # None for a branch: it writes a new folder, wherever its source wrote
    if summaries is not None and not Path(summaries).resolve().is_relative_to(SUMMARIES.resolve()):
        raise CheckpointError(f"{args['--resume']} keeps its summaries in {checkpoint['summaries_path']}, outside "
                              f"{SUMMARIES}/ here: resume it from the folder its run started in")
    config = config_from_dict(checkpoint["config"], args["--set"])
    check_resume_overrides(checkpoint["config"], config)
    check_threads(config, checkpoint["config"])
    if config.updates <= checkpoint["update"]:
        raise ConfigError(f"{args['--resume']} is at update {checkpoint['update']} of updates {config.updates}: "
                          "nothing to resume (raise it, e.g. --set updates=...)")
    return config, checkpoint["run_id"], checkpoint


def claim(run_id: str, checkpoint: dict | None, resume: str | None, overwrite: bool) -> RunLock:
    """Refuses a run that could not save or would replace a checkpoint it did not start from (its own, or its
    best evaluation's); else locks the run id for this process."""
    for folder in (MODELS, SUMMARIES):
        problem = writable(folder)
        if problem:
            raise ConfigError(f"{folder}/ is not writable ({problem}): the run could not save its work")
    lock = RunLock(MODELS / f"{run_id}.lock").acquire()
    try:
        target, best = MODELS / f"{run_id}.pt", MODELS / f"{run_id}-best.pt"
        if target.exists() and not overwrite and (resume is None or not same_checkpoint(resume, target)):
            if resume is None:
                raise CheckpointError(f"{target} exists: continue it with --resume {target}, or choose another "
                                      "--run-id (or pass --overwrite to replace it)")
            raise CheckpointError(f"{target} is not the checkpoint being resumed ({resume}) and would be replaced: "
                                  f"resume from {target} (the run's newest), or pass --overwrite")
        if best.exists() and not overwrite and not is_own_best(best, run_id, checkpoint):
            raise CheckpointError(f"{best} exists and is not this run's best evaluation: choose another --run-id "
                                  "(or pass --overwrite to replace it)")
    except CheckpointError:
        lock.release()
        raise
    return lock


def is_own_best(best: Path, run_id: str, checkpoint: dict | None) -> bool:
    """Whether `best` is the best evaluation of the run `checkpoint` continues: the one it recorded."""
    recorded = checkpoint and checkpoint.get("best")
    if not recorded:
        return False
    saved = load_checkpoint(best)
    return saved["run_id"] == run_id and saved["update"] == recorded["update"]


def main(argv=None) -> int:
    lock, trainer = None, None

    def finish_update(number: int) -> None:  # the run's first stop signal
        trainer.stop_signal = number
        trainer.summaries.say(f"\n{signal.Signals(number).name}: finishing this update, then saving (send it "
                              "again to stop at once)")

    with stopping.Stop(leaving=lambda: lock and lock.release()) as stop:
        try:
            try:
                with start_up_warnings():
                    args = command_line(USAGE, argv)
                    config, run_id, checkpoint = read_run(args, sys.argv[1:] if argv is None else argv)
                    device = resolve_device(config.device, args["--cpu"])
                    resume = None if checkpoint and "branch_of" in checkpoint else args["--resume"]  # a branch is new
                    lock = claim(run_id, checkpoint, resume, args["--overwrite"])
                    from trainer import Trainer
                    trainer = Trainer(config, run_id=run_id, device=device, summaries_dir=SUMMARIES,
                                      models_dir=MODELS, summaries_path=checkpoint and checkpoint["summaries_path"])
                    if checkpoint:
                        with fitted(args["--resume"]):
                            restore(trainer, checkpoint)
            except (ConfigError, CheckpointError, SpaceError) as error:
                return failed(error)
            except WorkerError as error:  # an environment that failed as the run started
                return failed(f"{error}; no checkpoint was saved in this run", 1)
            stop.working(finish_update)
            return train(trainer, checkpoint)
        except KeyboardInterrupt:  # a second signal
            return stop.report(f" at once, without saving; {last_checkpoint(trainer)}")
        finally:
            if trainer is not None:
                trainer.close()
            if lock is not None:
                lock.release()


def last_checkpoint(trainer) -> str:
    if trainer is None or trainer.saved_update is None:
        return "no checkpoint was saved in this run"
    return f"the last good checkpoint is {trainer.checkpoint_path} (update {trainer.saved_update})"


def train(trainer, checkpoint: dict | None) -> int:
    from losses import NonFiniteError
    if checkpoint:
        source = f" from {checkpoint['branch_of']}" if "branch_of" in checkpoint else ""
        print(f"{'branching' if source else 'resuming'} {trainer.run_id}{source} at update {trainer.update}/"
              f"{trainer.config.updates}", flush=True)
    threads = f"{trainer.threads} torch thread{'s' * (trainer.threads > 1)}"
    saved = checkpoint["config"].get("torch_threads", 0) if checkpoint else 0
    if saved > trainer.threads and saved > len(os.sched_getaffinity(0)):
        threads += f"; the checkpoint's {saved} are more than the cores here"
    print(f"training {trainer.run_id} on {trainer.device} ({threads}); summaries in {trainer.summaries.path}",
          flush=True)
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
        name = signal.Signals(trainer.stop_signal).name
        print(f"stopped by {name} after update {trainer.update}; saved {trainer.checkpoint_path}; "
              f"resume with: python train.py --resume {trainer.checkpoint_path}", flush=True)
        return 128 + trainer.stop_signal
    print(f"saved {trainer.checkpoint_path}")
    return 0


if __name__ == "__main__":
    sys.stdout = Stdout(sys.stdout)  # a closed stdout (`| head`) does not cost the run
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    stopping.end_children()  # the forkserver and its resource tracker
    os._exit(code)  # everything is saved and closed: skip unloading torch's libraries
