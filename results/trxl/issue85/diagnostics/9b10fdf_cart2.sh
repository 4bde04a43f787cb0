#!/usr/bin/env bash
cd /work/runs/exp85
for seed in 0 1; do for mode in relbias; do
  id=cart_${mode}_s$seed
  [ -f models/$id.pt ] && continue
  TRXL_POS=$mode .venv/bin/python train.py --config configs/cartpole_masked.yaml --set recurrence.layer_type=trxl --seed $seed --run-id $id > logs/$id.log 2>&1
done; done
for seed in 0; do for mode in none keys relbias; do
  id=cart_${mode}_2b_s$seed
  [ -f models/$id.pt ] && continue
  TRXL_POS=$mode .venv/bin/python train.py --config configs/cartpole_masked.yaml --set recurrence.layer_type=trxl --set recurrence.num_layers=2 --seed $seed --run-id $id > logs/$id.log 2>&1
done; done
