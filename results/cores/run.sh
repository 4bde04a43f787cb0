#!/usr/bin/env bash
# results/cores/: every core (gru, lstm, mingru, lru) on the shipped configs with their GRU's or LSTM's
# hyperparameters unchanged (issue 57 point 6). From the root of a clone of main outside the work tree, niced,
# in the background; each step resumes where an interrupted session left it (the loop the session notes name).
set -euo pipefail
PY=${PY:-.venv/bin/python}
out=results/cores
copy() { cp "sweeps/$1/stats.md" "$out/$1.md"; cp "sweeps/$1/stats.json" "$out/$1.json"; cp "sweeps/$1/stats.png" "$out/$1.png"
         mkdir -p "$out/runs"; cp -r "summaries/$1" "$out/runs/"; }

# PoC and masked CartPole, 10 seeds of each core (at ef4deb6, 2026-11-29, Xeon 2 cores beside other work)
$PY sweep.py --config configs/poc_memory_env.yaml --seeds 10 --grid recurrence.layer_type=gru,lstm,mingru,lru \
    --threshold 1.1 --sweep-id cores_poc10
copy cores_poc10
$PY sweep.py --config configs/cartpole_masked.yaml --seeds 10 --grid recurrence.layer_type=gru,lstm,mingru,lru \
    --threshold 190 --sweep-id cores_cartpole10
copy cores_cartpole10

# MiniGrid-MemoryS9, 3 seeds of each new core at the shipped budget (500 updates), held-out evaluation on;
# an interrupted run goes on with train.py --resume models/<run-id>.pt
export SDL_VIDEODRIVER=dummy
for s in 0 1 2; do
  for core in mingru lru; do
    $PY train.py --config configs/minigrid.yaml --set recurrence.layer_type=$core --seed $s \
        --set checkpoint_interval=10 --run-id minigrid_${core}_seed$s
  done
done
