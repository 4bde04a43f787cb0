"""How many torch threads the rollout's steps should use: config.rollout_threads's evidence.

    python tools/speed/rollout_threads.py [--rounds 5]

For each shipped config named below, the model a run builds takes `act` steps for its
n_workers environments (random observations of the stored shape and dtype, the config's
precision, as Trainer.collect runs them), at 1 and at 2 torch threads, alternated over
--rounds rounds; the median milliseconds per step of each. Writes
results/speed/rollout_threads.md and .json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import machine  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402
from config import Config, load_config  # noqa: E402
from environments import spaces_of  # noqa: E402
from model import autocast, build_model  # noqa: E402

CONFIGS = ["configs/poc_memory_env.yaml", "configs/cartpole_masked.yaml", "configs/minigrid.yaml"]


class RolloutInputs(NamedTuple):
    config: Config
    images: bool  # the observation has an image part (the model has a CNN)
    model: torch.nn.Module
    obs: torch.Tensor  # (W, *obs_shape)
    state: torch.Tensor  # (W, S)
    previous: torch.Tensor  # (W, P)


def rollout_inputs(path: str) -> RolloutInputs:
    """A shipped config, the model a run builds from it (seed 0) and one rollout step's inputs for
    its n_workers environments: random observations of the stored shape and dtype, the initial
    state and the previous input."""
    config = load_config(ROOT / path)
    probe = config.environment.make()
    spaces = spaces_of(probe, 0)
    probe.close()
    torch.manual_seed(0)
    model = build_model(config, spaces)
    W, layout = config.n_workers, spaces.observation
    rng = np.random.default_rng(0)
    if np.issubdtype(layout.dtype, np.integer):
        obs = torch.from_numpy(rng.integers(0, 256, (W, *layout.shape)).astype(layout.dtype))
    else:
        obs = torch.from_numpy(rng.random((W, *layout.shape), dtype=np.float32))
    return RolloutInputs(config, layout.images, model, obs, model.initial_state(W), torch.zeros(W, model.previous_size))


def step_ms(model, obs: torch.Tensor, state: torch.Tensor, previous: torch.Tensor, precision: str,
            steps: int) -> float:
    """Median milliseconds of one act() over `steps` steps, after 3 warm-up steps."""
    times = []
    with autocast(precision, torch.device("cpu")):
        for i in range(steps + 3):
            start = time.perf_counter()
            out = model.act(obs, state, previous=previous)
            state = out.state
            if i >= 3:
                times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=50, help="act() steps per measurement")
    args = parser.parse_args()
    rows = []
    for path in CONFIGS:
        config, images, model, obs, state, previous = rollout_inputs(path)
        W = config.n_workers
        ms = {1: [], 2: []}
        for _ in range(args.rounds):
            for threads in (1, 2):
                torch.set_num_threads(threads)
                ms[threads].append(step_ms(model, obs, state, previous, config.precision, args.steps))
        one, two = statistics.median(ms[1]), statistics.median(ms[2])
        rows.append({"config": path, "workers": W, "images": images, "precision": config.precision,
                     "ms_1_thread": one, "ms_2_threads": two, "ratio_2_over_1": two / one, "all": ms})
        print(f"{path}: 1 thread {one:.3f} ms, 2 threads {two:.3f} ms per step", flush=True)
    info = machine()
    report = {"command": command(), "machine": info, "rows": rows}
    lines = ["# Torch threads for the rollout's act() steps", "",
             f"`{report['command']}` on {info['cpu']} ({info['cores']} cores), torch {info['torch']}; "
             f"median ms per step of {args.steps} steps, {args.rounds} rounds alternating 1 and 2 threads.", ""]
    lines += table(["config", "rows (n_workers)", "CNN", "precision", "1 thread ms", "2 threads ms", "2 / 1"], "lrllrrr",
                   [[r["config"], str(r["workers"]), "yes" if r["images"] else "no", r["precision"],
                     f"{r['ms_1_thread']:.3f}", f"{r['ms_2_threads']:.3f}", f"{r['ratio_2_over_1']:.2f}"] for r in rows])
    lines += ["", "Below 1: the second thread pays. config.rollout_threads gives the rollout the run's threads "
              "only where the model has a CNN."]
    write("rollout_threads", report, lines)


if __name__ == "__main__":
    main()
