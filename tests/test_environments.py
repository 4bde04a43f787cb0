"""The two fast memory tasks behave as the reference defines them; workers are seeded apart."""
import gymnasium as gym
import numpy as np
import pytest

from config import EnvironmentConfig, config_from_dict

from environments.cartpole import CartPole
from environments.poc_memory import PocMemoryEnv
from normalization import Normalizers
from spaces import layout
from worker import environment_seeds
from worker import VecEnv, WorkerError
from tests.hang import wait_until

RIGHT, LEFT = 1, 0


def test_poc_goals_visible_then_hidden_agent_frozen_then_moving():
    env = PocMemoryEnv()
    obs, _ = env.reset(seed=3)
    left, position, right = obs
    assert sorted([left, right]) == [-1.0, 1.0]
    assert round(float(position), 2) in (-0.4, -0.2, 0.0, 0.2, 0.4)
    for _ in range(2):  # the first two steps: goals shown, agent cannot move, reward 0
        obs, reward, terminated, truncated, _ = env.step(RIGHT)
        assert (obs[0], obs[2]) == (left, right) and obs[1] == position
        assert reward == 0.0 and not terminated and not truncated
    obs, reward, terminated, _, _ = env.step(RIGHT)
    assert obs[0] == 0.0 and obs[2] == 0.0
    assert obs[1] == pytest.approx(position + 0.2)
    assert reward == pytest.approx(-0.1) and not terminated


@pytest.mark.parametrize("go_to_plus", [True, False])
def test_poc_goal_rewards(go_to_plus):
    env = PocMemoryEnv()
    obs, _ = env.reset(seed=11)
    plus_on_right = obs[2] > 0
    action = RIGHT if plus_on_right == go_to_plus else LEFT
    total, info, terminated = 0.0, {}, False
    while not terminated:
        _, reward, terminated, _, info = env.step(action)
        total += reward
    assert reward == pytest.approx(1.6 if go_to_plus else -1.6)
    assert info["success"] is go_to_plus


def test_poc_optimal_agent_averages_1_2_in_7_steps():
    env = EnvironmentConfig(type="PocMemoryEnv").make()
    returns, lengths = [], []
    for episode in range(2000):
        obs, _ = env.reset(seed=episode)
        action = RIGHT if obs[2] > 0 else LEFT  # remember where +1 was
        while True:
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                returns.append(info["episode"]["reward"])
                lengths.append(info["episode"]["length"])
                assert info["episode"]["success"] == 1.0
                break
    assert np.mean(returns) == pytest.approx(1.2, abs=0.02)
    assert np.mean(lengths) == pytest.approx(7.0, abs=0.1)


def balancing_action(obs):
    return int(obs[2] + obs[3] > 0)  # push towards where the pole falls: survives 200 steps


def test_cartpole_matches_gymnasium_cartpole_v1():
    """From the same state, the same actions give the same trajectories (our start state is drawn from
    the seed by environments/seeding.py, so it is put to Gymnasium's here)."""
    reference = gym.make("CartPole-v1", max_episode_steps=200)
    ours = CartPole(masked=False)
    rng = np.random.default_rng(0)
    truncations = 0
    for episode in range(30):
        a, _ = reference.reset(seed=episode)
        ours.reset(seed=episode)
        ours.state = tuple(float(v) for v in reference.unwrapped.state)
        np.testing.assert_array_equal(a, ours._obs())
        while True:
            action = balancing_action(a) if episode % 2 else int(rng.integers(2))
            a, ra, ta, tra, _ = reference.step(action)
            b, rb, tb, trb, _ = ours.step(action)
            # math.cos and np.cos may differ in the last bit; nothing more may differ.
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
            assert (ra, ta) == (rb, tb)
            if ta or tra:
                assert tb or trb
                truncations += bool(trb)
                break
    assert truncations > 0  # the 200-step limit was reached and reported as truncation


