"""The normalisers against plain-loop oracles: the running statistics equal the pooled statistics of
the prior and every sample (batches of one and empty batches included) and stay float64; observations
are standardised, clipped both ways and keep their shape; rewards are divided by the std of the
discounted return, clipped both ways, and the return restarts at episode ends; value predictions
go back to the returns' units only when value normalisation is on."""
import math

import gymnasium as gym
import numpy as np

from config import config_from_dict
from normalization import Normalizers, ObservationNormalizer, RewardScaler, RunningMeanStd
from spaces import layout

PRIOR = 1e-4  # RunningMeanStd's prior count, of a prior mean 0 and variance 1


def pooled(samples: list[float]) -> tuple[float, float]:
    """Mean and variance of the prior (weight PRIOR, mean 0, variance 1) and the samples, in one pass over them."""
    total = PRIOR + len(samples)
    mean = sum(samples) / total
    var = (PRIOR * (1.0 + mean ** 2) + sum((x - mean) ** 2 for x in samples)) / total
    return mean, var


def test_running_stats_equal_the_pooled_statistics_of_every_sample_in_float64():
    """float32 batches (as observations come) of one, several and no rows: the statistics are
    computed in float64, so they match the float64 oracle to 1e-12, not float32's 1e-7."""
    rng = np.random.default_rng(0)
    batches = [rng.normal(1000.0, 3.0, size=(n, 2)).astype(np.float32) for n in (1, 5, 1, 0, 3)]
    stats = RunningMeanStd((2,))
    for batch in batches:
        stats.update(batch)
    rows = np.concatenate(batches).astype(np.float64).tolist()
    for j in range(2):
        mean, var = pooled([row[j] for row in rows])
        np.testing.assert_allclose(stats.mean[j], mean, rtol=1e-12)
        np.testing.assert_allclose(stats.var[j], var, rtol=1e-12)
    assert stats.count == PRIOR + 10
    assert stats.mean.dtype == stats.var.dtype == np.float64


def test_one_sample_moves_the_running_stats_and_an_empty_batch_does_not():
    stats = RunningMeanStd()
    stats.update(np.array([4.0]))
    mean, var = pooled([4.0])
    assert math.isclose(stats.mean, mean, rel_tol=1e-12) and math.isclose(stats.var, var, rel_tol=1e-12)
    stats.update(np.zeros(0))
    assert math.isclose(stats.mean, mean, rel_tol=1e-12) and math.isclose(stats.var, var, rel_tol=1e-12)
    assert stats.count == PRIOR + 1


def test_loaded_statistics_are_float64_copies():
    """Whatever dtype a state comes in (here float32), the normalisers keep float64 statistics."""
    mean, var, returns = (np.array(v, np.float32) for v in ([1.5, -2.0], [0.25, 4.0], [0.5, -1.5]))
    stats = RunningMeanStd((2,))
    stats.load_state_dict({"mean": mean, "var": var, "count": np.float32(7.0)})
    scaler = RewardScaler(workers=2, gamma=0.9, clip=10.0)
    scaler.load_state_dict({"mean": mean[0], "var": var[0], "count": 7.0, "returns": returns})
    for loaded, source in ((stats.mean, mean), (stats.var, var), (scaler.returns, returns),
                           (scaler.mean, mean[0]), (scaler.var, var[0])):
        assert loaded.dtype == np.float64
        np.testing.assert_array_equal(loaded, source)
    assert stats.count == 7.0 and type(stats.count) is float
    mean[0] = returns[0] = 99.0
    assert stats.mean[0] == 1.5 and scaler.returns[0] == 0.5  # copies, not views


