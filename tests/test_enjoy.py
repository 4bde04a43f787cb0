"""enjoy.py and the Agent API: the same hidden-state handling as training, videos, scores, bad input."""
import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from agent import Agent
from checkpoint import load_checkpoint, save_checkpoint
from config import ConfigError, config_from_dict
from enjoy import on_training_levels, record, write_video
from environments import HELD_OUT
from evaluation import evaluate, evaluation_seeds
from trainer import PhaseTimes, Trainer
from worker import environment_seeds
from tests.hang import HANG_S

ROOT = Path(__file__).resolve().parent.parent


def small(env: str, layer: str, reset: bool, previous: bool = False):
    return config_from_dict({
        "environment": {"type": env}, "n_workers": 4, "worker_steps": 48, "n_mini_batch": 2, "updates": 1,
        "recurrence": {"layer_type": layer, "hidden_state_size": 16, "reset_hidden_state": reset,
                       "previous_action": previous, "previous_reward": previous}})


@pytest.mark.parametrize("env,layer,reset,previous", [
    ("PocMemoryEnv", "gru", True, False), ("PocMemoryEnv", "lstm", False, False),
    ("CartPoleMasked", "lstm", True, False),
    ("PocMemoryEnv", "gru", True, True), ("CartPoleMasked", "lstm", False, True)])  # the last action and reward
def test_agent_reproduces_the_training_rollout(tmp_path, env, layer, reset, previous):
    trainer = Trainer(small(env, layer, reset, previous), summaries_dir=tmp_path, models_dir=tmp_path, verbose=False)
    with torch.no_grad():
        trainer.model.policy_out.weight.mul_(300.0)  # a sharp policy: a wrong state changes the actions
    rng = torch.get_rng_state()
    trainer.collect(PhaseTimes())
    trainer.close()
    b = trainer.buffer
    agent = Agent(trainer.model, trainer.config, trainer.spaces.action_space)
    torch.set_rng_state(rng)  # the same sampling noise as the rollout drew
    state, start, actions, rewards = None, np.ones(4, dtype=bool), None, None
    raw_rewards = b.rewards / trainer.normalizers.reward_scale  # what the environments gave (CartPole: x 0.01)
    for t in range(b.T):
        step = agent.act(b.obs[:, t], state, start, previous_action=actions, previous_reward=rewards)
        np.testing.assert_array_equal(step.actions, b.actions[:, t, 0])
        np.testing.assert_array_equal(step.log_probs, b.log_probs[:, t])
        state, start = step.state, b.terminated[:, t] | b.truncated[:, t]
        actions, rewards = (step.actions, raw_rewards[:, t]) if previous else (None, None)
    assert start.any() or b.terminated.any() or b.truncated.any()
    if previous:  # forgetting them mid-episode is an error, not silent zeros
        with pytest.raises(ValueError, match="previous_action"):
            agent.act(b.obs[:, 0], state, np.zeros(4, dtype=bool))


def trained(tmp_path, name="poc", **changes) -> Path:
    raw = yaml.safe_load((ROOT / "configs/poc_memory_env.yaml").read_text())
    raw.update(changes)
    trainer = Trainer(config_from_dict(raw), run_id=name, summaries_dir=tmp_path, models_dir=tmp_path,
                      verbose=False)
    trainer.run()
    return tmp_path / f"{name}.pt"


def test_held_out_seeds_are_disjoint_from_training_seeds():
    training = set(environment_seeds(0, 1000))
    held_out = evaluation_seeds(0, 1000)
    assert not training & set(held_out) and min(held_out) >= HELD_OUT


def test_evaluate_runs_exactly_the_asked_episodes_in_parallel(tmp_path):
    agent = Agent.load(trained(tmp_path, updates=2))
    results = evaluate(agent, episodes=21, seed=3, workers=4)
    assert len(results) == 21 and all({"reward", "length", "success"} <= r.keys() for r in results)


