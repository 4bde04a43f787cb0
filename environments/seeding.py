"""How episodes get their seeds. SplitMix64 (Steele, Lea and Flood 2014) for CartPole and PocMemoryEnv, whose
episodes each start from a seed of their own (EpisodeStats) and need a few numbers, far fewer than a numpy generator
costs to build; a seed always gives the same episode (not Gymnasium's). SeedRange: levels from a range of seeds."""
import secrets

import gymnasium as gym
import numpy as np

_MASK = 2 ** 64 - 1


class SplitMix64:
    __slots__ = ("state",)

    def __init__(self, seed: int | None = None):
        self.state = (secrets.randbits(64) if seed is None else seed) & _MASK

    def next(self) -> int:
        self.state = state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def random(self) -> float:
        return (self.next() >> 11) * (1.0 / 9007199254740992.0)

    def integers(self, n: int) -> int:
        """An integer in [0, n) (n small: the modulo's bias is below 2**-60)."""
        return self.next() % n


class SeedRange(gym.Wrapper):
    """Each reset draws the episode's seed from [start, start + count), by a generator that a seeded reset seeds."""

    def __init__(self, env: gym.Env, start: int, count: int):
        super().__init__(env)
        self.start, self.count = start, count
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        return self.env.reset(seed=self.start + int(self._rng.integers(self.count)), options=options)
