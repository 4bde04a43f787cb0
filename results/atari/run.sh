#!/usr/bin/env bash
# results/atari/: Breakout in CleanRL's setting (configs/breakout_noframeskip.yaml), from the repository root.
set -euo pipefail
PY=${PY:-.venv/bin/python}
# a uniform random policy, scored by the config's own held-out evaluation
$PY tools/random_policy.py --config configs/breakout_noframeskip.yaml --episodes 400 --out results/atari/random_noframeskip
# stepping 8 environments: our worker processes against ale-py's AtariVectorEnv (idle machine)
$PY tools/atari_vector.py --steps 2000 --repeats 3
# what a lost life does: ours against AtariVectorEnv (a few seconds of one core)
$PY tools/atari_lives.py --games 8
