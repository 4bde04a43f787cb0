"""Held-out evaluation: enjoy.py's scoring, and the evaluations a run makes while it trains."""
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

from agent import Agent
from checkpoint import load_checkpoint
from config import ConfigError, config_from_dict
from environments import CONTINUES, HELD_OUT, EpisodeStats
from evaluation import evaluate, evaluation_seed, evaluation_seeds
from summaries import scores
from trainer import Trainer
from worker import environment_seeds

ROOT = Path(__file__).resolve().parent.parent
SMALL = dict(n_workers=4, worker_steps=32, n_mini_batch=2, torch_threads=1)


def poc(**changes) -> dict:
    raw = yaml.safe_load((ROOT / "configs/poc_memory_env.yaml").read_text())
    raw.update(SMALL)
    raw.update(changes)
    return raw


def trainer(tmp_path, run_id: str, raw: dict) -> Trainer:
    return Trainer(config_from_dict(raw), run_id=run_id, summaries_dir=tmp_path / "s", models_dir=tmp_path / "m",
                   verbose=False)


def episode_seeds(env, first_seed: int, episodes: int) -> list[int]:
    """The seeds the environment's episodes were reset with, episode after episode (EpisodeStats' state)."""
    seeds = []
    env.reset(seed=first_seed)
    for _ in range(episodes):
        seeds.append(env.get_state()["episode_seed"])
        env.reset()
    return seeds


def test_every_held_out_episode_seed_is_disjoint_from_every_training_episode_seed():
    config = config_from_dict(poc())
    env = config.environment.make()
    training = [s for first in environment_seeds(0, 4) for s in episode_seeds(env, first, 200)]
    held_out = [s for first in evaluation_seeds(0, 4) for s in episode_seeds(env, first, 200)]
    assert max(training) < HELD_OUT <= min(held_out) and max(held_out) < 2 ** 32
    assert len(set(held_out)) == len(held_out)


def test_evaluations_come_every_interval_and_after_the_last_update(tmp_path):
    t = trainer(tmp_path, "e", poc(updates=5, evaluation={"interval": 2, "episodes": 6}))
    history = t.run()
    assert [log.update for log in history if log.evaluation is not None] == [2, 4, 5]
    assert all(len(log.evaluation) == 6 for log in history if log.evaluation is not None)
    assert all(log.times.evaluation > 0 for log in history if log.evaluation is not None)
    assert all(log.times.evaluation == 0 for log in history if log.evaluation is None)


def test_no_evaluation_when_the_interval_is_zero(tmp_path):
    t = trainer(tmp_path, "e", poc(updates=2))
    assert t.evaluator is None and all(log.evaluation is None for log in t.run())
    assert not (tmp_path / "m/e-best.pt").exists()


@pytest.mark.parametrize("deterministic", [True, False])
def test_an_evaluation_scores_what_enjoy_scores_for_the_checkpoint_of_that_update(tmp_path, deterministic):
    """The final checkpoint and the best one, each scored by enjoy.py's code with the episodes and seed of
    the evaluation of their update, give the very episodes the run logged."""
    raw = poc(updates=6, evaluation={"interval": 2, "episodes": 7, "seed": 5, "deterministic": deterministic})
    t = trainer(tmp_path, "e", raw)
    history = t.run()
    evaluated = {log.update: log.evaluation for log in history if log.evaluation is not None}
    final = evaluate(Agent.load(tmp_path / "m/e.pt"), 7, seed=evaluation_seed(5, 6), deterministic=deterministic)
    assert final == evaluated[6]
    best = load_checkpoint(tmp_path / "m/e-best.pt")
    means = {update: scores(episodes)["reward_mean"] for update, episodes in evaluated.items()}
    assert best["update"] == max(means, key=lambda u: (means[u], -u)) == t.best["update"]  # the first of the best
    assert t.best["reward_mean"] == max(means.values())
    assert evaluate(Agent.load(tmp_path / "m/e-best.pt"), 7, seed=evaluation_seed(5, best["update"]),
                    deterministic=deterministic) == evaluated[best["update"]]


