"""Tiny memory tasks for the spaces the shipped environments do not cover.

Used as `environment: {type: gym, name: "tests.memory_tasks:<Id>"}` (gym.make
imports this module, in worker processes too). Each shows a cue only on the
first step and asks for it back on the last one, so none can be solved without
memory (RevealedArm shows none: only the rewards tell); each finishes in a
handful of steps, so a learning test takes seconds.
"""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class _CueTask(gym.Env):
    """Shared clock: the cue is drawn at reset, the episode lasts `length` steps."""

    def __init__(self, length: int = 4):
        self.length = length
        self._t = 0

    def _draw(self):
        raise NotImplementedError

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._draw()
        return self._obs(), {}


class CueMultiDiscrete(_CueTask):
    """MultiDiscrete([2, 3]) actions. Step 0 shows two cues (one-hot 2 and one-hot 3);
    the action of the last step scores 0.5 per branch that repeats its cue. Acting
    at random scores 0.5 * (1/2 + 1/3) = 0.42 on average; remembering scores 1."""

    def __init__(self, length: int = 4):
        super().__init__(length)
        self.observation_space = spaces.Box(0.0, 1.0, (6,), np.float32)  # 2 + 3 cue entries, 1 "answer now" flag
        self.action_space = spaces.MultiDiscrete([2, 3])

    def _draw(self):
        self._cue = (int(self.np_random.integers(2)), int(self.np_random.integers(3)))

    def _obs(self):
        obs = np.zeros(6, np.float32)
        if self._t == 0:
            obs[self._cue[0]] = 1.0
            obs[2 + self._cue[1]] = 1.0
        obs[5] = float(self._t == self.length - 1)
        return obs

    def step(self, action):
        self._t += 1
        done = self._t == self.length
        reward = 0.0
        if done:
            reward = 0.5 * (int(action[0]) == self._cue[0]) + 0.5 * (int(action[1]) == self._cue[1])
        return self._obs(), reward, done, False, {"success": reward == 1.0} if done else {}


class CueMultiBinary(_CueTask):
    """MultiBinary(3) actions. Step 0 shows three cue bits; the last step's action scores 1/3 per bit it repeats."""

    def __init__(self, length: int = 4):
        super().__init__(length)
        self.observation_space = spaces.Box(0.0, 1.0, (4,), np.float32)  # 3 cue bits, 1 "answer now" flag
        self.action_space = spaces.MultiBinary(3)

    def _draw(self):
        self._cue = self.np_random.integers(2, size=3)

    def _obs(self):
        return np.array([*(self._cue if self._t == 0 else (0, 0, 0)), self._t == self.length - 1], np.float32)

    def step(self, action):
        self._t += 1
        done = self._t == self.length
        reward = float(np.mean(np.asarray(action) == self._cue)) if done else 0.0
        return self._obs(), reward, done, False, {}


class _OneOfThree(_CueTask):
    """A cue that is one of three things; the last step's Discrete(3) action must name it (reward 1, else 0)."""

    def _draw(self):
        self._cue = int(self.np_random.integers(3))

    def step(self, action):
        self._t += 1
        done = self._t == self.length
        reward = float(done and int(action) == self._cue)
        return self._obs(), reward, done, False, {"success": reward == 1.0} if done else {}


class CueDict(_OneOfThree):
    """Dict observation {"cue": one-hot of 3 shown on step 0 only, "clock": steps left / length},
    Discrete(3) actions: the last step's action must repeat the cue (reward 1, else 0)."""

    def __init__(self, length: int = 4):
        super().__init__(length)
        self.observation_space = spaces.Dict({
            "cue": spaces.Box(0.0, 1.0, (3,), np.float32),
            "clock": spaces.Box(0.0, 1.0, (1,), np.float32),
        })
        self.action_space = spaces.Discrete(3)

    def _obs(self):
        cue = np.zeros(3, np.float32)
        if self._t == 0:
            cue[self._cue] = 1.0
        return {"cue": cue, "clock": np.array([(self.length - self._t) / self.length], np.float32)}


