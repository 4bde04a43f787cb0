#!/usr/bin/env bash
# issue 85: the positional encodings at 18ec83e, PoC (30 updates) and masked CartPole (100 updates), seeds 0-4
cd /work/runs/p85b
run() { local id=$1 cfg=$2; shift 2; [ -f models/$id.pt ] || .venv/bin/python train.py --config configs/$cfg.yaml --set recurrence.layer_type=trxl "$@" --run-id $id > logs/$id.log 2>&1; }
for seed in 0 1 2; do for enc in absolute relative none; do run poc_${enc}_s$seed poc_memory_env --set recurrence.positional_encoding=$enc --seed $seed; done; done
for seed in 2 3 4 0 1; do for enc in relative absolute none; do run cart_${enc}_s$seed cartpole_masked --set recurrence.positional_encoding=$enc --seed $seed; done; done
