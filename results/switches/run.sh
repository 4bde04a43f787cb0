#!/usr/bin/env bash
# The evidence of results/switches/ (docs/memory-inputs.md, README): each recurrence switch
# against the shipped defaults, 10 seeds each through sweep.py, on masked CartPole, the PoC
# task and a long-range cue task (cue_discrete_32.yaml). The defaults of the two shipped
# configs are results/sweeps/run.sh's poc10 and cartpole10 (the same seeds 0-9).
# Run from the repository root on an otherwise idle machine.
set -euo pipefail
PY=${PY:-.venv/bin/python}
SWITCHES=(recurrence.previous_action=true recurrence.previous_reward=true recurrence.burn_in=4
          recurrence.refresh_states=true)
sweep() {  # sweep ID CONFIG [--set KV]
    [ -e "sweeps/$1" ] || $PY sweep.py --sweep-id "$1" --config "$2" --seeds 10 "${@:3}" > "/tmp/$1.log" 2>&1
}
sweep cue32 results/switches/cue_discrete_32.yaml
for s in "${SWITCHES[@]}"; do
    name=${s#recurrence.}; name=${name%%=*}
    sweep "poc-$name" configs/poc_memory_env.yaml --set "$s"
    sweep "cue32-$name" results/switches/cue_discrete_32.yaml --set "$s"
done
for s in "${SWITCHES[@]}"; do
    name=${s#recurrence.}; name=${name%%=*}
    sweep "cartpole-$name" configs/cartpole_masked.yaml --set "$s"
done
$PY stats.py --runs summaries/poc10 summaries/poc-* --out results/switches/poc_memory_env --threshold 1.1
$PY stats.py --runs summaries/cue32 summaries/cue32-* --out results/switches/cue_discrete_32 --threshold 0.9
$PY stats.py --runs summaries/cartpole10 summaries/cartpole-* --out results/switches/cartpole_masked \
    --threshold 190
