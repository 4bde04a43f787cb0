"""Statistics over seeds: mean, median and IQM with stratified bootstrap confidence intervals.

    python stats.py --runs summaries/poc10 --out results/sweeps/poc10 --threshold 1.1

Reads every run below the --runs paths (a folder with config.json and TensorBoard events),
groups the seeds of each config into a grid point, and writes <out>.md (the table, also
printed), <out>.json (every run's final score, the curves, the profiles) and <out>.png (IQM
curves against the reference baseline's, and the performance profile). A run's final score
is its episode/reward_mean_last100 averaged over its last K updates (--final-updates). A run
with fewer updates than the longest of its grid point (stopped by a scheduler, or still
running) is counted as stopped early and kept out of the statistics. --published draws figures
other projects published (a point at some step, or a level such as a random policy's) beside the
runs, for a task without the reference baseline's curves (Memory Gym, Atari).

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

import argparse
import csv
import json
import sys
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any, Callable, NamedTuple

import matplotlib

matplotlib.use("Agg")  # headless: write files, never open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats as scipy_stats  # noqa: E402
from tensorboard.compat.proto.event_pb2 import Event  # noqa: E402
from tensorboard.compat.tensorflow_stub import errors  # noqa: E402
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New  # noqa: E402

from atomic import write_atomically  # noqa: E402
from config import EXECUTION_KEYS  # noqa: E402

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


# ------------------------------------------------------------------ reading runs
TAG = "episode/reward_mean_last100"  # the reference baseline's reward_mean: a run's score and curve


class Scalar(NamedTuple):
    tag: str
    step: int
    value: float
    wall_time: float


def read_events(file: Path) -> list[Scalar]:
    """The scalars of one TensorBoard events file, in the order written. A file that cannot be read to its end
    (a record damaged, or cut short by a process that died writing it) is named in one warning line and read up
    to there."""
    scalars, step = [], 0
    reader = PyRecordReader_New(str(file))
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return scalars
        except errors.DataLossError:
            print(f"warning: {file} is damaged or cut short after update {step}: read up to there", file=sys.stderr)
            return scalars
        event = Event.FromString(reader.record())
        step = event.step
        scalars += [Scalar(v.tag, event.step, v.simple_value, event.wall_time)
                    for v in event.summary.value if v.WhichOneof("value") == "simple_value"]


def read_scalars(folder: Path, tags: dict[str, str]) -> dict[int, dict[str, float]]:
    """{update: {key: value}} for the TensorBoard tags {tag: key} of one run's events files."""
    return _read_run(folder, tags)[0]


def _read_run(folder: Path, tags: dict[str, str]) -> tuple[dict[int, dict[str, float]], float]:
    """read_scalars, and the wall time of the first of those scalars. A resumed run writes a new file from
    its checkpoint's update on, which replaces what earlier files hold from there."""
    by_update: dict[int, dict[str, float]] = {}
    started = float("inf")
    for file in sorted(folder.rglob("events.out.tfevents.*")):
        scalars = [s for s in read_events(file) if s.tag in tags]
        if scalars:
            first = min(s.step for s in scalars)
            by_update = {u: values for u, values in by_update.items() if u < first}
            started = min(started, scalars[0].wall_time)
        for s in scalars:
            by_update.setdefault(s.step, {})[tags[s.tag]] = s.value
    return by_update, started


# ------------------------------------------------------------------ runs and grid points
TAGS = {TAG: "reward", "time/env_steps": "steps", "episode/success_mean": "success",
        "time/steps_per_second": "speed", "eval/reward_mean": "eval"}


