"""Environments that fail on purpose, for the fault tests.

Used as `environment: {type: gym, name: "tests.faulty_envs:<Id>"}`: gym.make
imports this module (in whichever process builds the environment), which
registers the ids below.
"""
import os
import signal
import sys

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Flaky(gym.Env):
    """A tiny task that raises, or returns a NaN reward ("nan"), an observation holding inf ("inf-observation")
    or a reward as text ("text-reward"), once it has taken `at_step` steps."""

    def __init__(self, at_step: int = 30, fault: str = "raise"):
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.at_step, self.fault, self.steps, self.t = at_step, fault, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, size=2).astype(np.float32), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        reward = float(action)
        obs = self.np_random.uniform(-1, 1, size=2).astype(np.float32)
        if self.steps >= self.at_step:
            if self.fault == "raise":
                raise RuntimeError(f"Flaky environment broke at step {self.steps}")
            if self.fault == "inf-observation":
                obs[1] = np.inf
            else:
                reward = "1.5" if self.fault == "text-reward" else float("nan")
        return obs, reward, self.t >= 10, False, {}


gym.register("Flaky-v0", entry_point=Flaky)


class KillsItsProcess(Flaky):
    """Flaky's task, except that the first environment to reach `at_step` steps SIGKILLs its own
    process (a trainer stepping its environments in-process: the run itself), once: the marker
    file it creates first keeps every later run, and the same run resumed, alive."""

    def __init__(self, marker: str, at_step: int = 30):
        super().__init__(at_step=2 ** 62)
        self.marker, self.kill_at = marker, at_step

    def step(self, action):
        if self.steps + 1 == self.kill_at:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


gym.register("KillsItsProcess-v0", entry_point=KillsItsProcess)


class Chatty(Flaky):
    """Flaky's task without its fault, made by an environment that writes `line` to its process's
    stderr (as a library's banner or warning does) and appends it to the file `said` too, so a
    test can tell that the line was written wherever it did not appear."""

    def __init__(self, said: str, line: str):
        super().__init__(at_step=2 ** 62)
        print(line, file=sys.stderr, flush=True)
        with open(said, "a") as file:
            file.write(line + "\n")


gym.register("Chatty-v0", entry_point=Chatty)


class Endless(gym.Env):
    """An episode that never ends, registered without a time limit: a policy evaluated on it
    (deterministic or not) is only ever stopped by the evaluation's step cap. EndlessLimited-v0:
    the same with a time limit of its own (30 steps), which the cap's default leaves alone."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}

    def __init__(self, render_mode=None):
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 1.0, False, False, {}

    def render(self):
        return np.zeros((8, 8, 3), dtype=np.uint8)


gym.register("Endless-v0", entry_point=Endless)
gym.register("EndlessLimited-v0", entry_point=Endless, max_episode_steps=30)


class BadReset(Flaky):
    """Flaky's task without its step fault, whose reset raises from its `at_reset`-th call on (1: the
    first, the one that describes the spaces; 2: the first reset of the run's environments)."""

    def __init__(self, at_reset: int = 1):
        super().__init__(at_step=2 ** 62)
        self.at_reset, self.resets = at_reset, 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        if self.resets >= self.at_reset:
            raise RuntimeError(f"BadReset broke at reset {self.resets}")
        return super().reset(seed=seed)


gym.register("BadReset-v0", entry_point=BadReset)


class WrongShape(Flaky):
    """Flaky's task whose step returns an observation of 3 entries where its space says 2."""

    def __init__(self):
        super().__init__(at_step=2 ** 62)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return np.append(obs, 0.0).astype(np.float32), reward, terminated, truncated, info


gym.register("WrongShape-v0", entry_point=WrongShape)


class Gate(Flaky):
    """Flaky's task without its fault, whose first environment in a process to take its `at_step`-th step waits
    there, if `gate` exists (a FIFO a test made), until the test opens it for writing: a signal can then land
    inside a given update. It creates `<gate>.waiting` first, for the test to await."""
    waited = False

    def __init__(self, gate: str, at_step: int = 15):
        super().__init__(at_step=2 ** 62)
        self.gate, self.wait_at = gate, at_step

    def step(self, action):
        if self.steps + 1 == self.wait_at and not Gate.waited and os.path.exists(self.gate):
            Gate.waited = True
            open(f"{self.gate}.waiting", "w").close()
            open(self.gate).close()  # blocks until a writer opens it
        return super().step(action)


gym.register("Gate-v0", entry_point=Gate)
