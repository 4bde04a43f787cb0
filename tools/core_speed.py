"""The training pass alone, forward and backward, of every core and each of its paths (cores.py's step-by-step loop
and parallel scan), at several sequence lengths L over the same number of steps per minibatch; and a rollout step
(act() on W environments' observations) of every core.

    python tools/core_speed.py --out results/speed/core_speed               # the defaults: L = 8, 64, 256, 512
    python tools/core_speed.py --device cuda --hidden 512 --steps 2048 --out results/gpu/core_speed

Each training-pass timing is model.training_pass() on N = steps / L sequences of L real steps of a vector observation
(with --episodes, whole-episode sequences of 1 to L real steps padded to L, which the model packs),
then backward on its log-probs and values; a rollout step is one act() call, without gradient. The paths and cores take turns (one call each, round after round), so that a drift
of the machine's speed hits them alike; the report gives each one's median seconds per call.
Writes PREFIX.json and PREFIX.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)  # the imports below take seconds

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from config import CORES, InitializationConfig, RecurrenceConfig  # noqa: E402
from model import ActorCritic, layer_class  # noqa: E402
from plumbing.cli import number  # noqa: E402
from plumbing.machine import autocast  # noqa: E402
from tools.benchmark import machine  # noqa: E402

FEATURES = 64  # the observation's width


def paths(name: str) -> list[str]:
    """The paths of a core: loop and scan for those that run cores.linear_recurrence, its one call otherwise."""
    return ["loop", "scan"] if hasattr(layer_class(CORES[name]), "scan_min_length") else ["call"]


def sequence_mask(steps: int, L: int, episodes: bool, device: torch.device) -> torch.Tensor:
    """(N, L): L real steps in each of steps / L sequences; with episodes, whole-episode sequences instead, padded
    to the longest, L: about steps real steps in sequences of 1 to L / 2 real steps and one of L."""
    if not episodes:
        return torch.ones(max(1, steps // L), L, dtype=torch.bool, device=device)
    lengths = torch.randint(1, L // 2 + 1, (max(1, 4 * steps // (L + 2)),))
    lengths[0] = L
    return torch.arange(L, device=device) < lengths[:, None].to(device)  # (N, L)


def now(device: torch.device) -> float:
    """The clock once the device has done the work it was given (a GPU runs it after the call returns)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def timed(model: ActorCritic, mask: torch.Tensor, precision: str, device: torch.device) -> float:
    obs = torch.randn(int(mask.sum()), FEATURES, device=device)
    actions = torch.randint(0, 4, (*mask.shape, 1), device=device)
    N = len(mask)
    state = model.initial_state(N, device)
    model.zero_grad()
    start = now(device)
    with autocast(precision, device):
        out = model.training_pass(obs, state, actions, mask=mask)
    (out.log_probs.sum() + out.values.square().sum()).backward()
    return now(device) - start


def step_timed(model: ActorCritic, W: int, precision: str, device: torch.device) -> float:
    obs, state = torch.randn(W, FEATURES, device=device), model.initial_state(W, device)
    start = now(device)
    with autocast(precision, device):
        model.act(obs, state)
    return now(device) - start


def build(names: list[str], hidden: int, device: torch.device) -> dict[str, ActorCritic]:
    return {name: ActorCritic(gym.spaces.Box(-1, 1, (FEATURES,), np.float32), gym.spaces.Discrete(4), 512,
                              RecurrenceConfig(layer_type=name, hidden_state_size=hidden),
                              initialization=InitializationConfig()).to(device)
            for name in names}


def measure_steps(names: list[str], W: int, hidden: int, repeats: int, precision: str,
                  device: torch.device) -> list[dict]:
    models, seconds = build(names, hidden, device), {name: [] for name in names}
    for round_ in range(repeats * 20 + 1):  # a step is short: many rounds; round 0 warms up
        for name in names:
            took = step_timed(models[name], W, precision, device)
            if round_:
                seconds[name].append(took)
    rows = [{"core": name, "W": W, "median_s": statistics.median(t), "repeats": len(t)} for name, t in seconds.items()]
    for row in rows:
        print(f"step W {W} {row['core']:7s} {row['median_s'] * 1e6:9.1f} us", flush=True)
    return rows


