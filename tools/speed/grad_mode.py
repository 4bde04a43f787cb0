"""Which grad mode the rollout's act() runs in: model._no_gradient's evidence.

    python tools/speed/grad_mode.py [--rounds 5]

For masked CartPole (float32) and MiniGrid (its precision, auto: bfloat16 on a CPU with
AVX-512 BF16), the model a run builds takes act() steps for its n_workers environments on one
torch thread, inside one autocast region as Trainer.collect runs them, under torch.no_grad and
under torch.inference_mode, alternated over --rounds rounds; the median microseconds per step
of each. Writes results/speed/grad_mode.md and .json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import machine  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402
from model import autocast  # noqa: E402
from tools.speed.rollout_threads import rollout_inputs  # noqa: E402

CONFIGS = {"configs/cartpole_masked.yaml": 1000, "configs/minigrid.yaml": 40}  # act() steps per measurement
MODES = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}


def step_us(model, obs, state, previous, precision: str, mode, steps: int) -> float:
    """Median microseconds of the steps of one act()'s body under `mode`, after 3 warm-up steps."""
    body = model._step, model._heads, model.distribution.sample
    times = []
    with autocast(precision, torch.device("cpu")), mode():
        for i in range(steps + 3):
            start = time.perf_counter()
            y, state = body[0](obs, state, previous)
            params, _ = body[1](y)
            body[2](params, None, False)
            if i >= 3:
                times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for path, steps in CONFIGS.items():
        config, _, model, obs, state, previous = rollout_inputs(path)
        W = config.n_workers
        us = {name: [] for name in MODES}
        for _ in range(args.rounds):
            for name, mode in MODES.items():
                us[name].append(step_us(model, obs, state, previous, config.precision, mode, steps))
        median = {name: statistics.median(values) for name, values in us.items()}
        rows.append({"config": path, "precision": config.precision, "workers": W, "median_us": median, "all": us})
        print(f"{path}: " + ", ".join(f"{n} {v:.0f} us" for n, v in median.items()), flush=True)
    info = machine()
    report = {"command": command(), "machine": info, "rows": rows}
    lines = ["# Grad mode of the rollout's act() steps", "",
             f"`{report['command']}` on {info['cpu']} ({info['cores']} cores), torch {info['torch']}, "
             f"1 thread; median microseconds per step, {args.rounds} rounds alternating the modes.", ""]
    lines += table(["config", "precision", "rows", "no_grad us", "inference_mode us", "inference_mode / no_grad"],
                   "llrrrr", [[r["config"], r["precision"], str(r["workers"]), f"{r['median_us']['no_grad']:.0f}",
                               f"{r['median_us']['inference_mode']:.0f}",
                               f"{r['median_us']['inference_mode'] / r['median_us']['no_grad']:.2f}"] for r in rows])
    lines += ["", "Below 1: inference_mode is faster. model._no_gradient takes inference_mode outside an "
              "autocast region and no_grad inside one."]
    write("grad_mode", report, lines)


if __name__ == "__main__":
    main()
