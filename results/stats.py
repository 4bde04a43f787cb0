"""Statistics over seeds: mean, median and IQM with stratified bootstrap confidence intervals.

    python results/stats.py --runs summaries/poc10 --out results/sweeps/poc10 --threshold 1.1

Follows Agarwal et al., "Deep Reinforcement Learning at the Edge of the Statistical
Precipice" (NeurIPS 2021): report the interquartile mean (IQM) and percentile bootstrap
confidence intervals over seeds, never one lucky seed or a bare mean. When the scores of
several tasks are aggregated, the bootstrap is stratified: each task's seeds are resampled
on their own, so every resample keeps each task's number of runs.
The bootstrap is scipy.stats.bootstrap (percentile method; with several samples and
paired=False it resamples each one separately, which is the stratification), not the
authors' rliable package: scipy is a dependency already, rliable would add arch,
statsmodels and seaborn. Every interval draws from a generator with a fixed seed, so the
same runs always give the same numbers.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parent))  # results/, for plot.py when imported from elsewhere

N_RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0  # of the bootstrap's generator
MAX_RESAMPLED_VALUES = 4_000_000  # values resampled at once (32 MB of float64): bounds memory on long curves

# statistic(x, axis) reduces scores along axis; it must not depend on their order
Statistic = Callable[..., Any]


class Interval(NamedTuple):
    """A statistic's point estimate and its confidence interval: floats, or arrays of one shape."""
    point: Any
    low: Any
    high: Any


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the middle half of the scores along axis.

    trim_mean(x, 0.25) drops int(n / 4) scores at each end (n = 10: two each side, the
    mean of the middle six). rliable computes its IQM with this very call, so our IQMs
    compare with published ones. Robust to an outlier seed, yet less noisy than the median.
    """
    return scipy_stats.trim_mean(x, 0.25, axis=axis)


def interval(samples: list[np.ndarray], statistic: Statistic, n_resamples: int = N_RESAMPLES,
             confidence: float = CONFIDENCE, seed: int = SEED) -> Interval:
    """Stratified percentile-bootstrap interval of statistic(all tasks' scores, pooled).

    samples: one array per task, (..., seeds); leading axes (e.g. updates) get one interval
    each. A resample draws each task's seeds with replacement from that task alone, pools
    them and applies statistic; with one task this is the ordinary bootstrap.
    A task with one seed, or with all scores equal, resamples to itself, so it is held
    fixed (scipy refuses one seed); when every task is, low == high == point.
    """
    samples = [np.asarray(s, dtype=float) for s in samples]
    point = statistic(np.concatenate(samples, axis=-1), axis=-1)
    varies = [s.shape[-1] > 1 and bool(np.any(np.ptp(s, axis=-1) != 0)) for s in samples]
    resampled = [s for s, v in zip(samples, varies) if v]
    fixed = [s for s, v in zip(samples, varies) if not v]
    if not resampled:
        return Interval(point, point, point)

    def pooled(*draws: np.ndarray, axis: int = -1) -> Any:
        # scipy hands each task's draws as (..., resamples, seeds_i); a fixed task joins every resample
        batch_shape = draws[0].shape[:-1]
        held = [np.broadcast_to(np.expand_dims(f, -2), batch_shape + f.shape[-1:]) for f in fixed]
        return statistic(np.concatenate([*draws, *held], axis=-1), axis=-1)

    values_per_resample = sum(s.size for s in samples)
    result = scipy_stats.bootstrap(
        resampled, pooled, n_resamples=n_resamples, batch=max(1, MAX_RESAMPLED_VALUES // values_per_resample),
        vectorized=True, paired=False, axis=-1, confidence_level=confidence, method="percentile",
        rng=np.random.default_rng(seed))
    return Interval(point, result.confidence_interval.low, result.confidence_interval.high)


STATISTICS: dict[str, Statistic] = {"mean": np.mean, "median": np.median, "iqm": iqm}


def aggregates(samples: list[np.ndarray], **bootstrap: Any) -> dict[str, Interval]:
    """Mean, median and IQM of the pooled scores, each with its stratified bootstrap interval."""
    return {name: interval(samples, statistic, **bootstrap) for name, statistic in STATISTICS.items()}


def fraction_at_least(samples: list[np.ndarray], threshold: float, **bootstrap: Any) -> Interval:
    """The fraction of runs scoring >= threshold (how many seeds solve the task), with its interval."""
    return interval(samples, lambda x, axis=-1: np.mean(x >= threshold, axis=axis), **bootstrap)


def performance_profile(samples: list[np.ndarray], taus: np.ndarray, **bootstrap: Any) -> Interval:
    """The fraction of runs scoring > tau for each tau: arrays (taus,), with pointwise bands."""
    taus = np.asarray(taus, dtype=float)

    def above(x: np.ndarray, axis: int = -1) -> np.ndarray:
        # (..., seeds) -> (taus, ...): taus lead, so scipy's resample axis stays last
        return np.mean(x > taus.reshape(-1, *[1] * x.ndim), axis=-1)
    return interval(samples, above, **bootstrap)


def curve_interval(curves: np.ndarray, statistic: Statistic, **bootstrap: Any) -> Interval:
    """statistic across seeds at every update, with an interval per update: arrays (updates,).

    curves: (seeds, updates). A resample draws whole runs: every update sees the same seeds.
    """
    return interval([np.asarray(curves).T], statistic, **bootstrap)  # (seeds, updates) -> (updates, seeds)
