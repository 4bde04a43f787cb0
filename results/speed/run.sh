#!/usr/bin/env bash
# The measurements of results/speed/ (docs/results.md, README), in one go on an otherwise
# idle machine, from the repository root. Each script alternates what it compares.
set -euo pipefail
PY=${PY:-.venv/bin/python}
$PY tools/speed/encoder.py
$PY tools/speed/recurrent.py
$PY tools/speed/rollout_threads.py
$PY tools/speed/grad_mode.py
$PY tools/speed/optimizer.py --repeats 3
$PY tools/speed/threads.py --config configs/cartpole_masked.yaml --set updates=20 \
    --config configs/minigrid.yaml --set updates=2 --repeats 3
# alone: both sides on the machine's 2 threads (torch_threads 0 would count the cores left idle)
$PY tools/benchmark.py --against 5176396 --own-configs --config configs/minigrid.yaml --set updates=3 \
    --set torch_threads=2 --repeats 3 --out results/speed/minigrid_against_5176396
# beside one busy process: each side's own default thread choice
$PY tools/benchmark.py --against 5176396 --own-configs --config configs/minigrid.yaml --set updates=2 \
    --busy 1 --repeats 3 --out results/speed/minigrid_against_5176396_busy
# the fast configs: 11 runs a side, refused on (and failing beside) other work
$PY tools/benchmark.py --against 5176396 --own-configs --config configs/cartpole_masked.yaml \
    --config configs/poc_memory_env.yaml --set torch_threads=2 --repeats 11 --require-idle \
    --out results/speed/fast_against_5176396
$PY tools/speed/optimizer_flat.py
$PY tools/speed/rollout_step.py --against 3a3aeaa --config configs/cartpole_masked.yaml --config configs/poc_memory_env.yaml
$PY tools/speed/precision.py --config configs/minigrid.yaml --set updates=10 --repeats 3
