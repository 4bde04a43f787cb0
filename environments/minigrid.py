"""MiniGrid Memory (and any MiniGrid id): 84x84 RGB egocentric view, three actions.

As the reference baseline uses it: the agent sees an RGB picture of its
agent_view_size x agent_view_size egocentric view (3x3 by default; 7x7
selectable), scaled to 84x84 pixels, kept as uint8; the actions are reduced to
turn left, turn right and move forward. Each environment is seeded once and
then draws every episode from its own generator, so episodes come from
unlimited seeds (the reference only ever drew 99). An episode is a success when
it ends with a positive reward.
"""
from __future__ import annotations

import gymnasium as gym
from gymnasium import spaces

PIXELS = 84
ACTIONS = 3  # MiniGrid's actions 0, 1, 2: turn left, turn right, move forward


class _ThreeActions(gym.Wrapper):
    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.action_space = spaces.Discrete(ACTIONS)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info = {**info, "success": reward > 0}
        return obs, reward, terminated, truncated, info


def make_minigrid(name: str = "MiniGrid-MemoryS9-v0", agent_view_size: int = 3,
                  render_mode: str | None = None, **kwargs) -> gym.Env:
    import minigrid  # noqa: F401  (registers the MiniGrid ids)
    from minigrid.wrappers import ImgObsWrapper, RGBImgPartialObsWrapper
    if PIXELS % agent_view_size:
        raise ValueError(f"agent_view_size {agent_view_size} must divide {PIXELS} (3, 7, ...)")
    env = gym.make(name, agent_view_size=agent_view_size, render_mode=render_mode, **kwargs)
    env = ImgObsWrapper(RGBImgPartialObsWrapper(env, tile_size=PIXELS // agent_view_size))
    return _ThreeActions(env)