def test_the_start_states_are_gymnasiums_distribution_drawn_from_the_seed():
    """Each entry uniform in [-0.05, 0.05), independent, the same for the same seed; PoC's goal side and
    start cell each near equally likely."""
    env = CartPole(masked=False)
    starts = np.array([env.reset(seed=seed)[0] for seed in range(4000)])
    assert starts.min() >= -0.05 and starts.max() < 0.05
    np.testing.assert_allclose(starts.mean(axis=0), 0.0, atol=0.003)  # 4000 draws: std of a mean 0.0005
    np.testing.assert_allclose(starts.std(axis=0), 0.1 / np.sqrt(12), rtol=0.05)
    assert abs(np.corrcoef(starts.T)[0, 1:]).max() < 0.06
    np.testing.assert_array_equal(env.reset(seed=7)[0], CartPole(masked=False).reset(seed=7)[0])
    assert not np.array_equal(env.reset(seed=7)[0], env.reset(seed=8)[0])
    poc = PocMemoryEnv()
    firsts = np.array([poc.reset(seed=seed)[0] for seed in range(4000)])  # (left goal, position, right goal)
    for column, kinds in ((0, 2), (1, 5)):  # the goal side; the 5 start cells
        values, counts = np.unique(firsts[:, column], return_counts=True)
        assert len(values) == kinds and np.all(abs(counts - 4000 / kinds) < 150), (column, values, counts)


def test_masked_cartpole_hides_velocities_and_reports_raw_return():
    config = EnvironmentConfig(type="CartPoleMasked")
    env = config.make()
    obs, _ = env.reset(seed=0)
    total = 0.0
    while True:
        assert obs[1] == 0.0 and obs[3] == 0.0
        unmasked = env.unwrapped.state
        obs, reward, terminated, truncated, info = env.step(balancing_action(np.array(unmasked)))
        total += reward
        if terminated or truncated:
            break
    assert truncated and info["episode"] == {"reward": 200.0, "length": 200} and total == 200.0
    normalizers = Normalizers(config_from_dict({"environment": {"type": "CartPoleMasked"}}),
                              layout(env.observation_space))
    np.testing.assert_array_equal(normalizers.reward(np.ones(3, np.float32), np.zeros(3, bool)),
                                  np.full(3, 0.01, np.float32))  # trained on reward / 100


def test_environment_seeds_are_distinct_and_reproducible():
    seeds = environment_seeds(0, 64)
    assert len(set(seeds)) == 64
    assert seeds == environment_seeds(0, 64)
    assert seeds != environment_seeds(1, 64)


def random_rollout(vec: VecEnv, steps: int):
    rng = np.random.default_rng(0)
    observations = [vec.reset().copy()]
    episodes = []
    for _ in range(steps):
        step = vec.step(rng.integers(0, 2, size=(vec.n, 1)))
        observations.append(step.obs.copy())
        episodes += step.episodes
    return np.stack(observations), episodes


def test_workers_do_not_share_a_random_stream():
    vec = VecEnv(EnvironmentConfig(type="PocMemoryEnv"), environment_seeds(0, 8), processes=0)
    try:
        obs, _ = random_rollout(vec, 50)
    finally:
        vec.close()
    # Each worker's sequence of observations (its episodes) differs from every other's.
    rows = {obs[:, w].tobytes() for w in range(8)}
    assert len(rows) == 8


@pytest.mark.parametrize("env_type", ["PocMemoryEnv", "CartPoleMasked"])
def test_worker_processes_step_exactly_like_in_process(env_type):
    seeds = environment_seeds(5, 6)
    results = []
    for processes in (0, 2, 3):
        vec = VecEnv(EnvironmentConfig(type=env_type), seeds, processes=processes)
        try:
            results.append(random_rollout(vec, 120))
        finally:
            vec.close()
    for obs, episodes in results[1:]:
        np.testing.assert_array_equal(obs, results[0][0])
        assert sorted(map(str, episodes)) == sorted(map(str, results[0][1]))
    assert results[0][1]  # episodes ended and reported their stats


