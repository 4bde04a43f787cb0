#!/usr/bin/env bash
# results/minigrid/minigrid5_lr.*: MiniGrid Memory (configs/minigrid.yaml as it was then, its learning rate decaying from
# 2e-4 to 1e-5 over the 500 updates) over five seeds at the full 500 updates (2,048,000 steps), held-out
# evaluation on (issue 24, point 2). From the root of a clone of main outside the work tree: it runs for
# hours (about 1 h a seed on 2 idle cores).
# The first sweep, minigrid5, ran the config's earlier constant 2e-4 until its seed 0 collapsed after
# update 290 (results/minigrid/minigrid5_seed0_snapshot.md, results/minigrid/collapse/); it was stopped there.
# The first minigrid5_lr sweep (at f2b50bb) finished seeds 0 and 1 (their snapshots:
# results/minigrid/minigrid5_lr_seed{0,1}_snapshot.md) and was lost with its machine on 2026-11-25,
# event files and checkpoints included; it was started again from scratch at 8df78aa. Since then each
# finished seed's summaries (config.json and TensorBoard events, under 1 MB) are committed under
# results/minigrid/runs/minigrid5_lr/seed<N>, so a lost machine costs at most the seed in progress.
#
# A candidate config on its own five seeds: the sweep id, then the candidate's overrides. results/minigrid/
# minigrid5_beta.* (2026-11-26, the config shipped since): seed 4's stall (docs/results.md) led to a
# ten-times entropy bonus at the start, back to 0.001 by update 200; it ran, before it was shipped, as
#   bash results/minigrid/run.sh minigrid5_beta --set beta_schedule.initial=0.01 --set beta_schedule.max_decay_steps=200
# which is the shipped config now (run.sh with no arguments). minigrid5_lr, the config before it (a
# constant 0.001), is today's config with --set beta_schedule.initial=0.001 --set beta_schedule.max_decay_steps=300.
set -euo pipefail
PY=${PY:-.venv/bin/python}
SWEEP=${1:-minigrid5_beta}
shift $(( $# > 0 ? 1 : 0 ))
# headless MiniGrid rendering (sweep.py runs the trials at its own priority: no RAY_worker_niceness needed)
export SDL_VIDEODRIVER=dummy
if [ -d "sweeps/$SWEEP" ]; then
    # go on after an interrupted session: finished seeds are kept, the others resume from their
    # last checkpoint (every 10 updates)
    $PY sweep.py --resume "sweeps/$SWEEP"
else
    $PY sweep.py --config configs/minigrid.yaml --seeds 5 \
        --cpus-per-trial 2 --sweep-id "$SWEEP" --set checkpoint_interval=10 "$@"
fi
# a finished seed, kept in main (from this clone's root; MAIN is main's work tree):
# mkdir -p $MAIN/results/minigrid/runs/$SWEEP && cp -r summaries/$SWEEP/seed<N> $MAIN/results/minigrid/runs/$SWEEP/
# If the machine is lost mid-sweep: the seeds not yet under results/minigrid/runs/<sweep> run again
# with --seed-list (e.g. --seed-list 3,4 --sweep-id minigrid5_lr_rest) and are copied there the same way.
# A seed trained whole on a lent GPU (results/minigrid/gpu_seeds.sh, with the sweep's overrides) goes under
# results/minigrid/runs/<sweep>_h200: a sample beside the sweep's, not one of its seeds, as Tune chooses
# which seed runs next (minigrid5_beta's seed 4 on an H200; Tune started this machine's seed 4 after seed 1).
# the statistics over the seeds (IQM and 95% CIs of the final held-out score and of the last 10
# updates' training reward, each seed's curve beside the reference's 10 runs), from the committed runs
$PY stats.py --runs "results/minigrid/runs/$SWEEP" --out "results/minigrid/$SWEEP" --final-updates 10 --threshold 0.85
