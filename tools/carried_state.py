"""Scores a checkpoint from the recurrent state its run's rollout had reached, beside the initial state that every
evaluation and enjoy.py start from, on held-out levels and, where the config has others for training (its
environment.evaluation_kwargs / evaluation_reset_params), on those.

    python tools/carried_state.py --model models/minigrid_mingru_seed1.pt --episodes 160

With recurrence.reset_hidden_state false a run never resets its rollout's state, so a core may come to rely on what
that state holds after many episodes: a policy that scores well in training and poorly from the initial state. A
resumable checkpoint (not an --inference-only one) holds that state, one row per training environment; here each
evaluation environment starts from one of those rows. Episodes, seeds and quotas are evaluation.py's, so the
initial-state score on held-out levels is what `enjoy.py --model ... --episodes N` prints.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's modules

from agent import Agent  # noqa: E402
from checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from config import ConfigError  # noqa: E402
from enjoy import on_training_levels  # noqa: E402
from evaluation import evaluate, summary  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a resumable checkpoint written by train.py")
    parser.add_argument("--episodes", type=int, default=160, help="at least the run's n_workers")
    parser.add_argument("--seed", type=int, help="as enjoy.py's (default: the checkpoint's evaluation.seed + 1)")
    parser.add_argument("--deterministic", action="store_true", help="the most probable action, not a sample")
    args = parser.parse_args(argv)
    try:
        agent = Agent.load(args.model)
        carried = load_checkpoint(args.model).get("state")
        if carried is None:
            raise ConfigError(f"{args.model} holds no rollout state: an --inference-only checkpoint")
        carried = carried.float()  # (W, S), as act() takes a state
        if args.episodes < len(carried):
            raise ConfigError(f"--episodes {args.episodes}: at least {len(carried)}, one environment per saved row")
        levels = {"held-out levels": agent.config}
        if agent.config.environment.has_evaluation_levels:  # else training's levels are the held-out ones
            levels = {"training levels": on_training_levels(agent.config, args.model), **levels}
    except (CheckpointError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    seed = agent.config.evaluation.fresh_seed if args.seed is None else args.seed
    for name, config in levels.items():
        agent.config = config
        for start, state in (("initial state", None), ("the run's rollout state", carried)):
            results = evaluate(agent, args.episodes, seed, args.deterministic, workers=len(carried), state=state)
            print(f"{name}, from {start}: {summary(results)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
