"""Stepping 8 Breakout environments: this repository's worker processes against ale-py's AtariVectorEnv.

    python tools/atari_vector.py --steps 2000 --repeats 3

Both with CleanRL's preprocessing (configs/breakout_noframeskip.yaml: BreakoutNoFrameskip-v4, up to 30
no-ops, 4 frames per action max-pooled, 84x84 grayscale, one frame, a lost life ends the training
episode, FIRE after resets; rewards unclipped, as the statistics want them); AtariVectorEnv's
episodic_life starts a new game at a lost life where ours goes on with the game (tools/atari_lives.py),
so its side resets more often. Actions are uniform
random, drawn before the clock starts; each side steps the 8 environments `--steps` times, its
ended episodes reset as it does (ours in the workers; AtariVectorEnv in its C++ threads, same-step
autoreset). Alternated, `--repeats` times each; the median steps/s (environment steps) goes to
results/atari/vector_env.{md,json} with the machine's load. Not measured here: what the model and
the update cost (the steps/s of a whole run are in results/atari/).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from config import load_config  # noqa: E402
from worker import VecEnv, environment_seeds  # noqa: E402

W = 8


def ours(actions: np.ndarray, processes: int) -> float:
    config = load_config(ROOT / "configs/breakout_noframeskip.yaml")
    envs = VecEnv(config.environment, environment_seeds(0, W), processes=processes)
    try:
        envs.reset()
        start = time.perf_counter()
        for row in actions:
            envs.step(row.reshape(W, 1))
        return actions.size / (time.perf_counter() - start)
    finally:
        envs.close()


def ale_vector(actions: np.ndarray, threads: int) -> float:
    import gymnasium as gym
    import ale_py
    from ale_py.vector_env import AtariVectorEnv
    gym.register_envs(ale_py)
    envs = AtariVectorEnv("breakout", W, num_threads=threads, stack_num=1, noop_max=30, frameskip=4,
                          repeat_action_probability=0.0, episodic_life=True, use_fire_reset=True,
                          reward_clipping=False, autoreset_mode="SameStep")
    try:
        envs.reset(seed=0)
        start = time.perf_counter()
        for row in actions:
            envs.step(row)
        return actions.size / (time.perf_counter() - start)
    finally:
        envs.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from tools.benchmark import load_snapshot, machine
    actions = np.random.default_rng(0).integers(4, size=(args.steps, W))
    cores = len(os.sched_getaffinity(0))
    sides = {f"worker processes ({cores})": lambda: ours(actions, cores),
             f"AtariVectorEnv ({cores} threads)": lambda: ale_vector(actions, cores)}
    runs: dict[str, list[float]] = {name: [] for name in sides}
    before = load_snapshot()
    for _ in range(args.repeats):
        for name, side in sides.items():
            runs[name].append(side())
    load = load_snapshot(before)
    medians = {name: statistics.median(values) for name, values in runs.items()}
    command = shlex.join(["python", "tools/atari_vector.py", *(argv if argv is not None else sys.argv[1:])])
    out = ROOT / "results/atari/vector_env"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"command": command, "machine": machine(), "load": load, "steps": args.steps, "environments": W,
              "runs": runs, "median_steps_per_second": medians}
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    (ours_name, ale_name) = sides
    lines = ["# Stepping 8 Breakout environments: worker processes against AtariVectorEnv", "",
             f"`{command}` on {machine()}; {load['summary']}. Random actions, CleanRL's preprocessing "
             "(AtariVectorEnv's episodic_life: a new game at every lost life, tools/atari_lives.py), "
             f"{args.steps} steps of the 8 environments per run, alternated, median of {args.repeats}.", "",
             "| stepped by | environment steps/s (median) | runs |", "|---|---:|---|",
             *(f"| {name} | {medians[name]:.0f} | {', '.join(f'{v:.0f}' for v in runs[name])} |" for name in sides),
             "", f"AtariVectorEnv / worker processes: {medians[ale_name] / medians[ours_name]:.2f}x."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