class InputError(ValueError):
    """Input a user can get wrong (a missing path, no runs under it): the CLI prints it in one line."""


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class Run:
    """One run: its config and its curve, arrays by update (every update with a time/env_steps summary)."""
    folder: Path
    config: dict
    started: float  # the wall time of its first summary
    update: np.ndarray  # (updates,)
    env_steps: np.ndarray  # (updates,)
    reward: np.ndarray  # (updates,) episode/reward_mean_last100; NaN before the first episode ends
    success: np.ndarray | None  # (updates,) episode/success_mean, NaN where absent; None: never reported
    speed: float = float("nan")  # the median over updates of time/steps_per_second (NaN: never reported)
    # eval/reward_mean at the updates where the run evaluated (config `evaluation`): (evaluations,) each
    evaluation_update: np.ndarray | None = None
    evaluation: np.ndarray | None = None

    @property
    def final_evaluation(self) -> float | None:
        """The held-out score after the run's last update (the trainer evaluates there); None: no evaluation."""
        if self.evaluation is None or self.evaluation_update[-1] != self.update[-1]:
            return None
        return float(self.evaluation[-1])

    @property
    def seed(self) -> Any:
        return self.config.get("seed")

    @property
    def updates(self) -> int:
        return int(self.update[-1])

    def final_score(self, last: int = 1) -> float:
        """The mean of reward_mean_last100 over the last `last` updates (all of them, if fewer)."""
        return float(np.mean(self.reward[-last:]))

    def first_update_at(self, threshold: float) -> dict[str, int | None]:
        """The first update whose reward_mean_last100 ("training") and whose held-out evaluation
        ("evaluation") reached threshold; None where it never did (or the run never evaluated)."""
        def first(updates, scores):
            reached = np.flatnonzero(scores >= threshold) if scores is not None else []
            return int(updates[reached[0]]) if len(reached) else None
        return {"training": first(self.update, self.reward),
                "evaluation": first(self.evaluation_update, self.evaluation)}


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
    by_update, started = _read_run(folder, TAGS)
    updates = sorted(u for u, values in by_update.items() if "steps" in values)
    if not updates:
        return None
    rows = [by_update[u] for u in updates]
    reward = _carry_forward(np.array([r.get("reward", np.nan) for r in rows]))
    success = np.array([r.get("success", np.nan) for r in rows]) if any("success" in r for r in rows) else None
    speeds = [r["speed"] for r in rows if "speed" in r]
    evaluated = [(u, by_update[u]["eval"]) for u in updates if "eval" in by_update[u]]
    return Run(folder, config, started, np.array(updates), np.array([r["steps"] for r in rows]), reward, success,
               float(np.median(speeds)) if speeds else float("nan"),
               np.array([u for u, _ in evaluated]) if evaluated else None,
               np.array([e for _, e in evaluated]) if evaluated else None)


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
    config: dict  # the config, seed and EXECUTION_KEYS removed
    runs: list[Run]  # runs that reached the last update of the grid point: these are scored
    stopped: list[Run]  # runs with fewer updates (stopped by a scheduler, or still running): not scored

    def scores(self, last: int = 1) -> np.ndarray:
        """Final scores of the scored runs: (seeds,)."""
        return np.array([run.final_score(last) for run in self.runs])

    def evaluation_scores(self) -> np.ndarray | None:
        """Final held-out evaluations of the scored runs (seeds,), or None unless every one has one."""
        finals = [run.final_evaluation for run in self.runs]
        return None if any(f is None for f in finals) else np.array(finals)

    def curves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(updates (U,), env steps (U,), rewards (seeds, U)) at the U updates every scored run has."""
        common = reduce(np.intersect1d, [run.update for run in self.runs])
        rewards = np.stack([run.reward[np.isin(run.update, common)] for run in self.runs])
        first = self.runs[0]
        return common, first.env_steps[np.isin(first.update, common)], rewards


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


def _label(config: dict, flat: dict[str, Any], differing: list[str]) -> str:
    """'key=value, ...' for the keys that differ between grid points; the environment if none do."""
    if differing:
        return ", ".join(f"{k}={_text(flat.get(k))}" for k in differing)
    environment = config.get("environment", {})
    return " ".join(filter(None, [environment.get("type"), environment.get("name")])) or "all runs"


def group_runs(runs: list[Run]) -> list[GridPoint]:
    """Runs whose configs are equal once `seed` and the EXECUTION_KEYS (device, threads, ...) are
    removed form a grid point; grid points are labelled by the keys whose values differ between
    them, and sorted by those values. Runs of one config and seed are one run trained again (train.py
    --overwrite starts a new folder beside the old): the newest counts, a warning names the others."""
    members: dict[str, dict[Any, Run]] = {}  # config -> seed -> run
    for run in sorted(runs, key=lambda r: r.started):
        what = json.dumps({k: v for k, v in run.config.items() if k not in ("seed", *EXECUTION_KEYS)}, sort_keys=True)
        older = members.setdefault(what, {}).get(run.seed)
        if older:
            print(f"warning: {older.folder} left out: {run.folder} is a newer run of its config and seed",
                  file=sys.stderr)
        members[what][run.seed] = run
    configs = [json.loads(key) for key in members]
    flat = [flatten(config) for config in configs]
    differing = [k for k in sorted(set().union(*flat)) if len({_text(f.get(k)) for f in flat}) > 1]
    points = []
    for config, f, seeds in zip(configs, flat, members.values()):
        group = sorted(seeds.values(), key=lambda r: _order(r.seed))
        longest = max(run.updates for run in group)
        point = GridPoint(_label(config, f, differing), config,
                          [r for r in group if r.updates == longest], [r for r in group if r.updates < longest])
        points.append((tuple(_order(f.get(k)) for k in differing), point))
    return [point for _, point in sorted(points, key=lambda p: p[0])]


# ------------------------------------------------------------------ reference curves
REFERENCE_FOLDER = Path(__file__).resolve().parent / "results/reference"
# (environment type, name or None for any name) -> the reference baseline's 10-run curve
REFERENCES = {("PocMemoryEnv", None): "poc_memory_env.csv", ("CartPoleMasked", None): "cartpole_masked.csv",
              ("Minigrid", "MiniGrid-MemoryS9-v0"): "minigrid_memory_s9.csv"}


class ReferenceCurve(NamedTuple):
    env_steps: np.ndarray  # (updates,)
    mean: np.ndarray  # (updates,) over its runs
    low: np.ndarray  # (updates,) min over its runs
    high: np.ndarray  # (updates,) max over its runs
    runs: int


def reference_for(config: dict) -> Path | None:
    """The reference baseline's curve for the config's environment, None if it has none."""
    environment = config.get("environment", {})
    kind, name = environment.get("type"), environment.get("name")
    file = REFERENCES.get((kind, None)) or REFERENCES.get((kind, name))
    return REFERENCE_FOLDER / file if file else None


def read_reference(path: Path) -> ReferenceCurve:
    with open(path) as file:
        rows = list(csv.DictReader(file))
    column = {key: np.array([float(r[key]) for r in rows]) for key in rows[0]}
    return ReferenceCurve(column["env_steps"], column["reward_mean_over_runs"], column["reward_min_over_runs"],
                          column["reward_max_over_runs"], int(rows[0]["runs"]))


def _choose_reference(reference: str | Path | None, points: list[GridPoint]) -> Path | None:
    """'none': no reference; 'auto': the one all grid points' environments share, if any; else a CSV path."""
    if reference is None or str(reference) == "none":
        return None
    if str(reference) == "auto":
        found = {reference_for(point.config) for point in points}
        return found.pop() if len(found) == 1 else None
    if not Path(reference).is_file():
        raise InputError(f"reference curve {reference} does not exist")
    return Path(reference)