def measure(names: list[str], lengths: list[int], hidden: int, steps: int, repeats: int, precision: str,
            device: torch.device, episodes: bool = False) -> list[dict]:
    rows = []
    for L in lengths:
        mask = sequence_mask(steps, L, episodes, device)
        N = len(mask)
        models = build(names, hidden, device)
        runs = [(name, path) for name in names for path in paths(name)]
        seconds = {run: [] for run in runs}
        for round_ in range(repeats + 1):  # round 0 warms up (allocations, oneDNN's kernels), then is dropped
            for name, path in runs:
                if path != "call":
                    layer_class(CORES[name]).scan_min_length[device.type] = 1 if path == "scan" else 2 ** 62
                took = timed(models[name], mask, precision, device)
                if round_:
                    seconds[(name, path)].append(took)
        for (name, path), times in seconds.items():
            rows.append({"core": name, "path": path, "L": L, "N": N, "median_s": statistics.median(times),
                         "min_s": min(times), "max_s": max(times), "repeats": len(times)})
            print(f"L {L:4d} N {N:5d} {name:7s} {path:5s} {statistics.median(times) * 1000:9.2f} ms", flush=True)
    return rows


def markdown(rows: list[dict], steps: list[dict], meta: dict) -> str:
    lengths = sorted({r["L"] for r in rows})
    columns = sorted({(r["core"], r["path"]) for r in rows}, key=lambda c: (list(CORES).index(c[0]), c[1]))
    table = {(r["core"], r["path"], r["L"]): r["median_s"] for r in rows}
    sequences = ("whole-episode sequences: one of L real steps, the others 1 to L / 2, padded to L; the model packs "
                 "them" if meta["episodes"] else "N = steps / L sequences of L")
    lines = [f"# Training pass per core and path: {meta['device']}, {meta['precision']}", "",
             f"model.training_pass() forward and backward over {meta['steps']} real steps per call ({sequences}), a "
             f"{FEATURES}-wide vector observation, hidden_state_size {meta['hidden']}, hidden_layer_size 512; "
             f"median of {meta['repeats']} alternated calls, in milliseconds.", "",
             f"Machine: {meta['machine']}; torch {meta['torch']}; {meta['threads']} threads. Command: "
             f"`{meta['command']}`", "",
             "| L | N | " + " | ".join(f"{c} {p}" for c, p in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for L in lengths:
        N = next(r["N"] for r in rows if r["L"] == L)
        lines.append(f"| {L} | {N} | " + " | ".join(f"{table[(c, p, L)] * 1000:.1f}" for c, p in columns) + " |")
    lines += ["", f"A rollout step: act() on {meta['workers']} observations, without gradient; median of "
              f"{steps[0]['repeats']} alternated calls, in microseconds.", "",
              "| core | " + " | ".join(s["core"] for s in steps) + " |", "|---|" + "---|" * len(steps),
              f"| W = {meta['workers']} | " + " | ".join(f"{s['median_s'] * 1e6:.0f}" for s in steps) + " |"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", nargs="+", default=list(CORES), choices=list(CORES))
    parser.add_argument("--lengths", nargs="+", type=number(int, 1), default=[8, 64, 256, 512])
    parser.add_argument("--hidden", type=number(int, 1), default=256, help="recurrence.hidden_state_size")
    parser.add_argument("--steps", type=number(int, 1), default=2048, help="real steps per call (a minibatch)")
    parser.add_argument("--workers", type=number(int, 1), default=32, help="W of a rollout step")
    parser.add_argument("--repeats", type=number(int, 1), default=5)
    parser.add_argument("--precision", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=number(int, 0), default=0, help="torch threads; 0: torch's default")
    parser.add_argument("--episodes", action="store_true",
                        help="whole-episode sequences, about 3/4 of the slots padding (as Mortar Mayhem's): packed")
    parser.add_argument("--out", required=True, help="writes OUT.json and OUT.md")
    args = parser.parse_args()
    if args.episodes and min(args.lengths) < 2:
        parser.error("--episodes needs --lengths of 2 or more")
    out = life.prefixed(args.out)
    return script.life(lambda: life.check_out("--out", out), lambda started: measure_all(args, out))


def measure_all(args, out: list[Path]) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    rows = measure(args.cores, args.lengths, args.hidden, args.steps, args.repeats, args.precision, device,
                   args.episodes)
    steps = measure_steps(args.cores, args.workers, args.hidden, args.repeats, args.precision, device)
    meta = {"device": args.device, "precision": args.precision, "steps": args.steps, "hidden": args.hidden,
            "episodes": args.episodes,
            "workers": args.workers,
            "repeats": args.repeats, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "machine": torch.cuda.get_device_name(device) if device.type == "cuda" else machine()["cpu"],
            "command": "python " + " ".join(["tools/core_speed.py", *sys.argv[1:]])}
    life.write_out({out[0]: json.dumps({"meta": meta, "rows": rows, "steps": steps}, indent=1) + "\n",
                    out[1]: markdown(rows, steps, meta)})
    print(f"wrote {out[0]} and {out[1]}")
    return 0


if __name__ == "__main__":
    script.run(main)
