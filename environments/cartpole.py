"""CartPole with a 200-step limit; masked: the two velocity entries are zeroed.

Without the velocities the task needs memory: the agent must infer them from
consecutive positions and angles (the reference baseline's masked CartPole).
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

VELOCITY_ENTRIES = (1, 3)  # cart velocity, pole angular velocity
MAX_STEPS = 200


class MaskObservation(gym.ObservationWrapper):
    """Zeroes the given entries of a vector observation."""

    def __init__(self, env: gym.Env, hidden: tuple[int, ...]):
        super().__init__(env)
        self._keep = np.ones(env.observation_space.shape, dtype=env.observation_space.dtype)
        self._keep[list(hidden)] = 0

    def observation(self, observation):
        return observation * self._keep


def make_cartpole(masked: bool, render_mode: str | None = None) -> gym.Env:
    env = gym.make("CartPole-v1", max_episode_steps=MAX_STEPS, render_mode=render_mode,
                   disable_env_checker=True)
    return MaskObservation(env, VELOCITY_ENTRIES) if masked else env