class Published(NamedTuple):
    """A figure another project published, drawn beside the runs (--published): a point at env_steps,
    or with env_steps None a level at every step (a random policy's score, say)."""
    env_steps: int | None
    value: float
    label: str


def parse_published(text: str) -> Published:
    """'STEPS:VALUE:LABEL' (STEPS empty: a level) -> Published; refuses anything else with InputError."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[2].strip():
        raise InputError(f"--published {text!r}: expected STEPS:VALUE:LABEL (STEPS empty for a level), "
                         "e.g. 8192000:0.42:GRU")
    steps, value, label = parts
    try:
        number = float(value)
        at = int(steps) if steps.strip() else None
    except ValueError:
        raise InputError(f"--published {text!r}: STEPS must be a whole number or empty, VALUE a number") from None
    if not np.isfinite(number) or (at is not None and at < 0):
        raise InputError(f"--published {text!r}: VALUE must be finite and STEPS at least 0")
    return Published(at, number, label.strip())


# ------------------------------------------------------------------ report
def _as_json(interval_: Interval) -> dict[str, Any]:
    return {key: np.asarray(value).tolist() for key, value in zip(("value", "low", "high"), interval_)}


def summarise(point: GridPoint, taus: np.ndarray, threshold: float | None, last: int, **bootstrap: Any) -> dict:
    """One grid point's numbers, as the JSON holds them: scores, intervals, curves, profile."""
    scores = point.scores(last)  # (seeds,)
    updates, steps, curves = point.curves()  # (updates,), (updates,), (seeds, updates)
    at_least = fraction_at_least([scores], threshold, **bootstrap) if threshold is not None else None
    evaluations = point.evaluation_scores()  # (seeds,) or None
    settings = [{k: r.config.get(k) for k in EXECUTION_KEYS} for r in point.runs]  # where each seed ran
    return {
        "label": point.label, "config": point.config, "seeds": len(scores),
        "runs": [{"seed": r.seed, "folder": str(r.folder), "updates": r.updates, "final_score": float(score),
                  "steps_per_second": r.speed, "execution": setting,
                  "final_evaluation": r.final_evaluation,
                  "first_update_at_threshold": r.first_update_at(threshold) if threshold is not None else None,
                  "evaluations": None if r.evaluation is None else {"update": r.evaluation_update.tolist(),
                                                                    "reward_mean": r.evaluation.tolist()}}
                 for r, score, setting in zip(point.runs, scores, settings)],
        "final_evaluation": None if evaluations is None else
        {name: _as_json(i) for name, i in aggregates([evaluations], **bootstrap).items()},
        "stopped_early": [{"seed": r.seed, "folder": str(r.folder), "updates": r.updates} for r in point.stopped],
        "final_score": {name: _as_json(i) for name, i in aggregates([scores], **bootstrap).items()},
        "fraction_at_least_threshold": _as_json(at_least) if at_least is not None else None,
        # the cost side: the median over seeds of each run's median steps/s (one machine, one load); None
        # where the seeds ran in different settings (a GPU's seeds beside a CPU's): each run's is above
        "steps_per_second": (float(np.median([r.speed for r in point.runs]))
                             if all(setting == settings[0] for setting in settings) else None),
        "curve": {"update": updates.tolist(), "env_steps": steps.tolist(),
                  "per_seed": curves.tolist(),  # (seeds, updates), seeds in the order of "runs"
                  "iqm": _as_json(curve_interval(curves, iqm, **bootstrap)),
                  "mean": _as_json(curve_interval(curves, np.mean, **bootstrap))},
        "profile": {"tau": taus.tolist(), **_as_json(performance_profile([scores], taus, **bootstrap))},
    }


