#!/usr/bin/env bash
# issue 85: masked CartPole, trxl at e5a2fdd (+ an env switch that skips the keys' and values' LayerNorm)
cd /work/runs/p85
run() { local id=$1; shift; [ -f models/$id.pt ] || .venv/bin/python train.py --config configs/cartpole_masked.yaml --set recurrence.layer_type=trxl "$@" --run-id $id > logs/$id.log 2>&1; }
for seed in 0 1; do
  TRXL_NO_KVNORM=1 run nokvnorm_rel_s$seed --set recurrence.positional_encoding=relative --seed $seed
  run rel_s$seed --set recurrence.positional_encoding=relative --seed $seed
  TRXL_NO_KVNORM=1 run nokvnorm_none_s$seed --set recurrence.positional_encoding=none --seed $seed
  run abs_s$seed --seed $seed
  run none_s$seed --set recurrence.positional_encoding=none --seed $seed
done
