"""The Memory Gym, Atari and MiniGrid (S13, S17Random) configs make working environments.

Spaces and dtypes, seeding, reset parameters reaching every reset, episode
statistics, exact resume after pickling, and one-line errors when a package or
a parameter is wrong.
"""
import sys
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

from checkpoint import FORMAT, _leaves, _tensor, arrays, load_checkpoint, save_checkpoint
from config import ConfigError, EnvironmentConfig, config_from_dict, load_config

from environments.memory_gym import make_memory_gym
from worker import VecEnv, environment_seeds

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
RGB = ((84, 84, 3), np.uint8)

# config -> (observation shape and dtype, action space, reports success)
EXPECTED = {
    "mortar_mayhem_grid": (RGB, spaces.Discrete(4), True),
    "mystery_path_grid": (RGB, spaces.Discrete(4), True),
    "mortar_mayhem": (RGB, spaces.MultiDiscrete([3, 3]), True),
    "searing_spotlights": (RGB, spaces.MultiDiscrete([3, 3]), True),
    "breakout": (((84, 84, 1), np.uint8), spaces.Discrete(4), False),
    "minigrid_s13": (RGB, spaces.Discrete(3), True),
    "minigrid_s17_random": (RGB, spaces.Discrete(3), True),
}


def environment(name: str, **changes) -> EnvironmentConfig:
    config = load_config(CONFIGS / f"{name}.yaml").environment
    for key, value in changes.items():
        setattr(config, key, value)
    return config


def random_episode(env, seed: int, max_steps: int = 5000):
    """Plays random actions until the episode ends; returns (steps, terminated, truncated, info)."""
    env.reset(seed=seed)
    env.action_space.seed(seed)
    for step in range(1, max_steps + 1):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            return step, terminated, truncated, info
    raise AssertionError(f"no episode end in {max_steps} steps")


@pytest.mark.parametrize("name", EXPECTED)
def test_config_makes_env_with_its_spaces_seeding_and_episode_stats(name):
    (shape, dtype), action_space, has_success = EXPECTED[name]
    env = environment(name).make()
    try:
        assert env.observation_space.shape == shape and env.observation_space.dtype == dtype
        assert env.action_space == action_space
        first, _ = env.reset(seed=7)
        assert first.shape == shape and first.dtype == dtype and env.observation_space.contains(first)
        again, _ = env.reset(seed=7)
        np.testing.assert_array_equal(first, again)
        _, _, _, info = random_episode(env, seed=7)
        assert set(info["episode"]) == ({"reward", "length", "success"} if has_success else {"reward", "length"})
        assert info["episode"]["length"] > 0
    finally:
        env.close()


def test_breakout_frame_stack_is_channels_first():
    env = environment("breakout", kwargs={"frame_stack": 4}).make()
    try:
        assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
        obs, _ = env.reset(seed=0)
        assert obs.shape == (4, 84, 84)
        np.testing.assert_array_equal(obs[0], obs[3])  # after a reset the first frame fills the stack
        for _ in range(3):
            obs, *_ = env.step(1)
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    finally:
        env.close()


def test_memory_gym_wrapper_passes_reset_params_to_every_reset(monkeypatch):
    params = {"start-seed": 100, "num-seeds": 10, "arena_size": 3, "command_count": [4]}
    env = make_memory_gym("MortarMayhem-Grid-v0", params)
    calls = []
    inner_reset = env.env.env.reset

    def spy(**kwargs):
        calls.append(kwargs)
        return inner_reset(**kwargs)

    monkeypatch.setattr(env.env.env, "reset", spy)
    try:
        env.reset(seed=3)  # the trainer's first reset
        env.reset()  # the workers' autoreset
        env.reset(options={"arena_size": 4})  # a caller's options add to the config's
        expected = {"arena_size": 3, "command_count": [4]}
        assert [c["options"] for c in calls] == [expected, expected, {**expected, "arena_size": 4}]
        assert all(100 <= c["seed"] < 110 for c in calls)  # episode seeds come from [start-seed, +num-seeds)
        assert env.unwrapped.reset_params["arena_size"] == 4 and env.unwrapped.reset_params["command_count"] == [4]
    finally:
        env.close()