def test_evaluations_leave_the_training_exactly_as_without_them(tmp_path):
    """Sampled evaluation actions draw from a generator of their own: the run's own draws, its
    environments and its weights are the same with evaluations as without."""
    plain = trainer(tmp_path, "plain", poc(updates=4))
    plain.run()
    evaluated = trainer(tmp_path, "evaluated", poc(updates=4, evaluation={"interval": 1, "episodes": 5,
                                                                          "deterministic": False}))
    evaluated.run()
    for (name, a), b in zip(plain.model.state_dict().items(), evaluated.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert [log.reward_mean for log in plain.summaries.history] == \
        [log.reward_mean for log in evaluated.summaries.history]


def test_a_resumed_run_evaluates_and_keeps_its_best_exactly_as_an_uninterrupted_one(tmp_path):
    raw = poc(updates=8, checkpoint_interval=0, evaluation={"interval": 2, "episodes": 5, "deterministic": False})
    straight = trainer(tmp_path, "straight", raw)
    straight_history = straight.run()
    first = trainer(tmp_path, "split", {**raw, "updates": 4})
    first_history = first.run()
    second = trainer(tmp_path, "split", raw)
    second.load_state_dict(load_checkpoint(tmp_path / "m/split.pt"))
    second_history = second.run()
    for (name, a), b in zip(straight.model.state_dict().items(), second.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert [(log.update, log.evaluation) for log in first_history + second_history if log.evaluation] == \
        [(log.update, log.evaluation) for log in straight_history if log.evaluation]
    assert second.best == straight.best
    for name in ("straight", "split"):  # the best checkpoints hold the same weights
        assert load_checkpoint(tmp_path / f"m/{name}-best.pt")["update"] == straight.best["update"]
    best = [load_checkpoint(tmp_path / f"m/{name}-best.pt")["model"] for name in ("straight", "split")]
    assert all(torch.equal(best[0][key], best[1][key]) for key in best[0])


def test_evaluations_are_logged_as_eval_scalars_and_on_the_console_line(tmp_path):
    from tests.test_faults import scalars
    t = trainer(tmp_path, "e", poc(updates=3, evaluation={"interval": 2, "episodes": 4}))
    history = t.run()
    logged = scalars(t.summaries.path)
    assert [step for step, _ in logged["eval/reward_mean"]] == [2, 3]
    assert {"eval/reward_std", "eval/length_mean", "eval/success_mean", "eval/reward_min",
            "eval/reward_max"} <= logged.keys()
    assert logged["eval/reward_mean"][0][1] == pytest.approx(scores(history[1].evaluation)["reward_mean"])
    lines = [t.summaries.line(log, t.summaries.scalars(log)) for log in history]
    assert "eval" not in lines[0] and "eval" in lines[1]


@pytest.mark.parametrize("key, value, words", [
    ("interval", -1, "evaluation.interval"),
    ("episodes", 0, "evaluation.episodes"),
    ("seed", 2 ** 32, "evaluation.seed"),
    ("bogus", 1, "unknown config key 'evaluation.bogus'"),
])
def test_evaluation_settings_are_checked(key, value, words):
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        config_from_dict(poc(evaluation={key: value}))


def test_evaluation_reset_params_are_merged_for_evaluation_only_and_checked():
    raw = yaml.safe_load((ROOT / "configs/mortar_mayhem_grid.yaml").read_text())
    raw["environment"]["evaluation_reset_params"] = {"start-seed": 200000}
    env = config_from_dict(raw).environment
    assert env.reset_params["start-seed"] == 0 and env.for_evaluation().reset_params["start-seed"] == 200000
    assert env.for_evaluation().reset_params["num-seeds"] == env.reset_params["num-seeds"]
    poc_raw = poc()
    poc_raw["environment"] = {**poc_raw.get("environment", {}), "evaluation_reset_params": {"x": 1}}
    with pytest.raises(ConfigError, match="environment.evaluation_reset_params"):
        config_from_dict(poc_raw)


def test_each_evaluation_plays_held_out_episodes_no_other_evaluation_played(tmp_path):
    """One set of episodes at every evaluation lent its luck to every score of a run and to the pick of its best
    model (Mystery Path Grid, docs/reliability.md). Each evaluation draws its own, none a training episode; the same
    update's are the same again (enjoy.py replays them), and enjoy.py's default seed plays none of them."""
    t = trainer(tmp_path, "e", poc(updates=1, evaluation={"interval": 1, "episodes": 6, "deterministic": False}))
    env = t.config.environment.make()
    played = {}
    for update in (1, 2, 3, 2):
        t.evaluator(t.model, t.normalizers, update)
        played.setdefault(update, []).append([s for first in t.evaluator.envs.seeds
                                              for s in episode_seeds(env, first, 20)])
    t.close()
    assert played[2][0] == played[2][1]
    seeds = [set(played[update][0]) for update in (1, 2, 3)]
    assert min(min(s) for s in seeds) >= HELD_OUT
    assert not (seeds[0] & seeds[1] or seeds[1] & seeds[2] or seeds[0] & seeds[2])
    fresh = t.config.evaluation.fresh_seed
    assert fresh not in {evaluation_seed(t.config.evaluation.seed, update) for update in range(100_000)}


def test_environments_reset_to_new_seeds_alike_in_worker_processes_and_in_this_one():
    """VecEnv.reset(seeds): the next evaluation's seeds reach environments wherever they run."""
    from worker import VecEnv
    config = config_from_dict(poc()).environment
    local, remote = VecEnv(config, [1, 2, 3]), VecEnv(config, [1, 2, 3], processes=2)
    env = config.make()
    try:
        for envs in (local, remote):
            envs.reset([7, 8, 9])
            assert [state["episode_seed"] for state in envs.get_state()] == \
                [episode_seeds(env, seed, 1)[0] for seed in (7, 8, 9)]
    finally:
        env.close()
        local.close()
        remote.close()


def test_evaluation_scores_whole_games_when_a_lost_life_ends_a_training_episode():
    """Under episodic_life a termination may come without a score: each environment's quota counts
    whole games, matched to the environment they ended in."""
    from evaluation import evaluation_envs
    raw = yaml.safe_load((ROOT / "configs/breakout_noframeskip.yaml").read_text())
    config = config_from_dict({**raw, "n_workers": 4})

    class Random:
        def __init__(self):
            self.config, self.rng = config, np.random.default_rng(0)

        def act(self, obs, state, start, deterministic, mask, actions, rewards):
            from agent import AgentStep
            n = obs.shape[0]
            return AgentStep(self.rng.integers(4, size=n), torch.zeros(n, 1), np.zeros(n), np.zeros(n))

    envs = evaluation_envs(config, 4, 0)
    lost = []
    step = envs.step

    def counting(actions):
        out = step(actions)
        lost.append(int(out.terminated.sum()) - len(out.episodes))
        return out
    envs.step = counting
    try:
        games = evaluate(Random(), 4, envs=envs)
    finally:
        envs.close()
    assert len(games) == 4 and sum(lost) >= 4 * 4  # every game lost its first four lives unscored
    assert all(game["length"] > 100 for game in games)  # whole games (a life lasts some 30 steps)


def test_an_evaluation_environment_that_cannot_be_made_or_acted_on_is_refused_at_start(tmp_path, monkeypatch):
    """evaluation_kwargs apply to evaluation only: a bad value was a traceback at the first evaluation,
    after `interval` updates of training; now the Trainer refuses it before any worker process starts."""
    import trainer as trainer_module
    started = []  # the training's environments (and worker processes) would start here
    monkeypatch.setattr(trainer_module, "VecEnv", lambda *a, **k: started.append(a))
    lake = {"type": "gym", "name": "FrozenLake-v1", "kwargs": {"map_name": "4x4"}}
    for evaluation_kwargs, words in (({"map_name": "bogus"}, "cannot be made: KeyError: 'bogus'"),
                                     ({"map_name": "8x8"}, "change the environment's spaces")):
        raw = poc(updates=1, evaluation={"interval": 1, "episodes": 2},
                  environment={**lake, "evaluation_kwargs": evaluation_kwargs})
        with pytest.raises(ConfigError, match=words):
            trainer(tmp_path, "e", raw)
    assert not started


def test_an_episode_that_never_ends_is_cut_at_the_step_cap_and_counted(tmp_path):
    """An environment without a time limit and a policy that never ends an episode: evaluate() and
    record() (enjoy.py) looped forever, printing nothing. The cap cuts each episode, its stats say so,
    and the summary counts them; an environment's own time limit is left to act (the default cap)."""
    from enjoy import record
    from evaluation import summary
    endless = {"type": "gym", "name": "tests.faulty_envs:Endless-v0"}
    t = trainer(tmp_path, "e", poc(updates=1, environment=endless, evaluation={"interval": 1, "episodes": 3,
                                                                                "max_steps": 25}))
    agent = Agent(t.model, t.config, t.spaces.action_space, normalizers=t.normalizers)
    for results in (t.score_held_out(), evaluate(agent, episodes=3, workers=2), record(agent, episodes=2)[0]):
        assert results and all(r["length"] == 25 and r["capped"] for r in results)
    assert scores(results)["capped"] == 2 and "2 cut at the step cap" in summary(results)
    assert [r["length"] for r in evaluate(agent, episodes=2, max_steps=7)] == [7, 7]
    t.close()
    limited = poc(updates=1, environment={"type": "gym", "name": "tests.faulty_envs:EndlessLimited-v0"})
    t = trainer(tmp_path, "f", limited)
    agent = Agent(t.model, t.config, t.spaces.action_space, normalizers=t.normalizers)
    results = evaluate(agent, episodes=2)  # the default cap: the environment's own 30 steps cut it, as truncated
    assert [r["length"] for r in results] == [30, 30] and not any("capped" in r for r in results)
    assert "capped" not in scores(results)
    t.close()


def test_the_default_step_cap_ends_an_endless_episode(monkeypatch):
    import environments
    monkeypatch.setattr(environments, "DEFAULT_MAX_STEPS", 40)  # 100,000 takes ~15 s here
    env = environments.make_env("gym", "tests.faulty_envs:Endless-v0", max_steps=0)
    env.reset(seed=0)
    steps = 1
    while not env.step(0)[3]:
        steps += 1
    assert steps == 40


class Lives(gym.Env):
    """Never over: a life lost every `life` steps, each a training episode's end inside the game (CONTINUES)."""
    observation_space, action_space = gym.spaces.Box(-1.0, 1.0, (1,)), gym.spaces.Discrete(2)

    def __init__(self, life: int):
        self.life = life

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        lost = self.t % self.life == 0
        return np.zeros(1, dtype=np.float32), 1.0, lost, False, {CONTINUES: True} if lost else {}

    def render(self):
        return np.full((2, 2, 3), self.t, dtype=np.uint8)


@pytest.mark.parametrize("life, cap", [(3, 10), (5, 10)])
def test_the_step_cap_counts_a_whole_game_across_its_lost_lives(life, cap):
    """Under episodic_life a lost life ends a training episode inside the scored one (CONTINUES): the cap
    counts the game's steps, not a life's, and a life lost at the cap does not carry the game past it."""
    env = EpisodeStats(Lives(life), max_steps=cap)
    env.reset(seed=0)
    ends = 0
    while True:
        _, _, terminated, truncated, info = env.step(0)
        if "episode" in info:
            break
        if terminated:
            ends += 1
            env.reset()  # seedless: the game goes on
    assert truncated and info["episode"] == {"reward": cap, "length": cap, "capped": True}
    assert ends == (cap - 1) // life
    env.reset()  # a new game after the cut, not the old one going on
    assert env._length == 0 and not env._continues


def test_a_filmed_game_has_a_frame_at_its_start_and_after_each_step_drawn_before_any_reset():
    """enjoy.py's video: a lost life's reset draws no frame of its own, and the last step's frame is drawn
    before the environment is reset (VecEnv resets an ended episode inside its step)."""
    env = EpisodeStats(Lives(3), max_steps=10, filmed=True)
    env.reset(seed=0)
    while "episode" not in (out := env.step(0))[4]:
        if out[2]:
            env.reset()  # seedless after a lost life: the game goes on
    info = out[4]
    env.reset()
    assert [int(frame[0, 0, 0]) for frame in info["episode"]["frames"]] == [0, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
