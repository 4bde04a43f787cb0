#!/usr/bin/env bash
# issue 85: masked CartPole, trxl at e5a2fdd with the embedding's bias left as torch initialises it (as both anchors)
cd /work/runs/p85
while pgrep -f "p85/cart.sh" > /dev/null || pgrep -f "^bash ./cart.sh" > /dev/null; do sleep 30; done
run() { local id=$1; shift; [ -f models/$id.pt ] || .venv/bin/python train.py --config configs/cartpole_masked.yaml --set recurrence.layer_type=trxl "$@" --run-id $id > logs/$id.log 2>&1; }
for seed in 0 1; do
  TRXL_BIAS_DEFAULT=1 run bias_abs_s$seed --seed $seed
  TRXL_BIAS_DEFAULT=1 run bias_rel_s$seed --set recurrence.positional_encoding=relative --seed $seed
done
