#!/usr/bin/env bash
# results/trxl/: what the transformer costs beside the recurrent cores (issue 71 points 1 and 4), on an otherwise
# idle machine: pause the long runs meanwhile (kill -STOP / -CONT on their process groups).
set -euo pipefail
PY=${PY:-.venv/bin/python}
out=results/trxl
export SDL_VIDEODRIVER=dummy
# Memory cost on the visual configs (computed, not timed): the state's width, the buffer's bytes and the parameters
# of each core as the configs build them -> results/trxl/memory_cost.txt
$PY - > "$out/memory_cost.txt" <<'PY'
import torch
from buffer import RolloutBuffer
from config import load_config
from model import build_model
from worker import environment_seeds, make_probe
print("config | core | state floats per row | stored states MiB | buffer MiB | parameters")
for path in ("configs/minigrid.yaml", "configs/mortar_mayhem_b_grid.yaml"):
    for sets in (["recurrence.layer_type=gru"], ["recurrence.layer_type=trxl"],
                 ["recurrence.layer_type=trxl", "recurrence.memory_length=96"]):
        c = load_config(path, [*sets, "initialization.recurrent_gain=1.0"])  # MiniGrid's 1.41 is the LSTM's
        _, spaces = make_probe(c.environment, environment_seeds(0, 1)[0])
        m = build_model(c, spaces)
        b = RolloutBuffer(c.n_workers, c.worker_steps, spaces.observation.shape, spaces.observation.dtype,
                          spaces.action, spaces.masked, m.state_size, torch.device("cpu"), c.n_mini_batch,
                          m.previous_size)
        print(f"{path} | {' '.join(sets)} | {m.state_size} | {b.states.nbytes / 2 ** 20:.0f} | "
              f"{sum(a.nbytes for a in b._flat.values()) / 2 ** 20:.0f} | {sum(p.numel() for p in m.parameters())}")
PY
# Speed and peak RSS per core on the same configs, alternated, 3 runs each (the long runs paused meanwhile), in
# float32 and, where the CPU runs it natively (the config refuses it elsewhere), under bfloat16 autocast
for precision in float32 bfloat16; do
  suffix=; [ $precision = bfloat16 ] && suffix=_bf16
  [ $precision = bfloat16 ] && { $PY -c "import torch, plumbing.machine as m
assert m.bfloat16_is_fast(torch.device('cpu'))" 2> /dev/null || continue; }
  for c in minigrid mortar_mayhem_b_grid; do
    updates=3; [ $c = mortar_mayhem_b_grid ] && updates=1
    # the transformer refuses MiniGrid's LSTM recurrent_gain; 1.0 for both cores (an initial value: the speed is the same)
    $PY tools/benchmark.py --config configs/$c.yaml --vary recurrence.layer_type=gru,trxl --set updates=$updates \
        --set evaluation.interval=0 --set initialization.recurrent_gain=1.0 --set precision=$precision --repeats 3 \
        --require-idle --out "$out/speed_$c$suffix"
  done
done
$PY tools/core_speed.py --cores gru lstm mingru lru trxl --repeats 7 --out "$out/core_speed"