MEMORY_GYM_CONFIGS = sorted(p.stem for p in CONFIGS.glob("*.yaml")
                            if load_config(p).environment.type == "MemoryGym")


@pytest.mark.parametrize("name", MEMORY_GYM_CONFIGS)
def test_memory_gym_configs_score_on_seeds_they_never_train_on(name):
    """Held-out evaluation and enjoy.py draw episode seeds from a range disjoint from the training one, as
    the Memory Gym authors score on novel seeds."""
    environment = load_config(CONFIGS / f"{name}.yaml").environment
    ranges = []
    for env_config in (environment, environment.for_evaluation()):
        env = make_memory_gym(env_config.name, env_config.reset_params)
        ranges.append(range(env.start, env.start + env.count))
        env.close()
    training, held_out = ranges
    assert training.stop <= held_out.start or held_out.stop <= training.start, (training, held_out)


def test_reset_params_change_the_environment():
    # Mystery Path's time limit: every episode, autoreset ones included, is cut at max_steps
    # and reported as a truncation (the agent is not shown the clock).
    env = environment("mystery_path_grid", reset_params={"max_steps": 12}).make()
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        ends = []
        while len(ends) < 3:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            if terminated or truncated:
                ends.append((info["episode"]["length"], terminated, truncated))
                env.reset()
        assert ends == [(12, False, True)] * 3
    finally:
        env.close()
    # Mortar Mayhem's arena size shows in the picture; a single seed gives the same episode every time.
    pictures = {}
    for size in (3, 5):
        env = environment("mortar_mayhem_grid", reset_params={"arena_size": size, "num-seeds": 1}).make()
        try:
            pictures[size], _ = env.reset(seed=1)
            np.testing.assert_array_equal(env.reset(seed=2)[0], pictures[size])
            np.testing.assert_array_equal(env.reset()[0], pictures[size])
        finally:
            env.close()
    assert not np.array_equal(pictures[3], pictures[5])


@pytest.mark.parametrize("reset_params, words", [
    ({"arena_sise": 4}, "'arena_sise'"),
    ({"allowed_commands": 12}, "out of the ranges"),
    ({"num-seeds": 0}, "num-seeds"),
])
def test_wrong_reset_params_are_one_line_config_errors(reset_params, words):
    with pytest.raises(ConfigError) as error:
        EnvironmentConfig(type="MemoryGym", name="MortarMayhem-Grid-v0", reset_params=reset_params).make()
    assert words in str(error.value) and "\n" not in str(error.value)


def test_a_non_memory_gym_id_is_a_config_error():
    with pytest.raises(ConfigError, match="not a Memory Gym id"):
        EnvironmentConfig(type="MemoryGym", name="CartPole-v1").make()


@pytest.mark.parametrize("name, actions", [("mortar_mayhem_grid", 25), ("mortar_mayhem", 25), ("breakout", 60)])
def test_env_state_resumes_exactly(tmp_path, name, actions):
    """A checkpoint keeps each environment's state as plain data (episode seed and actions,
    through weights-only saving): a new environment set to it goes on exactly as the original."""
    env = environment(name).make()
    rng = np.random.default_rng(0)
    sample = (lambda: int(rng.integers(env.action_space.n))) if isinstance(env.action_space, spaces.Discrete) \
        else (lambda: rng.integers(env.action_space.nvec))
    env.reset(seed=5)
    for _ in range(actions):
        if any(env.step(sample())[2:4]):
            env.reset()
    save_checkpoint(tmp_path / "state.pt", {"format": FORMAT, "model": {}, "config": {}, "update": 0, "steps": 0,
                                             "run_id": "x", "normalization": {},
                                             "environments": _leaves([env.get_state()], _tensor)})
    copy = environment(name).make()
    copy.set_state(arrays(load_checkpoint(tmp_path / "state.pt")["environments"])[0])
    try:
        for _ in range(150):
            action = sample()
            a, b = env.step(action), copy.step(action)
            np.testing.assert_array_equal(a[0], b[0])
            assert a[1:4] == b[1:4]
            if a[2] or a[3]:
                assert a[4].get("episode") == b[4].get("episode")
                np.testing.assert_array_equal(env.reset()[0], copy.reset()[0])
    finally:
        env.close()
        copy.close()


