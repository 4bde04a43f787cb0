"""Held-out scoring, alike for enjoy.py and for a run's evaluations while it trains: a run's eval/* at update k is
what `enjoy.py --episodes E --seed evaluation_seed(S, k)` prints for that checkpoint. The environments are seeded in
the held-out half of the seed range; each plays a fixed quota (the first E episodes to end would favour short ones)."""
from dataclasses import dataclass

import numpy as np
import torch

from config import SEEDS, Config, EnvironmentConfig
from environments import HELD_OUT
from plumbing.errors import ConfigError
from summaries import scores


def evaluation_seeds(seed: int, count: int) -> list[int]:
    from worker import environment_seeds
    return [HELD_OUT + s for s in environment_seeds(seed, count)]


def evaluation_seed(seed: int, update: int) -> int:
    """enjoy.py's --seed of a run's evaluation after `update`: each plays episodes of its own, so no set's luck lasts
    the run; half the seed range away from evaluation.seed `seed` and the seeds above it (enjoy.py's default)."""
    return (seed + 2 ** 31 + update) % SEEDS


@dataclass
class EvaluationEnvironment(EnvironmentConfig):
    """Its environments, whoever makes them, cut episodes at max_steps and, filmed, give their frames (EpisodeStats)."""
    max_steps: int = 0
    filmed: bool = False

    def make(self):
        return super().make(self.max_steps, self.filmed)


def evaluation_envs(config: Config, episodes: int, seed: int, workers: int | None = None,
                    max_steps: int | None = None, filmed: bool = False):
    """for_evaluation()'s environments here, episodes cut at max_steps (None: evaluation.max_steps): none hangs."""
    from worker import VecEnv
    W = max(1, min(workers or config.n_workers, episodes))
    cap = config.evaluation.max_steps if max_steps is None else max_steps
    environment = EvaluationEnvironment(**vars(config.environment.for_evaluation()), max_steps=cap, filmed=filmed)
    return VecEnv(environment, evaluation_seeds(seed, W), processes=0)


def evaluate(agent, episodes: int, seed: int = 0, deterministic: bool = False, workers: int | None = None,
             on_episode=None, envs=None, max_steps: int | None = None, filmed: bool = False) -> list[dict]:
    """Runs `episodes` held-out episodes; their stats (reward, length[, success], capped[, frames if filmed]) in the
    order they ended. envs: from evaluation_envs(), reset here to seed's seeds and left open; else made and closed."""
    torch.manual_seed(seed)  # the same command samples the same actions
    if own := envs is None:
        envs = evaluation_envs(agent.config, episodes, seed, workers, max_steps, filmed)
    W, recurrence = envs.n, agent.config.recurrence
    quota = [episodes // W + (w < episodes % W) for w in range(W)]
    results, state, actions, rewards = [], None, None, None
    obs, start = envs.reset(evaluation_seeds(seed, W)), np.ones(W, dtype=bool)
    try:
        while len(results) < episodes:
            step = agent.act(obs, state, start, deterministic, envs.action_mask,
                             actions if recurrence.previous_action else None,
                             rewards if recurrence.previous_reward else None)
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
    """Evaluation during training (config `evaluation`), made where its interval is above 0."""

    def __init__(self, config: Config, spaces, device: torch.device):
        """Makes the environments now, so that a setting only evaluation uses is refused at start."""
        self.config, self.spaces, self.device = config, spaces, torch.device(device)
        self.envs = evaluation_envs(config, config.evaluation.episodes, config.evaluation.seed)
        made = self.envs.spaces
        if made.observation != spaces.observation or made.action_space != spaces.action_space:
            self.close()
            raise ConfigError("environment.evaluation_kwargs / evaluation_reset_params change the environment's "
                              f"spaces (observations {made.observation_space}, actions {made.action_space}; "
                              f"training's: {spaces.observation_space}, {spaces.action_space}): the model could "
                              "not act on them")

    def due(self, update: int) -> bool:
        return update % self.config.evaluation.interval == 0 or update == self.config.updates

    def __call__(self, model, normalizers, update: int) -> list[dict]:
        """The stats of the evaluation's episodes after `update` (evaluation_seed); the model is left in training."""
        from agent import Agent
        e = self.config.evaluation
        agent = Agent(model, self.config, self.spaces.action_space, self.device, normalizers, self.spaces.masked)
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=devices):  # the training's generator is left as it was
                return evaluate(agent, e.episodes, evaluation_seed(e.seed, update), e.deterministic, envs=self.envs)
        finally:
            model.train()

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None
