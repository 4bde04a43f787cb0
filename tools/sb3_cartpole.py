"""sb3-contrib's RecurrentPPO on this repository's masked CartPole, for the side-by-side benchmark.

    python tools/sb3_cartpole.py [--steps 409600] [--seed 0]

Needs the bench extra (pip install -r requirements-bench.txt). The environment
is the same one train.py uses (make_env: masked velocities, 200-step limit,
reward / 100 for training); the hyperparameters are the closest equivalents of
configs/cartpole_masked.yaml: 16 environments x 256 steps, 4 epochs of 4
minibatches (batch 1024), one LSTM of 64 units shared by policy and value,
hidden layers of 128 with ReLU, gamma 0.99, lambda 0.95, learning rate 3e-4
decaying linearly to 3e-6, clip 0.2, entropy 0.001 decaying to 0.0001 (as a
coefficient sb3 keeps constant: 0.001), value coefficient 0.2, max grad norm 0.5.
Prints one JSON line: wall seconds, steps/s and the final return (the mean raw
return of the last 100 episodes, as train.py's episode/reward_mean_last100).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import gymnasium as gym

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>


class RawEpisodeInfo(gym.Wrapper):
    """Turns our info["episode"] (raw units) into the {"r", "l"} that sb3's logger reads."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "episode" in info:
            info = {**info, "episode": {"r": info["episode"]["reward"], "l": info["episode"]["length"], "t": 0.0}}
        return obs, reward, terminated, truncated, info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=409_600)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()

    import numpy as np
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.vec_env import DummyVecEnv
    from torch import nn

    from config import EnvironmentConfig

    from worker import environment_seeds

    seeds = environment_seeds(args.seed, 16)

    def factory(seed):
        def build():
            env = RawEpisodeInfo(EnvironmentConfig(type="CartPoleMasked").make())
            env.reset(seed=seed)
            return env
        return build

    env = DummyVecEnv([factory(s) for s in seeds])
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=256, batch_size=1024, n_epochs=4,
        learning_rate=lambda remaining: 3e-6 + (3e-4 - 3e-6) * remaining,
        gamma=0.99, gae_lambda=0.95, clip_range=0.2, ent_coef=0.001, vf_coef=0.2, max_grad_norm=0.5,
        policy_kwargs=dict(lstm_hidden_size=64, n_lstm_layers=1, shared_lstm=True, enable_critic_lstm=False,
                           net_arch=dict(pi=[128, 128], vf=[128, 128]), activation_fn=nn.ReLU),
        seed=args.seed, device="cpu", verbose=0)
    model.learn(total_timesteps=args.steps)
    wall = time.perf_counter() - start
    returns = [info["r"] for info in model.ep_info_buffer]
    print(json.dumps({"library": "sb3-contrib RecurrentPPO", "env_steps": model.num_timesteps,
                      "wall_seconds": wall, "steps_per_second": model.num_timesteps / wall,
                      "final_reward": float(np.mean(returns)) if returns else None}), flush=True)


if __name__ == "__main__":
    main()
