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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's modules
from plumbing import script  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)  # the imports below take seconds

import numpy as np  # noqa: E402
from scipy import stats as scipy_stats  # noqa: E402

from plumbing.errors import ConfigError  # noqa: E402
import stats  # noqa: E402

WHAT = "enjoy.py's saved output or a JSON file of episodes"


def returns(path: str) -> np.ndarray:
    """The episodes' returns of one file, or of several joined by commas (one pooled sample); refused where there
    are none."""
    if "," in path:
        return np.concatenate([returns(p) for p in path.split(",")])
    episodes = path.endswith(".json")
    data = life.read_json(path, WHAT) if episodes else life.read_text(path, WHAT)
    try:
        if episodes:
            found = [float(e["reward"]) for e in data["episodes"]]
        else:
            lines = [line.split() for line in data.splitlines() if line.startswith("episode ")]
            found = [float(words[words.index("return") + 1]) for words in lines]
    except (KeyError, IndexError, TypeError, ValueError):
        raise ConfigError(f"{path} does not hold episodes with their returns: give {WHAT}") from None
    if not found:
        raise ConfigError(f"{path} holds no episodes (no 'episode N  return R' line): give {WHAT}")
    return np.array(found)


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
    if args.difference and len(args.files) != 2:
        parser.error(f"--difference takes two files (or comma-joined lists), got {len(args.files)}")
    return script.life(lambda: [returns(f) for f in args.files], lambda samples: report(args, samples))


def report(args, samples: list[np.ndarray]) -> int:
    if args.seeds:
        means = np.array([r.mean() for r in samples])
        cells = ", ".join(f"{name} {a['value']:.3f} [{a['low']:.3f}, {a['high']:.3f}]"
                          for name, a in stats.aggregates(means).items())
        print(f"{len(means)} seeds' means ({', '.join(f'{m:.3f}' for m in means)}): {cells}")
        return 0
    if args.pool:
        r = np.concatenate(samples)
        point, low, high = interval([r], lambda x, axis=-1: x.mean(axis))
        print(f"{len(args.files)} files pooled: {len(r)} episodes, mean {point:.3f} [{low:.3f}, {high:.3f}], "
              f"std {r.std():.3f}, min {r.min():.3f}, max {r.max():.3f}")
        return 0
    if args.difference:
        a, b = samples
        point, low, high = interval([a, b], lambda x, y, axis=-1: y.mean(axis) - x.mean(axis))
        print(f"{args.files[1]} - {args.files[0]}: {point:+.2f} [{low:+.2f}, {high:+.2f}] "
              f"({len(a)} and {len(b)} episodes)")
        return 0
    for f, r in zip(args.files, samples):
        if len(r) < 2:
            print(f"{f}: {len(r)} episodes, too few for an interval")
            continue
        point, low, high = interval([r], lambda x, axis=-1: x.mean(axis))
        print(f"{f}: {len(r)} episodes, mean {point:.3f} [{low:.3f}, {high:.3f}], std {r.std():.3f}, "
              f"min {r.min():.3f}, max {r.max():.3f}")
    return 0


if __name__ == "__main__":
    script.run(main)
