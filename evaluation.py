"""Held-out scoring: the episodes enjoy.py scores, and the evaluations a run makes while it trains.

Both score alike, so a run's eval/* numbers at update k are what `enjoy.py --episodes E --seed S
[--deterministic]` prints for the checkpoint saved at update k:
- W = min(n_workers, episodes) environments, built as `environment.for_evaluation()` describes
  (evaluation_kwargs and evaluation_reset_params merged over the training settings, e.g. MiniGrid's
  unlimited layouts, Memory Gym's novel seeds);
- seeded from the evaluation seed in the held-out half of the seed range (environments.HELD_OUT), so
  no episode replays a training episode; the same seed gives the same episodes, and with sampled
  actions the same draws (the policy's generator is seeded too);
- environment w plays a fixed quota of the episodes (not "the first E to finish", which would favour
  short episodes); what it plays beyond its quota is not counted;
- the policy acts through Agent, in float32, as any program that loads the checkpoint would.

During training (config `evaluation`, Evaluator) the episodes run after the update's optimisation,
while nothing else runs, in the trainer's process, on environments made once and reset to the same
seeds at every evaluation; the training's random generators go on as if nothing had run, so a run
with evaluations resumes exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from config import Config, ConfigError, EnvironmentConfig
from environments import HELD_OUT


def evaluation_seeds(seed: int, count: int) -> list[int]:
    """`count` environment seeds for the evaluation seed `seed`, all in the held-out half."""
    from worker import environment_seeds
    return [HELD_OUT + s for s in environment_seeds(seed, count)]


@dataclass
class CappedEnvironment(EnvironmentConfig):
    """An environment section whose every environment cuts its episodes at max_steps (make_env's
    step cap: 0, the environment's own time limit, else environments.DEFAULT_MAX_STEPS), whoever
    makes them (VecEnv calls make())."""
    max_steps: int = 0

    def make(self, render_mode: str | None = None, max_steps: int | None = None):
        return super().make(render_mode, self.max_steps if max_steps is None else max_steps)


def evaluation_environment(config: Config, max_steps: int | None = None) -> CappedEnvironment:
    """The environment section that scores: for_evaluation()'s, its episodes cut at max_steps (None:
    the config's evaluation.max_steps), so no evaluation hangs on a policy that loops forever in an
    environment without a time limit."""
    cap = config.evaluation.max_steps if max_steps is None else max_steps
    return CappedEnvironment(**vars(config.environment.for_evaluation()), max_steps=cap)


def evaluation_envs(config: Config, episodes: int, seed: int, workers: int | None = None,
                    max_steps: int | None = None):
    """The environments that score `episodes` episodes: min(workers or n_workers, episodes) of them,
    stepped in this process, their episodes cut at the step cap (evaluation_environment)."""
    from worker import VecEnv
    W = max(1, min(workers or config.n_workers, episodes))
    return VecEnv(evaluation_environment(config, max_steps), evaluation_seeds(seed, W), processes=0)


def evaluate(agent, episodes: int, seed: int = 0, deterministic: bool = False, workers: int | None = None,
             on_episode=None, envs=None, max_steps: int | None = None) -> list[dict]:
    """Runs `episodes` held-out episodes across parallel environments; their stats (reward, length
    [, success], capped: True where the step cap cut the episode) in the order they ended. envs:
    environments from evaluation_envs() to reuse (they are reset here and left open), else made
    (with the step cap max_steps, see evaluation_environment) and closed here."""
    torch.manual_seed(seed)  # the policy's sampled actions: the same command gives the same scores
    own = envs is None
    if own:
        envs = evaluation_envs(agent.config, episodes, seed, workers, max_steps)
    W = envs.n
    quota = [episodes // W + (w < episodes % W) for w in range(W)]
    results, state, actions, rewards = [], None, None, None
    obs, start = envs.reset(), np.ones(W, dtype=bool)
    try:
        while len(results) < episodes:
            step = agent.act(obs, state, start, deterministic, envs.action_mask, actions, rewards)
            state, actions = step.state, step.actions
            out = envs.step(step.actions.reshape(W, -1))
            obs, start, rewards = out.obs, out.terminated | out.truncated, out.rewards.copy()
            for w, stats in zip(out.episode_envs, out.episodes):
                if quota[w] > 0:
                    quota[w] -= 1
                    results.append(stats)
                    if on_episode:
                        on_episode(len(results), stats)
    finally:
        if own:
            envs.close()
    return results


def scores(results: list[dict]) -> dict[str, float]:
    """The statistics of scored episodes: reward mean, std, min and max, length mean, the success
    rate where every episode reports success, and how many the step cap cut (only where it cut any)."""
    rewards = np.array([r["reward"] for r in results], dtype=np.float64)
    out = {"reward_mean": float(rewards.mean()), "reward_std": float(rewards.std()),
           "reward_min": float(rewards.min()), "reward_max": float(rewards.max()),
           "length_mean": float(np.mean([r["length"] for r in results]))}
    if all("success" in r for r in results):
        out["success_mean"] = float(np.mean([r["success"] for r in results]))
    capped = sum(bool(r.get("capped")) for r in results)
    if capped:
        out["capped"] = float(capped)
    return out


def summary(results: list[dict]) -> str:
    """enjoy.py's closing line."""
    s = scores(results)
    line = (f"{len(results)} episodes: return {s['reward_mean']:.3f} +- {s['reward_std']:.3f} "
            f"(min {s['reward_min']:.3f}, max {s['reward_max']:.3f}), length {s['length_mean']:.1f}")
    if "success_mean" in s:
        line += f", success rate {s['success_mean']:.3f}"
    if "capped" in s:
        line += f"; {s['capped']:.0f} cut at the step cap (--max-steps), scored as they stood"
    return line


class Evaluator:
    """Evaluation during training: config `evaluation`, see the module docstring."""

    def __init__(self, config: Config, spaces, device: torch.device):
        """spaces: the training environments' (environments.spaces_of). The evaluation's environments
        are made here, at start and before any worker process: settings that only evaluation uses
        (environment.evaluation_kwargs, evaluation_reset_params) are refused now, in one line, not
        with a traceback at the first evaluation, an hour into the run."""
        self.config, self.action_space, self.device = config, spaces.action_space, torch.device(device)
        e = config.evaluation
        self.envs = evaluation_envs(config, e.episodes, e.seed)  # kept until close()
        made = self.envs.spaces
        if made.observation != spaces.observation or made.action_space != spaces.action_space:
            self.close()
            raise ConfigError("environment.evaluation_kwargs / evaluation_reset_params change the environment's "
                              f"spaces (observations {made.observation_space}, actions {made.action_space}; "
                              f"training's: {spaces.observation_space}, {spaces.action_space}): the model could "
                              "not act on them")

    def due(self, update: int) -> bool:
        """Every `interval` updates, and after the last."""
        interval = self.config.evaluation.interval
        return interval > 0 and (update % interval == 0 or update == self.config.updates)

    def __call__(self, model, normalizers) -> list[dict]:
        """The episodes' stats for the model as it is now (it is left in training mode)."""
        from agent import Agent
        e = self.config.evaluation
        agent = Agent(model, self.config, self.action_space, self.device, normalizers)
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=devices):  # the training's generator is put back afterwards
                return evaluate(agent, e.episodes, e.seed, e.deterministic, envs=self.envs)
        finally:
            model.train()

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None
