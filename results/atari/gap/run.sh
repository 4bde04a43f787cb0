#!/usr/bin/env bash
# results/atari/gap/: the shipped Breakout model on fresh games, float32 (enjoy.py) against the bfloat16
# autocast its training acted under, on the same seeds; from the repository root (docs/results.md#breakout).
# One thread: the numbers are the same as with two, and a busy machine runs it several times faster.
# The bfloat16 runs were made at accca2c, whose acting code is the training run's (08dee8e); the model.py
# merged later rounds otherwise under bfloat16, so at a later commit they give other games.
set -euo pipefail
export OMP_NUM_THREADS=1
PY=${PY:-.venv/bin/python}
M=models/breakout_noframeskip.pt
G=results/atari/gap
for s in 1 3 424242 1234567 0; do
  n=$(case $s in 1) echo 100;; 3) echo 200;; 0) echo 16;; *) echo 32;; esac)
  $PY enjoy.py --model $M --episodes $n --seed $s > $G/fp32_seed$s.log
done
# $G/bf16_seed<s>.json and .log, the same seeds and games: evaluation.evaluate as enjoy.py calls it, the policy
# under model.autocast("bfloat16"), each game's return and length written as JSON. Made by $G/score.py, later
# tools/breakout_precision.py, removed after bb9ca25 (git show bb9ca25:tools/breakout_precision.py).
$PY enjoy.py --model $M --episodes 128 --seed 424242 > $G/fp32_seed424242_128.log  # its first 32 games and 96 more
$PY enjoy.py --model $M --episodes 100 --seed 5 > $G/fp32_seed5.log
$PY enjoy.py --model $M --episodes 32 --seed 2 --deterministic > $G/fp32_det_seed2.log
# the intervals and resamplings (gap.md holds their output)
$PY tools/episode_interval.py $G/fp32_seed*.log $G/bf16_seed*.json $G/fp32_det_seed2.log
$PY tools/episode_interval.py --pool $G/fp32_seed{1,3,424242,1234567}.log
$PY tools/episode_interval.py --pool $G/bf16_seed{1,3,424242,1234567}.json
$PY tools/episode_interval.py --pool $G/fp32_seed{1,3,424242_128,1234567,5}.log
for s in 1 3 424242 1234567 0; do $PY tools/episode_interval.py --difference $G/fp32_seed$s.log $G/bf16_seed$s.json; done
$PY tools/episode_interval.py --difference $G/fp32_seed1.log,$G/fp32_seed3.log,$G/fp32_seed424242.log,$G/fp32_seed1234567.log \
  $G/bf16_seed1.json,$G/bf16_seed3.json,$G/bf16_seed424242.json,$G/bf16_seed1234567.json
# the resamplings, gap.md's last five lines: 200,000 means of 16 and of 32 games drawn with replacement from the
# 560 fresh float32 games (the five fp32_seed*.log of the last pooled line; numpy's generator, seed 0), how often
# they reach the run's 84.625 or fall to seed 424242's 52.406 or below 45, and the best of 5 and of 20 16-game
# means on average. Made by tools/breakout_selection.py, removed after bb9ca25
# (git show bb9ca25:tools/breakout_selection.py).
