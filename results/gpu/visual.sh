#!/usr/bin/env bash
# Issue 41, point 6: this repository's visual configs on a lent GPU machine, a few updates each, as a user
# would start them there (`precision: auto`, bfloat16 on a GPU then; float32 there since results/gpu/precision.sh),
# with more worker processes than the 2-core default, since the machine has 16 cores. train.py's `timings:` line gives the
# steps/s and the env / inference / buffer / update split (seconds of the training loop). From the
# repository root, on the device machine (results/gpu/README.md says with what):
#   bash results/gpu/visual.sh
# Logs go to $OUT (results/gpu/out when run by hand).
set -uo pipefail
OUT=${OUT:-results/gpu/out}
ROOT=$(pwd)
mkdir -p "$OUT"
export SDL_VIDEODRIVER=dummy PYTHONUNBUFFERED=1
SCRATCH=$(mktemp -d)
# config, updates, worker processes
while read -r name updates processes; do
    (cd "$SCRATCH" && timeout 150 python3 "$ROOT/train.py" --config "$ROOT/configs/$name.yaml" --run-id "gpu_$name" \
        --set device=cuda --set updates="$updates" --set worker_processes="$processes" \
        --set checkpoint_interval=0 --set evaluation.interval=0) > "$OUT/$name.log" 2>&1
    echo "$name: rc $?, $updates updates, $processes worker processes"
    grep -h "timings:" "$OUT/$name.log" || tail -5 "$OUT/$name.log"
done <<'RUNS'
minigrid 10 8
mortar_mayhem_b_grid 4 16
breakout_noframeskip 20 8
RUNS
rm -rf "$SCRATCH"
