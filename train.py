"""Train a recurrent PPO agent.

Usage:
  train.py [options]
  train.py --help

Options:
  --config=<path>   The yaml config to train [default: configs/poc_memory_env.yaml].
  --run-id=<name>   Names the summaries folder (summaries/<run-id>/<time>) and the checkpoint
                    (models/<run-id>.pt) [default: run].
  --seed=<n>        The run seed; overrides the config's seed.
  --cpu             Train on the CPU even when a GPU is available.
"""
from __future__ import annotations

import sys

from docopt import docopt

from config import ConfigError, load_config
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
    try:
        config = load_config(args["--config"])
        if args["--seed"] is not None:
            try:
                config.seed = int(args["--seed"])
            except ValueError:
                raise ConfigError(f"--seed must be an integer, got {args['--seed']!r}") from None
        check_family(config.environment)
        device = resolve_device(config.device, args["--cpu"])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    from trainer import Trainer
    trainer = Trainer(config, run_id=args["--run-id"], device=device)
    print(f"training {args['--config']} on {device}; summaries in {trainer.summaries_path}", flush=True)
    trainer.run()
    print(f"saved {trainer.checkpoint_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
