#!/usr/bin/env bash
# The evidence of results/sweeps/ (docs/sweeps.md, README): 10 seeds of the two fast configs
# through sweep.py and the same seeds one after another with train.py, then an Optuna search.
# Run from the repository root on an otherwise idle machine; each step writes its own files.
set -euo pipefail
PY=${PY:-.venv/bin/python}
out=results/sweeps
copy() { cp "sweeps/$1/stats.md" "$out/$1.md"; cp "sweeps/$1/stats.json" "$out/$1.json"; cp "sweeps/$1/stats.png" "$out/$1.png"; }

$PY sweep.py --config configs/poc_memory_env.yaml --seeds 10 --sweep-id poc10 --threshold 1.1 | tee "$out/poc10.log"
copy poc10
# the same seeds one after another with train.py, and Ray's own cost per trial (one 2-thread trial at a time
# against train.py one after another, alternated): both instruments were removed after accca2c
# at accca2c: tools/sequential.py --config configs/poc_memory_env.yaml --seeds 10 --out "$out/poc10_sequential"
# at accca2c: tools/sweep_overhead.py --config configs/poc_memory_env.yaml --seeds 10 --repeats 3 --out "$out/poc10_overhead"

$PY sweep.py --config configs/cartpole_masked.yaml --seeds 10 --sweep-id cartpole10 --threshold 190 | tee "$out/cartpole10.log"
copy cartpole10
# at accca2c: tools/sequential.py --config configs/cartpole_masked.yaml --seeds 10 --out "$out/cartpole10_sequential"

# a search: 16 samples of TPE over learning rate, entropy coefficient and sequence length, ASHA
$PY sweep.py --config configs/cartpole_masked.yaml --sweep-id cartpole_search --samples 16 \
    --search learning_rate_schedule.initial=loguniform:1.0e-4:2.0e-3 \
    --search beta_schedule.initial=loguniform:1.0e-4:1.0e-2 \
    --search recurrence.sequence_length=choice:4,8,16,32 \
    --scheduler asha --metric episode/reward_mean_last100 | tee "$out/cartpole_search.log"

# the search's best sample against the shipped config, both on 5 seeds the search never saw
BEST=(--set learning_rate_schedule.initial=0.0011698678831285683 --set beta_schedule.initial=0.00015638768526427812
      --set recurrence.sequence_length=16)
$PY sweep.py --config configs/cartpole_masked.yaml "${BEST[@]}" --seed-list 10,11,12,13,14 \
    --sweep-id cartpole_best5 --threshold 190 | tee "$out/cartpole_best5.log"
copy cartpole_best5
$PY sweep.py --config configs/cartpole_masked.yaml --seed-list 10,11,12,13,14 --sweep-id cartpole_shipped5 \
    --threshold 190 | tee "$out/cartpole_shipped5.log"
copy cartpole_shipped5
$PY stats.py --runs summaries/cartpole_shipped5 summaries/cartpole_best5 --threshold 190 \
    --out "$out/cartpole_best_vs_shipped"
