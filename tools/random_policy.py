"""A uniform random policy scored by a config's own held-out evaluation: the floor a learned agent is read against.

    python tools/random_policy.py --config configs/mortar_mayhem_b_grid.yaml --out results/memory_gym/random_b_grid
    python tools/random_policy.py --config configs/breakout_noframeskip.yaml --episodes 100 --out results/atari/random

Plays `--episodes` (default: the config's evaluation.episodes) episodes on the environments,
seeds and quotas of evaluation.py, exactly as a run's evaluation or enjoy.py scores an agent,
with every action drawn uniformly from the action space (masked actions honoured), and writes
<out>.json (every episode) and <out>.md (the scores).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)  # the imports below take seconds

import numpy as np  # noqa: E402

from agent import AgentStep  # noqa: E402
from config import load_config  # noqa: E402
from evaluation import evaluate  # noqa: E402
from summaries import scores  # noqa: E402
from tools.benchmark import describe_tree  # noqa: E402


class RandomAgent:
    """What evaluate() asks of an agent, answered with uniform random actions."""

    def __init__(self, config, seed: int):
        self.config = config
        env = config.environment.make()
        self.space = env.action_space
        env.close()
        self.space.seed(seed)

    def act(self, obs, state, episode_start, deterministic=False, action_mask=None, previous_action=None,
            previous_reward=None) -> AgentStep:
        n = obs.shape[0]
        masks = [None] * n if action_mask is None else [np.asarray(m, dtype=np.int8) for m in action_mask]
        actions = np.array([self.space.sample(mask) if mask is not None else self.space.sample() for mask in masks])
        return AgentStep(actions, state, np.zeros(n, np.float32), np.zeros(n, np.float32))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--episodes", type=int, help="default: the config's evaluation.episodes")
    parser.add_argument("--seed", type=int, help="the evaluation seed; default: the config's evaluation.seed")
    parser.add_argument("--out", required=True, help="writes <out>.json and <out>.md")
    args = parser.parse_args(argv)
    out = life.prefixed(args.out)

    def start():
        life.check_out("--out", out)
        return load_config(args.config)
    return script.life(start, lambda config: play(args, argv, out, config))


def play(args, argv: list[str] | None, out: list[Path], config) -> int:
    episodes = args.episodes or config.evaluation.episodes
    seed = config.evaluation.seed if args.seed is None else args.seed
    results = evaluate(RandomAgent(config, seed), episodes, seed=seed)
    summary = scores(results)
    command = shlex.join(["python", "tools/random_policy.py", *(argv if argv is not None else sys.argv[1:])])
    code = describe_tree(ROOT)
    report = {"command": command, "commit": code["commit"], "config": args.config, "episodes": episodes, "seed": seed,
              "scores": summary, "results": results}
    lines = [f"# A uniform random policy on {config.environment.name or config.environment.type}", "",
             f"`{command}`: {episodes} held-out episodes, evaluation seed {seed}, scored as evaluation.py scores "
             f"an agent (the config's evaluation environments and seeds). Code: {code['label']}.", "",
             "| statistic | value |", "|---|---:|",
             *(f"| {name} | {value:.4f} |" for name, value in summary.items())]
    life.write_out({out[0]: json.dumps(report, indent=1) + "\n", out[1]: "\n".join(lines) + "\n"})
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    script.run(main)
