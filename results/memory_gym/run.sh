#!/usr/bin/env bash
# results/memory_gym/: Mortar Mayhem B Grid (configs/mortar_mayhem_b_grid.yaml), from the repository root.
set -euo pipefail
PY=${PY:-.venv/bin/python}
# a uniform random policy, scored by the config's own held-out evaluation (150 novel-seed episodes)
SDL_VIDEODRIVER=dummy $PY tools/random_policy.py --config configs/mortar_mayhem_b_grid.yaml --out results/memory_gym/random_b_grid
