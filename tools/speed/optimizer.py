"""Why optimizer.py is our own AdamW and not torch.optim.AdamW: what each costs.

    python tools/speed/optimizer.py [--repeats 5]

1. Start-up: fresh processes that import torch and build a model, with and without
   constructing torch.optim.AdamW and taking one step (constructing any torch.optim
   optimizer imports torch._dynamo), alternated, median of --repeats each.
2. Per step: one AdamW step over the parameters of the masked-CartPole and MiniGrid
   models, ours against torch.optim.AdamW (foreach and fused), median of 200 steps.
3. End to end: the shipped fast configs' wall time (python train.py --config X, start-up
   included), median of --repeats, in the same run: the share the start-up cost would add.
Writes results/speed/optimizer.md and .json.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import machine  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402
from config import load_config  # noqa: E402
from environments import spaces_of  # noqa: E402
from model import build_model  # noqa: E402
from optimizer import AdamW  # noqa: E402

PROGRAM = """
import sys; sys.path.insert(0, {root!r})
import torch
p = torch.nn.Parameter(torch.zeros(8))
if {torch_optim}:
    o = torch.optim.AdamW([p], lr=3e-4, fused=True)
    p.grad = torch.ones(8); o.step()
"""


def start_up(torch_optim: bool) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", PROGRAM.format(root=str(ROOT), torch_optim=torch_optim)], check=True)
    return time.perf_counter() - start


def train_wall(name: str) -> float:
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "train.py"), "--config", str(ROOT / f"configs/{name}.yaml"),
                        "--cpu"], cwd=work, check=True, capture_output=True)
        return time.perf_counter() - start


def per_step(optimizer, model, steps: int = 200) -> float:
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    optimizer.step()
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.step()
    return (time.perf_counter() - start) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs = {"torch only": [], "torch + torch.optim.AdamW": []}
    for _ in range(args.repeats):  # alternated: the machine's speed drifts
        runs["torch only"].append(start_up(False))
        runs["torch + torch.optim.AdamW"].append(start_up(True))
    medians = {k: statistics.median(v) for k, v in runs.items()}
    extra = medians["torch + torch.optim.AdamW"] - medians["torch only"]
    steps = {}
    for name in ("cartpole_masked", "minigrid"):
        config = load_config(ROOT / f"configs/{name}.yaml")
        env = config.environment.make()
        spaces = spaces_of(env, 0)
        env.close()
        makers = {"ours": lambda ps: AdamW(ps, lr=3e-4),
                  "torch.optim foreach": lambda ps: torch.optim.AdamW(ps, lr=3e-4, foreach=True),
                  "torch.optim fused": lambda ps: torch.optim.AdamW(ps, lr=3e-4, fused=True)}
        steps[name] = {}
        for label, make in makers.items():
            model = build_model(config, spaces)
            steps[name][label] = per_step(make(list(model.parameters())), model)
        print(name, {k: round(v) for k, v in steps[name].items()}, flush=True)
    walls = {name: statistics.median(train_wall(name) for _ in range(args.repeats))
             for name in ("poc_memory_env", "cartpole_masked")}
    report = {"command": command(), "machine": machine(), "start_up_seconds": runs,
              "start_up_median": medians, "torch_optim_extra_seconds": extra, "per_step_us": steps,
              "shipped_wall_seconds": walls}
    lines = ["# torch.optim.AdamW against optimizer.py", "", f"`{report['command']}` on {report['machine']['cpu']}.",
             "", f"Start-up, median of {args.repeats} fresh processes each, alternated: torch alone "
             f"{medians['torch only']:.2f} s, with torch.optim.AdamW constructed and stepped "
             f"{medians['torch + torch.optim.AdamW']:.2f} s: **{extra:.2f} s more per run**.", ""]
    for name, wall in walls.items():
        lines.append(f"- configs/{name}.yaml: {extra:.2f} s would be {100 * extra / wall:.1f}% of its whole run "
                     f"({wall:.1f} s, start-up included, median of {args.repeats})")
    lines += ["", "One AdamW step, microseconds (median of 200, 1 thread):", ""]
    lines += table(["model", *next(iter(steps.values()))], "lrrr",
                   [[name, *(f"{v:.0f}" for v in row.values())] for name, row in steps.items()])
    write("optimizer", report, lines)


if __name__ == "__main__":
    main()