def _setting(run: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in run["execution"].items())


def _cell(numbers: dict[str, Any], spec: str = ".4g") -> str:
    return f"{numbers['value']:{spec}} [{numbers['low']:{spec}}, {numbers['high']:{spec}}]"


def table(summaries: list[dict], settings: dict) -> str:
    """The markdown table: one row per grid point."""
    threshold = settings["threshold"]
    lines = [f"Final score: episode/reward_mean_last100, mean over each run's last {settings['final_updates']} "
             f"update(s). [low, high]: {settings['confidence']:.0%} percentile bootstrap interval over seeds "
             f"({settings['n_resamples']} resamples).", ""]
    at_least = [f"seeds >= {threshold:g}"] if threshold is not None else []
    lines.append("| " + " | ".join(["grid point", "seeds", "mean", "median", "IQM", *at_least, "steps/s",
                                    "stopped early"]) + " |")
    lines.append("|---|---:|---|---|---|" + "---|" * len(at_least) + "---:|---:|")
    for s in summaries:
        score = s["final_score"]
        fraction = [_cell(s["fraction_at_least_threshold"], ".2f")] if threshold is not None else []
        cells = [s["label"], str(s["seeds"]), _cell(score["mean"]), _cell(score["median"]), _cell(score["iqm"]),
                 *fraction, "mixed" if s["steps_per_second"] is None else f"{s['steps_per_second']:.0f}",
                 str(len(s["stopped_early"]))]
        lines.append("| " + " | ".join(cells) + " |")
    evaluated = [s for s in summaries if s.get("final_evaluation")]
    for s in (s for s in summaries if s["steps_per_second"] is None):
        per_seed = ", ".join(f"{r['seed']}: {r['steps_per_second']:.0f} ({_setting(r)})" for r in s["runs"])
        lines += ["", "steps/s mixed: the grid point's seeds ran in different settings (device, processes or "
                  f"threads); per seed: {per_seed}."]
    if settings.get("published"):
        lines += ["", "Figures drawn beside the runs (--published): " + "; ".join(
            f"{p['label']} {p['value']:g}" + (f" at {p['env_steps']:,} steps" if p["env_steps"] is not None else "")
            for p in settings["published"]) + "."]
    if evaluated:
        lines += ["", "Final held-out evaluation: eval/reward_mean after each run's last update (config `evaluation`: "
                  "held-out episodes, scored as enjoy.py scores).", "",
                  "| grid point | seeds | mean | median | IQM | per seed (seed: score) |", "|---|---:|---|---|---|---|"]
        for s in evaluated:
            score = s["final_evaluation"]
            per_seed = ", ".join(f"{r['seed']}: {r['final_evaluation']:.3f}" for r in s["runs"])  # seed: score
            lines.append(f"| {s['label']} | {s['seeds']} | {_cell(score['mean'])} | {_cell(score['median'])} | "
                         f"{_cell(score['iqm'])} | {per_seed} |")
    if threshold is not None:
        lines += ["", f"First update at which each seed reached {threshold:g} (seed: training reward_mean_last100"
                  + (" / held-out evaluation" if evaluated else "") + "; -: never):", ""]
        for s in summaries:
            reached = [r["first_update_at_threshold"] for r in s["runs"]]
            lines.append(f"- {s['label']}: " + ", ".join(
                f"{r['seed']}: " + " / ".join("-" if u is None else str(u)
                                              for u in (f["training"], *([f["evaluation"]] if evaluated else [])))
                for r, f in zip(s["runs"], reached)))
    return "\n".join(lines) + "\n"


