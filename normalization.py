"""Running statistics for the normalisation switches (config `normalization`), in float64, updated from
whole batches. The checkpoint carries them; Agent uses them frozen."""
import numpy as np
import torch
from gymnasium.wrappers.utils import RunningMeanStd as _GymnasiumRunningMeanStd

from spaces import Layout


def _fitting(saved, current: np.ndarray, name: str) -> np.ndarray:
    """A saved statistic in float64; one of another shape is a ValueError (numpy would broadcast it silently)."""
    saved = np.array(saved, dtype=np.float64)
    if saved.shape != current.shape:
        raise ValueError(f"its normaliser {name} has the shape {saved.shape}, the config's {current.shape}")
    return saved


class RunningMeanStd(_GymnasiumRunningMeanStd):
    """Per-feature mean and variance so far (Chan et al.'s update); gymnasium's prior: mean 0, var 1, count 1e-4."""

    def __init__(self, shape: tuple[int, ...] = ()):
        super().__init__(shape=shape)

    def update(self, batch: np.ndarray) -> None:
        """batch (n, *shape), in float64; an empty batch changes nothing."""
        if len(batch):
            super().update(np.asarray(batch, dtype=np.float64))

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var + 1e-8)

    def state_dict(self) -> dict:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.var = _fitting(state["mean"], self.mean, "mean"), _fitting(state["var"], self.var, "var")
        self.count = float(state["count"])


class ObservationNormalizer(RunningMeanStd):
    """(obs - mean) / std per feature, clipped, for the vector features only (never image pixels)."""

    def __init__(self, features: np.ndarray, clip: float):
        super().__init__((int(features.sum()),))
        self.features, self.clip = features, clip  # features (D,) bool

    def __call__(self, obs: np.ndarray, update: bool) -> np.ndarray:
        """obs (W, *shape) -> a normalised float32 copy; update: fold this batch into the statistics first."""
        if update:
            self.update(obs.reshape(obs.shape[0], -1)[:, self.features])  # (W, *shape) -> (W, D) -> (W, features)
        obs = torch.from_numpy(np.require(obs, requirements="CW"))  # torch takes no read-only or reversed array
        return normalize(obs, *self.frozen(), self.clip).numpy()

    def frozen(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(features, mean, std) (D,) over a flat observation: the statistics on the features, identity elsewhere."""
        mean, std = np.zeros(self.features.shape), np.ones(self.features.shape)
        mean[self.features], std[self.features] = self.mean, self.std
        return torch.from_numpy(self.features), torch.from_numpy(mean), torch.from_numpy(std)


def normalize(obs: torch.Tensor, features: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
              clip: float) -> torch.Tensor:
    """(obs - mean) / std in float64, clipped, on the features (D,): obs (B, *shape) -> float32; export.Step's too."""
    flat = obs.reshape(obs.shape[0], -1).double()  # (B, *shape) -> (B, D)
    scaled = ((flat - mean) / std).clamp(-clip, clip)
    return torch.where(features, scaled, flat).float().reshape(obs.shape)


class RewardScaler(RunningMeanStd):
    """Rewards / the running std of the workers' discounted returns (no mean subtracted, as usual in PPO), clipped."""

    def __init__(self, workers: int, gamma: float, clip: float):
        super().__init__()
        self.returns = np.zeros(workers, dtype=np.float64)  # (W,) discounted return so far
        self.gamma, self.clip = gamma, clip

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """rewards (W,), dones (W,) -> scaled float32 rewards (W,)."""
        self.returns = self.returns * self.gamma + rewards
        self.update(self.returns)
        self.returns[dones] = 0.0
        return np.clip(rewards / self.std, -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "returns": self.returns.copy()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.returns = _fitting(state["returns"], self.returns, "returns")


class ValueNormalizer(RunningMeanStd):
    """The value head predicts returns standardised by their running mean and std."""

    def update(self, returns: np.ndarray) -> None:
        super().update(returns.reshape(-1))

    def normalize(self, x):
        return (x - float(self.mean)) / float(self.std)

    def denormalize(self, x):
        return x * float(self.std) + float(self.mean)


class Normalizers:
    """The switched-on normalisers (None where off) and the environment's reward scale and clip."""

    def __init__(self, config, observation: Layout):
        norm = config.normalization
        features = observation.vector_features()
        self.observations = (ObservationNormalizer(features, norm.observation_clip)
                             if norm.observations and features is not None else None)
        self.rewards = RewardScaler(config.n_workers, config.gamma, norm.reward_clip) if norm.rewards else None
        self.values = ValueNormalizer() if norm.value_targets else None
        self.stored_dtype = np.dtype(np.float32) if self.observations is not None else observation.dtype  # in buffers
        self.reward_scale = config.environment.training_reward_scale
        self.reward_clip = config.environment.reward_clip

    def observation(self, obs: np.ndarray, update: bool) -> np.ndarray:
        return obs if self.observations is None else self.observations(obs, update)

    def reward(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """Raw rewards (W,) -> training's: scaled, clipped, then divided by the return's std if on (stats keep raw)."""
        if self.reward_scale != 1.0:
            rewards = (rewards * self.reward_scale).astype(np.float32)
        if self.reward_clip is not None:
            rewards = np.clip(rewards, -self.reward_clip, self.reward_clip).astype(np.float32)
        return rewards if self.rewards is None else self.rewards(rewards, dones)

    def value_units(self, values: np.ndarray) -> np.ndarray:
        return values if self.values is None else self.values.denormalize(values)

    def _parts(self) -> dict:
        parts = {"observations": self.observations, "rewards": self.rewards, "values": self.values}
        return {name: part for name, part in parts.items() if part is not None}

    def state_dict(self) -> dict:
        return {name: part.state_dict() for name, part in self._parts().items()}

    def load_state_dict(self, state: dict) -> None:
        for name, part in self._parts().items():
            part.load_state_dict(state[name])
