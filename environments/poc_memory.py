"""Proof-of-concept memory task, as the reference baseline defines it: a track from -1 to 1 in steps of 0.2
whose ends hold goals of +1 and -1 in random order, shown at the reset and the first two steps (when the agent
cannot move), hidden afterwards. Each later step costs 0.1; the +1 end gives +1.6 (success), the -1 end -1.6,
and both end the episode. An optimal agent averages 1.2 in 7 steps."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces

from environments.seeding import SplitMix64

STEP = 0.2
ENDS = 5  # the track ends sit at +-ENDS cells of STEP
STARTS = np.array([-2, -1, 0, 1, 2])
SHOW_STEPS = 2  # steps during which the goals are shown and the agent is frozen
TIME_PENALTY = 0.1
GOAL_REWARD = 1.0 + (ENDS + 1) * TIME_PENALTY  # 1.6, the reference's value


class PocMemoryEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode: str | None = None):
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)  # 0: left, 1: right
        self.render_mode = render_mode
        self._cell = 0
        self._goals = np.zeros(2, dtype=np.float32)
        self._t = 0
        self._rng = SplitMix64()

    def _obs(self) -> np.ndarray:
        left, right = self._goals if self._t <= SHOW_STEPS else (0.0, 0.0)
        return np.array([left, self._cell * STEP, right], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = SplitMix64(seed)
        self._cell = int(STARTS[self._rng.integers(len(STARTS))])
        plus_right = self._rng.random() < 0.5
        self._goals = np.array([-1.0, 1.0] if plus_right else [1.0, -1.0], dtype=np.float32)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        if self._t <= SHOW_STEPS:
            return self._obs(), 0.0, False, False, {}
        self._cell += 1 if int(action) == 1 else -1
        if abs(self._cell) < ENDS:
            return self._obs(), -TIME_PENALTY, False, False, {}
        success = bool(self._goals[0 if self._cell < 0 else 1] > 0)
        reward = GOAL_REWARD if success else -GOAL_REWARD
        return self._obs(), reward, True, False, {"success": success}

    def render(self):
        cells = np.full((1, 2 * ENDS + 1, 3), 60, dtype=np.uint8)  # a grey track
        cells[0, [0, -1]] = [(40, 200, 40) if goal > 0 else (200, 40, 40) for goal in self._goals]
        cells[0, self._cell + ENDS] = 240  # the agent
        tile = np.zeros((16, 16, 1), dtype=np.uint8)
        tile[2:-2, 2:-2] = 1
        return np.kron(cells, tile)  # (1, cells, 3) -> (16, 16 x cells, 3): a tile per cell, black borders
