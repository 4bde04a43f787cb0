#!/usr/bin/env bash
# results/atari/: Breakout in CleanRL's setting (configs/breakout_noframeskip.yaml), from the repository root.
set -euo pipefail
PY=${PY:-.venv/bin/python}
# a uniform random policy, scored by the config's own held-out evaluation
$PY tools/random_policy.py --config configs/breakout_noframeskip.yaml --episodes 400 --out results/atari/random_noframeskip
# stepping 8 environments: our worker processes against ale-py's AtariVectorEnv (idle machine), and what a
# lost life does there; both instruments answered their question and were removed after accca2c:
# at accca2c: tools/atari_vector.py --steps 2000 --repeats 3
# at accca2c: tools/atari_lives.py --games 8
# CleanRL's 2M point: the first 1954 updates of the 10M schedule (about 2 h on 2 cores here; from a clone
# of main outside the work tree, in the background; after an interrupted session, go on with the second
# command). The shipped model's run evaluated 16 whole games every 100 updates, as the config then did
# (it now evaluates 64 every 500): the two --set evaluation.* below repeat that run.
# nice $PY train.py --config configs/breakout_noframeskip.yaml --set updates=1954 --set checkpoint_interval=25 \
#     --set evaluation.interval=100 --set evaluation.episodes=16 --run-id breakout_noframeskip_seed0
# nice $PY train.py --resume models/breakout_noframeskip_seed0.pt
# issue 41: seeds 1 and 2 with the config as it is now (64 games every 500 updates), at dda0431
# for s in 1 2; do nice $PY train.py --config configs/breakout_noframeskip.yaml --set updates=1954 \
#     --set checkpoint_interval=25 --seed $s --run-id breakout_noframeskip_seed$s; done
# then the three seeds (seed 0 evaluated on another schedule, which does not change training: --pool):
# python stats.py --runs results/atari/runs/breakout_noframeskip_seed{0,1,2} --out results/atari/breakout_3seeds \
#     --final-updates 10 --pool evaluation --published "2000000:45:CleanRL ppo_atari_lstm"
# each seed's -best.pt on 100 fresh games (enjoy.py's default seed; seed 0's is the shipped model's), then over seeds:
# OMP_NUM_THREADS=1 python enjoy.py --model models/breakout_noframeskip_seed$s-best.pt --episodes 100 \
#     > results/atari/seeds/breakout_noframeskip_seed${s}_fresh.log   (for s in 1 2)
# python tools/episode_interval.py --seeds results/atari/gap/fp32_seed1.log \
#     results/atari/seeds/breakout_noframeskip_seed{1,2}_fresh.log
# the shipped model on fresh games, float32 against bfloat16 (docs/results.md#breakout)
# bash results/atari/gap/run.sh
