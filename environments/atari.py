"""Atari games through ale-py: Breakout and any ALE id, with gymnasium's AtariPreprocessing (the DQN
papers': up to 30 no-ops after a reset, each action held 4 frames, grayscale 84x84 uint8; `frame_stack: k`
stacks k frames channels first). Rewards stay unclipped here; other kwargs go to gym.make."""
import gymnasium as gym

# In a terminated step's info: the training episode ends here, the scored episode goes on (EpisodeStats)
CONTINUES = "episode_continues"
NOOP, FIRE, RIGHT = 0, 1, 2  # the ALE's action ids in every game's minimal action set that has them


class LivesAndFire(gym.Wrapper):
    """episodic_life: a lost life ends the training episode, not the game, scored whole (CONTINUES).
    fire_reset: FIRE then RIGHT after every reset and lost life, so the ball is in play (as CleanRL's)."""

    def __init__(self, env: gym.Env, episodic_life: bool, fire_reset: bool):
        super().__init__(env)
        self._episodic_life = episodic_life
        meanings = env.unwrapped.get_action_meanings()
        self._fire = fire_reset and len(meanings) > RIGHT and meanings[FIRE] == "FIRE"
        self._lives = 0
        self._life_lost = False  # the last step lost a life: the next seedless reset goes on with the game

    def reset(self, *, seed=None, options=None):
        if seed is None and self._life_lost:
            # a life is left (lives > 0), so this step cannot end the game
            obs, _, terminated, truncated, info = self.env.step(NOOP)
        else:
            obs, info = self.env.reset(seed=seed, options=options)
            terminated = truncated = False
        self._life_lost = False
        if self._fire and not (terminated or truncated):
            for action in (FIRE, RIGHT):
                obs, _, terminated, truncated, info = self.env.step(action)
                if terminated or truncated:
                    break
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if self._episodic_life and not (terminated or truncated) and 0 < lives < self._lives:
            terminated, self._life_lost = True, True
            info = {**info, CONTINUES: True}
        self._lives = lives
        return obs, reward, terminated, truncated, info


def make_atari(name: str = "ALE/Breakout-v5", frame_stack: int = 0, episodic_life: bool = False,
               fire_reset: bool = False, render_mode: str | None = None, **make_kwargs) -> gym.Env:
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
    gym.register_envs(ale_py)
    env = gym.make(name, frameskip=1, render_mode=render_mode, **make_kwargs)
    env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_newaxis=frame_stack <= 1)
    if episodic_life or fire_reset:
        env = LivesAndFire(env, episodic_life, fire_reset)
    if frame_stack > 1:
        env = FrameStackObservation(env, frame_stack)  # (84, 84) frames -> (k, 84, 84)
    return env
