"""The PPO loop: collect a rollout, compute advantages, optimise, log, save.

run() -> collect() / optimise() -> one minibatch step; nothing here knows which
environment it trains on, nor which recurrent layer the model uses.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

from buffer import RolloutBuffer
from checkpoint import save_checkpoint
from config import Config, schedule_value
from losses import Losses, ppo_loss
from model import build_model
from normalization import Normalizers
from optimizer import AdamW
from spaces import action_format
from worker import VecEnv, environment_seeds


class NonFiniteError(RuntimeError):
    """A loss or gradient that is NaN or infinite: the update stops, nothing is saved."""


@dataclass
class PhaseTimes:
    """Wall seconds per phase of one update."""
    env: float = 0.0  # stepping the environments
    inference: float = 0.0  # the policy during the rollout
    buffer: float = 0.0  # GAE and the sequence index map
    update: float = 0.0  # the PPO epochs

    def total(self) -> float:
        return self.env + self.inference + self.buffer + self.update


@dataclass
class UpdateLog:
    update: int
    steps: int  # environment steps so far
    episodes: int  # episodes that ended during this update's rollout
    reward_mean: float | None  # mean raw return of those episodes
    length_mean: float | None
    success_mean: float | None  # None where the env reports no success
    metrics: dict = field(default_factory=dict)  # losses and statistics of the optimisation
    times: PhaseTimes = field(default_factory=PhaseTimes)


class Trainer:
    def __init__(self, config: Config, run_id: str = "run", device: str | torch.device = "cpu",
                 summaries_dir: str | Path = "summaries", models_dir: str | Path = "models",
                 verbose: bool = True, summaries_path: str | Path | None = None):
        self.config, self.run_id, self.verbose = config, run_id, verbose
        self.device = torch.device(device)
        self.update_threads = config.torch_threads or os.cpu_count() or 1
        # The model's orthogonal init (a QR factorisation) gives different last bits
        # with different thread counts: fix the count before anything is drawn.
        torch.set_num_threads(self.update_threads)
        torch.manual_seed(config.seed)
        np.random.seed(config.seed)

        W, T = config.n_workers, config.worker_steps
        self.envs = VecEnv(config.environment, environment_seeds(config.seed, W), config.worker_processes)
        self.model = build_model(config, self.envs.model_space, self.envs.action_space).to(self.device)
        self.optimizer = AdamW(self.model.parameters(), lr=config.learning_rate_schedule.initial)
        self.normalizers = Normalizers(config, self.envs.model_space)
        obs_space = self.envs.observation_space
        obs_dtype = np.float32 if self.normalizers.observations else obs_space.dtype
        self.buffer = RolloutBuffer(W, T, obs_space.shape, obs_dtype, action_format(self.envs.action_space),
                                    self.envs.masked, self.model.state_size, self.device)
        self.update = 0
        self.steps = 0
        self.history: list[UpdateLog] = []
        self.checkpoint_path = Path(models_dir) / f"{run_id}.pt"
        self.summaries_path = Path(summaries_path) if summaries_path else \
            Path(summaries_dir) / run_id / datetime.now().strftime("%Y%m%d-%H%M%S")
        self.writer: SummaryWriter | None = None
        self.saved_update: int | None = None  # the update of the last checkpoint written
        self.recent_rewards: deque = deque(maxlen=100)  # the reference baseline's reward_mean window
        self._stop_signal: int | None = None

        self.obs = self.envs.reset()  # (W, *obs_shape) host array
        self.state = self.model.initial_state(W, self.device)  # (W, S)

    # ------------------------------------------------------------------ run
    def run(self) -> list[UpdateLog]:
        """Trains until config.updates, or until SIGINT/SIGTERM: then saves and returns."""
        c = self.config
        self.writer = SummaryWriter(str(self.summaries_path))
        handlers = self._catch_signals()
        try:
            start = time.perf_counter()
            while self.update < c.updates and self._stop_signal is None:
                tick = time.perf_counter()
                log = self._one_update()
                self.history.append(log)
                self._report(log, time.perf_counter() - tick)
                if c.checkpoint_interval and self.update % c.checkpoint_interval == 0:
                    self.save()
            if self.saved_update != self.update:
                self.save()
            if self._stop_signal is not None:
                print(f"stopped by {signal.Signals(self._stop_signal).name} after update {self.update}; "
                      f"resume with: python train.py --resume {self.checkpoint_path}", flush=True)
            elif self.verbose:
                print("timings: " + json.dumps(self.timings(time.perf_counter() - start)), flush=True)
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)
            self.close()
        return self.history

    def _catch_signals(self) -> dict:
        """The first SIGINT/SIGTERM lets the current update finish and saves; a second stops at once."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def on_signal(number, frame):
            if self._stop_signal is not None:
                raise KeyboardInterrupt
            self._stop_signal = number
            print(f"\n{signal.Signals(number).name}: finishing update {self.update + 1}, then saving "
                  "(send it again to stop without saving)", flush=True)

        return {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}

    def timings(self, seconds: float) -> dict:
        """Totals over the updates run so far: the per-phase split of `seconds`."""
        phases = {name: sum(getattr(h.times, name) for h in self.history)
                  for name in ("env", "inference", "buffer", "update")}
        steps = len(self.history) * self.config.n_workers * self.config.worker_steps
        # ru_maxrss is in KiB on Linux; worker processes count as children
        peak_kib = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                       resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        return {"updates": len(self.history), "env_steps": steps, "train_seconds": seconds,
                "reward_mean_last100": float(np.mean(self.recent_rewards)) if self.recent_rewards else None,
                "steps_per_second": steps / seconds, "peak_rss_mb": peak_kib / 1024,
                **{f"{k}_seconds": v for k, v in phases.items()}}

    def _one_update(self) -> UpdateLog:
        c, times = self.config, PhaseTimes()
        lr = schedule_value(c.learning_rate_schedule, self.update)
        beta = schedule_value(c.beta_schedule, self.update)
        clip = schedule_value(c.clip_range_schedule, self.update)

        episodes = self.collect(times)
        self.recent_rewards.extend(e["reward"] for e in episodes)
        start = time.perf_counter()
        n = self.normalizers
        last_values = self._values(n.observation(self.obs, update=False), self.state)
        self.buffer.finish(last_values, c.gamma, c.lamda, c.recurrence.sequence_length, n.values)
        times.buffer = time.perf_counter() - start

        start = time.perf_counter()
        metrics = self.optimise(lr, beta, clip)
        times.update = time.perf_counter() - start
        metrics.update(learning_rate=lr, beta=beta, clip_range=clip,
                       sequences=float(self.buffer.sequences),
                       padding_fraction=self.buffer.padding_fraction)

        self.update += 1
        self.steps += c.n_workers * c.worker_steps

        def mean(key):
            values = [e[key] for e in episodes if key in e]
            return float(np.mean(values)) if values else None
        return UpdateLog(self.update, self.steps, len(episodes), mean("reward"), mean("length"),
                         mean("success"), metrics, times)

    # -------------------------------------------------------------- collect
    def _values(self, obs: np.ndarray, state: torch.Tensor) -> np.ndarray:
        """V(obs) in the returns' units, for observations as the model sees them."""
        values = self.model.value(torch.from_numpy(obs).to(self.device), state).cpu().numpy()
        return self.normalizers.value_units(values)

    def collect(self, times: PhaseTimes) -> list[dict]:
        """Fills the buffer with T steps of all W environments; returns the finished episodes."""
        b, model, device, norm = self.buffer, self.model, self.device, self.normalizers
        reset_state = self.config.recurrence.reset_hidden_state
        initial = model.initial_state(1, device)  # (1, S), broadcast over the rows to reset
        episodes = []
        torch.set_num_threads(1)  # W-row inference: more threads only add synchronisation
        start, env_time = time.perf_counter(), 0.0
        for t in range(self.config.worker_steps):
            obs = norm.observation(self.obs, update=True)  # what the model and the buffer see
            b.obs[:, t] = obs
            b.states[:, t] = self.state.cpu().numpy()  # the state this step's policy uses, saved before any reset
            mask = None
            if b.masked:  # the actions allowed now; stored so the update uses the same support
                b.action_mask[:, t] = self.envs.action_mask
                mask = torch.from_numpy(b.action_mask[:, t]).to(device)
            out = model.act(torch.from_numpy(obs).to(device), self.state, action_mask=mask)
            actions = out.actions.cpu().numpy()
            b.actions[:, t], b.log_probs[:, t] = actions, out.log_probs.cpu()
            b.values[:, t] = norm.value_units(out.values.cpu().numpy())

            tick = time.perf_counter()
            step = self.envs.step(actions)
            env_time += time.perf_counter() - tick

            done = step.terminated | step.truncated
            rewards = step.rewards if norm.rewards is None else norm.rewards(step.rewards, done)
            b.rewards[:, t], b.terminated[:, t], b.truncated[:, t] = rewards, step.terminated, step.truncated
            if step.truncated.any():
                # Bootstrap a time-limit cut from V(final observation) under the state
                # that followed the last step, before that state is reset.
                rows = np.flatnonzero(step.truncated)
                final_obs = norm.observation(step.final_obs[rows], update=False)
                b.final_values[rows, t] = self._values(final_obs, out.state[rows])
            self.obs = step.obs  # a view of the workers' shared array: read before the next step overwrites it
            self.state = out.state
            if reset_state and done.any():
                self.state = torch.where(torch.from_numpy(done).to(device).unsqueeze(1), initial, self.state)
            episodes.extend(step.episodes)
        times.env = env_time
        times.inference = time.perf_counter() - start - env_time
        return episodes

    # ------------------------------------------------------------- optimise
    def optimise(self, lr: float, beta: float, clip: float) -> dict:
        c = self.config
        torch.set_num_threads(self.update_threads)
        self.optimizer.lr = lr
        value_clip = (c.value_clip_range or clip) if c.value_clip else None
        stats = []  # per minibatch: the losses and the gradient norm, read back once at the end
        early_stop = False
        for _ in range(c.epochs):
            for mb in self.buffer.minibatches(c.n_mini_batch):
                out = self.model.evaluate(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask)
                losses = ppo_loss(out, mb, clip, beta, c.value_loss_coefficient,
                                  c.normalization.advantages, value_clip)
                if c.target_kl is not None and losses.approx_kl.item() > c.target_kl:
                    # The policy has moved too far from the rollout's: this minibatch's
                    # step is skipped and the update's remaining epochs too.
                    early_stop = True
                    break
                self.optimizer.zero_grad()
                losses.total.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.max_grad_norm, foreach=True)
                if not torch.isfinite(losses.total + grad_norm):
                    terms = ", ".join(f"{k} {v.item():.4g}" for k, v in losses._asdict().items())
                    raise NonFiniteError(f"non-finite loss or gradient in update {self.update + 1} "
                                         f"({terms}, grad_norm {grad_norm.item():.4g}); the model was not saved")
                self.optimizer.step()
                stats.append(torch.stack([*(v.detach() for v in losses), grad_norm]))
            if early_stop:
                break
        steps = len(stats)
        if not stats:  # stopped before the first step: report that minibatch's losses
            stats.append(torch.stack([*(v.detach() for v in losses), torch.tensor(0.0)]))
        means = torch.stack(stats).mean(0).tolist()
        return {**dict(zip([*Losses._fields, "grad_norm"], means)),
                "early_stop": float(early_stop), "minibatch_steps": float(steps)}

    # ------------------------------------------------------------- report
    def _report(self, log: UpdateLog, seconds: float) -> None:
        c, w = self.config, self.writer
        sps = c.n_workers * c.worker_steps / max(seconds, 1e-9)
        if log.reward_mean is not None:
            w.add_scalar("episode/reward_mean", log.reward_mean, log.update)
            w.add_scalar("episode/reward_mean_last100", float(np.mean(self.recent_rewards)), log.update)
            w.add_scalar("episode/length_mean", log.length_mean, log.update)
        if log.success_mean is not None:
            w.add_scalar("episode/success_mean", log.success_mean, log.update)
        for name, value in log.metrics.items():
            w.add_scalar(f"training/{name}", value, log.update)
        for name in ("env", "inference", "buffer", "update"):
            w.add_scalar(f"time/{name}", getattr(log.times, name), log.update)
        w.add_scalar("time/steps_per_second", sps, log.update)
        w.add_scalar("time/env_steps", log.steps, log.update)
        if self.verbose:
            def fmt(value, spec):
                return "-" if value is None else format(value, spec)
            m = log.metrics
            print(f"update {log.update:4d}/{c.updates}  steps {log.steps:8d}  "
                  f"reward {fmt(log.reward_mean, '8.3f')}  length {fmt(log.length_mean, '6.1f')}  "
                  f"success {fmt(log.success_mean, '.2f')}  pg {m['pg_loss']:+.4f}  v {m['v_loss']:.4f}  "
                  f"entropy {m['entropy']:.3f}  kl {m['approx_kl']:.4f}  clip {m['clip_frac']:.3f}  "
                  f"sps {sps:7.0f}", flush=True)

    # ---------------------------------------------------------- checkpoint
    def save(self) -> Path:
        """Writes models/<run-id>.pt; refuses a model with non-finite parameters."""
        if not all(torch.isfinite(p).all() for p in self.model.parameters()):
            raise NonFiniteError(f"the model has non-finite parameters after update {self.update}; not saved")
        save_checkpoint(self.checkpoint_path, {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "config": self.config.to_dict(),
            "update": self.update,
            "steps": self.steps,
            "run_id": self.run_id,
            "summaries_path": str(self.summaries_path),
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "environments": self.envs.get_state(),
            "obs": torch.from_numpy(self.obs.copy()),
            "state": self.state.cpu(),
            "recent_rewards": list(self.recent_rewards),
            "normalization": self.normalizers.state_dict(),
        })
        self.saved_update = self.update
        return self.checkpoint_path

    def restore(self, checkpoint: dict) -> None:
        """Continues a saved run exactly: same parameters, optimizer, generators, environments."""
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.update, self.steps = checkpoint["update"], checkpoint["steps"]
        self.saved_update = self.update
        rng = checkpoint["rng"]
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        self.envs.set_state(checkpoint["environments"])
        self.obs = checkpoint["obs"].numpy().copy()
        self.state = checkpoint["state"].to(self.device)
        self.recent_rewards.extend(checkpoint.get("recent_rewards", []))
        self.normalizers.load_state_dict(checkpoint.get("normalization", {}))

    def close(self) -> None:
        self.envs.close()
        if self.writer is not None:
            self.writer.close()