def test_a_video_shows_the_episodes_scored_with_one_frame_per_step_plus_one_per_episode(tmp_path):
    from PIL import Image
    agent = Agent.load(trained(tmp_path, updates=2))
    results, frames = record(agent, episodes=5, seed=1)
    assert results == evaluate(agent, episodes=5, seed=1)  # played in parallel, as enjoy.py plays without a video
    path = tmp_path / "out.gif"
    write_video(path, frames)
    with Image.open(path) as gif:
        assert gif.n_frames == sum(r["length"] + 1 for r in results)


def run_enjoy(tmp_path, *args):
    env = {"SDL_VIDEODRIVER": "dummy", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(ROOT / "enjoy.py"), *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=HANG_S, env=env)


@pytest.mark.slow
def test_enjoy_cli_prints_episodes_and_summary_headless(tmp_path):
    model = trained(tmp_path, updates=2)
    result = run_enjoy(tmp_path, "--model", str(model), "--episodes", "5", "--deterministic")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sum(l.startswith("episode") for l in lines) == 5
    assert lines[-1].startswith("5 episodes: return") and "success rate" in lines[-1]



@pytest.mark.slow
def test_video_never_replaces_a_file_unasked_and_render_without_a_display_writes_nothing(tmp_path):
    model = trained(tmp_path, updates=1)
    (tmp_path / "mine.gif").write_bytes(b"a user's file")
    result = run_enjoy(tmp_path, "--model", str(model), "--episodes", "1", "--video", "mine.gif")
    assert result.returncode == 2 and "--overwrite" in result.stderr and result.stderr.count("\n") == 1
    assert "episode" not in result.stdout and (tmp_path / "mine.gif").read_bytes() == b"a user's file"
    result = run_enjoy(tmp_path, "--model", str(model), "--episodes", "1", "--video", "mine.gif", "--overwrite")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "mine.gif").read_bytes().startswith(b"GIF")
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_enjoy(tmp_path, "--model", str(model), "--episodes", "1", "--render")  # no display here
    assert result.returncode == 2 and "--video" in result.stderr and result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no <model name>.gif invented


def test_a_video_that_appears_while_the_episodes_run_is_not_replaced(tmp_path):
    frames = [np.zeros((4, 4, 3), dtype=np.uint8)] * 2
    (tmp_path / "late.gif").write_bytes(b"written meanwhile")
    with pytest.raises(FileExistsError):
        write_video(tmp_path / "late.gif", frames)
    assert (tmp_path / "late.gif").read_bytes() == b"written meanwhile" and len(list(tmp_path.iterdir())) == 1
    write_video(tmp_path / "late.gif", frames, overwrite=True)
    assert (tmp_path / "late.gif").read_bytes().startswith(b"GIF")


def test_a_video_that_appears_meanwhile_is_one_line_naming_overwrite(tmp_path, monkeypatch, capsys):
    import enjoy
    video = tmp_path / "late.gif"

    def record(*args):
        video.write_bytes(b"written meanwhile")
        return [{"reward": 1.0, "length": 3}], [np.zeros((4, 4, 3), dtype=np.uint8)] * 2
    monkeypatch.setattr(enjoy, "record", record)
    args = argparse.Namespace(video=video, overwrite=False, episodes=1, seed=1, deterministic=False, max_steps=None)
    assert enjoy.play(None, args, None) == 1
    out = capsys.readouterr()
    assert out.err == f"error: {video} appeared while the episodes ran: pass --overwrite to replace it\n"
    assert out.out.startswith("1 episodes: return 1.000") and video.read_bytes() == b"written meanwhile"


@pytest.mark.slow
def test_mp4_without_the_extra_is_one_clear_line_or_a_file(tmp_path):
    model = trained(tmp_path, updates=1)
    result = run_enjoy(tmp_path, "--model", str(model), "--episodes", "1", "--video", "out.mp4")
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        assert result.returncode == 2 and "pip install -r requirements-video.txt" in result.stderr
        assert result.stderr.count("\n") == 1
    else:
        import imageio.v2 as imageio
        assert result.returncode == 0, result.stderr
        written = int(result.stdout.split("out.mp4 (")[1].split()[0])
        assert imageio.get_reader(tmp_path / "out.mp4").count_frames() == written


