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

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parent))  # results/, for plot.py when imported from elsewhere

from plot import TAG, read_scalars  # noqa: E402

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


# ------------------------------------------------------------------ runs and grid points
TAGS = {TAG: "reward", "time/env_steps": "steps", "episode/success_mean": "success"}


class InputError(ValueError):
    """Input a user can get wrong (a missing path, no runs under it): the CLI prints it in one line."""


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class Run:
    """One run: its config and its curve, arrays by update (every update with a time/env_steps summary)."""
    folder: Path
    config: dict
    update: np.ndarray  # (updates,)
    env_steps: np.ndarray  # (updates,)
    reward: np.ndarray  # (updates,) episode/reward_mean_last100; NaN before the first episode ends
    success: np.ndarray | None  # (updates,) episode/success_mean, NaN where absent; None: never reported

    @property
    def seed(self) -> Any:
        return self.config.get("seed")

    @property
    def updates(self) -> int:
        return int(self.update[-1])

    def final_score(self, last: int = 1) -> float:
        """The mean of reward_mean_last100 over the last `last` updates (all of them, if fewer)."""
        return float(np.mean(self.reward[-last:]))


def _carry_forward(x: np.ndarray) -> np.ndarray:
    """Fill NaNs with the latest value before them. The trainer writes reward_mean_last100 only
    at updates where an episode ended; in between, the last 100 episodes are the same ones."""
    latest = np.where(np.isnan(x), 0, np.arange(len(x)))  # index of the latest value so far
    return x[np.maximum.accumulate(latest)] if len(x) else x


def load_run(folder: Path) -> Run | None:
    """The run in folder (its config.json and TensorBoard events), None before its first update."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except json.JSONDecodeError as error:
        raise InputError(f"{folder / 'config.json'}: not valid JSON ({error})") from None
    by_update = read_scalars(folder, TAGS)
    updates = sorted(u for u, values in by_update.items() if "steps" in values)
    if not updates:
        return None
    rows = [by_update[u] for u in updates]
    reward = _carry_forward(np.array([r.get("reward", np.nan) for r in rows]))
    success = np.array([r.get("success", np.nan) for r in rows]) if any("success" in r for r in rows) else None
    return Run(folder, config, np.array(updates), np.array([r["steps"] for r in rows]), reward, success)


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Every run at or below the paths: a folder holding config.json and, at or below it, event
    files. A run that has not finished its first update yet is left out."""
    runs: dict[Path, Run] = {}  # by folder: overlapping paths give each run once
    for path in map(Path, paths):
        if not path.exists():
            raise InputError(f"{path} does not exist")
        folders = [c.parent for c in sorted(path.rglob("config.json"))
                   if next(c.parent.rglob("events.out.tfevents.*"), None)]
        found = [run for run in map(load_run, folders) if run is not None]
        if not found:
            raise InputError(f"no runs under {path} (a run's folder holds config.json and TensorBoard "
                             "events of at least one update)")
        runs.update((run.folder.resolve(), run) for run in found)
    return list(runs.values())


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class GridPoint:
    """The runs of one config, seeds apart."""
    label: str  # the config keys that tell grid points apart, or the environment when there is one
    config: dict  # the config, seed removed
    runs: list[Run]  # runs that reached the last update of the grid point: these are scored
    stopped: list[Run]  # runs with fewer updates (stopped by a scheduler, or still running): not scored

    def scores(self, last: int = 1) -> np.ndarray:
        """Final scores of the scored runs: (seeds,)."""
        return np.array([run.final_score(last) for run in self.runs])

    def curves(self) -> tuple[np.ndarray, np.ndarray]:
        """(env steps (updates,), rewards (seeds, updates)) at the updates every scored run has."""
        common = self.runs[0].update
        for run in self.runs[1:]:
            common = np.intersect1d(common, run.update)
        rewards = np.stack([run.reward[np.isin(run.update, common)] for run in self.runs])
        return self.runs[0].env_steps[np.isin(self.runs[0].update, common)], rewards


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}: nested keys by their dotted names."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _order(value: Any) -> tuple:
    """Sort key: numbers by value (so 8 comes before 16), everything else by its text."""
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, _text(value))


def group_runs(runs: list[Run]) -> list[GridPoint]:
    """Runs whose configs are equal once `seed` is removed form a grid point; grid points are
    labelled by the keys whose values differ between them, and sorted by those values."""
    members: dict[str, list[Run]] = {}
    for run in runs:
        key = json.dumps({k: v for k, v in run.config.items() if k != "seed"}, sort_keys=True)
        members.setdefault(key, []).append(run)
    configs = [json.loads(key) for key in members]
    flat = [flatten(config) for config in configs]
    differing = [k for k in sorted(set().union(*flat)) if len({_text(f.get(k)) for f in flat}) > 1]
    points = []
    for config, f, group in zip(configs, flat, members.values()):
        if differing:
            label = ", ".join(f"{k}={_text(f.get(k))}" for k in differing)
        else:
            environment = config.get("environment", {})
            label = " ".join(filter(None, [environment.get("type"), environment.get("name")])) or "all runs"
        longest = max(run.updates for run in group)
        points.append((tuple(_order(f.get(k)) for k in differing), GridPoint(
            label, config, [r for r in group if r.updates == longest], [r for r in group if r.updates < longest])))
    return [point for _, point in sorted(points, key=lambda p: p[0])]
