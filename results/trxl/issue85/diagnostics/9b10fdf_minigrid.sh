#!/usr/bin/env bash
# issue 85 diagnostic: MiniGrid-MemoryS9 trxl, reset on, float32 instead of bfloat16, keys-only absolute PE (main's code)
cd /work/runs/exp85
export SDL_VIDEODRIVER=dummy
id=mg_f32_reset_s0
if [ -f models/$id.pt ]; then .venv/bin/python train.py --resume models/$id.pt >> logs/$id.log 2>&1
else TRXL_POS=keys .venv/bin/python train.py --config configs/minigrid.yaml --set recurrence.layer_type=trxl \
  --set initialization.recurrent_gain=1.0 --set recurrence.reset_hidden_state=true --set precision=float32 \
  --set updates=200 --set checkpoint_interval=10 --seed 0 --run-id $id > logs/$id.log 2>&1; fi
