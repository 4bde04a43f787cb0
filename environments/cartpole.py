"""CartPole with a 200-step limit; masked: the two velocities are zeroed, so the task needs memory.
Gymnasium's CartPole-v1 (its spaces and its picture) stepped on Python floats, for speed (tests/test_environments.py
checks both give the same trajectories); episodes are drawn from their seed by environments/seeding.py."""
import math

import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from environments.seeding import SplitMix64

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
HALF_LENGTH = 0.5
POLE_MOMENT = MASS_POLE * HALF_LENGTH
FORCE = 10.0
TAU = 0.02  # seconds per step
THETA_LIMIT = 12 * 2 * math.pi / 360
X_LIMIT = 2.4
MAX_STEPS = 200
VELOCITY_ENTRIES = (1, 3)  # cart velocity, pole angular velocity


class CartPole(CartPoleEnv):

    def __init__(self, masked: bool = True, max_steps: int = MAX_STEPS, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)  # actions 0: push left, 1: push right
        self._keep = np.ones(4, dtype=np.float32)
        if masked:
            self._keep[list(VELOCITY_ENTRIES)] = 0.0
        self._max_steps = max_steps
        self.state = (0.0, 0.0, 0.0, 0.0)
        self._t = 0
        self._rng = SplitMix64()

    def _obs(self) -> np.ndarray:
        return np.array(self.state, dtype=np.float32) * self._keep

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = SplitMix64(seed)
        self.state = tuple(-0.05 + 0.1 * self._rng.random() for _ in range(4))
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = FORCE if action == 1 else -FORCE
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + POLE_MOMENT * theta_dot * theta_dot * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos * cos / TOTAL_MASS))
        x_acc = temp - POLE_MOMENT * theta_acc * cos / TOTAL_MASS
        x, x_dot = x + TAU * x_dot, x_dot + TAU * x_acc
        theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
        self.state = (x, x_dot, theta, theta_dot)
        self._t += 1
        terminated = x < -X_LIMIT or x > X_LIMIT or theta < -THETA_LIMIT or theta > THETA_LIMIT
        truncated = not terminated and self._t >= self._max_steps
        return self._obs(), 1.0, terminated, truncated, {}
