#!/usr/bin/env bash
# The measurements of results/speed/ (docs/results.md, README), from the repository root, on an otherwise
# idle machine; each file names the commit it ran at. The instruments of tools/speed/ answered their
# questions and were removed after commit accca2c; the lines that used them are kept below as comments
# (read one with `git show accca2c:tools/speed/<name>.py`; run it from a checkout of that commit,
# `git worktree add /tmp/at accca2c`).
set -euo pipefail
PY=${PY:-.venv/bin/python}
# at accca2c: tools/speed/encoder.py
# at accca2c: tools/speed/recurrent.py
# at accca2c: tools/speed/rollout_threads.py
# at accca2c: tools/speed/grad_mode.py
# at accca2c: tools/speed/optimizer.py --repeats 3
# at accca2c: tools/speed/threads.py --config configs/cartpole_masked.yaml --set updates=20 \
#     --config configs/minigrid.yaml --set updates=2 --repeats 3
# alone: both sides on the machine's 2 threads (torch_threads 0 would count the cores left idle)
$PY tools/benchmark.py --against 5176396 --own-configs --config configs/minigrid.yaml --set updates=3 \
    --set torch_threads=2 --repeats 3 --out results/speed/minigrid_against_5176396
# beside one busy process, each side's own default thread choice (benchmark.py's --busy, removed after accca2c):
# at accca2c: tools/benchmark.py --against 5176396 --own-configs --config configs/minigrid.yaml --set updates=2 \
#     --busy 1 --repeats 3 --out results/speed/minigrid_against_5176396_busy
# the fast configs: 11 runs a side, refused on (and failing beside) other work
$PY tools/benchmark.py --against 5176396 --own-configs --config configs/cartpole_masked.yaml \
    --config configs/poc_memory_env.yaml --set torch_threads=2 --repeats 11 --require-idle \
    --out results/speed/fast_against_5176396
# (the same on the 2-core Xeon, 2026-11-26: --out results/speed/fast_against_5176396_xeon, its per-run lines
# saved as fast_against_5176396_xeon.log)
# at accca2c: tools/speed/optimizer_flat.py
# at accca2c: tools/speed/rollout_step.py --against 3a3aeaa --config configs/cartpole_masked.yaml \
#     --config configs/poc_memory_env.yaml
# at accca2c: tools/speed/precision.py --config configs/minigrid.yaml --set updates=10 --repeats 3
# the same on the 2-core Xeon with AMX that ran the MiniGrid sweep's seeds (results/speed/precision_xeon.md)
# at accca2c: tools/speed/precision.py --config configs/minigrid.yaml --set updates=10 --repeats 3 --name precision_xeon
# the packed training pass: the core's two ways with padding, at MiniGrid's minibatch (512 real steps) and at
# Memory Gym's (2048 real steps, GRU 512 on 3316 features)
# at accca2c: tools/speed/recurrent.py --kinds gru --widths 3316 --lengths 32 128 512 \
#     --paddings 0.25 0.5 0.75 0.9 --steps 2048 --hidden 512 --out recurrent_memory_gym --repeats 3
# whole runs against the commit before it (the Memory Gym row's padded gather used 5 GB: the kernel's own
# page work counts as other work there, so no --require-idle; the report gives the load)
SDL_VIDEODRIVER=dummy $PY tools/benchmark.py --against 8df78aa --config configs/mortar_mayhem_b_grid.yaml \
    --set updates=3 --set evaluation.interval=0 --repeats 3 --out results/speed/packed_memory_gym
$PY tools/benchmark.py --against 8df78aa --config configs/minigrid.yaml --set updates=3 \
    --set evaluation.interval=0 --repeats 3 --out results/speed/packed_minigrid
$PY tools/benchmark.py --against 8df78aa --own-configs --config configs/cartpole_masked.yaml \
    --config configs/poc_memory_env.yaml --set torch_threads=2 --repeats 5 --out results/speed/packed_fast
# AdamW's flat gradients (optimizer.py): a minibatch step's parts, model.py and optimizer.py against the commit before
# at accca2c: tools/speed/update_step.py --against 37cb1f2 --config configs/poc_memory_env.yaml \
#     --config configs/cartpole_masked.yaml --repeats 101
# after AdamW's flat gradients (717bd67), the fast configs' benchmark again on the 2-core Xeon, idle, 2026-11-26
# (its per-run lines saved as fast_against_5176396_xeon_flat_grads.log)
$PY tools/benchmark.py --against 5176396 --own-configs --config configs/cartpole_masked.yaml \
    --config configs/poc_memory_env.yaml --set torch_threads=2 --repeats 11 --require-idle \
    --out results/speed/fast_against_5176396_xeon_flat_grads

# The week's merges (transformer core, trust round six, the house, the best-model rule) against bb9ca25, at b17132b
$PY tools/benchmark.py --config configs/cartpole_masked.yaml --config configs/poc_memory_env.yaml --repeats 3 \
    --against bb9ca25 --require-idle --out results/speed/week_against_bb9ca25
# make test test by test, a fresh clone of each commit, one after the other (make_test_against_bb9ca25.md is
# the two --durations=0 lists summed by file)
# SDL_VIDEODRIVER=dummy python -m pytest -q -n 2 --durations=0 -p no:cacheprovider

# autogroup.md: two busy loops on core 1, each in its own session, one niced; then the niced one's autogroup at 19
# loop='while True: pass'
# setsid taskset -c 1 python3 -c "$loop" &
# setsid bash -c "echo $G > /proc/\$\$/autogroup; exec taskset -c 1 nice -n 19 python3 -c '$loop'" &   # G = 0, 19
# (utime + stime of each from /proc/PID/stat over 20 s)