def test_worker_exception_names_worker_and_environment():
    config = EnvironmentConfig(type="gym", name="CartPole-v1")
    vec = VecEnv(config, [1, 2, 3, 4], processes=2)
    with pytest.raises(WorkerError) as error:
        vec.step(np.full((4, 1), 7))  # an invalid action makes CartPole's own check raise
    assert "environment 'CartPole-v1' #0 (in worker process 0, pid" in str(error.value)
    assert "Traceback" in str(error.value)
    vec.close()


@pytest.mark.filterwarnings("ignore:.*not within the observation space")
def test_an_environment_that_fails_in_the_trainers_process_is_a_worker_error_naming_it():
    """Its first reset (the one that reads the spaces), a later reset, and a step whose observation has the
    wrong shape: each a WorkerError naming the environment, with what went wrong."""
    for kwargs, words in (({"at_reset": 1}, "broke at reset 1"), ({"at_reset": 2}, "broke at reset 2")):
        config = EnvironmentConfig(type="gym", name="tests.faulty_envs:BadReset-v0", kwargs=kwargs)
        with pytest.raises(WorkerError) as error:
            VecEnv(config, [1, 2], processes=0).reset()
        assert "environment 'tests.faulty_envs:BadReset-v0' #0 (in the trainer's process) failed" in str(error.value)
        assert words in str(error.value)
    vec = VecEnv(EnvironmentConfig(type="gym", name="tests.faulty_envs:WrongShape-v0"), [1, 2], processes=0)
    vec.reset()
    with pytest.raises(WorkerError, match=r"(?s)WrongShape-v0' #0 .*could not broadcast .* shape \(3,\) into shape \(2,\)"):
        vec.step(np.zeros((2, 1), np.int64))


def test_a_stop_signal_while_worker_processes_start_still_reaches_the_trainer():
    """Worker processes start with SIGINT and SIGTERM blocked (they inherit it and never act on
    them); a Ctrl-C that reaches the trainer meanwhile must still reach its handler, during the
    start or right after it. (With the signals ignored instead it vanished, and a run trained on
    after a Ctrl-C sent while its workers started on a busy machine.)"""
    import os
    import signal

    from plumbing import stopping
    received = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        with stopping.starting_processes():
            assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # what the workers inherit
            assert signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, set())
            os.kill(os.getpid(), signal.SIGINT)
        wait_until(lambda: bool(received), "SIGINT handled")  # at the main thread's next bytecode
        assert received == [signal.SIGINT]
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # the mask is back
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("environment,words", [
    ({"type": "gym", "name": "FrozenLake-v1", "kwargs": {"map_name": "bogus"}}, "KeyError: 'bogus'"),
    ({"type": "Minigrid", "name": "MiniGrid-Empty-5x5-v0", "kwargs": {"size": 2}}, "AssertionError"),
])
def test_whatever_an_environment_raises_when_made_is_one_line_naming_its_settings(environment, words):
    """A Gymnasium environment's own error for a bad kwarg value (any type: KeyError, AssertionError,
    ...) was a traceback; it is a ConfigError naming environment.name, the kwargs and the error."""
    from config import ConfigError
    with pytest.raises(ConfigError) as error:
        EnvironmentConfig(**environment).make()
    message = str(error.value)
    assert words in message and environment["name"] in message and "environment.kwargs" in message
    assert "\n" not in message


def test_a_minigrid_time_limit_truncates_the_episode_at_its_step():
    """time_limit: K ends an episode at step K as truncated (a time limit, bootstrapped), not a failure's end."""
    config = EnvironmentConfig(type="Minigrid", name="MiniGrid-MemoryS9-v0",
                               kwargs={"agent_view_size": 3, "time_limit": 5})
    env = config.make()
    env.reset(seed=0)
    ends = [env.step(0)[2:4] for _ in range(5)]
    assert ends[:4] == [(False, False)] * 4 and ends[4] == (False, True)
