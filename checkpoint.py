"""Checkpoint files: written atomically, read with one clear error for anything wrong.

A checkpoint is everything a run needs to go on exactly where it stopped: model
and optimizer state, the config as a dict, the update and step counts, the run's
summaries folder, the random generators, every environment's state, the current
observations and recurrent state. Loading one unpickles Python objects: load
only checkpoints you trust (your own runs).

    python checkpoint.py --inference-only models/run.pt models/run_small.pt

keeps what Agent.load and enjoy.py use (model, config, normaliser statistics,
counts) and drops what only a resumed run needs: 16 of 50 MiB for the MiniGrid
model (no optimizer moments, environment states or generators).
"""
from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import torch


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message is one line."""


REQUIRED = ("model", "config", "update")
INFERENCE = ("model", "config", "update", "steps", "run_id", "normalization")
RESUME = ("optimizer", "steps", "run_id", "summaries_path", "rng", "environments", "obs", "state")


def save_checkpoint(path: str | Path, payload: dict) -> Path:
    """Writes to a temporary file, then renames: a crash never leaves a broken checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=False)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError, OSError) as error:
        reason = " ".join(str(error).split())[:200]
        raise CheckpointError(f"{path} is not a readable checkpoint (truncated, or not written by train.py): "
                              f"{reason}") from None
    if not isinstance(payload, dict) or any(key not in payload for key in REQUIRED):
        raise CheckpointError(f"{path} is not a checkpoint of this project (it lacks {', '.join(REQUIRED)})")
    return payload


def inference_only(checkpoint: dict) -> dict:
    """The part of a checkpoint that acting needs."""
    return {key: checkpoint[key] for key in INFERENCE if key in checkpoint}


def require_resumable(checkpoint: dict, path: str | Path) -> None:
    if any(key not in checkpoint for key in RESUME):
        raise CheckpointError(f"{path} holds the model only (exported with --inference-only): "
                              "it cannot resume training; resume from the run's own checkpoint")


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="Writes the inference-only part of a checkpoint.")
    parser.add_argument("--inference-only", nargs=2, metavar=("SOURCE", "TARGET"), required=True)
    source, target = parser.parse_args().inference_only
    save_checkpoint(target, inference_only(load_checkpoint(source)))
    print(f"wrote {target} ({Path(target).stat().st_size / 2 ** 20:.1f} MiB)")
