#!/usr/bin/env bash
# results/cores/: every core (gru, lstm, mingru, lru) on the shipped configs with their GRU's or LSTM's
# hyperparameters unchanged (issue 57 point 6). From the root of a clone of main outside the work tree, niced,
# in the background; each step resumes where an interrupted session left it (the loop the session notes name).
set -euo pipefail
PY=${PY:-.venv/bin/python}
out=results/cores
copy() { cp "sweeps/$1/stats.md" "$out/$1.md"; cp "sweeps/$1/stats.json" "$out/$1.json"; cp "sweeps/$1/stats.png" "$out/$1.png"
         mkdir -p "$out/runs"; cp -r "summaries/$1" "$out/runs/"; }

# PoC and masked CartPole, 10 seeds of each core (at ef4deb6, 2026-11-29, Xeon 2 cores beside other work)
$PY sweep.py --config configs/poc_memory_env.yaml --seeds 10 --grid recurrence.layer_type=gru,lstm,mingru,lru \
    --threshold 1.1 --sweep-id cores_poc10
copy cores_poc10
$PY sweep.py --config configs/cartpole_masked.yaml --seeds 10 --grid recurrence.layer_type=gru,lstm,mingru,lru \
    --threshold 190 --sweep-id cores_cartpole10
copy cores_cartpole10

# MiniGrid-MemoryS9, 3 seeds of each new core at the shipped budget (500 updates), held-out evaluation on;
# an interrupted run goes on with train.py --resume models/<run-id>.pt. minGRU seed 0 ran at ef4deb6, the others
# at b8904c8 (the same cores; b8904c8 scans minGRU and the LRU flat where half the slots are padding, which
# MiniGrid's sequences of 8 rarely are).
export SDL_VIDEODRIVER=dummy
for s in 0 1 2; do
  for core in mingru lru; do
    $PY train.py --config configs/minigrid.yaml --set recurrence.layer_type=$core --seed $s \
        --set checkpoint_interval=10 --run-id minigrid_${core}_seed$s
    mkdir -p "$out/runs"; cp -r summaries/minigrid_${core}_seed$s "$out/runs/"
    $PY tools/run_summary.py --run summaries/minigrid_${core}_seed$s --last 10 \
        --reference results/reference/minigrid_memory_s9.csv --out "$out/minigrid_${core}_seed$s" \
        --command "python train.py --config configs/minigrid.yaml --set recurrence.layer_type=$core --seed $s"
    # its best held-out model on 150 fresh layouts, sampled, at enjoy.py's default seed
    $PY enjoy.py --model models/minigrid_${core}_seed$s-best.pt --episodes 150 > "$out/minigrid_${core}_seed${s}_fresh.log"
  done
done
# the LRU's best models that scored below their held-out figure sampled, deterministic too; then every final model
for run in minigrid_lru_seed1 minigrid_lru_seed2; do
  $PY enjoy.py --model models/$run-best.pt --episodes 150 --deterministic > "$out/${run}_fresh_deterministic.log"
done
for core in mingru lru; do
  for s in 0 1 2; do
    $PY enjoy.py --model models/minigrid_${core}_seed$s.pt --episodes 150 > "$out/minigrid_${core}_seed${s}_final_fresh.log"
  done
  $PY tools/episode_interval.py --seeds "$out"/minigrid_${core}_seed{0,1,2}_fresh.log
  $PY tools/episode_interval.py --seeds "$out"/minigrid_${core}_seed{0,1,2}_final_fresh.log
done
# over seeds beside the shipped LSTM's five
$PY stats.py --runs results/minigrid/runs/minigrid5_beta "$out"/runs/minigrid_mingru_seed* "$out"/runs/minigrid_lru_seed* \
    --final-updates 10 --out "$out/minigrid_cores_seeds"
# each of those runs' large updates and the falls after them ($out/kl_spikes.md): from the summaries, the updates
# whose training/approx_kl is above 0.05, and each update whose episode/reward_mean fell below 0.6 after the run
# had reached 0.9, with the largest KL of the 5 updates before it. Made by tools/kl_spikes.py, removed after
# bb9ca25 (git show bb9ca25:tools/kl_spikes.py).
# the training curves, then the held-out evaluations of the same runs
groups=(--runs results/minigrid/runs/minigrid5_beta/seed* --label "lstm, the shipped config"
        --runs "$out"/runs/minigrid_mingru_seed* --label mingru --runs "$out"/runs/minigrid_lru_seed* --label lru)
$PY tools/plot.py "${groups[@]}" --reference results/reference/minigrid_memory_s9.csv \
    --title "MiniGrid-MemoryS9, training reward (last 100 episodes)" --out "$out/minigrid_cores.png"
$PY tools/plot.py "${groups[@]}" --tag eval/reward_mean \
    --title "MiniGrid-MemoryS9, held-out evaluation (64 episodes, unlimited layouts)" --out "$out/minigrid_cores_heldout.png"