def play_until_lives_lost(env, lives: int, rng) -> list[int]:
    """Random actions from a seeded reset until `lives` lives are lost in one game; the rewards taken."""
    env.reset(seed=5)
    rewards = []
    while len(env.get_state()["goes_on"]) < lives:
        _, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        rewards.append(reward)
        if terminated or truncated:
            if "episode" in info:
                rewards = []
            env.reset()
    return rewards


def test_a_lost_life_ends_the_training_episode_and_the_game_goes_on_scored_whole():
    """breakout_noframeskip (CleanRL's setting): every lost life is a termination without a score,
    the game goes on (lives count down, points carry over), and its end scores the whole game."""
    env = environment("breakout_noframeskip").make()
    rng = np.random.default_rng(1)
    env.reset(seed=2)
    lives, rewards, ends = [], [], 0
    try:
        while True:
            _, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
            rewards.append(reward)
            if terminated or truncated:
                ends += 1
                if "episode" in info:
                    break
                assert terminated and info["episode_continues"]
                lives.append(env.unwrapped.ale.lives())
                env.reset()
        assert lives == [4, 3, 2, 1] and ends == 5  # one termination per life, the game's end scored once
        assert info["episode"]["reward"] == sum(rewards) and info["episode"]["length"] == len(rewards)
    finally:
        env.close()


def test_a_game_resumes_exactly_after_lost_lives(tmp_path):
    """A checkpoint taken after two lost lives replays the game from its start, the lives' resets
    included: the copy goes on exactly as the original, to the same whole-game score."""
    env = environment("breakout_noframeskip").make()
    rng = np.random.default_rng(0)
    play_until_lives_lost(env, 2, rng)
    save_checkpoint(tmp_path / "state.pt", {"format": FORMAT, "model": {}, "config": {}, "update": 0, "steps": 0,
                                             "run_id": "x", "normalization": {},
                                             "environments": _leaves([env.get_state()], _tensor)})
    copy = environment("breakout_noframeskip").make()
    copy.set_state(arrays(load_checkpoint(tmp_path / "state.pt")["environments"])[0])
    assert copy.unwrapped.ale.lives() == env.unwrapped.ale.lives() == 3
    try:
        scored = 0
        while scored < 2:
            action = int(rng.integers(env.action_space.n))
            a, b = env.step(action), copy.step(action)
            np.testing.assert_array_equal(a[0], b[0])
            assert a[1:4] == b[1:4] and a[4].get("episode") == b[4].get("episode")
            if a[2] or a[3]:
                scored += "episode" in a[4]
                np.testing.assert_array_equal(env.reset()[0], copy.reset()[0])
    finally:
        env.close()
        copy.close()


def test_vec_env_state_resumes_memory_gym_exactly():
    # Saved mid-episode, while the agents move (3 commands: a short showing phase). The
    # workers hand each environment a view of its shared action row, which the next step
    # overwrites: the state must keep the actions' values.
    config = environment("mortar_mayhem", reset_params={"command_count": [3]})
    vec = VecEnv(config, environment_seeds(1, 3), processes=0)
    actions = np.random.default_rng(0).integers(0, 3, size=(90, 3, 2))
    try:
        vec.reset()
        for row in actions[:30]:
            vec.step(row)
        state = vec.get_state()
        first = [vec.step(row).obs.copy() for row in actions[30:]]
        vec.set_state(state)
        again = [vec.step(row).obs.copy() for row in actions[30:]]
    finally:
        vec.close()
    np.testing.assert_array_equal(np.stack(first), np.stack(again))


def test_memory_gym_envs_share_pygame_in_one_process():
    # pygame has one display per process: closing one environment must not break the others.
    first, second = (environment("mortar_mayhem_grid").make() for _ in range(2))
    alone = environment("mortar_mayhem_grid").make()
    expected = [alone.reset(seed=9)[0]] + [alone.step(3)[0] for _ in range(5)]
    alone.close()
    first.reset(seed=0)
    second.reset(seed=9)
    first.close()
    observed = [second.step(3)[0] for _ in range(5)]
    second.close()
    for a, b in zip(expected[1:], observed):
        np.testing.assert_array_equal(a, b)


