"""MiniGrid Memory (and any MiniGrid id), as the reference baseline uses it: the agent's 3x3 egocentric view
as an 84x84 RGB picture, three actions, success for a positive final reward. `seed_pool: N` draws each
layout seed from 0..N-1, as the reference did with N = 99 (docs/environments.md). `time_limit: K` cuts an episode
at K steps (truncated), as the Memory Gym authors' TrXL code does at 96 (the reward scaled by MiniGrid's max_steps)."""
import gymnasium as gym
from gymnasium import spaces

from environments.seeding import SeedRange

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
                  render_mode: str | None = None, seed_pool: int = 0, time_limit: int = 0, **kwargs) -> gym.Env:
    import minigrid  # noqa: F401  (registers the MiniGrid ids)
    from minigrid.wrappers import ImgObsWrapper, RGBImgPartialObsWrapper
    env = gym.make(name, agent_view_size=agent_view_size, render_mode=render_mode, **kwargs)
    env = ImgObsWrapper(RGBImgPartialObsWrapper(env, tile_size=PIXELS // agent_view_size))
    env = _ThreeActions(gym.wrappers.TimeLimit(env, time_limit) if time_limit else env)
    return SeedRange(env, 0, seed_pool) if seed_pool else env