# each checkpoint on its 99 training layouts (enjoy.py --training-levels), and the shipped LSTM on both, at afa41e9
mkdir -p "$out/levels"
for m in minigrid_{mingru,lru}_seed{0,1,2}{,-best}; do
  $PY enjoy.py --model models/$m.pt --episodes 150 --training-levels > "$out/levels/${m}_training_levels.log"
done
$PY enjoy.py --model models/minigrid.pt --episodes 150 --training-levels > "$out/levels/minigrid_lstm_shipped_training_levels.log"
$PY enjoy.py --model models/minigrid.pt --episodes 150 > "$out/levels/minigrid_lstm_shipped_fresh.log"
# the final and -best checkpoints from the initial state (as every evaluation) and from the run's own rollout state,
# on the training layouts and on held-out ones (the MiniGrid config never resets the state in training), at 7d8945e
# ($out/carried_state/<model>.txt): 160 sampled episodes of evaluation.py's, with each of the 16 evaluation
# environments started from one row of the rollout state the checkpoint saved. Made by tools/carried_state.py,
# removed after bb9ca25 (git show bb9ca25:tools/carried_state.py).
# which of minGRU's units hold what its policy needs from that state, at 51839a3 (mingru_slow_units_seed*.md): each
# unit's largest z over 64 steps of the 16 training environments played from the run's rollout state, then 160
# held-out episodes from zeros with the units whose z stayed below a threshold set to the saved rows' mean. Made by
# tools/mingru_slow_units.py, removed after bb9ca25 (git show bb9ca25:tools/mingru_slow_units.py).

# Mortar Mayhem B Grid, one seed of the LRU (the better new core on masked CartPole and MiniGrid) at 8,192,000
# steps, at bf03bff (the chunked scan)
$PY train.py --config configs/mortar_mayhem_b_grid.yaml --set recurrence.layer_type=lru --set updates=500 \
    --set checkpoint_interval=5 --run-id mmb_grid_lru_seed0
cp -r summaries/mmb_grid_lru_seed0 "$out/runs/"
$PY tools/run_summary.py --run "$out/runs/mmb_grid_lru_seed0" --last 10 --out "$out/mmb_grid_lru_seed0" \
    --command "python train.py --config configs/mortar_mayhem_b_grid.yaml --set recurrence.layer_type=lru --set updates=500 --set checkpoint_interval=5 --run-id mmb_grid_lru_seed0 (at bf03bff)"
$PY stats.py --runs results/memory_gym/runs/mmb_grid_seed{0,1,2,3,4} "$out/runs/mmb_grid_lru_seed0" --final-updates 10 \
    --published "8192000:0.42:GRU, Memory Gym authors" --out "$out/mmb_grid_cores"
$PY enjoy.py --model models/mmb_grid_lru_seed0-best.pt --episodes 150 > "$out/mmb_grid_lru_seed0_fresh.log"
$PY tools/episode_interval.py "$out/mmb_grid_lru_seed0_fresh.log"

# minGRU seed 1 on MiniGrid with the state reset at every episode (the config's reset_hidden_state: false
# otherwise), at 4a3958f: does its held-out score then follow its training return?
id=minigrid_mingru_reset_seed1
$PY train.py --config configs/minigrid.yaml --set recurrence.layer_type=mingru --seed 1 \
    --set recurrence.reset_hidden_state=true --set checkpoint_interval=5 --run-id $id
cp -r summaries/$id "$out/runs/"
$PY tools/run_summary.py --run "$out/runs/$id" --last 10 --reference results/reference/minigrid_memory_s9.csv \
    --out "$out/$id" --command "python train.py --config configs/minigrid.yaml --set recurrence.layer_type=mingru --seed 1 --set recurrence.reset_hidden_state=true --set checkpoint_interval=5 --run-id $id (at 4a3958f)"
$PY enjoy.py --model models/$id-best.pt --episodes 150 > "$out/${id}_fresh.log"
$PY enjoy.py --model models/$id.pt --episodes 150 > "$out/${id}_final_fresh.log"
$PY tools/plot.py --runs "$out/runs/minigrid_mingru_seed1" --label "mingru seed 1, reset_hidden_state: false (the config's)" \
    --runs "$out/runs/$id" --label "mingru seed 1, reset_hidden_state: true" --tag eval/reward_mean \
    --title "MiniGrid-MemoryS9, minGRU seed 1, held-out evaluation (64 episodes)" --out "$out/minigrid_mingru_reset_heldout.png"
$PY tools/plot.py --runs "$out/runs/minigrid_mingru_seed1" --label "mingru seed 1, reset_hidden_state: false (the config's)" \
    --runs "$out/runs/$id" --label "mingru seed 1, reset_hidden_state: true" --reference results/reference/minigrid_memory_s9.csv \
    --title "MiniGrid-MemoryS9, minGRU seed 1, training reward (last 100 episodes)" --out "$out/minigrid_mingru_reset.png"
