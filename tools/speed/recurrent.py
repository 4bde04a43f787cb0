"""Where the training pass should take the packed way instead of torch's fused recurrent layer.

    python tools/speed/recurrent.py [--repeats 5]
    python tools/speed/recurrent.py --kinds gru --widths 3316 --lengths 32 128 512 --steps 2048 --hidden 512 \
        --out recurrent_memory_gym

model.ActorCritic.evaluate runs the core over N zero-padded sequences of L slots in one of two
ways: torch's fused GRU/LSTM layer over every slot (mkldnn's RNN kernel for an LSTM on a CPU),
padding included, then the heads on every slot; or the packed way, which sees the R real steps
only: the input projection W_ih x + b_ih of the R steps as one matrix product, the recurrence one
time step at a time over the sequences still going, the heads and the distribution on R rows.
For each layer type, input width F, sequence length L, share of padding and precision, this
times one forward and backward pass of evaluate() over a minibatch of about --steps real steps
(512, configs/minigrid.yaml's; 2048 is Memory Gym's 32 x 512 / 8) of a core of --hidden units
(256 by default), a vector observation F wide fed to the core as it is (the real steps' inputs
alone, as the buffer serves them), the gradient reaching the input as it does an encoder's. Padding
trails each sequence, its lengths drawn so that the share is as asked and one sequence is L long.
The two ways alternate, median of --repeats each, on the machine's cores. model.ActorCritic._packs's
rule (PACKED_* in model.py) is read off this table.
Writes results/speed/<--out>.md and .json.
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

RULE = model.ActorCritic._packs  # model.py's choice, before measure() overrides it


def lengths_for(padding: float, length: int, steps: int) -> torch.Tensor:
    """Sequence lengths in [1, L] whose padding share is about `padding`, about `steps` real steps in
    all, one of them L long: 1 + (L - 1) u^a for evenly spread u, a chosen for the mean (1 - padding) L."""
    mean = max((1.0 - padding) * length, 1.0 + 1e-6)
    a = (length - 1) / (mean - 1.0) - 1.0 if length > 1 else 0.0
    n = max(1, round(steps / mean))
    u = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    lengths = (1 + torch.floor((length - 1) * u ** max(a, 0.0) + 0.5)).long().clamp(1, length)
    lengths[-1] = length
    return lengths


def one_pass(net: model.ActorCritic, x: torch.Tensor, state: torch.Tensor, actions: torch.Tensor,
             mask: torch.Tensor, bfloat16: bool) -> float:
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
        out = net.evaluate(x, state, actions, mask=mask)
    ((out.log_probs + out.values.square() + out.entropy) * mask).sum().backward()
    return time.perf_counter() - start


def measure(kind: str, width: int, length: int, padding: float, bfloat16: bool, repeats: int, steps: int,
            hidden: int) -> dict:
    torch.manual_seed(0)
    recurrence = RecurrenceConfig(layer_type=kind, hidden_state_size=hidden, sequence_length=length)
    space = gym.spaces.Box(-1.0, 1.0, (width,), np.float32)
    net = model.ActorCritic(space, gym.spaces.Discrete(3), 256, recurrence)
    lengths = lengths_for(padding, length, steps)
    mask = torch.arange(length) < lengths[:, None]  # (N, L), padding trailing
    N = mask.shape[0]
    x = torch.randn(N, length, width)[mask].requires_grad_()  # the real steps' inputs alone, as the buffer serves them
    state = torch.randn(N, net.state_size) * 0.1
    actions = torch.randint(0, 3, (N, length, 1))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
        chosen = RULE(net, width, length, int(mask.sum()), mask.numel(), torch.device("cpu"))  # real steps, slots
    times = {"fused": [], "packed": []}
    for i in range(repeats + 1):  # the first of each is a warm-up
        for way in times:
            model.ActorCritic._packs = lambda self, *args, way=way: way == "packed"
            seconds = one_pass(net, x, state, actions, mask, bfloat16)
            if i:
                times[way].append(seconds)
    model.ActorCritic._packs = RULE
    fused, packed = (statistics.median(v) * 1e3 for v in times.values())
    return {"kind": kind, "width": width, "length": length, "padding": 1.0 - float(mask.float().mean()),
            "sequences": N, "real_steps": int(mask.sum()), "precision": "bfloat16" if bfloat16 else "float32",
            "fused_ms": fused, "packed_ms": packed, "fused_over_packed": fused / packed, "model_packs": chosen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", default=["lstm", "gru"], choices=["lstm", "gru"])
    parser.add_argument("--precisions", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    parser.add_argument("--widths", nargs="+", type=int, default=[64, 512, 1024, 3136])
    parser.add_argument("--lengths", nargs="+", type=int, default=[8, 32, 128])
    parser.add_argument("--paddings", nargs="+", type=float, default=[0.0, 0.25, 0.5, 0.75])
    parser.add_argument("--steps", type=int, default=512, help="real steps in a minibatch")
    parser.add_argument("--hidden", type=int, default=256, help="the core's units H")
    parser.add_argument("--out", default="recurrent", help="writes results/speed/<out>.md and .json")
    args = parser.parse_args()
    rule = {name: getattr(model, name) for name in ("PACKED_MIN_FEATURES", "PACKED_MAX_STEPS", "PACKED_MIN_PADDING")}
    rows = []
    for kind in args.kinds:
        for bfloat16 in (p == "bfloat16" for p in args.precisions):
            for width in args.widths:
                for length in args.lengths:
                    for padding in args.paddings:
                        row = measure(kind, width, length, padding, bfloat16, args.repeats, args.steps, args.hidden)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    report = {"command": command(), "machine": machine(), "threads": torch.get_num_threads(),
              "repeats": args.repeats, "steps": args.steps, "hidden": args.hidden, "rule": rule, "rows": rows}
    lines = ["# The recurrent core's training pass: torch's fused layer or the packed way", "",
             f"`{report['command']}` on {report['machine']['cpu']}, {report['threads']} torch threads; one "
             f"forward and backward pass of evaluate() over about {args.steps} real steps (H = {args.hidden}, a vector "
             f"observation F wide fed to the core as it is), median of {args.repeats}, the two ways alternated.",
             "",
             f"model.py takes the packed way (marked *) for inputs at least {rule['PACKED_MIN_FEATURES']} wide: "
             f"an LSTM under bfloat16 when L is at most {rule['PACKED_MAX_STEPS']}, any other core when the "
             "padding share is at least " + ", ".join(f"{share:.0%} for L <= {longest}" if longest < 2 ** 31
                                                      else f"{share:.0%} for any L"
                                                      for longest, share in rule["PACKED_MIN_PADDING"]) + ".", ""]
    lines += table(["layer", "precision", "input F", "steps L", "padding", "sequences N", "fused ms", "packed ms",
                    "fused / packed"], "llrrrrrrr",
                   [[r["kind"], r["precision"], str(r["width"]), str(r["length"]), f"{r['padding']:.2f}",
                     str(r["sequences"]), f"{r['fused_ms']:.1f}", f"{r['packed_ms']:.1f}",
                     f"{r['fused_over_packed']:.2f}" + (" *" if r["model_packs"] else "")] for r in rows])
    write(args.out, report, lines)


if __name__ == "__main__":
    main()
