#!/usr/bin/env bash
# Whether `precision: auto` should mean bfloat16 on a GPU: Mortar Mayhem B Grid and MiniGrid in float32 and in
# bfloat16 on the same card, whole train.py processes alternated f, b, b, f, f, b, every output line stamped
# with the time. Per run: the seconds from the start to the first update's line, the median steps/s of the
# updates after the first, and train.py's `timings:` line. Also the start-up's imports (python -X importtime).
# On the device machine, from the repository root, the environments' wheels in .whl/ (results/gpu/wheels.sh):
#   bash results/gpu/precision.sh
# Logs and precision.txt go to $OUT (results/gpu/out when run by hand).
set -uo pipefail
OUT=${OUT:-results/gpu/out}
ROOT=$(pwd)
mkdir -p "$OUT"
export SDL_VIDEODRIVER=dummy PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    || { echo "wheels: run results/gpu/wheels.sh here and carry .whl"; exit 2; }
export PYTHONPATH=/tmp/site
{ nvidia-smi -L; nproc; python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__,
'cuda', torch.version.cuda, torch.cuda.get_device_name(), 'bfloat16', torch.cuda.is_bf16_supported())"; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
SCRATCH=$(mktemp -d)
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
steady() {  # log: start-up seconds and the median steps/s of the updates after the first
    python3 - "$1" <<'PY'
import re, statistics, sys
lines = [l.split(" ", 1) for l in open(sys.argv[1]) if " " in l]
t0 = float(lines[0][0])
updates = [(float(t), float(re.search(r"sps +(\d+)", l).group(1))) for t, l in lines if l.startswith("update ")]
if updates:
    print(f"start-up {updates[0][0] - t0:5.1f} s  steady {statistics.median(s for _, s in updates[1:] or updates):6.0f} steps/s")
else:
    print("no update line")
PY
}
run() {  # config updates processes precision round
    local log=$OUT/$1_$4_$5.log
    (cd "$SCRATCH" && echo start && timeout 150 python3 "$ROOT/train.py" --config "$ROOT/configs/$1.yaml" \
        --run-id "p_$1_$4_$5" --overwrite --set device=cuda --set precision="$4" --set updates="$2" \
        --set worker_processes="$3" --set checkpoint_interval=0 --set evaluation.interval=0) 2>&1 | stamp > "$log"
    echo "$1 $4 round $5: rc ${PIPESTATUS[0]}  $(steady "$log")" | tee -a "$OUT/precision.txt"
}
T0=$(date +%s)
while read -r name updates processes; do
    for round in 1 2 3; do
        [ $(( $(date +%s) - T0 )) -lt "${BUDGET:-420}" ] || { echo "budget spent before $name round $round" | tee -a "$OUT/precision.txt"; break 2; }
        if [ $((round % 2)) -eq 1 ]; then order="float32 bfloat16"; else order="bfloat16 float32"; fi
        for p in $order; do run "$name" "$updates" "$processes" "$p" "$round"; done
    done
done <<'RUNS'
mortar_mayhem_b_grid 5 16
minigrid 10 8
RUNS
for log in "$OUT"/*.log; do echo "$(basename "$log" .log) $(grep -h "timings:" "$log" | cut -d' ' -f2-)"; done > "$OUT/timings.txt"
(cd "$SCRATCH" && python3 -X importtime "$ROOT/train.py" --help > /dev/null 2> "$OUT/importtime.txt")
python3 -c "import time; t = time.perf_counter(); import torch; a = time.perf_counter(); torch.zeros(1, device='cuda');
print(f'import torch {a - t:.1f} s, first cuda tensor {time.perf_counter() - a:.1f} s')" | tee -a "$OUT/precision.txt"
rm -rf "$SCRATCH"
