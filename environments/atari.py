"""Atari games through ale-py (its ROMs ship inside the package): Breakout and any ALE id.

The usual DQN preprocessing, by gymnasium's AtariPreprocessing: up to 30 no-op
actions after each reset, each action repeated on 4 frames (the base
environment is made with frameskip=1 so that the skip is not applied twice),
the last two of them max-pooled, grayscale, 84x84, uint8. Observations are
(84, 84, 1) (a trailing channel axis), or (k, 84, 84) with `frame_stack: k`,
the k latest frames stacked channels first (the first frame repeated after a reset).
Rewards are not clipped: the episode statistics report game scores, and
`environment.reward_scale` is there to shrink them for training. The ALE ids'
own settings stay (v5: sticky actions with probability 0.25, at most 108,000
frames per episode, reported as truncation); other keys of `kwargs` go to
gym.make (e.g. repeat_action_probability, full_action_space).
"""
from __future__ import annotations

import gymnasium as gym


def make_atari(name: str = "ALE/Breakout-v5", frame_stack: int = 0, noop_max: int = 30, frame_skip: int = 4,
               screen_size: int = 84, terminal_on_life_loss: bool = False, render_mode: str | None = None,
               **make_kwargs) -> gym.Env:
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
    gym.register_envs(ale_py)
    if "frameskip" in make_kwargs:
        raise ValueError("set frame_skip (applied by the preprocessing), not the base environment's frameskip")
    env = gym.make(name, frameskip=1, render_mode=render_mode, **make_kwargs)
    env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=frame_skip, screen_size=screen_size,
                             terminal_on_life_loss=terminal_on_life_loss, grayscale_obs=True,
                             grayscale_newaxis=frame_stack <= 1, scale_obs=False)
    if frame_stack > 1:
        env = FrameStackObservation(env, frame_stack)  # (84, 84) frames -> (k, 84, 84)
    return env
