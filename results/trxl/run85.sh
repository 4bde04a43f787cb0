#!/usr/bin/env bash
# Issue 85: the transformer with the configs that follow the Memory Gym authors' own TrXL code (configs/*_trxl.yaml).
# From the root of a clone of main outside the work tree, niced, in the background; an interrupted run goes on from
# its checkpoint (train.py --resume), a finished one is skipped. Order: what decides the defaults first.
set -euo pipefail
PY=${PY:-.venv/bin/python}
out=results/trxl/issue85
export SDL_VIDEODRIVER=dummy
mkdir -p "$out/runs"

# run-id, config, then train.py's --set and --seed arguments; checkpoint every 5 updates; the run's summary and
# its best held-out model on 150 fresh episodes where the config evaluates
run() {
  local id=$1 config=$2; shift 2
  [ -f "$out/$id.md" ] && return 0
  if [ -f "models/$id.pt" ]; then $PY train.py --resume "models/$id.pt"
  else $PY train.py --config "$config" --set checkpoint_interval=5 "$@" --run-id "$id"; fi
  cp -r "summaries/$id" "$out/runs/"
  $PY tools/run_summary.py --run "summaries/$id" --last 10 --out "$out/$id" --command "python train.py --config $config $*"
  if [ -f "models/$id-best.pt" ]; then $PY enjoy.py --model "models/$id-best.pt" --episodes 150 > "$out/${id}_fresh.log"; fi
}

run minigrid_trxl_seed0 configs/minigrid_trxl.yaml --seed 0
run cartpole_trxl_seed0 configs/cartpole_masked_trxl.yaml --seed 0
run poc_trxl_seed0 configs/poc_memory_env_trxl.yaml --seed 0
run minigrid_trxl_seed1 configs/minigrid_trxl.yaml --seed 1
