"""What small sets and the pick of the best evaluation do to a Breakout score: 16- and 32-game means
resampled from the fresh float32 games of results/atari/gap/ (a fixed seed), from the repository root:

    python tools/breakout_selection.py
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root, the other tools as tools.<name>
from tools.episode_interval import returns  # noqa: E402

G = ROOT / "results" / "atari" / "gap"
FRESH = ["fp32_seed1.log", "fp32_seed3.log", "fp32_seed424242_128.log", "fp32_seed1234567.log", "fp32_seed5.log"]

games = np.concatenate([returns(str(G / f)) for f in FRESH])
rng = np.random.default_rng(0)
means16 = rng.choice(games, size=(200_000, 16)).mean(1)
means32 = rng.choice(games, size=(200_000, 32)).mean(1)
print(f"{len(games)} fresh games: mean {games.mean():.2f}, std {games.std():.2f}, min {games.min():.0f}, "
      f"max {games.max():.0f}")
print(f"16-game mean: std {means16.std():.2f}; at least 84.625 (the run's last evaluation) "
      f"{(means16 >= 84.625).mean():.2%}")
for k in (5, 20):
    print(f"best of {k} evaluations of 16 games: {means16.reshape(-1, k).max(1).mean():.1f} on average")
print(f"32-game mean: std {means32.std():.2f}; at most 52.406 (seed 424242's first 32) "
      f"{(means32 <= 52.406).mean():.2%}; under 45 (the test's floor) {(means32 < 45).mean():.4%}")
