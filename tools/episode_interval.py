"""The mean episode return of enjoy.py runs with its 95% interval (scipy's percentile bootstrap, 10,000
resamples, a fixed seed), and the difference of two runs' means with its interval.

    python tools/episode_interval.py results/shipped/*.log
    python tools/episode_interval.py --difference a.log b.log  (or a1.log,a2.log b1.json,b2.json: pooled)
    python tools/episode_interval.py --pool a.log b.json ...
    python tools/episode_interval.py --seeds seed0.log seed1.log seed2.log  (one file per training seed)

Reads enjoy.py's per-episode lines ("episode N  return R  length L") from its saved output, or the
"episodes" list of a JSON file (results/atari/gap/bf16_*.json). With --seeds, each file is one training
seed's model scored on fresh episodes: the mean, median and IQM over seeds of their mean returns, with
stats.py's interval (percentile bootstrap over seeds), as stats.py aggregates a run's final score.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's modules
from plumbing.cli import failed  # noqa: E402
from plumbing.files import kind  # noqa: E402
import stats  # noqa: E402


def returns(path: str) -> np.ndarray:
    """The episodes' returns of one file, or of several joined by commas (one pooled sample)."""
    if "," in path:
        return np.concatenate([returns(p) for p in path.split(",")])
    if path.endswith(".json"):
        return np.array([e["reward"] for e in json.loads(Path(path).read_text())["episodes"]])
    lines = [line.split() for line in Path(path).read_text().splitlines() if line.startswith("episode ")]
    return np.array([float(words[words.index("return") + 1]) for words in lines])


def interval(samples: list[np.ndarray], statistic) -> tuple[float, float, float]:
    result = scipy_stats.bootstrap(samples, statistic, n_resamples=10_000, method="percentile",
                                   random_state=np.random.default_rng(0))
    return float(statistic(*samples)), float(result.confidence_interval.low), float(result.confidence_interval.high)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--difference", action="store_true", help="the second file's mean minus the first's")
    parser.add_argument("--pool", action="store_true", help="all the files' episodes as one sample")
    parser.add_argument("--seeds", action="store_true", help="each file one seed's: statistics over the seeds' means")
    args = parser.parse_args()
    for path in (p for f in args.files for p in f.split(",")):
        if kind(path) != "a file":
            return failed(f"{path} is {kind(path)}: give enjoy.py's saved output or a JSON file of episodes")
    if args.seeds:
        means = np.array([returns(f).mean() for f in args.files])
        cells = ", ".join(f"{name} {a['value']:.3f} [{a['low']:.3f}, {a['high']:.3f}]"
                          for name, a in stats.aggregates(means).items())
        print(f"{len(means)} seeds' means ({', '.join(f'{m:.3f}' for m in means)}): {cells}")
        return 0
    if args.pool:
        r = np.concatenate([returns(f) for f in args.files])
        point, low, high = interval([r], lambda x, axis=-1: x.mean(axis))
        print(f"{len(args.files)} files pooled: {len(r)} episodes, mean {point:.3f} [{low:.3f}, {high:.3f}], "
              f"std {r.std():.3f}, min {r.min():.3f}, max {r.max():.3f}")
        return 0
    if args.difference:
        a, b = (returns(f) for f in args.files)
        point, low, high = interval([a, b], lambda x, y, axis=-1: y.mean(axis) - x.mean(axis))
        print(f"{args.files[1]} - {args.files[0]}: {point:+.2f} [{low:+.2f}, {high:+.2f}] "
              f"({len(a)} and {len(b)} episodes)")
        return 0
    for f in args.files:
        r = returns(f)
        if len(r) < 2:
            print(f"{f}: {len(r)} episodes, too few for an interval")
            continue
        point, low, high = interval([r], lambda x, axis=-1: x.mean(axis))
        print(f"{f}: {len(r)} episodes, mean {point:.3f} [{low:.3f}, {high:.3f}], std {r.std():.3f}, "
              f"min {r.min():.3f}, max {r.max():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
