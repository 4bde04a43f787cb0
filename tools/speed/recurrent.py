"""Where the training pass should project the recurrent core's input outside torch's fused layer.

    python tools/speed/recurrent.py [--repeats 7]

model.ActorCritic._sequence runs the core over N sequences of L steps in one of two ways:
torch's fused GRU/LSTM layer (mkldnn's RNN kernel on a CPU), or the input projection
W_ih x + b_ih of all N*L steps as one matrix product followed by L steps of the recurrence
(`projected`). For each layer type, input width F, sequence length L and precision, this
times one forward and backward pass of a 512-step minibatch (N = 512 / L sequences, H = 256
units, the gradient reaching the input as it does the encoder), alternating the two ways,
median of --repeats each, on the machine's cores. model.ActorCritic._projected's rule
(an LSTM under bfloat16, PROJECTED_MIN_FEATURES, PROJECTED_MAX_STEPS) is read off this table.
Writes results/speed/recurrent.md and .json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

import model  # noqa: E402
from tools.benchmark import machine  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402
from config import RecurrenceConfig  # noqa: E402

STEPS = 512  # per minibatch: configs/minigrid.yaml's 16 x 256 / 8
RULE = model.ActorCritic._projected  # model.py's choice, before measure() overrides it
HIDDEN = 256


def one_pass(net: model.ActorCritic, x: torch.Tensor, state: torch.Tensor, bfloat16: bool) -> float:
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
        y = net._sequence(0, net.core, x, state)
    y.float().square().mean().backward()
    return time.perf_counter() - start


def measure(kind: str, width: int, length: int, bfloat16: bool, repeats: int) -> dict:
    torch.manual_seed(0)
    recurrence = RecurrenceConfig(layer_type=kind, hidden_state_size=HIDDEN, sequence_length=length)
    space = gym.spaces.Box(-1.0, 1.0, (width,), np.float32)
    net = model.ActorCritic(space, gym.spaces.Discrete(3), 64, recurrence)
    x = torch.randn(STEPS // length, length, width, requires_grad=True)
    state = torch.randn(STEPS // length, net.state_size) * 0.1
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
        chosen = RULE(net, x)
    times = {"fused": [], "projected": []}
    for i in range(repeats + 1):  # the first of each is a warm-up
        for way in times:
            model.ActorCritic._projected = lambda self, x, way=way: way == "projected"
            seconds = one_pass(net, x, state, bfloat16)
            if i:
                times[way].append(seconds)
    fused, projected = (statistics.median(v) * 1e3 for v in times.values())
    return {"kind": kind, "width": width, "length": length, "precision": "bfloat16" if bfloat16 else "float32",
            "fused_ms": fused, "projected_ms": projected, "fused_over_projected": fused / projected,
            "model_projects": chosen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rules = model.PROJECTED_MIN_FEATURES, model.PROJECTED_MAX_STEPS
    rows = []
    for kind in ("lstm", "gru"):
        for bfloat16 in (False, True):
            for width in (64, 512, 1024, 2048, 3136):
                for length in (8, 16, 32, 64, 128):
                    row = measure(kind, width, length, bfloat16, args.repeats)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    report = {"command": command(), "machine": machine(), "threads": torch.get_num_threads(),
              "repeats": args.repeats, "rule": {"min_features": rules[0], "max_steps": rules[1]}, "rows": rows}
    lines = ["# The recurrent core's training pass: torch's fused layer or the input projected first", "",
             f"`{report['command']}` on {report['machine']['cpu']}, {report['threads']} torch threads; one "
             f"forward and backward pass of a {STEPS}-step minibatch (N = {STEPS} / L sequences, H = {HIDDEN}), "
             f"median of {args.repeats}, the two ways alternated.", "",
             f"model.py projects an LSTM's input under bfloat16 when it has at least {rules[0]} features and "
             f"the sequences at most {rules[1]} steps (marked *).", ""]
    lines += table(["layer", "precision", "input F", "steps L", "fused ms", "projected ms", "fused / projected"],
                   "llrrrrr", [[r["kind"], r["precision"], str(r["width"]), str(r["length"]), f"{r['fused_ms']:.1f}",
                                f"{r['projected_ms']:.1f}",
                                f"{r['fused_over_projected']:.2f}" + (" *" if r["model_projects"] else "")]
                               for r in rows])
    write("recurrent", report, lines)


if __name__ == "__main__":
    main()
