#!/usr/bin/env bash
# results/memory_gym/: Memory Gym (Mortar Mayhem B Grid and Grid, Mystery Path Grid, Searing Spotlights), from the repository root.
set -euo pipefail
PY=${PY:-.venv/bin/python}
# a uniform random policy, scored by the config's own held-out evaluation (150 novel-seed episodes)
SDL_VIDEODRIVER=dummy $PY tools/random_policy.py --config configs/mortar_mayhem_b_grid.yaml --out results/memory_gym/random_b_grid
# the published point: the first 500 updates (8,192,000 steps) of the reference's schedule, evaluation
# on 150 novel-seed episodes every 25 updates (about 3.5 h on the 2 cores of the Xeon with AMX: 21-40 s an
# update as episodes lengthen; run it from a clone of main outside the work tree, in the background, with
# nothing beside it; after an interrupted session, go on with the second command)
# SDL_VIDEODRIVER=dummy nice $PY train.py --config configs/mortar_mayhem_b_grid.yaml --set updates=500 \
#     --set checkpoint_interval=5 --run-id mmb_grid_seed0
# SDL_VIDEODRIVER=dummy nice $PY train.py --resume models/mmb_grid_seed0.pt
# issue 41: seeds 1-4 of the same (the queue in the session notes runs them one after another, each resumed
# from its checkpoint after an interrupted session), at dda0431
# for s in 1 2 3 4; do SDL_VIDEODRIVER=dummy nice $PY train.py --config configs/mortar_mayhem_b_grid.yaml \
#     --set updates=500 --set checkpoint_interval=5 --seed $s --run-id mmb_grid_seed$s; done
# then the five seeds:
# python stats.py --runs results/memory_gym/runs/mmb_grid_seed{0,1,2,3,4} --out results/memory_gym/mmb_grid_5seeds \
#     --final-updates 10 --published "8192000:0.42:GRU, Memory Gym authors"
# and each seed's -best.pt on 150 fresh episodes (enjoy.py's default seed; seed 0's is the shipped model's), over seeds:
# SDL_VIDEODRIVER=dummy python enjoy.py --model models/mmb_grid_seed$s-best.pt --episodes 150 \
#     > results/memory_gym/seeds/mmb_grid_seed${s}_fresh.log   (for s in 1 2 3 4)
# python tools/episode_interval.py --seeds results/shipped/mortar_mayhem_b_grid.log \
#     results/memory_gym/seeds/mmb_grid_seed{1,2,3,4}_fresh.log
# issue 41: Mortar Mayhem Grid with the reference's config, seed 0, its first 500 updates, at dda0431
# SDL_VIDEODRIVER=dummy nice $PY train.py --config configs/mortar_mayhem_grid.yaml --set updates=500 \
#     --set checkpoint_interval=5 --run-id mm_grid_seed0
# issue 60: Mystery Path Grid with the reference's config, seed 0, its first 500 updates, at b8904c8
# (resumed from its checkpoint with the second command after each interrupted session)
# SDL_VIDEODRIVER=dummy nice $PY train.py --config configs/mystery_path_grid.yaml --set updates=500 \
#     --set checkpoint_interval=5 --run-id mpg_grid_seed0
# SDL_VIDEODRIVER=dummy nice $PY train.py --resume models/mpg_grid_seed0.pt
# its summary and curve (mpg_grid_seed0.md, mpg_grid_seed0_curve.md), from its summaries copied to runs/mpg_grid_seed0:
# python tools/run_summary.py --run results/memory_gym/runs/mpg_grid_seed0 --last 10 --command "python train.py \
#     --config configs/mystery_path_grid.yaml --set updates=500 --set checkpoint_interval=5 --run-id mpg_grid_seed0 \
#     (at b8904c8)" --out results/memory_gym/mpg_grid_seed0
# python stats.py --runs results/memory_gym/runs/mpg_grid_seed0 --out results/memory_gym/mpg_grid_seed0_curve \
#     --published "8192000:0.117:GRU, Memory Gym authors"
# its best model (models/mpg_grid_seed0-best.pt, update 425; lost with the machine before it was shipped) on 150 fresh
# episodes each way (results/memory_gym/mpg_grid_seed0_best_fresh_seed1{,_det}.log), on two more fresh sets and on the run's own
# evaluation set (seed 0); the final model (models/mpg_grid_seed0.pt) on the three fresh sets:
# SDL_VIDEODRIVER=dummy python enjoy.py --model models/mpg_grid_seed0-best.pt --episodes 150 [--deterministic]
#     > results/memory_gym/mpg_grid_seed0_best_fresh_seed1[_det].log   (enjoy's default seed, 1)
# SDL_VIDEODRIVER=dummy python enjoy.py --model models/mpg_grid_seed0-best.pt --episodes 150 --seed $s
#     > results/memory_gym/mpg_grid_seed0_best_fresh_seed$s.log   (s = 2, 3; s = 0: ..._best_on_eval_seed0.log)
# SDL_VIDEODRIVER=dummy python enjoy.py --model models/mpg_grid_seed0.pt --episodes 150 --seed $s
#     > results/memory_gym/mpg_grid_seed0_final_fresh_seed$s.log  (s = 2, 3; s = 1: ..._final_fresh.log)
# python tools/episode_interval.py --pool results/memory_gym/mpg_grid_seed0_best_fresh_seed1.log \
#     results/memory_gym/mpg_grid_seed0_best_fresh_seed{2,3}.log   (450 fresh episodes: 0.091 [0.064, 0.118])
# issue 60: Mystery Path Grid seed 1, the same at the same commit
# SDL_VIDEODRIVER=dummy nice $PY train.py --config configs/mystery_path_grid.yaml --set updates=500 \
#     --set checkpoint_interval=5 --seed 1 --run-id mpg_grid_seed1
# SDL_VIDEODRIVER=dummy nice $PY train.py --resume models/mpg_grid_seed1.pt
# stopped by SIGTERM after update 145 (it had not learned; docs/results.md); its summary, and both seeds' curves:
# python tools/run_summary.py --run results/memory_gym/runs/mpg_grid_seed1 --last 10 --command "python train.py \
#     --config configs/mystery_path_grid.yaml --set updates=500 --set checkpoint_interval=5 --seed 1 --run-id mpg_grid_seed1 \
#     (at b8904c8; stopped by SIGTERM after update 145)" --out results/memory_gym/mpg_grid_seed1
# for t in episode/success_mean training/entropy; do python tools/plot.py --runs results/memory_gym/runs/mpg_grid_seed0 \
#     --runs results/memory_gym/runs/mpg_grid_seed1 --label "seed 0 (500 updates)" --label "seed 1 (stopped at 145)" \
#     --tag $t --out results/memory_gym/mpg_grid_seeds01_$(basename $t).png; done
# issue 60: seed 0 run again (the first run's weights were lost), the same command at the same commit, its best model to ship
# SDL_VIDEODRIVER=dummy nice $PY train.py --config configs/mystery_path_grid.yaml --set updates=500 \
#     --set checkpoint_interval=5 --run-id mpg_grid_seed0_rerun
# SDL_VIDEODRIVER=dummy nice $PY train.py --resume models/mpg_grid_seed0_rerun.pt
# its summary and curve, from its summaries copied to runs/mpg_grid_seed0_rerun:
# python tools/run_summary.py --run results/memory_gym/runs/mpg_grid_seed0_rerun --last 10 --command "python train.py \
#     --config configs/mystery_path_grid.yaml --set updates=500 --set checkpoint_interval=5 --run-id mpg_grid_seed0_rerun \
#     (at b8904c8)" --out results/memory_gym/mpg_grid_seed0_rerun
# python stats.py --runs results/memory_gym/runs/mpg_grid_seed0_rerun --out results/memory_gym/mpg_grid_seed0_rerun_curve \
#     --published "8192000:0.117:GRU, Memory Gym authors"
# its best model (update 425), shipped as models/mystery_path_grid.pt, on fresh sets 2 and 3 and on the run's own
# evaluation set (seed 0); set 1 is the shipped score (results/shipped/mystery_path_grid{,_det}.log, results/shipped_models.md):
# python checkpoint.py --inference-only models/mpg_grid_seed0_rerun-best.pt models/mystery_path_grid.pt
# SDL_VIDEODRIVER=dummy python enjoy.py --model models/mystery_path_grid.pt --episodes 150 --seed $s
#     > results/memory_gym/mpg_grid_seed0_rerun_best_fresh_seed$s.log   (s = 2, 3; s = 0: ..._best_on_eval_seed0.log)
# python tools/episode_interval.py --pool results/shipped/mystery_path_grid.log \
#     results/memory_gym/mpg_grid_seed0_rerun_best_fresh_seed{2,3}.log   (450 fresh episodes: 0.084 [0.060, 0.111])
# the final model (update 500) on the same three fresh sets:
# SDL_VIDEODRIVER=dummy python enjoy.py --model models/mpg_grid_seed0_rerun.pt --episodes 150 --seed $s
#     > results/memory_gym/mpg_grid_seed0_rerun_final_fresh_seed$s.log   (s = 1, 2, 3; pooled 0.082 [0.058, 0.109])
# issue 60: Searing Spotlights, seed 0, 500 updates (8,192,000 steps), at fcbc80b
# SDL_VIDEODRIVER=dummy nice $PY train.py --config configs/searing_spotlights.yaml --set updates=500 \
#     --set checkpoint_interval=5 --run-id ss_seed0
