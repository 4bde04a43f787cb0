"""Scores a checkpoint as enjoy.py does (evaluation.evaluate, the same seeds and draws), with the policy
acting in float32 (as enjoy.py) or under the bfloat16 autocast that training's rollout used; writes each
episode's stats to --out as JSON.

    python tools/breakout_precision.py --model models/breakout_noframeskip.pt --episodes 200 --seed 1 \
        --precision bfloat16 --out results/atari/gap/bf16_seed1.json
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

import torch  # noqa: E402

from agent import Agent  # noqa: E402
from evaluation import evaluate, summary  # noqa: E402
from model import autocast  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--model", required=True)
parser.add_argument("--episodes", type=int, required=True)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--precision", choices=("float32", "bfloat16"), required=True)
parser.add_argument("--deterministic", action="store_true")
parser.add_argument("--out", required=True)
args = parser.parse_args()

agent = Agent.load(args.model)
with autocast(args.precision, torch.device("cpu")):
    results = evaluate(agent, args.episodes, args.seed, args.deterministic,
                       on_episode=lambda i, s: print(i, s, flush=True))
print(summary(results))
Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), **vars(args), "episodes": results}, indent=1))