@pytest.mark.slow
def test_bad_model_files_are_one_line_and_exit_2(tmp_path):
    (tmp_path / "text.pt").write_text("hello")
    checkpoint = load_checkpoint(trained(tmp_path, updates=1))
    checkpoint["config"]["environment"] = {"type": "gym", "name": "a_package_not_installed:Thing-v0"}
    save_checkpoint(tmp_path / "foreign_env.pt", checkpoint)
    for name, words in (("missing.pt", "not found"), ("text.pt", "corrupt checkpoint"),
                        ("foreign_env.pt", "a_package_not_installed")):
        result = run_enjoy(tmp_path, "--model", name)
        assert result.returncode == 2, result.stdout
        assert words in result.stderr and result.stderr.count("\n") == 1
    result = run_enjoy(tmp_path, "--model", "poc.pt", "--training-levels")  # PoC has no other levels
    assert result.returncode == 2 and "--training-levels" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("environment,previous", [
    ({"type": "gym", "name": "Pendulum-v1", "observation_mask": [2]}, False),  # Box actions, clipped on the way out
    ({"type": "gym", "name": "tests.memory_tasks:CueMultiDiscrete-v0"}, False),
    ({"type": "gym", "name": "tests.memory_tasks:CueDict-v0"}, False),  # a packed Dict observation
    ({"type": "gym", "name": "tests.memory_tasks:MaskedChoice-v0"}, False),  # raises on a masked action
    ({"type": "gym", "name": "Pendulum-v1", "observation_mask": [2]}, True),  # the last action and reward as inputs
])
def test_evaluate_and_record_every_space(tmp_path, environment, previous):
    recurrence = {**yaml.safe_load((ROOT / "configs/poc_memory_env.yaml").read_text())["recurrence"],
                  "previous_action": previous, "previous_reward": previous}
    model = trained(tmp_path, updates=1, environment=environment, n_workers=4, worker_steps=32, n_mini_batch=2,
                    normalization={"observations": True}, recurrence=recurrence)
    agent = Agent.load(model)
    assert len(evaluate(agent, episodes=4, seed=0, workers=2)) == 4
    if environment["name"] == "Pendulum-v1":
        results, frames = record(agent, episodes=1, seed=0)
        assert len(frames) == results[0]["length"] + 1


def kwargs_made(monkeypatch) -> list[dict]:
    """The kwargs of every environment made from now on; each is made as the plain PoC environment."""
    import environments
    seen, real_make_env = [], environments.make_env

    def spy(family, name, kwargs, *args):
        seen.append(dict(kwargs))
        return real_make_env(family, name, {}, *args)

    monkeypatch.setattr(environments, "make_env", spy)
    return seen


def test_evaluation_and_recording_build_the_environment_with_evaluation_kwargs(tmp_path, monkeypatch):
    """environment.evaluation_kwargs is merged over kwargs for scoring and recording (e.g. MiniGrid's
    training seed pool switched off, so scores come from unlimited held-out layouts), never for training."""
    agent = Agent.load(trained(tmp_path, updates=1))
    agent.config.environment.kwargs = {"length": 5}
    agent.config.environment.evaluation_kwargs = {"length": 7}
    seen = kwargs_made(monkeypatch)
    evaluate(agent, episodes=2, workers=2)
    record(agent, episodes=1)
    assert seen and all(kwargs == {"length": 7} for kwargs in seen)


def test_training_levels_are_the_training_section_and_refused_where_there_are_no_other_levels(tmp_path, monkeypatch):
    """enjoy.py --training-levels plays environment.kwargs / reset_params without their evaluation_* overrides
    (MiniGrid's seed pool, Memory Gym's training seeds); a config without overrides has no other levels."""
    path = trained(tmp_path, updates=1)
    agent = Agent.load(path)
    with pytest.raises(ConfigError, match="--training-levels: .*no evaluation_kwargs or evaluation_reset_params"):
        on_training_levels(agent.config, str(path))
    agent.config.environment.kwargs = {"length": 5}
    agent.config.environment.evaluation_kwargs = {"length": 7}
    agent.config.environment.evaluation_reset_params = {"start-seed": 100000}
    agent.config = on_training_levels(agent.config, str(path))
    assert agent.config.environment.for_evaluation().reset_params == {}
    seen = kwargs_made(monkeypatch)
    evaluate(agent, episodes=2, workers=2)
    assert seen and all(kwargs == {"length": 5} for kwargs in seen)


