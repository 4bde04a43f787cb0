#!/usr/bin/env bash
# results/best_rule/: how far a 150-episode evaluation moves by chance at a low success rate, and which model each
# rule for models/<run-id>-best.pt keeps (issue 72, point 5; docs/reliability.md, "A best model that is not picked
# by luck"), from the repository root.
# tools/evaluation_noise.py answered its question and was removed after af45231; its lines are kept as comments
# (read it with `git show af45231:tools/evaluation_noise.py`; run them from a checkout of that commit,
# `git worktree add /tmp/at af45231`).
set -euo pipefail
PY=${PY:-.venv/bin/python}
# the shipped Mystery Path Grid model on fresh sets of 150 episodes (set s: enjoy.py --seed s's episodes) and on its
# run's own evaluation set (evaluation.seed 0's episodes) replayed with other action draws (1 to 8), alternately;
# one JSON file per set in sets/ (fresh_4.json was played with 2 torch threads, the others with 1)
# at af45231: tools/evaluation_noise.py play --model models/mystery_path_grid.pt --fresh 4 \
#   --out results/best_rule/sets
# at af45231: tools/evaluation_noise.py play --model models/mystery_path_grid.pt --fresh 5-12 \
#   --replays 1-8 --out results/best_rule/sets
# the report: with the fresh sets 1-3 and the own set as its run played it, which enjoy.py scored before
# (results/shipped/mystery_path_grid.log is --seed 1; results/memory_gym/run.sh has those commands)
# M=results/memory_gym
# at af45231: tools/evaluation_noise.py report --fresh results/shipped/mystery_path_grid.log \
#   $M/mpg_grid_seed0_rerun_best_fresh_seed2.log $M/mpg_grid_seed0_rerun_best_fresh_seed3.log \
#   results/best_rule/sets/fresh_{4..12}.json \
#   --own $M/mpg_grid_seed0_rerun_best_on_eval_seed0.log results/best_rule/sets/replay_{1..8}.json \
#   --out results/best_rule/mystery_path_grid
