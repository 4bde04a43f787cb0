#!/usr/bin/env bash
# results/minigrid/collapse/branches.*: seed 0 of sweep minigrid5 (configs/minigrid.yaml, bfloat16 on an
# AVX-512 BF16 CPU) held 0.86-0.91 on held-out layouts up to update 290, its best, then fell to 0.34 by
# update 320. Each branch starts from that best checkpoint (update 290) with one change and trains to
# update 320 (issue 24, point 2: is the collapse the precision's?). From the root of the clone that ran
# the sweep (results/minigrid/run.sh), after it, or while it is stopped; about 5 min a branch on 2 cores.
set -euo pipefail
PY=${PY:-.venv/bin/python}
export SDL_VIDEODRIVER=dummy
FROM=sweeps/minigrid5/models/seed0-best.pt
branch() {  # branch <run-id> <overrides...>: skipped when it has run (its summaries exist; one cut off
            # by a session's end goes on with: train.py --resume models/<run-id>.pt)
    local id=$1; shift
    [ -d summaries/$id ] || $PY train.py --resume $FROM --run-id $id --set updates=320 "$@"
}
# (the float32 row in branches.md was run before --run-id made branches: as a resume of a copy of the
# checkpoint, its event file then moved to summaries/seed0-f32; the arithmetic is the same, tests/test_faults.py)
branch seed0-f32 --set precision=float32
# the same change of arithmetic in either precision: a clipping threshold 1e-7 lower perturbs
# every update a little, which tells a collapse that any perturbation moves from one bfloat16 causes
branch seed0-bf16-clip --set max_grad_norm=0.4999999
branch seed0-f32-clip --set precision=float32 --set max_grad_norm=0.4999999
# the learning rate decaying linearly to 1e-5 over the 500 updates (CleanRL anneals its to 0) instead of a
# constant 2e-4: at update 290 of that schedule it is 9.0e-5
branch seed0-bf16-lr --set learning_rate_schedule.final=1.0e-5 --set learning_rate_schedule.max_decay_steps=500
# the table (tools/branches.py answered this question and was removed after accca2c):
# at accca2c: tools/branches.py --source summaries/minigrid5/seed0 --start 290 --window 10 \
#     --branch "float32=summaries/seed0-f32" --branch "bfloat16, clip 0.4999999=summaries/seed0-bf16-clip" \
#     --branch "float32, clip 0.4999999=summaries/seed0-f32-clip" \
#     --branch "bfloat16, learning rate 2e-4 -> 1e-5=summaries/seed0-bf16-lr" \
#     --command "bash results/minigrid/collapse/run.sh" --out results/minigrid/collapse/branches
