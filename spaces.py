"""How observations and actions of any supported Gymnasium space are laid out in storage.

Everything between the environment and the model (shared memory, the rollout
buffer, checkpoints) holds one array per step. A Box observation is stored as
it is (uint8 images stay uint8). A Dict observation is packed into one float32
vector, its keys in sorted order, each flattened; the model unpacks it with the
same layout and gives each key its own encoder. An `action_mask` key is not an
observation: it is moved into info["action_mask"], where environments that
mask actions through the info dict already put it.

Actions are stored as (k,) rows: int64 for Discrete (k = 1), MultiDiscrete
(one entry per branch) and MultiBinary, float32 for Box. Only numpy here: the
environment worker processes import this module and never torch.
"""
from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np

MASK_KEY = "action_mask"


class SpaceError(ValueError):
    """An observation or action space this project cannot use; the message is one line."""


class Field(NamedTuple):
    key: str
    shape: tuple[int, ...]  # the key's own shape
    start: int  # offset in the packed vector
    size: int  # number of entries


def dict_layout(space: gym.spaces.Dict) -> list[Field]:
    """The packed layout of a Dict observation space (the action mask left out)."""
    fields, start = [], 0
    for key in sorted(space.spaces):
        if key == MASK_KEY:
            continue
        sub = space.spaces[key]
        if not isinstance(sub, gym.spaces.Box):
            raise SpaceError(f"observation key '{key}' has space {sub}; Dict observations must hold Box spaces")
        size = int(np.prod(sub.shape))
        fields.append(Field(key, tuple(sub.shape), start, size))
        start += size
    if not fields:
        raise SpaceError(f"the Dict observation space {space} has no observation key besides '{MASK_KEY}'")
    return fields


def packed_space(space: gym.spaces.Dict) -> gym.spaces.Box:
    size = sum(f.size for f in dict_layout(space))
    return gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)


def pack(obs: dict, layout: list[Field]) -> np.ndarray:
    """A Dict observation -> one float32 vector (the layout's order)."""
    return np.concatenate([np.asarray(obs[f.key], dtype=np.float32).ravel() for f in layout])


def is_image(shape: tuple[int, ...]) -> bool:
    return len(shape) == 3


def image_channels_last(shape: tuple[int, ...]) -> bool:
    """HWC (True) or CHW (False): the channel axis is the short one (at most 4 channels)."""
    if shape[-1] <= 4:
        return True
    if shape[0] <= 4:
        return False
    raise SpaceError(f"cannot tell the channel axis of the image observation shape {shape}: "
                      "expected height x width x channels or channels x height x width with at most 4 channels")


def vector_features(space: gym.Space) -> np.ndarray | None:
    """Which entries of the stored observation are vector features (True) rather than image pixels;
    None when the observation is a single image (nothing to normalise)."""
    if isinstance(space, gym.spaces.Dict):
        layout = dict_layout(space)
        mask = np.concatenate([np.full(f.size, not is_image(f.shape)) for f in layout])
        return mask if mask.any() else None
    if is_image(space.shape):
        return None
    return np.ones(int(np.prod(space.shape)), dtype=bool)


# ------------------------------------------------------------------ actions

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
    """Stored action rows (W, k) -> what each environment's step() takes.

    Box actions are clipped to the bounds here and only here: the policy's sample
    (and its log-prob) stays unclipped in the buffer.
    """
    if isinstance(space, gym.spaces.Discrete):
        return actions[:, 0].tolist()
    if isinstance(space, gym.spaces.Box):
        return list(np.clip(actions, space.low, space.high).astype(space.dtype))
    if isinstance(space, gym.spaces.MultiBinary):
        return list(actions.astype(np.int8).reshape(len(actions), *space.shape))
    return list(actions.reshape(len(actions), *space.shape))
