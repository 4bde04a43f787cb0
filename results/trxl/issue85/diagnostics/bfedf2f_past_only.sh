#!/usr/bin/env bash
# issue 85: the query over the window's earlier steps alone (as both anchors), and the anchors' 1/sqrt(width) score
# scale, on masked CartPole (100 updates, the new defaults: relative positions), at bfedf2f with bfedf2f_past_only.patch
cd /work/runs/d85
run() { local id=$1; shift; [ -f models/$id.pt ] || env "$@" .venv/bin/python train.py --config configs/cartpole_masked.yaml --set recurrence.layer_type=trxl --seed ${id##*_s} --run-id $id > logs/$id.log 2>&1; }
for seed in 0 1 2; do run bfedf2f_cart_pastonly_s$seed TRXL_PAST_ONLY=1; done
for seed in 0 1 2; do run bfedf2f_cart_scalewidth_s$seed TRXL_SCALE_WIDTH=1; done
for seed in 3 4; do run bfedf2f_cart_pastonly_s$seed TRXL_PAST_ONLY=1; done
