"""Which of a minGRU's units carry what its policy needs from the run's rollout state: a checkpoint of a run that never
reset its state (recurrence.reset_hidden_state false), scored on held-out episodes from states built of parts of it.

    python tools/mingru_slow_units.py --model models/minigrid_mingru_seed1.pt --out results/cores/mingru_slow_units

minGRU's update h_t = (1 - z_t) h_{t-1} + z_t h~_t leaves a unit whose gate z_t stays near 0 where it was: from the
initial zeros it stays near 0, in a run that never resets it holds what it gathered long ago. Here z is read on
`--steps` steps of the training environments, played from the run's rollout state, and for each threshold the units
whose z stays below it on every step are set to their mean over the saved rows, every other unit to 0. Writes
<out>.md. A one-layer minGRU actor without a separate critic core, as `--set recurrence.layer_type=mingru` gives.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's modules

from agent import Agent  # noqa: E402
from checkpoint import load_checkpoint  # noqa: E402
from cores import MinGRU  # noqa: E402
from evaluation import evaluate, scores  # noqa: E402
from worker import VecEnv, environment_seeds  # noqa: E402


def gates(agent: Agent, carried: torch.Tensor, steps: int) -> torch.Tensor:
    """The largest z of each unit (H,) over `steps` steps of the W training environments, from the carried state."""
    model, config = agent.model, agent.config
    envs = VecEnv(config.environment, environment_seeds(config.seed, len(carried)), processes=0)
    obs, state, largest = envs.reset(), carried.clone(), torch.zeros(carried.shape[1])
    try:
        with torch.no_grad():
            for _ in range(steps):
                x = torch.from_numpy(obs)
                z = torch.sigmoid(model.core.linear(model.encoder(x)).float().chunk(2, dim=-1)[0])  # (W, H)
                largest = torch.maximum(largest, z.max(0).values)
                out = model.act(x, state)
                obs, state = envs.step(out.actions.numpy()).obs, out.state
    finally:
        envs.close()
    return largest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a resumable checkpoint of a one-layer minGRU run")
    parser.add_argument("--episodes", type=int, default=160)
    parser.add_argument("--steps", type=int, default=64, help="steps of the training environments to read z on")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[1e-4, 1e-2, 0.05, 0.1, 0.2])
    parser.add_argument("--out", required=True, help="output path without extension")
    args = parser.parse_args(argv)
    agent = Agent.load(args.model)
    carried = load_checkpoint(args.model).get("state")
    if not isinstance(agent.model.core, MinGRU) or carried is None or carried.shape[1] != agent.model.state_size \
            or agent.model.state_size != agent.model.core.linear.out_features // 2:
        print(f"error: {args.model} is not a resumable checkpoint of a one-layer minGRU actor", file=sys.stderr)
        return 2
    carried = carried.float()  # (W, H)
    largest = gates(agent, carried, args.steps)
    seed = agent.config.evaluation.fresh_seed

    def score(state: torch.Tensor | None) -> str:
        s = scores(evaluate(agent, args.episodes, seed, workers=len(carried), state=state))
        return f"{s['reward_mean']:.3f} (success {s.get('success_mean', float('nan')):.3f})"

    rows = [("the initial state (zeros), as every evaluation", "", score(None)),
            ("the run's rollout state, one saved row per environment", "", score(carried)),
            ("the saved rows' mean, in every environment", "", score(carried.mean(0).expand_as(carried)))]
    for threshold in args.thresholds:
        slow = largest < threshold
        state = torch.zeros_like(carried)
        state[:, slow] = carried[:, slow].mean(0)
        rows.append((f"zeros, but the units with z < {threshold:g} at every step at the rows' mean",
                     f"{int(slow.sum())} of {len(slow)}", score(state)))
    lines = [f"# {Path(args.model).name}: held-out return by the state its episodes start from", "",
             f"`python tools/mingru_slow_units.py --model {args.model} --episodes {args.episodes} --steps {args.steps}`; "
             f"{args.episodes} sampled episodes at enjoy.py's default seed ({seed}), z read on {args.steps} steps of "
             f"{len(carried)} training environments.", "",
             "| start state | units | return (success) |", "|---|---:|---:|",
             *(f"| {what} | {units} | {value} |" for what, units, value in rows)]
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
