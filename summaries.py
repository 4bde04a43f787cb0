"""What a run reports after each update: TensorBoard scalars and one line on stdout, and with tracking the same
scalars to W&B (tracking.py). The TensorBoard folder also gets the run's config.json, for stats.py."""
import json
import resource
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from config import Config
from plumbing.atomic import write_atomically


@dataclass
class PhaseTimes:
    """Wall seconds per phase of one update."""
    env: float = 0.0  # stepping the environments
    inference: float = 0.0  # the policy during the rollout
    buffer: float = 0.0  # GAE and the sequence index map
    update: float = 0.0  # the PPO epochs
    evaluation: float = 0.0  # the held-out episodes of config `evaluation`, when due

    @contextmanager
    def measure(self, phase: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, phase, getattr(self, phase) + time.perf_counter() - start)


@dataclass
class UpdateLog:
    update: int
    steps: int  # environment steps so far
    episodes: list[dict]  # the episodes that ended in this rollout: reward, length[, success]
    metrics: dict = field(default_factory=dict)  # losses and statistics of the optimisation
    times: PhaseTimes = field(default_factory=PhaseTimes)
    seconds: float = 0.0  # wall time of the whole update
    evaluation: list[dict] | None = None  # the held-out episodes scored after this update

    def _mean(self, key: str) -> float | None:
        values = [e[key] for e in self.episodes if key in e]
        return float(np.mean(values)) if values else None

    @property
    def reward_mean(self) -> float | None:
        return self._mean("reward")

    @property
    def length_mean(self) -> float | None:
        return self._mean("length")

    @property
    def success_mean(self) -> float | None:
        return self._mean("success")


def scores(results: list[dict]) -> dict[str, float]:
    """The scores of held-out episodes: eval/* in a run's summaries, enjoy.py's closing line."""
    rewards = np.array([r["reward"] for r in results], dtype=np.float64)
    out = {"reward_mean": float(rewards.mean()), "reward_std": float(rewards.std()),
           "reward_min": float(rewards.min()), "reward_max": float(rewards.max()),
           "length_mean": float(np.mean([r["length"] for r in results]))}
    if all("success" in r for r in results):
        out["success_mean"] = float(np.mean([r["success"] for r in results]))
    if capped := sum(bool(r.get("capped")) for r in results):
        out["capped"] = float(capped)
    return out


