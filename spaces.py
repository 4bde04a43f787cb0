"""How observations and actions are stored: a single Box observation as it is, any other as one float32 vector of its
parts (categories as indices, a Dict's `action_mask` moved to the info). Only numpy: the workers import no torch."""
from typing import NamedTuple

import gymnasium as gym
import numpy as np

MASK_KEY = "action_mask"


class SpaceError(ValueError):
    """An observation or action space this project cannot use; the message is one line."""


class Part(NamedTuple):
    key: str  # where it sits: "" for the whole observation, "cue" in a Dict, "1" in a Tuple, "a.1" nested
    kind: str  # "image", "vector" (floats, 0/1 included) or "categorical" (indices, one-hot in the model)
    shape: tuple[int, ...]  # its own shape (an image's H, W, C or C, H, W)
    start: int  # its first entry in the stored vector (0 for an observation stored as it is)
    size: int  # its entries in storage
    categories: tuple[int, ...] = ()  # categorical: the number of categories of each of its indices
    channels_last: bool = True  # image: HWC (True) or CHW (False)
    scale: float = 1.0  # image: multiplies its pixels (1/255 for uint8)


class Layout(NamedTuple):
    parts: tuple[Part, ...]
    packed: bool  # stored as one float32 vector of the parts (anything but a single Box)
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def images(self) -> bool:
        return any(p.kind == "image" for p in self.parts)

    def vector_features(self) -> np.ndarray | None:
        """Which stored entries a normaliser may touch (never pixels or category indices); None: none."""
        mask = np.concatenate([np.full(p.size, p.kind == "vector") for p in self.parts])
        return mask if mask.any() else None


def _entries(space: gym.spaces.Dict | gym.spaces.Tuple) -> list[tuple[str, gym.Space]]:
    if isinstance(space, gym.spaces.Dict):
        return [(name, sub) for name, sub in sorted(space.spaces.items()) if name != MASK_KEY]
    return [(str(i), sub) for i, sub in enumerate(space.spaces)]


def _parts(space: gym.Space, key: str, start: int) -> list[Part]:
    """The parts of `space` in storage order, the first beginning at entry `start`."""
    if isinstance(space, gym.spaces.Box):
        shape = tuple(space.shape)
        if len(shape) > 3:
            raise SpaceError(f"observation shape {shape} is not supported (vectors, or 3-D images HWC / CHW)")
        if len(shape) < 3:
            return [Part(key, "vector", shape, start, int(np.prod(shape)))]
        if shape[0] > 4 and shape[-1] > 4:
            raise SpaceError(f"cannot tell the channel axis of the image observation shape {shape}: "
                             "expected height x width x channels or channels x height x width with at most 4 channels")
        return [Part(key, "image", shape, start, int(np.prod(shape)), channels_last=shape[-1] <= 4,
                     scale=1.0 / 255.0 if space.dtype == np.uint8 else 1.0)]
    if isinstance(space, gym.spaces.Discrete):
        return [Part(key, "categorical", (), start, 1, (int(space.n),))]
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in np.asarray(space.nvec).ravel())
        return [Part(key, "categorical", tuple(space.shape), start, len(nvec), nvec)]
    if isinstance(space, gym.spaces.MultiBinary):
        return [Part(key, "vector", tuple(np.atleast_1d(space.shape)), start, int(np.prod(space.shape)))]
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        parts = []
        for name, sub in _entries(space):
            parts += _parts(sub, f"{key}.{name}" if key else name, start + sum(p.size for p in parts))
        return parts
    raise SpaceError(f"observation space {space} is not supported "
                     "(Box, Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of them)")


def layout(space: gym.Space) -> Layout:
    parts = tuple(_parts(space, "", 0))
    if not parts:
        raise SpaceError(f"the observation space {space} has no observation besides '{MASK_KEY}'")
    if isinstance(space, gym.spaces.Box):
        return Layout(parts, False, tuple(space.shape), np.dtype(space.dtype))
    return Layout(parts, True, (sum(p.size for p in parts),), np.dtype(np.float32))


def pack(obs, space: gym.Space) -> np.ndarray:
    """An observation of a packed space -> its stored float32 vector (the layout's order)."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return np.concatenate([pack(obs[name if isinstance(space, gym.spaces.Dict) else int(name)], sub)
                               for name, sub in _entries(space)])
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return (np.asarray(obs) - space.start).astype(np.float32).ravel()
    return np.asarray(obs, dtype=np.float32).ravel()


class ActionFormat(NamedTuple):
    size: int  # k: entries per stored action row
    dtype: type  # storage dtype: np.int64 or np.float32
    mask_size: int  # entries of an action mask (sum of the categories); 0: the space cannot be masked


def action_format(space: gym.Space) -> ActionFormat:
    if isinstance(space, gym.spaces.Discrete):
        return ActionFormat(1, np.int64, int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return ActionFormat(int(np.prod(space.shape)), np.int64, int(np.sum(space.nvec)))
    if isinstance(space, gym.spaces.MultiBinary):
        return ActionFormat(int(np.prod(space.shape)), np.int64, 0)
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return ActionFormat(int(space.shape[0]), np.float32, 0)
    raise SpaceError(f"the environment's action space {space} is not supported "
                     "(Discrete, MultiDiscrete, MultiBinary, one-dimensional Box)")


def env_actions(space: gym.Space, actions: np.ndarray) -> list:
    """Stored action rows (W, k) -> what each environment's step() takes. Box actions are clipped to the
    bounds here and only here: the policy's sample (and its log-prob) stays unclipped in the buffer."""
    if isinstance(space, gym.spaces.Discrete):
        return actions[:, 0].tolist()
    if isinstance(space, gym.spaces.Box):
        return list(np.clip(actions, space.low, space.high).astype(space.dtype))
    if isinstance(space, gym.spaces.MultiBinary):
        return list(actions.astype(np.int8).reshape(len(actions), *space.shape))
    return list(actions.reshape(len(actions), *space.shape))


class EnvSpaces(NamedTuple):
    """An environment's spaces, checked once (environments.spaces_of)."""
    observation: Layout
    observation_space: gym.Space  # the environment's own (before packing)
    action_space: gym.Space
    action: ActionFormat
    masked: bool  # the environment gives info["action_mask"]

