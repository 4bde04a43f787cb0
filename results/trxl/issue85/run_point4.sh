#!/usr/bin/env bash
# Issue 85 point 4: the transformer with the defaults and configs of point 3, 10 seeds each through sweep.py.
# From the root of a clone of main outside the work tree, niced, in the background; an interrupted sweep goes on
# with sweep.py --resume sweeps/<sweep-id>, a finished one is skipped. One trial at a time (2 cores, shared).
set -euo pipefail
PY=${PY:-.venv/bin/python}
out=results/trxl/issue85
export SDL_VIDEODRIVER=dummy
copy() { cp "sweeps/$1/stats.md" "$out/$1.md"; cp "sweeps/$1/stats.json" "$out/$1.json"; cp "sweeps/$1/stats.png" "$out/$1.png"
         mkdir -p "$out/runs"; cp -r "summaries/$1" "$out/runs/"; }
sweep() {  # sweep-id, threshold, then sweep.py's config arguments
  local id=$1 threshold=$2; shift 2
  [ -f "$out/$id.md" ] && return 0
  if [ -d "sweeps/$id" ]; then $PY sweep.py --resume "sweeps/$id" --threshold "$threshold"
  else $PY sweep.py "$@" --seeds 10 --max-concurrent 1 --threshold "$threshold" --sweep-id "$id"; fi
  copy "$id"
}

# PoC with the config that follows the anchors (4 blocks, W 16, no positions)
sweep trxl85_poc10 1.1 --config configs/poc_memory_env_trxl.yaml
# masked CartPole: the shipped config with the transformer's new defaults (relative positions, plain projection),
# beside results/trxl/trxl_cartpole10.md (absolute positions, 123.6), same budget (100 updates)
sweep trxl85_cartpole10 190 --config configs/cartpole_masked.yaml --set recurrence.layer_type=trxl
# masked CartPole with the config that follows anchor A (4 gated blocks, W 32, 300 updates)
sweep trxl85_cartpole_anchor10 190 --config configs/cartpole_masked_trxl.yaml