def test_observations_are_standardised_per_feature_clipped_both_ways_and_keep_their_shape():
    """A single Box of shape (2, 3) is stored as it is: the normaliser sees (W, 2, 3) observations."""
    rng = np.random.default_rng(1)
    normalizer = ObservationNormalizer(np.ones(6, dtype=bool), clip=3.0)
    first = rng.normal(5.0, 2.0, size=(16, 2, 3)).astype(np.float32)
    out = normalizer(first, update=True)
    assert out.shape == (16, 2, 3) and out.dtype == np.float32
    stats = [pooled(first[:, i, j].astype(np.float64).tolist()) for i in range(2) for j in range(3)]

    def expected(obs):
        return np.array([[[min(max((obs[w, i, j] - stats[3 * i + j][0]) / math.sqrt(stats[3 * i + j][1] + 1e-8),
                                   -3.0), 3.0) for j in range(3)] for i in range(2)] for w in range(len(obs))])
    np.testing.assert_allclose(out, expected(first), rtol=1e-5, atol=1e-6)
    outliers = first[:3].copy()
    outliers[0], outliers[1] = 1000.0, -1000.0
    frozen = normalizer(outliers, update=False)
    assert (frozen[0] == 3.0).all() and (frozen[1] == -3.0).all()
    np.testing.assert_allclose(frozen, expected(outliers), rtol=1e-5, atol=1e-6)
    assert normalizer.count == PRIOR + 16  # update=False leaves the statistics as they were


def test_rewards_are_divided_by_the_std_of_the_discounted_return_and_clipped_both_ways():
    """Three workers, gamma 0.5, clip 1.0; a worker's return restarts from 0 after its episode ends."""
    scaler = RewardScaler(workers=3, gamma=0.5, clip=1.0)
    steps = [([1.0, -1.0, 0.01], [False, False, False]),
             ([2.0, -2.0, 0.5], [True, False, False]),
             ([0.2, 3.0, -0.4], [False, True, False]),
             ([1.5, -0.1, 0.3], [False, False, True])]
    returns, seen = [0.0, 0.0, 0.0], []
    clipped = set()
    for rewards, dones in steps:
        out = scaler(np.array(rewards), np.array(dones))
        returns = [0.5 * g + r for g, r in zip(returns, rewards)]
        seen += returns
        std = math.sqrt(pooled(seen)[1] + 1e-8)
        expected = [min(max(r / std, -1.0), 1.0) for r in rewards]
        clipped |= {math.copysign(1.0, e) for e in expected if abs(e) == 1.0}
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, expected, rtol=1e-6)
        returns = [0.0 if d else g for g, d in zip(returns, dones)]
        np.testing.assert_allclose(scaler.returns, returns, rtol=1e-12)
        assert scaler.returns.dtype == np.float64
    assert clipped == {-1.0, 1.0}  # the clip bounds were both reached
    np.testing.assert_allclose(scaler.mean, pooled(seen)[0], rtol=1e-12)


def _normalizers(value_targets: bool) -> Normalizers:
    config = config_from_dict({"environment": {"type": "CartPoleMasked"},
                               "normalization": {"value_targets": value_targets}})
    return Normalizers(config, layout(gym.spaces.Box(-1.0, 1.0, (4,), np.float32)))


def test_value_predictions_are_denormalised_only_when_value_normalisation_is_on():
    values = np.array([-1.0, 0.0, 2.0], np.float32)
    assert _normalizers(False).value_units(values) is values
    on = _normalizers(True)
    on.values.update(np.array([[1.0, 2.0], [3.0, 6.0]]))  # (W, T) returns, pooled as one batch
    mean, var = pooled([1.0, 2.0, 3.0, 6.0])
    np.testing.assert_allclose(on.value_units(values), values * math.sqrt(var + 1e-8) + mean, rtol=1e-6)


PACKED = gym.spaces.Dict({"a": gym.spaces.Box(-1.0, 1.0, (2,)), "b": gym.spaces.Discrete(3)})  # stored (3,):
# two vector features, then a category index that is never normalised


