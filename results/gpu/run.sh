#!/usr/bin/env bash
# Issue 24, point 5: the GPU checks, as one command on a lent GPU machine (about 6-8 minutes of its
# time; it has Python 3.12 and a CUDA torch, no network). Here, first: `bash results/gpu/wheels.sh`
# (the missing packages as wheels in .whl/). Then, through the device tool, from the repository root:
#   run(command="bash results/gpu/run.sh", carry=[".whl"], timeout_s=590)
# What it leaves in $OUT (results/gpu/out when run by hand): gpu.txt (the card and torch), tests.txt
# (the log-prob consistency checks and every shipped config's two updates, on cuda), and
# minigrid_cuda.md/.json (configs/minigrid.yaml on cuda: steps/s and the phases of the training loop).
# Copy them under results/gpu/ and say on which card they were taken.
# Size: the device takes at most 64 MiB of tracked files and carried paths. With the shipped Memory Gym
# (27 MB) and Breakout (9 MB) models the tracked files are 66 MiB, already over it: move those two
# models out of the checkout for the call, and back after (done so for results/minigrid/gpu_seeds.sh:
# 31 MiB). A check without Memory Gym or Atari carries only gymnasium, farama-notifications, minigrid
# and docopt (0.6 MB, as results/gpu/tests_optimizer.txt was made), MiniGrid's runs pygame-ce too.
set -uo pipefail
OUT=${OUT:-results/gpu/out}
source results/gpu/setup.sh

# the cuda cases only (tests/devices.py): consistency of the training pass with the rollout (float32 to
# 1e-5, bfloat16 to its stated tolerance), every shipped config's two updates and its checkpoint, the
# timings' GPU memory
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 8 -k "cuda or gpu" tests/test_consistency.py \
    tests/test_shipped_configs.py tests/test_benchmark.py 2>&1 | tee "$OUT/tests.txt"

# MiniGrid on the GPU: 10 updates a run, 2 runs. results/speed/precision_cuda.* (bfloat16 against float32)
# came from the instrument this line replaced, at accca2c: tools/speed/precision.py --config configs/minigrid.yaml
# --set updates=10 --device cuda --repeats 2 --name precision_cuda
timeout 300 python3 tools/benchmark.py --config configs/minigrid.yaml --set updates=10 --set device=cuda \
    --repeats 2 --out "$OUT/minigrid_cuda" 2>&1 | tail -20
ls -l "$OUT"
