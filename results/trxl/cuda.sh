#!/usr/bin/env bash
# Issue 71 point 4 on cuda: the transformer beside the GRU on a lent GPU, as one command (about 8 minutes of its
# time; not yet run: no device lent since the core landed). Here, first: `bash results/gpu/wheels.sh` (the packages
# the machine lacks, as wheels in .whl/), and the large shipped models moved out of the checkout for the call
# (results/gpu/run.sh says why). Then, through the device tool, from the repository root:
#   run(command="bash results/trxl/cuda.sh", carry=[".whl"], timeout_s=590)
# What it leaves in $OUT: gpu.txt (the card and torch); trxl_tests.txt (the transformer's cuda cases: the training
# pass reproduces the rollout); core_speed_cuda.md/.json (tools/core_speed.py: the rollout step and the training
# pass per core at MMB's width); speed_<config>_cuda.md/.json (train.py's steps/s and phases, GRU and transformer
# taking turns, 2 runs a side, the same overrides as results/trxl/measure.sh on the CPU).
set -uo pipefail
OUT=${OUT:-results/trxl/cuda_out}
source results/gpu/setup.sh

timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 -k "cuda and trxl" tests/test_cores.py \
    tests/test_consistency.py 2>&1 | tee "$OUT/trxl_tests.txt" | tail -3
timeout 120 python3 tools/core_speed.py --device cuda --cores gru trxl --hidden 512 --steps 2048 \
    --lengths 8 64 256 512 --out "$OUT/core_speed_cuda" 2>&1 | tail -8
for c in minigrid mortar_mayhem_b_grid; do
    updates=3; [ $c = mortar_mayhem_b_grid ] && updates=1
    timeout 200 python3 tools/benchmark.py --config configs/$c.yaml --vary recurrence.layer_type=gru,trxl \
        --set device=cuda --set updates=$updates --set evaluation.interval=0 --set initialization.recurrent_gain=1.0 \
        --repeats 2 --out "$OUT/speed_${c}_cuda" 2>&1 | tail -6
done
ls -l "$OUT"
