"""Train a recurrent PPO agent.

Usage:
  train.py [options] [--set=<kv>]...
  train.py --help

Options:
  --config=<path>         The yaml config to train [default: configs/poc_memory_env.yaml].
  --run-id=<name>         Names the summaries folder (summaries/<run-id>/<time>) and the checkpoint
                          (models/<run-id>.pt) [default: run].
  --seed=<n>              The run seed; overrides the config's seed.
  --cpu                   Train on the CPU even when a GPU is available.
  --set=<kv>       Override one config key, e.g. --set recurrence.sequence_length=16 (repeatable).
  --resume=<checkpoint>   Continue a run from its checkpoint (its config, run id, seed and
                          summaries); --config, --run-id and --seed do not apply, overrides do
                          (e.g. a larger updates).

Ctrl-C (SIGINT) or SIGTERM finishes the current update, saves the checkpoint and exits;
a second one stops at once without saving.
"""
from __future__ import annotations

import os
import sys

from docopt import docopt

from checkpoint import CheckpointError, load_checkpoint, require_resumable
from config import ConfigError, config_from_dict, load_config
from environments import check_family


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


def main(argv=None) -> int:
    args = docopt(__doc__, argv=argv)
    checkpoint = None
    try:
        if args["--resume"]:
            raw = sys.argv[1:] if argv is None else argv
            given = [flag for flag in ("--config", "--run-id", "--seed")
                     if any(a == flag or a.startswith(flag + "=") for a in raw)]
            if given:
                raise ConfigError(f"{', '.join(given)} cannot be combined with --resume (the checkpoint holds them)")
            checkpoint = load_checkpoint(args["--resume"])
            require_resumable(checkpoint, args["--resume"])
            config = config_from_dict(checkpoint["config"], args["--set"])
            run_id = checkpoint["run_id"]
        else:
            config = load_config(args["--config"], args["--set"])
            run_id = args["--run-id"]
            if args["--seed"] is not None:
                try:
                    config.seed = int(args["--seed"])
                except ValueError:
                    raise ConfigError(f"--seed must be an integer, got {args['--seed']!r}") from None
        check_family(config.environment)
        device = resolve_device(config.device, args["--cpu"])
    except (ConfigError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    from trainer import NonFiniteError, Trainer
    from worker import WorkerError
    trainer = None
    try:
        trainer = Trainer(config, run_id=run_id, device=device,
                          summaries_path=checkpoint["summaries_path"] if checkpoint else None)
        if checkpoint:
            trainer.restore(checkpoint)
            print(f"resuming {run_id} at update {trainer.update}/{config.updates}", flush=True)
        print(f"training {run_id} on {device}; summaries in {trainer.summaries_path}", flush=True)
        trainer.run()
    except ConfigError as error:  # found while building the environments
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (WorkerError, NonFiniteError) as error:
        saved = (f"the last good checkpoint is {trainer.checkpoint_path} (update {trainer.saved_update})"
                 if trainer is not None and trainer.saved_update is not None
                 else "no checkpoint was saved in this run")
        print(f"error: {error}\n{saved}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped without saving", file=sys.stderr)
        return 130
    print(f"saved {trainer.checkpoint_path}")
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is saved and closed by now. Skipping the interpreter's teardown
    # (unloading torch's libraries) saves about half a second per run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
