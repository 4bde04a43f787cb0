#!/usr/bin/env bash
# Issue 24, point 2: seeds of a MiniGrid sweep trained whole on a lent GPU machine (one command of the
# device tool, at most 10 minutes), while the machine here trains the sweep's other seeds. Each seed is
# the same run as the sweep's trial (configs/minigrid.yaml, the same --seed and overrides, checkpoint
# every 10 updates), through train.py, with more processes stepping its environments (the result does
# not depend on their number; the GPU machine has 16 cores). Through the device tool, from the root:
#   run(command="SEEDS='4 3' BUDGET=565 ENV_PROCESSES=6 bash results/minigrid/gpu_seeds.sh \
#       --set beta_schedule.initial=0.01 --set beta_schedule.max_decay_steps=200", carry=[".whl_small"],
#       timeout_s=600)
# as run on an H200 on 2026-11-26: seed 3 was stopped after 22 updates (both would have ended past the
# budget), seed 4 ended in 545 s of training (results/minigrid/minigrid5_beta_seed4_h200.log).
# .whl_small holds gymnasium, farama-notifications, minigrid, docopt and pygame-ce (copied from the
# .whl of results/gpu/wheels.sh): the machine has torch and the rest. The tree must stay under the
# device's 64 MiB: move the large shipped models (models/mortar_mayhem_b_grid.pt and
# models/breakout_noframeskip.pt) out of the checkout for the call, and back after.
# A 51 MB checkpoint cannot come back (16 MiB a file), so a seed counts only if it ends inside the
# command: after the first updates, if the seeds' pace says they would not all end by BUDGET seconds,
# the last seed is stopped (its partial curve still comes back) so the others go faster. What comes back in $OUT: seed<N>/ (the summaries: config.json and the
# TensorBoard events; kept under results/minigrid/runs/<sweep>_h200/seed<N>) and seed<N>.log.
set -uo pipefail
OUT=${OUT:-results/minigrid/gpu_out}
SEEDS=(${SEEDS:-4})
BUDGET=${BUDGET:-570}
ENV_PROCESSES=${ENV_PROCESSES:-6}
PY=${PY:-python3}
UPDATES=${UPDATES:-$(awk '/^updates:/ {print $2}' configs/minigrid.yaml)}
start=$(date +%s)
mkdir -p "$OUT"
export SDL_VIDEODRIVER=dummy PYTHONUNBUFFERED=1
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl_small/*.whl \
    || { echo "carry .whl_small (results/gpu/run.sh)"; exit 2; }
export PYTHONPATH=/tmp/site
nvidia-smi -L

declare -A pid
for seed in "${SEEDS[@]}"; do
    $PY train.py --config configs/minigrid.yaml --seed "$seed" --run-id "seed$seed" \
        --set checkpoint_interval=10 "$@" --set worker_processes="$ENV_PROCESSES" > "$OUT/seed$seed.log" 2>&1 &
    pid[$seed]=$!
done

elapsed() { echo $(( $(date +%s) - start )); }
update_of() { tr '\r' '\n' < "$OUT/seed$1.log" | awk '/^update +[0-9]+\//' | tail -1 | awk '{print $2+0}'; }
keep() {  # the seeds' summaries into $OUT, so that what a run wrote comes back even if the command is cut
    for seed in "${SEEDS[@]}"; do
        mkdir -p "$OUT/seed$seed"
        cp summaries/seed"$seed"/*/* "$OUT/seed$seed/" 2>/dev/null
    done
}
running() { local n=0; for seed in "${SEEDS[@]}"; do kill -0 "${pid[$seed]}" 2>/dev/null && n=$((n + 1)); done; echo $n; }

checked=0
first_time=(); first_update=()
while [ "$(running)" -gt 0 ]; do
    sleep 10
    keep
    now=$(elapsed)
    line="t=${now}s"
    worst=0
    for seed in "${SEEDS[@]}"; do
        u=$(update_of "$seed"); u=${u:-0}
        line="$line seed$seed:$u"
        # the pace from the seed's 5th update on (start-up and the first updates left out)
        if [ "$u" -ge 5 ] && [ -z "${first_time[$seed]:-}" ]; then first_time[$seed]=$now; first_update[$seed]=$u; fi
        if [ -n "${first_time[$seed]:-}" ] && [ "$u" -ge $(( ${first_update[$seed]} + 5 )) ]; then
            per=$(awk -v t=$((now - first_time[$seed])) -v n=$((u - first_update[$seed])) 'BEGIN {print t / n}')
            finish=$(awk -v now="$now" -v per="$per" -v left=$((UPDATES - u)) 'BEGIN {printf "%d", now + 1.05 * per * left}')
            line="$line(ends~${finish}s)"
            [ "$finish" -gt "$worst" ] && worst=$finish
        fi
    done
    echo "$line"
    if [ "$checked" = 0 ] && [ "$worst" -gt 0 ]; then
        checked=1
        alive=(); for seed in "${SEEDS[@]}"; do kill -0 "${pid[$seed]}" 2>/dev/null && alive+=("$seed"); done
        if [ "$worst" -gt "$BUDGET" ] && [ "${#alive[@]}" -gt 1 ]; then
            last=${alive[-1]}
            echo "projected end ${worst}s > ${BUDGET}s: stopping seed$last so that the others end in time"
            kill -INT "${pid[$last]}"
            checked=0; first_time=(); first_update=()  # the pace again, without it
        fi
    fi
    if [ "$now" -ge "$BUDGET" ]; then
        echo "budget reached: stopping what still runs (not a whole seed)"
        for seed in "${SEEDS[@]}"; do kill -INT "${pid[$seed]}" 2>/dev/null; done
        sleep 8
        break
    fi
done
wait
keep
for seed in "${SEEDS[@]}"; do echo "seed$seed: $(tr '\r' '\n' < "$OUT/seed$seed.log" | grep -E '^(timings|saved|stopped|error)' | cut -c1-300)"; done
ls -l "$OUT" "$OUT"/seed*/