@pytest.mark.slow
def test_enjoy_ends_on_an_environment_without_a_time_limit_and_says_where_it_cut(tmp_path):
    """A deterministic policy on an environment that never ends an episode: enjoy.py ran forever and
    printed nothing. Each episode is cut at the step cap, with a line, and scored as it stood."""
    model = trained(tmp_path, updates=1, environment={"type": "gym", "name": "tests.faulty_envs:Endless-v0"},
                    n_workers=2, worker_steps=16, n_mini_batch=1)
    for extra in ([], ["--video", "endless.gif"]):
        result = run_enjoy(tmp_path, "--model", str(model), "--episodes", "2", "--deterministic", "--max-steps", "50",
                           *extra)
        assert result.returncode == 0, result.stderr
        cut = [line for line in result.stdout.splitlines() if "cut at the step cap" in line]
        assert len(cut) == 3 and "length    50" in cut[0], result.stdout  # two episodes and the summary
    result = run_enjoy(tmp_path, "--model", str(model), "--max-steps", "-1")
    assert result.returncode == 2 and "--max-steps" in result.stderr


@pytest.mark.slow
def test_max_steps_0_is_the_configs_meaning_and_render_beside_video_is_not_dropped(tmp_path):
    """--max-steps 0 was refused, though 0 is evaluation.max_steps's documented value; --render beside --video
    without a display was left out in silence (issue 58, borderline)."""
    model = ROOT / "models/poc_memory_env.pt"
    result = run_enjoy(tmp_path, "--model", str(model), "--episodes", "2", "--max-steps", "0")
    assert result.returncode == 0 and "2 episodes: return" in result.stdout, result.stderr
    result = run_enjoy(tmp_path, "--model", str(model), "--episodes", "1", "--video", "v.gif", "--render")
    assert result.returncode == 2 and result.stderr == (
        "error: --render needs a display and there is none here (no DISPLAY or WAYLAND_DISPLAY): drop it, --video "
        "records the episodes\n")
    assert not list(tmp_path.iterdir())


def untrained_agent(environment: dict, **recurrence) -> Agent:
    from environments import spaces_of
    from model import build_model
    config = config_from_dict({"environment": environment, "recurrence": {"hidden_state_size": 8, **recurrence}})
    env = config.environment.make()
    model = build_model(config, spaces_of(env))
    env.close()
    return Agent(model, config, env.action_space)