def test_normalizers_with_every_switch_on_use_the_configured_clips_gamma_workers_and_reward_scale():
    config = config_from_dict({"environment": {"type": "CartPoleMasked", "reward_scale": 0.5}, "n_workers": 2,
                               "gamma": 0.9, "normalization": {"observations": True, "observation_clip": 1.5,
                                                                "rewards": True, "reward_clip": 0.75,
                                                                "value_targets": True}})
    n = Normalizers(config, layout(PACKED))
    obs = np.array([[0.0, 1.0, 2.0], [0.0, 2.0, 0.0], [0.0, 3.0, 1.0], [10.0, 4.0, 2.0]], np.float32)
    out = n.observation(obs, update=True)
    for j in (0, 1):
        mean, var = pooled(obs[:, j].astype(np.float64).tolist())
        expected = [min(max((x - mean) / math.sqrt(var + 1e-8), -1.5), 1.5) for x in obs[:, j].tolist()]
        np.testing.assert_allclose(out[:, j], expected, rtol=1e-6)
    assert out[3, 0] == 1.5  # (10 - 2.5) / 4.33 = 1.73, clipped
    np.testing.assert_array_equal(out[:, 2], obs[:, 2])
    n.observation(obs, update=False)
    assert n.observations.count == PRIOR + 4  # folded in once, with update=True only

    # rewards (exact in float32): times 0.5, then divided by the std of each worker's discounted return
    # (gamma 0.9), clipped at 0.75
    returns, seen = [0.0, 0.0], []
    for raw, dones in (([2.0, -4.0], [False, True]), ([1.0, 0.5], [False, False])):
        out = n.reward(np.array(raw, np.float32), np.array(dones))
        rewards = [0.5 * r for r in raw]
        returns = [0.9 * g + r for g, r in zip(returns, rewards)]
        seen += returns
        std = math.sqrt(pooled(seen)[1] + 1e-8)
        np.testing.assert_allclose(out, [min(max(r / std, -0.75), 0.75) for r in rewards], rtol=1e-6)
        returns = [0.0 if d else g for g, d in zip(returns, dones)]
        np.testing.assert_allclose(n.rewards.returns, returns, rtol=1e-12)
    assert set(n.state_dict()) == {"observations", "rewards", "values"}


def test_normalizers_switched_off_pass_everything_through_except_the_reward_scale():
    config = config_from_dict({"environment": {"type": "CartPoleMasked", "reward_scale": 0.5}})
    n = Normalizers(config, layout(PACKED))
    obs, values = np.ones((2, 3), np.float32), np.array([1.0, -2.0], np.float32)
    assert n.observation(obs, update=True) is obs and n.value_units(values) is values
    rewards = n.reward(np.array([3.0, -1.0], np.float32), np.array([False, True]))
    assert rewards.dtype == np.float32
    np.testing.assert_array_equal(rewards, [1.5, -0.5])
    assert n.state_dict() == {}
    unscaled = Normalizers(config_from_dict({"environment": {"type": "CartPoleMasked", "reward_scale": 1.0}}),
                           layout(PACKED))
    raw = np.array([3.0, -1.0], np.float32)
    assert unscaled.reward(raw, np.array([False, True])) is raw  # a scale of 1 leaves the rewards as they are


def test_image_observations_are_never_normalised_even_when_switched_on():
    config = config_from_dict({"environment": {"type": "CartPoleMasked"}, "normalization": {"observations": True}})
    n = Normalizers(config, layout(gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)))
    obs = np.full((2, 8, 8, 3), 200, np.uint8)
    assert n.observations is None and n.observation(obs, update=True) is obs


def test_the_reward_clip_bounds_training_rewards_after_the_scale_and_only_them():
    """environment.reward_clip (Atari's sign clip under CleanRL's setting): training rewards are
    scaled, then clipped to [-clip, clip]; the episode statistics never see it (EpisodeStats
    sums the environment's own rewards, before Normalizers)."""
    raw = {"environment": {"type": "PocMemoryEnv", "reward_scale": 2.0, "reward_clip": 1.0}}
    config = config_from_dict(raw)
    normalizers = Normalizers(config, layout(gym.spaces.Box(-1, 1, (3,))))
    rewards = np.array([0.0, 0.2, 0.7, -4.0, 7.0], dtype=np.float32)
    before = rewards.copy()
    out = normalizers.reward(rewards, np.zeros(5, dtype=bool))
    np.testing.assert_array_equal(out, np.array([0.0, 0.4, 1.0, -1.0, 1.0], dtype=np.float32))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(rewards, before)  # the caller's rewards untouched
    unclipped = Normalizers(config_from_dict({"environment": {"type": "PocMemoryEnv", "reward_scale": 2.0}}),
                            layout(gym.spaces.Box(-1, 1, (3,))))
    np.testing.assert_array_equal(unclipped.reward(rewards, np.zeros(5, dtype=bool)), rewards * 2)
