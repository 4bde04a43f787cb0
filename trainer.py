"""The PPO loop: collect a rollout, compute advantages, optimise, in that order, and when due score
the policy on held-out episodes. Nothing here knows which environment or recurrent core it trains."""
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import torch

from buffer import RolloutBuffer, require_rollout_memory
from checkpoint import arrays, load_model, save_checkpoint
from config import Config, schedule_value
from evaluation import Evaluator
from losses import StepStats, mean_metrics, ppo_loss, require_finite, require_model_parameters
from model import build_model
from normalization import Normalizers
from plumbing import stopping
from plumbing.errors import NonFiniteError
from plumbing.machine import Machine
from summaries import PhaseTimes, Summaries, UpdateLog
from worker import VecEnv, environment_seeds, make_probe


class Trainer:
    def __init__(self, config: Config, run_id: str = "run", device: str | torch.device = "cpu",
                 summaries_dir: str | Path = "summaries", models_dir: str | Path = "models",
                 verbose: bool = True, summaries_path: str | Path | None = None, tracking=None):
        self.config, self.run_id, self.device = config, run_id, torch.device(device)
        self.machine = Machine(config.torch_threads, config.precision, self.device)  # refuses bfloat16 where not native
        torch.manual_seed(config.seed)
        np.random.seed(config.seed)
        W, T = config.n_workers, config.worker_steps
        seeds = environment_seeds(config.seed, W)
        probe, self.spaces = make_probe(config.environment, seeds[0])  # for the spaces, before any worker starts
        with self.machine.building(self.spaces.observation.images):
            self.model = build_model(config, self.spaces).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.learning_rate_schedule.initial,
                                           eps=config.optimizer.eps, weight_decay=config.optimizer.weight_decay,
                                           fused=True)
        self.normalizers = Normalizers(config, self.spaces.observation)
        require_rollout_memory(config, self.spaces, self.model)
        self.buffer = RolloutBuffer(W, T, self.spaces.observation.shape, self.normalizers.stored_dtype,
                                    self.spaces.action, self.spaces.masked, self.model.state_size, self.device,
                                    self.model.previous_size)
        self.evaluator = Evaluator(config, self.spaces, self.device) if config.evaluation.interval else None
        self.envs = VecEnv(config.environment, seeds, config.worker_processes, probe, self.spaces)
        self.update = self.steps = 0
        self.saved_update: int | None = None  # the update of the last checkpoint written
        self.loss_checked = False  # the first minibatch's loss reaches the model's parameters alone
        self.stop_signal: int | None = None  # set by a signal handler: stop after this update
        self.checkpoint_path = Path(models_dir) / f"{run_id}.pt"
        self.best: dict | None = None  # the best evaluation so far, {"reward_mean", "update"}, saved to best_path
        self.best_path = Path(models_dir) / f"{run_id}-best.pt"
        self.summaries = Summaries(summaries_path or Path(summaries_dir, run_id, f"{datetime.now():%Y%m%d-%H%M%S}"),
                                   config, verbose, tracking, self.machine.precision_used)
        self.obs = self.envs.reset()  # (W, *obs_shape)
        self.state = self.model.initial_state(W, self.device)  # (W, S)
        self.previous = torch.zeros(W, self.model.previous_size, device=self.device)  # (W, P): no step before

    @property
    def threads(self) -> int:
        """The torch threads the run takes now."""
        return self.machine.threads

    def run(self, on_update=None) -> list[UpdateLog]:
        """Trains until config.updates or a stop signal, saving every checkpoint_interval updates and at
        the end; on_update(trainer, log, scalars) follows every update."""
        c = self.config
        self.summaries.open(self.update)
        start = time.perf_counter()
        try:
            while self.update < c.updates and self.stop_signal is None:
                log = self.one_update()
                scalars = self.summaries.write(log)
                if log.evaluation is not None:
                    self.keep_if_best(scalars["eval/reward_mean"])
                if c.checkpoint_interval and self.update % c.checkpoint_interval == 0:
                    self.save()
                if on_update is not None:
                    on_update(self, log, scalars)
            if self.saved_update != self.update:
                self.save()
            if self.stop_signal is None:
                self.summaries.finish(time.perf_counter() - start)
        finally:
            self.close()
        return self.summaries.history

    def one_update(self) -> UpdateLog:
        c, times, tick = self.config, PhaseTimes(), time.perf_counter()
        lr, beta, clip = (schedule_value(schedule, self.update)
                          for schedule in (c.learning_rate_schedule, c.beta_schedule, c.clip_range_schedule))
        episodes = self.collect(times)
        with times.measure("buffer"):
            self.advantages()
        with times.measure("update"):
            metrics = self.optimise(lr, beta, clip)
        index = self.buffer.index
        metrics.update(learning_rate=lr, beta=beta, clip_range=clip, sequences=float(len(index.starts)),
                       padding_fraction=1.0 - float(index.mask.mean()))
        self.update += 1
        self.steps += c.n_workers * c.worker_steps
        evaluation = None
        if self.evaluator is not None and self.evaluator.due(self.update):
            with times.measure("evaluation"):
                evaluation = self.score_held_out()
        return UpdateLog(self.update, self.steps, episodes, metrics, times, time.perf_counter() - tick, evaluation)

    def collect(self, times: PhaseTimes) -> list[dict]:
        """Fills the buffer with T steps of all W environments; returns the episodes that ended."""
        b, model, device, norm = self.buffer, self.model, self.device, self.normalizers
        episodes = []
        with self.machine.rollout(), model.rollout():
            start = time.perf_counter()
            for t in range(self.config.worker_steps):
                obs = norm.observation(self.obs, update=True)
                mask = self.envs.action_mask  # (W, A) allowed actions, or None
                out = model.act(torch.from_numpy(obs).to(device), self.state, previous=self.previous,
                                action_mask=None if mask is None else torch.from_numpy(mask).to(device))
                actions = out.actions.cpu().numpy()
                b.store_step(t, obs, self.state, self.previous, mask, actions, out.log_probs, out.values)
                with times.measure("env"):
                    step = self.envs.step(actions)
                done = step.terminated | step.truncated
                b.store_outcome(t, norm.reward(step.rewards, done), step.terminated, step.truncated)
                previous = model.previous_input(out.actions, step.rewards)  # (W, P) from the raw rewards
                if step.truncated.any():
                    # a time-limit cut is bootstrapped from V(final observation), under the state before its reset
                    rows = np.flatnonzero(step.truncated)
                    b.final_values[rows, t] = self._values(step.final_obs[rows], out.state[rows], previous[rows])
                self.obs = step.obs  # the workers' shared array: the next step overwrites it
                self.state = model.reset_state(out.state, done)
                self.previous = model.reset_previous(previous, done)
                episodes.extend(step.episodes)
        times.inference = time.perf_counter() - start - times.env
        return episodes

    def advantages(self) -> None:
        """GAE and the sequence index over the rollout, bootstrapped from V of the next observations."""
        c = self.config
        self.buffer.finish(self._values(self.obs, self.state, self.previous), c.gamma, c.lamda, c.recurrence,
                           self.normalizers.values)

    def _values(self, obs: np.ndarray, state: torch.Tensor, previous: torch.Tensor) -> np.ndarray:
        """V(obs) as the value head gives it, for raw observations (n, ...) and the state and previous input."""
        obs = self.normalizers.observation(obs, update=False)
        with self.machine.autocast():
            return self.model.value(torch.from_numpy(obs).to(self.device), state, previous).cpu().numpy()

    def optimise(self, lr: float, beta: float, clip: float) -> dict:
        """`epochs` passes of minibatch steps over the rollout; the metrics averaged over the steps."""
        c = self.config
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        steps = []
        for _ in range(c.epochs):
            for mb in self.buffer.minibatches(c.n_mini_batch, self.model):
                with self.machine.minibatch():
                    out = self.model.training_pass(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask,
                                                   mb.previous, mb.burn_in)
                losses = ppo_loss(out, mb, config=c, clip_range=clip, beta=beta)
                if c.target_kl is not None and losses.approx_kl.item() > c.target_kl:
                    return mean_metrics(steps, rejected=losses)  # too far from the rollout's policy: stop here
                if not self.loss_checked:
                    require_model_parameters(losses.total, self.model)
                    self.loss_checked = True
                self.optimizer.zero_grad()
                losses.total.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.max_grad_norm)
                require_finite(losses, grad_norm, self.update + 1)
                self.optimizer.step()
                steps.append(StepStats(losses, grad_norm))
        return mean_metrics(steps)

    def score_held_out(self) -> list[dict]:
        """The held-out episodes of the policy as it is now."""
        with self.machine.acting():
            return self.evaluator(self.model, self.normalizers, self.update)

    def keep_if_best(self, reward_mean: float) -> None:
        if self.best is None or reward_mean > self.best["reward_mean"]:
            self.best = {"reward_mean": reward_mean, "update": self.update}
            self.save(self.best_path)

    def save(self, path: Path | None = None) -> None:
        """Writes models/<run-id>.pt, or the same to `path` (the best evaluation's); refuses non-finite parameters."""
        if not all(torch.isfinite(p).all() for p in self.model.parameters()):
            raise NonFiniteError(f"the model has non-finite parameters after update {self.update}; not saved")
        with stopping.deferred():  # a stop signal meanwhile is answered with saved_update already true
            save_checkpoint(path or self.checkpoint_path, self.state_dict())
            if path is None:
                self.saved_update = self.update

    def state_dict(self) -> dict:
        """Everything a resumed run needs to go on exactly where it stopped, as plain data."""
        return {
            "model": self.model.state_dict(),
            "config": self.config.to_dict(),
            "update": self.update,
            "steps": self.steps,
            "run_id": self.run_id,
            "normalization": self.normalizers.state_dict(),
            "resumable": True,
            "summaries_path": str(self.summaries.path),
            "summaries": self.summaries.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(legacy=False),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "environments": self.envs.get_state(),
            "obs": self.obs.copy(),
            "state": self.state.cpu(),
            "previous": self.previous.cpu(),
            "best": self.best,
        }

    def load_state_dict(self, saved: dict) -> None:
        """Goes on from a state_dict() (as a checkpoint holds it): the same parameters, optimiser, generators and
        environments. The config's optimizer settings win over the saved ones: a resume may change them."""
        load_model(self.model, saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        for group in self.optimizer.param_groups:
            group.update(eps=self.config.optimizer.eps, weight_decay=self.config.optimizer.weight_decay)
        self.update = self.saved_update = saved["update"]
        self.steps = saved["steps"]
        rng = saved["rng"]
        torch.set_rng_state(rng["torch"])
        mt = arrays(rng["numpy"])  # a file holds the key as int64 (weights-only loading has no uint32 arrays)
        np.random.set_state({**mt, "state": {**mt["state"], "key": mt["state"]["key"].astype(np.uint32)}})
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        self.envs.set_state(arrays(saved["environments"]))
        self.obs = _same_shape("obs", arrays(saved["obs"]).copy(), self.obs)
        self.state = _same_shape("state", torch.as_tensor(saved["state"]), self.state).to(self.device)
        self.previous = _same_shape("previous", torch.as_tensor(saved["previous"]), self.previous).to(self.device)
        self.best = saved["best"]
        self.summaries.load_state_dict(saved["summaries"])
        self.normalizers.load_state_dict(arrays(saved["normalization"]))

    def close(self) -> None:
        self.envs.close()
        if self.evaluator is not None:
            self.evaluator.close()
        self.summaries.close()


def _same_shape(name: str, saved, expected):
    """saved, refused (ValueError) if its shape is not the run's (an edited file): it failed deep in torch."""
    if tuple(saved.shape) != tuple(expected.shape):
        raise ValueError(f"its {name} has the shape {tuple(saved.shape)}, the run's {tuple(expected.shape)}")
    return saved
