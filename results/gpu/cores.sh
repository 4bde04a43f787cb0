#!/usr/bin/env bash
# Issue 57 point 8: the memory models on a lent GPU, as one command (about 6-8 minutes of its time). Here,
# first: `bash results/gpu/wheels.sh` (the missing packages as wheels in .whl/); with the shipped Memory Gym
# and Breakout models moved out of the checkout for the call (results/gpu/run.sh says why). Then, through the
# device tool, from the repository root:
#   run(command="bash results/gpu/cores.sh", carry=[".whl"], timeout_s=590)
# What it leaves in $OUT: gpu.txt (the card and torch), cores_tests.txt (every core's cuda cases: the training
# pass reproduces the rollout, and each path of minGRU and the LRU equals its steps), core_speed_cuda.md/.json
# (tools/core_speed.py on cuda: which path is faster at which L, and a rollout step per core) and
# minigrid_<core>_cuda.md/.json (configs/minigrid.yaml on cuda, steps/s per core).
set -uo pipefail
OUT=${OUT:-results/gpu/out}
source results/gpu/setup.sh

timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -k "cuda" tests/test_cores.py tests/test_consistency.py \
    2>&1 | tee "$OUT/cores_tests.txt"
timeout 150 python3 tools/core_speed.py --device cuda --hidden 512 --steps 2048 --lengths 8 64 256 512 \
    --out "$OUT/core_speed_cuda" 2>&1 | tail -12
for core in gru lstm mingru lru; do
    timeout 60 python3 tools/benchmark.py --config configs/minigrid.yaml --set updates=3 --set device=cuda \
        --set recurrence.layer_type=$core --repeats 1 --out "$OUT/minigrid_${core}_cuda" 2>&1 | tail -3
done
ls -l "$OUT"
