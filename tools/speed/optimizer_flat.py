"""optimizer.py's AdamW step on one flat tensor per group against one parameter at a time.

    python tools/speed/optimizer_flat.py [--steps 300] [--repeats 5]

For the models of the shipped PoC, masked-CartPole and MiniGrid configs: random gradients (the same
for both ways), then AdamW steps alternated between an optimizer with flat=True and one with
flat=False over two copies of the model, on one torch thread; the median step time of --repeats
blocks of --steps steps each. Also checks that both ways end at the same parameters, to the bit.
Writes results/speed/optimizer_flat.md and .json.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import load_snapshot, machine  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402
from config import load_config  # noqa: E402
from environments import spaces_of  # noqa: E402
from model import build_model  # noqa: E402
from optimizer import AdamW  # noqa: E402

CONFIGS = ("poc_memory_env", "cartpole_masked", "minigrid")


def block(optimizer: AdamW, params: list[torch.Tensor], grads: list[torch.Tensor], steps: int) -> float:
    """Seconds per step over `steps` steps, the gradients set before the clock starts each step."""
    total = 0.0
    for _ in range(steps):
        for p, g in zip(params, grads):
            p.grad = g
        start = time.perf_counter()
        optimizer.step()
        total += time.perf_counter() - start
    return total / steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    before = load_snapshot()
    rows, report = [], {"command": command(), "machine": machine(), "configs": {}}
    for name in CONFIGS:
        config = load_config(ROOT / f"configs/{name}.yaml")
        torch.manual_seed(0)
        model = build_model(config, spaces_of(config.environment.make(), 0))
        copies = {way: copy.deepcopy(model) for way in ("flat", "per parameter")}
        params = {way: list(m.parameters()) for way, m in copies.items()}
        optimizers = {way: AdamW(params[way], lr=3e-4, flat=way == "flat") for way in copies}
        grads = [torch.randn_like(p) for p in params["flat"]]
        times: dict[str, list[float]] = {way: [] for way in copies}
        for _ in range(args.repeats):
            for way in copies:
                times[way].append(block(optimizers[way], params[way], grads, args.steps))
        same = all(torch.equal(a, b) for a, b in zip(params["flat"], params["per parameter"]))
        median = {way: statistics.median(t) for way, t in times.items()}
        report["configs"][name] = {"parameters": len(params["flat"]),
                                   "values": sum(p.numel() for p in params["flat"]),
                                   "seconds_per_step": times, "median_us": {k: 1e6 * v for k, v in median.items()},
                                   "same_parameters": same}
        fell_back = optimizers["flat"]._flat[0] is None  # above FLAT_MAX_VALUES: one parameter at a time too
        report["configs"][name]["flat_used"] = not fell_back
        rows.append([name + (" (flat=True falls back: above FLAT_MAX_VALUES)" if fell_back else ""),
                     str(len(params["flat"])), f"{sum(p.numel() for p in params['flat']):,}",
                     f"{1e6 * median['flat']:.0f}", f"{1e6 * median['per parameter']:.0f}",
                     f"{median['per parameter'] / median['flat']:.2f}x", "yes" if same else "NO"])
    load = load_snapshot(before)
    report["load"] = {k: v for k, v in load.items() if k != "summary"}
    lines = ["# AdamW on one flat tensor against one parameter at a time", "",
             f"`{report['command']}` on {report['machine']['cpu']}, one torch thread; {load['summary']}. "
             f"Median of {args.repeats} alternated blocks of {args.steps} steps.", "",
             *table(["model of", "parameters", "values", "flat, us/step", "per parameter, us/step", "speed-up",
                     "same parameters after every step"], "lrrrrrl", rows)]
    write("optimizer_flat", report, lines)


if __name__ == "__main__":
    main()
