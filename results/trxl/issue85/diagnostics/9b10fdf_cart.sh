#!/usr/bin/env bash
# issue 85 diagnostic: masked CartPole, trxl W64 1 block, positional-encoding placement
cd /work/runs/exp85
for seed in 0 1; do for mode in input none keys; do
  id=cart_${mode}_s$seed
  [ -f models/$id.pt ] && continue
  TRXL_POS=$mode .venv/bin/python train.py --config configs/cartpole_masked.yaml --set recurrence.layer_type=trxl --seed $seed --run-id $id > logs/$id.log 2>&1
done; done
