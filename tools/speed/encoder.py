"""The MiniGrid image encoder's cost, alone, in the variants the speed-up chose between.

    python tools/speed/encoder.py [--threads 2] [--batch 512]

Times the forward and forward+backward passes of configs/minigrid.yaml's CNN on one
minibatch of random uint8 frames (84x84x3), median of repeats, in this process:
- frames scaled by 1/255 as float32 before the first layer (the encoder before the speed-up);
- the scale folded into the first layer's weights instead (model.py's _ImageEncoder now);
- both under bfloat16 autocast, the frames cast straight to bfloat16 (precision: bfloat16 / auto).
Writes results/speed/encoder.md and .json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import machine  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402
from config import load_config  # noqa: E402
from environments import spaces_of  # noqa: E402
from model import build_model  # noqa: E402


def timed(run, repeats: int) -> float:
    run()  # warm-up: oneDNN picks its kernels on the first call
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=512, help="frames per minibatch (minigrid.yaml: 4096 / 8)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = load_config(ROOT / "configs/minigrid.yaml")
    env = config.environment.make()
    torch.manual_seed(0)
    conv = build_model(config, spaces_of(env, 0)).encoder.conv
    env.close()
    frames = torch.randint(0, 256, (args.batch, 84, 84, 3), dtype=torch.uint8).permute(0, 3, 1, 2)  # HWC view

    def layers(x, first_weight):
        x = F.conv2d(x, first_weight, conv[0].bias, conv[0].stride)
        return conv[1:](x)

    variants = {
        "float32, frames scaled (before)": (False, lambda: layers(frames.float() * (1 / 255), conv[0].weight)),
        "float32, scale in the weights": (False, lambda: layers(frames.float(), conv[0].weight / 255)),
        "bfloat16, frames scaled": (True, lambda: layers(frames.float() * (1 / 255), conv[0].weight)),
        "bfloat16, scale in the weights (now)": (True, lambda: layers(frames.to(torch.bfloat16), conv[0].weight / 255)),
    }
    rows = {}
    for name, (bf16, forward) in variants.items():
        def fwd():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                return forward()

        def fwd_bwd():
            fwd().float().sum().backward()
        rows[name] = {"forward_ms": timed(fwd, args.repeats), "forward_backward_ms": timed(fwd_bwd, args.repeats)}
        print(name, {k: round(v, 1) for k, v in rows[name].items()}, flush=True)
    base = rows["float32, frames scaled (before)"]["forward_backward_ms"]
    report = {"command": command(), "machine": machine(), "threads": args.threads,
              "batch": args.batch, "repeats": args.repeats, "variants": rows}
    lines = ["# The MiniGrid CNN alone, per minibatch", "",
             f"`{report['command']}` on {report['machine']['cpu']} ({args.threads} threads), "
             f"{args.batch} frames of 84x84x3, median of {args.repeats}.", ""]
    lines += table(["variant", "forward ms", "forward + backward ms", "speed-up of forward + backward"], "lrrr",
                   [[name, f"{r['forward_ms']:.1f}", f"{r['forward_backward_ms']:.1f}",
                     f"{base / r['forward_backward_ms']:.2f}x"] for name, r in rows.items()])
    write("encoder", report, lines)


if __name__ == "__main__":
    main()
