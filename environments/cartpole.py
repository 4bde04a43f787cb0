"""CartPole with a 200-step limit; masked: the two velocities are zeroed, so the task needs memory.
Gymnasium's CartPole-v1 on Python floats, for speed (tests/test_environments.py checks both give the same
trajectories); episodes are drawn from their seed by environments/seeding.py.
"""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
from gymnasium import spaces

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


class CartPole(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, masked: bool = True, max_steps: int = MAX_STEPS, render_mode: str | None = None):
        high = np.array([X_LIMIT * 2, np.finfo(np.float32).max, THETA_LIMIT * 2, np.finfo(np.float32).max],
                        dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.action_space = spaces.Discrete(2)  # 0: push left, 1: push right
        self.render_mode = render_mode
        self._keep = np.ones(4, dtype=np.float32)
        if masked:
            self._keep[list(VELOCITY_ENTRIES)] = 0.0
        self._max_steps = max_steps
        self._state = (0.0, 0.0, 0.0, 0.0)
        self._t = 0
        self._rng = SplitMix64()

    def _obs(self) -> np.ndarray:
        return np.array(self._state, dtype=np.float32) * self._keep

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = SplitMix64(seed)
        self._state = tuple(-0.05 + 0.1 * self._rng.random() for _ in range(4))
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self._state
        force = FORCE if action == 1 else -FORCE
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + POLE_MOMENT * theta_dot * theta_dot * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos * cos / TOTAL_MASS))
        x_acc = temp - POLE_MOMENT * theta_acc * cos / TOTAL_MASS
        x, x_dot = x + TAU * x_dot, x_dot + TAU * x_acc
        theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
        self._state = (x, x_dot, theta, theta_dot)
        self._t += 1
        terminated = x < -X_LIMIT or x > X_LIMIT or theta < -THETA_LIMIT or theta > THETA_LIMIT
        truncated = not terminated and self._t >= self._max_steps
        return self._obs(), 1.0, terminated, truncated, {}

    def render(self):
        x, _, theta, _ = self._state
        frame = np.full((200, 400, 3), 255, dtype=np.uint8)
        frame[150, :] = 0
        cart_x = int(200 + x / X_LIMIT * 180)
        frame[140:160, max(cart_x - 20, 0):min(cart_x + 20, 400)] = (60, 60, 60)
        for r in np.linspace(0, 100, 100):
            px, py = int(cart_x + r * math.sin(theta)), int(140 - r * math.cos(theta))
            if 0 <= px < 400 and 0 <= py < 200:
                frame[max(py - 2, 0):py + 2, max(px - 2, 0):px + 2] = (200, 120, 40)
        return frame