def test_act_checks_its_arguments_where_they_enter():
    """Each was a raw torch error deep inside, or silently accepted (an all-False mask row acted as if
    nothing were masked): now one ValueError naming the argument, what it expects and what it got."""
    agent = untrained_agent({"type": "gym", "name": "tests.memory_tasks:MaskedChoice-v0"})
    obs_shape = agent.model.observation_layout.shape
    obs, S = np.zeros((2, *obs_shape), dtype=np.float32), agent.model.state_size
    mask = np.ones((2, 5), dtype=bool)
    first = agent.act(obs, None, None, action_mask=mask)  # no state, no episode_start: all begin
    state = first.state
    assert agent.act(obs.tolist(), state, [False, True], action_mask=mask.tolist()).actions.shape == (2,)  # lists
    bad = [
        (dict(obs=obs[0]), "obs", "add the batch axis"),
        (dict(obs=obs[:0], state=None, episode_start=None), "obs", "n >= 1"),
        (dict(obs=np.zeros((2, obs_shape[0] + 1))), "obs", f"got shape (2, {obs_shape[0] + 1})"),
        (dict(obs=[[0.0], [0.0, 1.0]]), "obs", "no array"),
        (dict(obs=np.array([["a"] * obs_shape[0]] * 2)), "obs", "<U1"),
        (dict(episode_start=np.zeros(3, dtype=bool)), "episode_start", "shape (2,)"),
        (dict(episode_start=None), "episode_start", "got None"),
        (dict(episode_start=np.zeros(2)), "episode_start", "float64"),
        (dict(state=state.numpy()), "state", "got a ndarray"),
        (dict(state=state.double()), "state", "torch.float64"),
        (dict(state=state[:1]), "state", f"({2}, {S})"),
        (dict(action_mask=np.ones((2, 4), dtype=bool)), "action_mask", "shape (2, 5)"),
        (dict(action_mask=np.array([[True] * 5, [False] * 5])), "action_mask", "row 1 allows no action"),
    ]
    for change, name, words in bad:
        args = dict(obs=obs, state=state, episode_start=np.zeros(2, dtype=bool), action_mask=mask)
        args.update(change)
        with pytest.raises(ValueError) as error:
            agent.act(args["obs"], args["state"], args["episode_start"], action_mask=args["action_mask"])
        assert str(error.value).startswith(f"{name}: ") and words in str(error.value), (change, str(error.value))
    unmasked = untrained_agent({"type": "gym", "name": "Pendulum-v1"})  # Box actions: nothing to mask
    with pytest.raises(ValueError, match="action_mask: .* takes no mask"):
        unmasked.act(np.zeros((1, 3), dtype=np.float32), None, None, action_mask=np.ones((1, 1), dtype=bool))
    branches = untrained_agent({"type": "gym", "name": "tests.memory_tasks:CueMultiDiscrete-v0"})  # [2, 3]
    o = np.zeros((1, *branches.model.observation_layout.shape), dtype=np.float32)
    branches.act(o, None, None, action_mask=np.array([[True, False, False, False, True]]))
    with pytest.raises(ValueError, match="row 0 allows no action in one of its branches"):
        branches.act(o, None, None, action_mask=np.array([[True, True, False, False, False]]))


@pytest.mark.parametrize("name", ["CueImage-v0", "CueMultiDiscrete-v0", "CueMultiBinary-v0"])
def test_act_refuses_a_previous_action_outside_the_action_space(name):
    """99 or -1 for a Discrete(3) agent raised a torch RuntimeError from its one-hot encoding, and 0.5 was taken
    as index 0 (issue 72): one ValueError naming previous_action and its range."""
    agent = untrained_agent({"type": "gym", "name": f"tests.memory_tasks:{name}"}, previous_action=True)
    obs = np.zeros((2, *agent.model.observation_layout.shape), np.float32)
    first = agent.act(obs, None, None)
    starts = np.zeros(2, dtype=bool)
    agent.act(obs, first.state, starts, previous_action=first.actions)  # what act() returned
    high = {"CueImage-v0": 2, "CueMultiDiscrete-v0": 1, "CueMultiBinary-v0": 1}[name]  # the first column's
    for value in (99, -1, 0.5, high + 1):
        given = first.actions.copy().astype(float)
        given.reshape(2, -1)[1, 0] = value
        with pytest.raises(ValueError) as refused:
            agent.act(obs, first.state, starts, previous_action=given)
        assert str(refused.value) == (f"previous_action: expected the actions act() returned, whole numbers from 0 to "
                                      f"{high}, got {float(value)!r} in row 1")


@pytest.mark.parametrize("trained_with", ["", "previous_action", "previous_reward"])
def test_act_refuses_a_previous_input_the_model_was_trained_without(trained_with):
    """A previous_action or previous_reward given to a model trained without it was ignored in silence, where a
    model trained with it refuses its absence (issue 87, borderline): one ValueError naming it, at any step."""
    agent = untrained_agent({"type": "gym", "name": "tests.memory_tasks:CueImage-v0"},
                            **({trained_with: True} if trained_with else {}))
    obs = np.zeros((2, *agent.model.observation_layout.shape), np.float32)
    first = agent.act(obs, None, None)
    given = {"previous_action": first.actions, "previous_reward": np.zeros(2, np.float32)}
    used = {name: value for name, value in given.items() if name == trained_with}
    for name in given.keys() - used.keys():
        for state, starts in ((None, None), (first.state, np.zeros(2, dtype=bool))):
            with pytest.raises(ValueError) as refused:
                agent.act(obs, state, starts, **used, **{name: given[name]})
            assert str(refused.value) == f"{name}: this agent was trained without recurrence.{name}: pass None"