PER_SEED_LINES = 10  # a grid point with at most this many seeds also draws each seed's curve


def figure(summaries: list[dict], reference: Path | None, threshold: float | None, path: Path,
           published: list[Published] = ()) -> None:
    """Left: IQM curves with their bands against env steps, each seed's curve thin where a grid point
    has few seeds (and the reference's mean, min-max). Middle, when runs evaluated: each seed's held-out
    evaluations. Right: performance profiles with their bands. Published figures go on the left and
    middle panels: a point as a star, a level as a dotted line."""
    evaluated = any(r["evaluations"] for s in summaries for r in s["runs"])
    fig, panels = plt.subplots(1, 3 if evaluated else 2, figsize=(18 if evaluated else 12, 4.5))
    curves, profiles = panels[0], panels[-1]
    for i, s in enumerate(summaries):
        color, curve, profile = f"C{i % 10}", s["curve"], s["profile"]
        seeds = f"{s['seeds']} seed{'s' if s['seeds'] > 1 else ''}"
        curves.plot(curve["env_steps"], curve["iqm"]["value"], color=color, label=f"{s['label']} ({seeds})")
        curves.fill_between(curve["env_steps"], curve["iqm"]["low"], curve["iqm"]["high"], color=color, alpha=0.25)
        if s["seeds"] <= PER_SEED_LINES:
            for seed_curve in curve["per_seed"]:
                curves.plot(curve["env_steps"], seed_curve, color=color, linewidth=0.6, alpha=0.45)
        if evaluated:
            steps_at = dict(zip(curve["update"], curve["env_steps"]))
            for run in (r for r in s["runs"] if r["evaluations"]):
                points = [(steps_at[u], v) for u, v in zip(run["evaluations"]["update"],
                                                           run["evaluations"]["reward_mean"]) if u in steps_at]
                panels[1].plot([x for x, _ in points], [y for _, y in points], color=color, linewidth=0.8,
                               alpha=0.7, marker=".", markersize=3)
        # a fraction of runs is a step function of tau: it changes at each run's score
        profiles.plot(profile["tau"], profile["value"], color=color, drawstyle="steps-post")
        profiles.fill_between(profile["tau"], profile["low"], profile["high"], color=color, alpha=0.25, step="post")
    if reference:
        ref = read_reference(reference)
        curves.plot(ref.env_steps, ref.mean, color="black", linestyle="--",
                    label=f"reference baseline (mean, min-max of {ref.runs} runs)")
        curves.fill_between(ref.env_steps, ref.low, ref.high, color="gray", alpha=0.2)
    for k, p in enumerate(published):
        color = f"C{(len(summaries) + k) % 10}"  # after the grid points' colours
        for axes in panels[:-1]:
            if p.env_steps is None:
                axes.axhline(p.value, color=color, linestyle=":", label=p.label)
            else:
                axes.plot([p.env_steps], [p.value], color=color, marker="*", markersize=12, linestyle="none",
                          label=p.label)
    if threshold is not None:
        profiles.axvline(threshold, color="gray", linestyle=":")
    curves.set(xlabel="environment steps", ylabel="mean return, last 100 episodes",
               title="IQM over seeds, 95% CI; thin: each seed")
    if evaluated:
        panels[1].set(xlabel="environment steps", ylabel="held-out mean return (eval/reward_mean)",
                      title="held-out evaluation, each seed")
    profiles.set(xlabel="final score τ", ylabel="fraction of runs with score > τ", title="performance profile",
                 ylim=(-0.02, 1.02))
    curves.legend(loc="best", fontsize="small")
    if evaluated and published:
        panels[1].legend(loc="best", fontsize="small")
    for axes in panels:
        axes.grid(alpha=0.3)
    fig.tight_layout()
    try:
        write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(fig)


