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


class _EmulatorState(gym.Wrapper):
    """Makes the game's state survive pickling (checkpoints resume it exactly).

    ale-py pickles an environment as its constructor arguments only: unpickled,
    the game starts again from power-on. ALE can save its emulator and random
    generator, but not the previous action that sticky actions repeat, so the
    state is saved right after each reset (where there is no previous action)
    and the frames played since then are replayed on unpickling: at most
    108,000 one-byte actions, the v5 episode limit.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._episode_start = None  # ALE state (emulator and its generator) right after the last reset
        self._frames = bytearray()  # the action index of every frame since then

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._episode_start = self.env.unwrapped.ale.cloneState(include_rng=True)
        self._frames = bytearray()
        return obs, info

    def step(self, action):
        self._frames.append(int(action))
        return self.env.step(action)

    def __getstate__(self):
        # The no-op count of the next reset comes from the environment's generator, also lost otherwise.
        return {**self.__dict__, "_np_random": self.env.unwrapped.np_random}

    def __setstate__(self, state):
        np_random = state.pop("_np_random")
        self.__dict__.update(state)
        game = self.env.unwrapped
        game._np_random = np_random
        if self._episode_start is not None:
            game.ale.restoreState(self._episode_start)
            for action in self._frames:
                game.ale.act(game._action_set[action], 1.0)


def make_atari(name: str = "ALE/Breakout-v5", frame_stack: int = 0, noop_max: int = 30, frame_skip: int = 4,
               screen_size: int = 84, terminal_on_life_loss: bool = False, render_mode: str | None = None,
               **make_kwargs) -> gym.Env:
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
    gym.register_envs(ale_py)
    if "frameskip" in make_kwargs:
        raise ValueError("set frame_skip (applied by the preprocessing), not the base environment's frameskip")
    env = gym.make(name, frameskip=1, render_mode=render_mode, **make_kwargs)
    env = _EmulatorState(env)
    env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=frame_skip, screen_size=screen_size,
                             terminal_on_life_loss=terminal_on_life_loss, grayscale_obs=True,
                             grayscale_newaxis=frame_stack <= 1, scale_obs=False)
    if frame_stack > 1:
        env = FrameStackObservation(env, frame_stack)  # (84, 84) frames -> (k, 84, 84)
    return env