def test_act_refuses_values_that_are_not_finite_and_a_deterministic_that_is_not_a_bool():
    """NaN or inf observations and a NaN state acted silently (action 0, NaN values), and the NaN state
    then poisoned every later step of that environment; deterministic="no" sampled as if it were True."""
    agent = Agent.load(ROOT / "models/poc_memory_env.pt")
    obs = np.zeros((2, *agent._obs_shape), np.float32)
    first = agent.act(obs, None, None)
    nan_obs, inf_obs, nan_state = obs.copy(), obs.copy(), first.state.clone()
    nan_obs[1, 0], inf_obs[0, -1], nan_state[1, 0] = np.nan, np.inf, np.nan
    # finite in float64, inf in float32: action 0 with NaN values, log-probs and state (issue 58 point 8)
    huge = np.full(obs.shape, 1e39)
    starts = np.zeros(2, dtype=bool)
    for args, kwargs, words in (((nan_obs, None, None), {}, "obs: expected finite numbers within float32's range, "
                                                            "got NaN, inf or a larger number in row 1"),
                                ((huge, None, np.ones(2, bool)), {}, "obs: expected finite numbers within float32"),
                                ((inf_obs, first.state, starts), {}, "obs: expected finite numbers"),
                                ((obs, nan_state, starts), {}, "state: expected finite numbers"),
                                ((obs, None, None), {"deterministic": "no"}, "deterministic: expected True or False")):
        with pytest.raises(ValueError, match=words):
            agent.act(*args, **kwargs)
    agent.act(obs, first.state, starts, deterministic=np.bool_(True))  # numpy's bool is a bool


@pytest.mark.parametrize("device, words", [("banana", "expected a torch device"),
                                           ("cuda:99", "is not available here"), ("meta", "is not one")])
def test_load_names_a_device_it_cannot_use_not_a_corrupt_checkpoint(device, words):
    """Agent.load(path, device="cuda") without a GPU, or device="banana", called an intact model a 'corrupt
    checkpoint' (issue 58 point 10)."""
    with pytest.raises(ValueError, match=f"^device: .*{words}"):
        Agent.load(ROOT / "models/poc_memory_env.pt", device=device)


@pytest.mark.parametrize("n", [-1, 0, 1.5, True])
def test_initial_state_names_a_count_it_cannot_take(n):
    """Agent.initial_state(-1) raised torch's own error (issue 58, borderline)."""
    with pytest.raises(ValueError, match=f"^n: expected a number of environments >= 1, got {n!r}"):
        Agent.load(ROOT / "models/poc_memory_env.pt").initial_state(n)


def test_load_reads_the_action_space_before_closing_the_environment(monkeypatch):
    # Memory Gym's environments have no action space once closed (its wrapper's inner env is None):
    # Agent.load of models/mortar_mayhem_b_grid.pt ended in an AttributeError
    import gymnasium as gym

    import config as config_module

    class NoSpaceOnceClosed(gym.Wrapper):
        closed = False

        @property
        def action_space(self):
            if self.closed:
                raise AttributeError("closed environment")
            return self.env.action_space

        def close(self):
            self.closed = True
            super().close()

    make = config_module.EnvironmentConfig.make
    monkeypatch.setattr(config_module.EnvironmentConfig, "make",
                        lambda self, *a, **k: NoSpaceOnceClosed(make(self, *a, **k)))
    agent = Agent.load(ROOT / "models/poc_memory_env.pt")
    assert agent.act(np.zeros((1, *agent._obs_shape), np.float32), None, None).actions.shape == (1,)
