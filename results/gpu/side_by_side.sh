#!/usr/bin/env bash
# Issue 41, point 6: the reference baseline and this repository side by side on MiniGrid-MemoryS9, whole
# train.py processes, alternated (ref, ours, ours, ref, ref, ours, ...) so that drift hits both alike.
#   bash results/gpu/side_by_side.sh REF_DIR ROUNDS UPDATES OUTDIR [ours' --set KEY=VALUE ...]
# REF_DIR: a copy of the reference's tree, prepared as results/gpu/README.md says (never committed here).
# Both train their minigrid.yaml (16 x 256 steps an update) for UPDATES updates; ours without evaluation or
# checkpoints in between, as the reference has none. Every line a run prints is stamped with the time, so
# that the report gives each side's whole-process steps/s (start-up included), its steady rate (from the
# seconds between its first and last update lines) and what start-up cost, and the medians' ratios.
set -uo pipefail
REF=$(cd "$1" && pwd) ROUNDS=$2 UPDATES=$3 OUTDIR=$4; shift 4
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-python3}
mkdir -p "$OUTDIR"
SCRATCH=$(mktemp -d)
cp -r "$REF" "$SCRATCH/ref"
sed "s/^updates: .*/updates: $UPDATES/" "$REF/configs/minigrid.yaml" > "$SCRATCH/ref/configs/side_by_side.yaml"
mkdir -p "$SCRATCH/ours"
STEPS=$((UPDATES * 16 * 256))
LOG=$OUTDIR/side_by_side.txt
echo "rounds $ROUNDS, $UPDATES updates a run ($STEPS env steps), ours' --set: $*" | tee "$LOG"
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
run() {  # side round [ours' --set values]: one whole process, timed, its lines stamped
    local side=$1 round=$2 t0 t1 rc; shift 2
    t0=$(date +%s.%N)
    if [ "$side" = ref ]; then
        (cd "$SCRATCH/ref" && timeout 300 $PY train.py --config configs/side_by_side.yaml --run-id sbs$round) 2>&1 \
            | stamp > "$OUTDIR/${side}_$round.log"
    else
        (cd "$SCRATCH/ours" && timeout 300 $PY "$ROOT/train.py" --config "$ROOT/configs/minigrid.yaml" --run-id sbs$round \
            --set updates="$UPDATES" --set checkpoint_interval=0 --set evaluation.interval=0 "$@") 2>&1 \
            | stamp > "$OUTDIR/${side}_$round.log"
    fi
    rc=${PIPESTATUS[0]}; t1=$(date +%s.%N)
    python3 -c "import sys; w=$t1-$t0; print(f'{sys.argv[1]:4s} round {sys.argv[2]}: {w:7.1f} s  {$STEPS/w:7.0f} steps/s  rc {sys.argv[3]}')" \
        "$side" "$round" "$rc" | tee -a "$LOG"
}
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then run ref "$r"; run ours "$r" "$@"; else run ours "$r" "$@"; run ref "$r"; fi
done
rm -rf "$SCRATCH"
python3 - "$OUTDIR" "$UPDATES" "ours: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null), --set $*" <<'PY' | tee "$OUTDIR/side_by_side.md"
import glob, re, statistics, sys
outdir, updates, ours = sys.argv[1], int(sys.argv[2]), sys.argv[3]
steps = updates * 16 * 256
# an update's line: the reference prints "  N reward=...", ours "update   N/U ..."
update_line = {"ref": re.compile(r"^\s*\d+ reward="), "ours": re.compile(r"^update\s+\d+/")}
rows, rates = [], {"ref": ([], []), "ours": ([], [])}
runs = re.findall(r"^(ref|ours)\s+round (\d+):\s+(\S+) s .* rc (\d+)$", open(f"{outdir}/side_by_side.txt").read(), re.M)
for side, round_, wall, rc in runs:
    stamped = [text.split(" ", 1) for text in open(f"{outdir}/{side}_{round_}.log").read().splitlines()]
    ups = [float(t) for t, text in stamped if update_line[side].match(text)]
    wall = float(wall)
    per_update = (ups[-1] - ups[0]) / (len(ups) - 1) if len(ups) > 1 else float("nan")
    rates[side][0].append(steps / wall)
    rates[side][1].append(4096 / per_update)
    rows.append(f"| {side} | {round_} | {rc} | {len(ups)} | {wall:.1f} | {steps / wall:,.0f} | {wall - len(ups) * per_update:.1f} | "
                f"{per_update:.3f} | {4096 / per_update:,.0f} |")
print(f"MiniGrid-MemoryS9, {updates} updates a run ({steps:,} env steps); {ours}\n")
print("| side | round | exit | updates | wall s | whole-process steps/s | start-up s (wall - updates x s an update) | s an update (2nd to last) | steady steps/s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
print("\n".join(rows))
med = {side: (statistics.median(w), statistics.median(s)) for side, (w, s) in rates.items() if w}
print()
for side, (w, s) in med.items():
    print(f"- {side}: median whole-process {w:,.0f} steps/s, median steady {s:,.0f} steps/s")
if len(med) == 2:
    print(f"- ours / ref: whole-process {med['ours'][0] / med['ref'][0]:.2f}x, steady {med['ours'][1] / med['ref'][1]:.2f}x")
PY