def output_prefix(out: str | Path) -> Path:
    """--out is a prefix; an existing folder, or a path ending in a slash, gets stats.md, .json and .png inside."""
    return Path(out, "stats") if Path(out).is_dir() or str(out).endswith("/") else Path(out)


def report(folders: list[str | Path], out_prefix: str | Path, threshold: float | None = None,
           final_updates: int = 1, reference: str | Path | None = "auto", published: list[Published] = (),
           **bootstrap: Any) -> str:
    """Writes <output_prefix(out_prefix)>.md, .json and .png for the runs below folders; returns the markdown."""
    points = group_runs(load_runs(folders))
    for point in points:
        updates = len(point.runs[0].update)
        if final_updates > updates:
            raise InputError(f"--final-updates {final_updates}: the runs of {point.label} have {updates} "
                             f"update{'s' if updates > 1 else ''}")
    reference_path = _choose_reference(reference, points)
    all_scores = np.concatenate([point.scores(final_updates) for point in points])
    low, high = np.nanmin(all_scores), np.nanmax(all_scores)
    if low == high:  # one run, or equal scores: a span around the score, so the profile's step shows
        low, high = low - 0.1 * max(abs(low), 1.0), high + 0.1 * max(abs(high), 1.0)
    taus = np.linspace(low, high, 101)  # one axis, so profiles compare
    summaries = [summarise(point, taus, threshold, final_updates, **bootstrap) for point in points]
    settings = {"final_updates": final_updates, "threshold": threshold, "confidence": CONFIDENCE,
                "n_resamples": N_RESAMPLES, "seed": SEED, **bootstrap,
                "reference": str(reference_path) if reference_path else None,
                "published": [p._asdict() for p in published]}
    markdown = table(summaries, settings)
    out = output_prefix(out_prefix)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(Path(f"{out}.md"), lambda tmp: tmp.write_text(markdown))
    text = json.dumps({**settings, "grid_points": summaries}, indent=1) + "\n"
    write_atomically(Path(f"{out}.json"), lambda tmp: tmp.write_text(text))
    figure(summaries, reference_path, threshold, Path(f"{out}.png"), published)
    return markdown


# ------------------------------------------------------------------ command line
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """Every input error ends the same way: one line on stderr, exit code 2, no usage dump."""
        print(f"stats.py: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", action="extend", nargs="+", required=True,
                        help="a folder with runs below it (repeatable); each config is one grid point, seeds apart")
    parser.add_argument("--out", required=True, help="output path without extension: writes .md, .json and .png")
    parser.add_argument("--threshold", type=float, help="also report the fraction of seeds scoring at least this")
    parser.add_argument("--final-updates", type=int, default=1,
                        help="a run's final score is its mean reward_mean_last100 over this many last updates")
    parser.add_argument("--reference", default="auto",
                        help="auto (the reference baseline's curve for the runs' environment), none, or a CSV path")
    parser.add_argument("--published", action="append", default=[], metavar="STEPS:VALUE:LABEL",
                        help="a published figure to draw beside the runs (repeatable): a point at STEPS "
                             "environment steps, or with STEPS empty a level, e.g. 8192000:0.42:GRU or :0.017:random")
    args = parser.parse_args(argv)
    if args.threshold is not None and not np.isfinite(args.threshold):
        parser.error(f"--threshold must be a finite number, not {args.threshold}")
    if args.final_updates < 1:
        parser.error(f"--final-updates must be at least 1, not {args.final_updates}")
    try:
        published = [parse_published(text) for text in args.published]
        markdown = report(args.runs, args.out, args.threshold, args.final_updates, args.reference, published)
    except InputError as error:
        parser.error(str(error))
    except OSError as error:
        parser.error(f"could not read or write {error.filename}: {error.strerror}")
    out = output_prefix(args.out)
    print(markdown, end="")
    print(f"wrote {out}.md, {out}.json, {out}.png")


if __name__ == "__main__":
    main()
