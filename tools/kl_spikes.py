"""Large policy updates and the falls of the training return that follow them, run by run.

    python tools/kl_spikes.py --runs results/cores/runs/minigrid_* --out results/cores/kl_spikes

A spike is an update whose approximate KL (training/approx_kl) is above --spike. A fall is an update
whose mean episode return (episode/reward_mean) drops below --low after the run had reached --high.
For each fall the table names the largest KL of the --window updates before it. Writes <out>.md.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's stats.py
import stats  # noqa: E402

TAGS = {"training/approx_kl": "kl", "episode/reward_mean": "reward"}


def spikes_and_falls(run: Path, spike: float, high: float, low: float, window: int) -> dict:
    scalars = stats.read_scalars(run, TAGS)
    updates = np.array(sorted(u for u in scalars if {"kl", "reward"} <= scalars[u].keys()))
    if not len(updates):
        raise ValueError(f"no update has both {' and '.join(TAGS)}")
    kl = np.array([scalars[u]["kl"] for u in updates])
    reward = np.array([scalars[u]["reward"] for u in updates])
    reached = np.maximum.accumulate(reward) >= high
    falls = [i for i in range(1, len(reward)) if reached[i - 1] and reward[i - 1] >= low > reward[i]]
    before = [max(range(max(0, i - window), i), key=lambda j: kl[j]) for i in falls]
    return {"median": float(np.median(kl)), "spikes": int((kl > spike).sum()), "updates": len(kl),
            "max": (float(kl.max()), int(updates[kl.argmax()])),
            "falls": [(int(updates[i]), float(reward[i:i + 10].min()), float(kl[j]), int(updates[j]))
                      for i, j in zip(falls, before)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, help="run folders of TensorBoard summaries")
    parser.add_argument("--out", required=True, help="writes <out>.md")
    parser.add_argument("--spike", type=float, default=0.05)
    parser.add_argument("--high", type=float, default=0.9)
    parser.add_argument("--low", type=float, default=0.6)
    parser.add_argument("--window", type=int, default=5)
    args = parser.parse_args(argv)
    lines = [f"Spike: approximate KL above {args.spike}. Fall: the mean episode return of an update below "
             f"{args.low} after the run had reached {args.high}; its largest KL over the {args.window} updates "
             f"before it, and the lowest return of the 10 updates from it.", "",
             "| run | median KL | spikes | largest KL (update) | falls: update, lowest return, KL before (update) |",
             "|---|---:|---:|---:|---|"]
    for run in args.runs:
        try:
            r = spikes_and_falls(Path(run), args.spike, args.high, args.low, args.window)
        except ValueError as error:
            parser.error(f"{run}: {error}")
        falls = "; ".join(f"{u}: {low:.2f}, {kl:.3f} ({at})" for u, low, kl, at in r["falls"]) or "none"
        lines.append(f"| {run} | {r['median']:.4f} | {r['spikes']} of {r['updates']} | "
                     f"{r['max'][0]:.3f} ({r['max'][1]}) | {falls} |")
    Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