class Summaries:
    """The run's reports; keeps the history of updates and the last 100 episodes' returns."""

    def __init__(self, path: str | Path, config: Config, verbose: bool = True, tracking=None,
                 precision: str = "float32"):
        self.path, self.config, self.verbose = Path(path), config, verbose
        self.recorded = {**config.to_dict(), "precision": precision}  # for config.json and W&B, precision resolved
        self.tracking, self.tracker = tracking, None  # tracking.Tracking, or None: TensorBoard alone
        self.steps_per_update = config.n_workers * config.worker_steps
        self.history: list[UpdateLog] = []
        self.recent_rewards: deque = deque(maxlen=100)  # the reference baseline's reward_mean window
        self._writer = None

    def open(self, update: int = 0) -> None:
        """Writes after `update`, hiding what a killed process wrote past it (purge_step): it is written again."""
        from torch.utils.tensorboard import SummaryWriter
        _leave_writer_errors_to_the_writer()
        self._writer = SummaryWriter(str(self.path), purge_step=update + 1 if update else None)
        text = json.dumps(self.recorded, indent=1)
        write_atomically(self.path / "config.json", lambda tmp: tmp.write_text(text))
        if self.tracking is not None and self.tracker is None:
            from tracking import start  # imports wandb: a run without tracking never does
            self.tracker = start(self.tracking, self.recorded, self.path)

    def scalars(self, log: UpdateLog) -> dict[str, float]:
        """Every number reported for one update, by its TensorBoard tag."""
        out = {}
        if log.reward_mean is not None:
            out.update({"episode/reward_mean": log.reward_mean, "episode/length_mean": log.length_mean,
                        "episode/reward_mean_last100": float(np.mean(self.recent_rewards))})
        if log.success_mean is not None:
            out["episode/success_mean"] = log.success_mean
        if log.evaluation is not None:
            out.update({f"eval/{name}": value for name, value in scores(log.evaluation).items()})
        out.update({f"training/{name}": value for name, value in log.metrics.items()})
        out.update({f"time/{f.name}": getattr(log.times, f.name) for f in fields(PhaseTimes)})
        out["time/steps_per_second"] = self.steps_per_update / max(log.seconds, 1e-9)
        out["time/env_steps"] = log.steps
        return out

    def write(self, log: UpdateLog) -> dict[str, float]:
        self.history.append(log)
        self.recent_rewards.extend(e["reward"] for e in log.episodes)
        scalars = self.scalars(log)
        for tag, value in scalars.items():
            self._writer.add_scalar(tag, value, log.update)
        if self.tracker is not None:
            self.tracker.log(scalars, log.update)
        self.say(self.line(log, scalars))
        return scalars

    def line(self, log: UpdateLog, scalars: dict[str, float]) -> str:
        def fmt(value, spec):
            return "-" if value is None else format(value, spec)
        m = log.metrics
        return (f"update {log.update:4d}/{self.config.updates}  steps {log.steps:8d}  "
                f"reward {fmt(log.reward_mean, '8.3f')}  length {fmt(log.length_mean, '6.1f')}  "
                f"success {fmt(log.success_mean, '.2f')}  pg {m['pg_loss']:+.4f}  v {m['v_loss']:.4f}  "
                f"entropy {m['entropy']:.3f}  kl {m['approx_kl']:.4f}  clip {m['clip_frac']:.3f}  "
                f"sps {scalars['time/steps_per_second']:7.0f}"
                + (f"  eval {scalars['eval/reward_mean']:.3f}" if "eval/reward_mean" in scalars else ""))

    def say(self, text: str) -> None:
        if self.verbose:
            print(text, flush=True)

    def finish(self, seconds: float) -> None:
        self.say("timings: " + json.dumps(self.timings(seconds)))

    def timings(self, seconds: float) -> dict:
        """Totals over this process's updates, and the per-phase split of `seconds`."""
        phases = {f.name: sum(getattr(h.times, f.name) for h in self.history) for f in fields(PhaseTimes)}
        steps = len(self.history) * self.steps_per_update
        # ru_maxrss is in KiB on Linux; worker processes count as children
        peak_kib = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                       resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        return {"updates": len(self.history), "env_steps": steps, "train_seconds": seconds,
                "reward_mean_last100": float(np.mean(self.recent_rewards)) if self.recent_rewards else None,
                "steps_per_second": steps / seconds, "peak_rss_mb": peak_kib / 1024,
                "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if torch.cuda.is_initialized() else None,
                "torch_threads": torch.get_num_threads(),
                **{f"{k}_seconds": v for k, v in phases.items()}}

    def state_dict(self) -> dict:
        return {"recent_rewards": list(self.recent_rewards)}

    def load_state_dict(self, state: dict) -> None:
        self.recent_rewards.extend(state["recent_rewards"])

    def close(self) -> None:
        """Closes the writer; raises (OSError) a write the writer's thread could not make."""
        if self.tracker is not None:
            self.tracker.finish()
            self.tracker = None
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.flush()  # raises what the writer's thread met, which close() alone would not
            finally:
                writer.close()


def _leave_writer_errors_to_the_writer() -> None:
    """The writer raises its thread's failed write (a full disk) again at its next call, where train.py
    reports it in one line; the thread's own traceback (OSError in TensorBoard's threads only) is left out."""
    previous = threading.excepthook
    if getattr(previous, "leaves_writer_errors", False):
        return

    def hook(args):
        if not (type(args.thread).__module__.startswith("tensorboard.") and isinstance(args.exc_value, OSError)):
            previous(args)
    hook.leaves_writer_errors = True
    threading.excepthook = hook

