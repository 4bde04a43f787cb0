#!/usr/bin/env bash
# results/minigrid/minigrid5_lr.*: MiniGrid Memory (configs/minigrid.yaml, its learning rate decaying from
# 2e-4 to 1e-5 over the 500 updates) over five seeds at the full 500 updates (2,048,000 steps), held-out
# evaluation on (issue 24, point 2). From the root of a clone of main outside the work tree: it runs for
# hours (about 1 h a seed on 2 idle cores).
# The first sweep, minigrid5, ran the config's earlier constant 2e-4 until its seed 0 collapsed after
# update 290 (results/minigrid/minigrid5_seed0_snapshot.md, results/minigrid/collapse/); it was stopped there.
set -euo pipefail
PY=${PY:-.venv/bin/python}
# headless MiniGrid rendering; RAY_worker_niceness=0: Ray would run the trials at niceness 15, behind any other work
export SDL_VIDEODRIVER=dummy RAY_worker_niceness=0
if [ -d sweeps/minigrid5_lr ]; then
    # go on after an interrupted session: finished seeds are kept, the others resume from their
    # last checkpoint (every 10 updates)
    $PY sweep.py --resume sweeps/minigrid5_lr
else
    $PY sweep.py --config configs/minigrid.yaml --seeds 5 \
        --cpus-per-trial 2 --sweep-id minigrid5_lr --set checkpoint_interval=10
fi
# a snapshot of a finished seed's curve while the sweep runs (results/minigrid/minigrid5_lr_seed<N>_snapshot.md)
# $PY tools/run_summary.py --run summaries/minigrid5_lr/seed<N> --last 10 \
#     --reference results/reference/minigrid_memory_s9.csv --command "..." --out results/minigrid/minigrid5_lr_seed<N>_snapshot
# the statistics over the seeds (IQM and 95% CIs of the final held-out score and of the last 10
# updates' training reward, each seed's curve beside the reference's 10 runs); copy them to main
$PY stats.py --runs summaries/minigrid5_lr --out results/minigrid/minigrid5_lr --final-updates 10
