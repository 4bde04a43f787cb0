"""Running statistics for the normalisation switches (config `normalization`).

All three keep numpy float64 statistics, update from whole batches (the parallel
form of Welford's algorithm, as Chan et al. 1979), and round-trip through a
checkpoint with state_dict() / load_state_dict(). A model trained with any of
them on is only meaningful with the same statistics, so the checkpoint carries
them and enjoy.py / Agent use them frozen.
"""
from __future__ import annotations

import numpy as np

from spaces import Layout


class RunningMeanStd:
    """Mean and variance of everything seen so far, per feature."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = 1e-4  # a tiny prior count keeps the first division finite

    def update(self, batch: np.ndarray) -> None:
        """batch (n, *shape)."""
        batch = np.asarray(batch, dtype=np.float64)
        n = batch.shape[0]
        if n == 0:
            return
        mean, var = batch.mean(axis=0), batch.var(axis=0)
        delta, total = mean - self.mean, self.count + n
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + var * n + delta ** 2 * self.count * n / total) / total
        self.count = total

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var + 1e-8)

    def state_dict(self) -> dict:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        # np.array copies, from the arrays of a live run or the tensors of a checkpoint
        self.mean = np.array(state["mean"], dtype=np.float64)
        self.var = np.array(state["var"], dtype=np.float64)
        self.count = float(state["count"])


class ObservationNormalizer:
    """(obs - mean) / std per feature, clipped; only the vector features (spaces.Layout.vector_features),
    never image pixels. Works on stored observations (W, D)."""

    def __init__(self, features: np.ndarray, clip: float):
        self.features = features  # (D,) bool
        self.stats = RunningMeanStd((int(features.sum()),))
        self.clip = clip

    def __call__(self, obs: np.ndarray, update: bool) -> np.ndarray:
        """obs (W, *shape) raw -> normalised float32 copy; update: fold this batch into the statistics first."""
        W = obs.shape[0]
        flat = obs.reshape(W, -1)  # (W, *shape) -> (W, D)
        values = flat[:, self.features]
        if update:
            self.stats.update(values)
        out = flat.astype(np.float32)
        out[:, self.features] = np.clip((values - self.stats.mean) / self.stats.std, -self.clip, self.clip)
        return out.reshape(obs.shape)  # (W, D) -> (W, *shape)

    def state_dict(self) -> dict:
        return self.stats.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.stats.load_state_dict(state)


class RewardScaler:
    """Divides rewards by the running std of each worker's discounted return (not by
    the std of the rewards, and without subtracting a mean: the variant of the
    common PPO implementations, see seed 003), then clips."""

    def __init__(self, workers: int, gamma: float, clip: float):
        self.returns = np.zeros(workers, dtype=np.float64)  # (W,) discounted return so far
        self.stats = RunningMeanStd()
        self.gamma, self.clip = gamma, clip

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """rewards (W,), dones (W,) the episode ended at this step -> scaled float32 rewards (W,)."""
        self.returns = self.returns * self.gamma + rewards
        self.stats.update(self.returns)
        self.returns[dones] = 0.0
        return np.clip(rewards / self.stats.std, -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict:
        return {**self.stats.state_dict(), "returns": self.returns.copy()}

    def load_state_dict(self, state: dict) -> None:
        self.stats.load_state_dict(state)
        self.returns = np.array(state["returns"], dtype=np.float64)


class ValueNormalizer:
    """The value head predicts returns standardised by their running mean and std;
    normalize() turns targets into that scale, denormalize() turns predictions back."""

    def __init__(self):
        self.stats = RunningMeanStd()

    def update(self, returns: np.ndarray) -> None:
        self.stats.update(returns.reshape(-1))

    def normalize(self, x):
        return (x - float(self.stats.mean)) / float(self.stats.std)

    def denormalize(self, x):
        return x * float(self.stats.std) + float(self.stats.mean)

    def state_dict(self) -> dict:
        return self.stats.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.stats.load_state_dict(state)


class Normalizers:
    """What training sees of observations, rewards and values: the switched-on normalisers
    (None where off) and the environment's reward scale, saved and restored together."""

    def __init__(self, config, observation: Layout):
        """config: the run's Config; observation: how observations are stored (spaces.Layout)."""
        norm = config.normalization
        features = observation.vector_features()
        # images are never normalised: a pure image observation has no features to normalise
        self.observations = (ObservationNormalizer(features, norm.observation_clip)
                             if norm.observations and features is not None else None)
        self.rewards = RewardScaler(config.n_workers, config.gamma, norm.reward_clip) if norm.rewards else None
        self.values = ValueNormalizer() if norm.value_targets else None
        self.reward_scale = config.environment.training_reward_scale()
        self.reward_clip = config.environment.reward_clip

    def observation(self, obs: np.ndarray, update: bool) -> np.ndarray:
        """Raw observations (n, ...) -> what the model sees: normalised when switched on, else as they are."""
        return obs if self.observations is None else self.observations(obs, update)

    def reward(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """Raw rewards (W,) -> what training uses: times the reward scale and clipped to the reward clip
        (the environment's own units stay in the episode statistics), then scaled by the return's std
        when switched on."""
        if self.reward_scale != 1.0:
            rewards = (rewards * self.reward_scale).astype(np.float32)  # stored as float32, whatever dtype the rewards came in
        if self.reward_clip is not None:
            rewards = np.clip(rewards, -self.reward_clip, self.reward_clip).astype(np.float32)
        return rewards if self.rewards is None else self.rewards(rewards, dones)

    def value_units(self, values: np.ndarray) -> np.ndarray:
        """The value head's output -> the returns' units: denormalised when switched on, else as it is."""
        return values if self.values is None else self.values.denormalize(values)

    def _parts(self) -> dict:
        return {name: part for name, part in
                (("observations", self.observations), ("rewards", self.rewards), ("values", self.values))
                if part is not None}

    def state_dict(self) -> dict:
        return {name: part.state_dict() for name, part in self._parts().items()}

    def load_state_dict(self, state: dict) -> None:
        for name, part in self._parts().items():
            part.load_state_dict(state[name])