def test_memory_gym_steps_the_same_in_worker_processes():
    config = environment("mortar_mayhem", reset_params={"agent_scale": 0.25})
    seeds = environment_seeds(3, 4)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 3, size=(80, 4, 2))
    runs = []
    for processes in (0, 2):
        vec = VecEnv(config, seeds, processes=processes)
        try:
            observations = [vec.reset().copy()]
            for row in actions:
                observations.append(vec.step(row).obs.copy())
            runs.append(np.stack(observations))
        finally:
            vec.close()
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("family, module, words", [
    ("MemoryGym", "memory_gym", "requirements-nodeps.txt"),
    ("Atari", "ale_py", "requirements.txt"),
])
def test_missing_package_is_one_line(monkeypatch, family, module, words):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail as if not installed
    with pytest.raises(ConfigError) as error:
        EnvironmentConfig(type=family).make()
    message = str(error.value)
    assert "\n" not in message and module in message and "pip install" in message and words in message


def test_reset_params_are_refused_outside_memory_gym():
    with pytest.raises(ConfigError, match="reset_params"):
        EnvironmentConfig(type="Atari", reset_params={"max_steps": 3}).make()


@pytest.mark.parametrize("environment, key, allowed", [
    ({"type": "CartPoleMasked", "kwargs": {"max_steps": 0}}, "kwargs.max_steps", "an integer >= 1"),
    ({"type": "CartPole", "kwargs": {"max_steps": -5}}, "kwargs.max_steps", "an integer >= 1"),
    ({"type": "CartPoleMasked", "kwargs": {"max_steps": "abc"}}, "kwargs.max_steps", "an integer >= 1"),
    ({"type": "CartPoleMasked", "kwargs": {"max_steps": 2.5}}, "kwargs.max_steps", "an integer >= 1"),
    ({"type": "CartPoleMasked", "kwargs": {"max_steps": True}}, "kwargs.max_steps", "an integer >= 1"),
    ({"type": "Minigrid", "kwargs": {"agent_view_size": 4}}, "kwargs.agent_view_size", "3, 7 or 21"),
    ({"type": "Minigrid", "kwargs": {"seed_pool": 2.5}}, "kwargs.seed_pool", "an integer >= 0"),
    ({"type": "Atari", "kwargs": {"frame_stack": -1}}, "kwargs.frame_stack", "an integer >= 0"),
    ({"type": "Atari", "kwargs": {"episodic_life": "yes"}}, "kwargs.episodic_life", "true or false"),
    ({"type": "MemoryGym", "reset_params": {"num-seeds": 2.5}}, "reset_params.num-seeds", "an integer >= 1"),
])
def test_a_family_refuses_values_its_settings_do_not_take_when_the_config_is_checked(environment, key, allowed):
    """Each family declares the values of its settings (environments.FAMILIES); a config with another is
    refused in one line naming the key and the values, before any environment is made."""
    with pytest.raises(ConfigError) as error:
        config_from_dict({"environment": environment})
    assert f"config key 'environment.{key}' = " in str(error.value) and allowed in str(error.value)
    assert "\n" not in str(error.value)


def test_minigrid_seed_pool_repeats_layouts_reproducibly_and_default_does_not():
    """seed_pool: N (the reference drew N = 99) gives at most N first observations; unlimited gives more."""
    def first_observations(seed_pool: int, seed: int) -> list[bytes]:
        env = EnvironmentConfig(type="Minigrid", name="MiniGrid-MemoryS9-v0",
                                         kwargs={"agent_view_size": 3, "seed_pool": seed_pool}).make()
        observations = [env.reset(seed=seed)[0].tobytes()] + [env.reset()[0].tobytes() for _ in range(59)]
        env.close()
        return observations

    pooled = first_observations(2, seed=3)
    assert len(set(pooled)) <= 2 and pooled == first_observations(2, seed=3)
    assert len(set(first_observations(0, seed=3))) > 2
    with pytest.raises(ConfigError, match="seed_pool"):
        EnvironmentConfig(type="Minigrid", name="MiniGrid-MemoryS9-v0", kwargs={"seed_pool": -1}).make()