class CueImage(_OneOfThree):
    """uint8 pictures (36, 36, 3), Discrete(3) actions, as MiniGrid Memory asks for it in
    miniature: step 0 shows a bright square in one of three places (the cue), the
    following steps a blank picture, the last one a stripe ("answer now"); the last
    step's action must name the cue's place (reward 1, else 0; chance 0.33)."""

    SIZE = 36  # the smallest picture the three-layer CNN takes

    def __init__(self, length: int = 6, size: int = SIZE):
        super().__init__(length)
        self.size = size  # smaller: what the CNN refuses
        self.observation_space = spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.action_space = spaces.Discrete(3)

    def _obs(self):
        obs = np.zeros((self.size, self.size, 3), np.uint8)
        if self._t == 0:
            obs[8:20, 12 * self._cue:12 * self._cue + 12] = (255, 64, 0)
        if self._t == self.length - 1:
            obs[-4:] = (0, 128, 255)
        return obs


class CueDiscrete(_OneOfThree):
    """A Discrete(5) observation, as FrozenLake's or a POMDP's state index: step 0 shows the
    cue (1, 2 or 3), the steps after it show 0, the last one shows 4 ("answer now"); the
    last step's Discrete(3) action must name the cue (reward 1, else 0; chance 0.33)."""

    def __init__(self, length: int = 4):
        super().__init__(length)
        self.observation_space = spaces.Discrete(5)
        self.action_space = spaces.Discrete(3)

    def _obs(self):
        if self._t == 0:
            return 1 + self._cue
        return 4 if self._t == self.length - 1 else 0


class MaskedChoice(gym.Env):
    """Discrete(5) actions of which only some are allowed at each step (a random subset,
    never empty). An invalid action raises, so a run that finishes never took one.
    Reward 1 for the highest allowed action: learnable only by reading the mask,
    which comes in info["action_mask"] or (mask_in="obs") as a Dict key."""

    N = 5

    def __init__(self, mask_in: str = "info", length: int = 8):
        self.mask_in, self.length = mask_in, length
        self.action_space = spaces.Discrete(self.N)
        vector = spaces.Box(0.0, 1.0, (self.N,), np.float32)
        self.observation_space = vector if mask_in == "info" else spaces.Dict(
            {"allowed": vector, "action_mask": spaces.MultiBinary(self.N)})

    def _new_mask(self):
        self._mask = self.np_random.random(self.N) < 0.5
        self._mask[self.np_random.integers(self.N)] = True

    def _out(self):
        allowed = self._mask.astype(np.float32)
        if self.mask_in == "info":
            return allowed, {"action_mask": self._mask.copy()}
        return {"allowed": allowed, "action_mask": self._mask.astype(np.int8)}, {}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._new_mask()
        return self._out()

    def step(self, action):
        if not self._mask[int(action)]:
            raise RuntimeError(f"invalid action {action} taken; allowed {np.flatnonzero(self._mask)}")
        reward = float(int(action) == np.flatnonzero(self._mask).max())
        self._t += 1
        self._new_mask()
        obs, info = self._out()
        return obs, reward, False, self._t == self.length, info


class RevealedArm(gym.Env):
    """A two-armed bandit (RL^2's setting in miniature): one arm, drawn at reset, pays 1 for each of
    the episode's `length` pulls, the other 0. The observation is the clock only and never shows the
    arm: only the rewards reveal it, so a policy that sees its previous action and reward (recurrence.
    previous_action / previous_reward) can find the arm and stay on it (win-stay, lose-shift: 7.5 of
    8 on average), while one that does not scores chance, 4 of 8, whatever it remembers."""

    def __init__(self, length: int = 8):
        self.length = length
        self.observation_space = spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        return np.array([self._t / self.length], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t, self._arm = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        return self._obs(), float(int(action) == self._arm), self._t == self.length, False, {}


gym.register("CueMultiDiscrete-v0", entry_point=CueMultiDiscrete)
gym.register("CueMultiBinary-v0", entry_point=CueMultiBinary)
gym.register("CueDict-v0", entry_point=CueDict)
gym.register("MaskedChoice-v0", entry_point=MaskedChoice)
gym.register("CueImage-v0", entry_point=CueImage)
gym.register("CueDiscrete-v0", entry_point=CueDiscrete)
gym.register("RevealedArm-v0", entry_point=RevealedArm)
