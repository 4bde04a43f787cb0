"""Statistics over seeds: mean, median and IQM with bootstrap intervals (Agarwal et al., 2021; docs/sweeps.md)."""
from plumbing import script

script.begin(__name__)  # the imports below take seconds

import argparse
import copy
import difflib
import itertools
import json
import sys
import warnings
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

import numpy as np
from scipy import stats as scipy_stats
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

from config import EXECUTION_KEYS
from plumbing.atomic import write_all_atomically
from plumbing.cli import ArgumentParser, check_output, failed, number
from plumbing.errors import ConfigError
from plumbing.files import reason

N_RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0  # of the bootstrap's generator: the same runs always give the same intervals
MAX_RESAMPLED_VALUES = 4_000_000  # values resampled in one batch: bounds memory on long curves
TAG = "episode/reward_mean_last100"  # the reference baseline's reward_mean: a run's score and curve
TAGS = {TAG: "reward", "time/env_steps": "steps", "time/steps_per_second": "speed", "eval/reward_mean": "eval"}
PER_SEED_LINES = 10  # a grid point with at most this many seeds also draws each seed's curve
REFERENCE_FOLDER = Path(__file__).resolve().parent / "results/reference"
# an environment type or name -> the reference baseline's curve over its 10 runs
REFERENCES = {"PocMemoryEnv": "poc_memory_env.csv", "CartPoleMasked": "cartpole_masked.csv",
              "MiniGrid-MemoryS9-v0": "minigrid_memory_s9.csv"}


class Interval(NamedTuple):
    point: Any  # floats, or arrays of one shape
    low: Any
    high: Any


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean once int(n / 4) scores are dropped at each end, as rliable computes it."""
    return scipy_stats.trim_mean(x, 0.25, axis=axis)


def interval(scores: np.ndarray, statistic: Callable, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> Interval:
    """Percentile bootstrap over seeds of statistic(x, axis): scores (..., seeds), an interval per leading index."""
    scores = np.asarray(scores, dtype=float)
    point = statistic(scores, axis=-1)
    if scores.shape[-1] < 2 or not np.any(np.ptp(scores, axis=-1)):  # nothing to resample
        return Interval(point, point, point)
    with warnings.catch_warnings():  # a point where a seed has no value (NaN) has no interval: NaN, as meant
        warnings.simplefilter("ignore", scipy_stats.DegenerateDataWarning)
        ci = scipy_stats.bootstrap((scores,), statistic, n_resamples=n_resamples, vectorized=True, axis=-1,
                                   batch=max(1, MAX_RESAMPLED_VALUES // scores.size), confidence_level=CONFIDENCE,
                                   method="percentile", rng=np.random.default_rng(seed)).confidence_interval
    return Interval(point, ci.low, ci.high)


STATISTICS: dict[str, Callable] = {"mean": np.mean, "median": np.median, "iqm": iqm}


def performance_profile(scores: np.ndarray, taus: np.ndarray, **bootstrap: Any) -> Interval:
    """The fraction of runs scoring > tau for each tau: arrays (taus,)."""
    taus = np.asarray(taus, dtype=float)

    def above(x: np.ndarray, axis: int = -1) -> np.ndarray:
        # (..., seeds) -> (taus, ...): the resample axis stays last, as scipy wants it
        return np.mean(x > taus.reshape(-1, *[1] * x.ndim), axis=-1)
    return interval(scores, above, **bootstrap)


class Scalar(NamedTuple):
    tag: str
    step: int
    value: float
    wall_time: float


def read_events(file: Path) -> list[Scalar]:
    """The scalars of one TensorBoard events file. A file that cannot be read to its end (a record damaged,
    or cut short by a process that died writing it) is named in one warning line and read up to there."""
    scalars, step = [], 0
    reader = PyRecordReader_New(str(file))
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return scalars
        except errors.DataLossError:
            print(f"warning: {file} is damaged or cut short after a record of update {step}: read up to there",
                  file=sys.stderr)
            return scalars
        event = Event.FromString(reader.record())
        step = event.step
        scalars += [Scalar(v.tag, step, v.simple_value, event.wall_time)
                    for v in event.summary.value if v.WhichOneof("value") == "simple_value"]


def read_scalars(folder: Path, tags: dict[str, str]) -> dict[int, dict[str, float]]:
    """{update: {key: value}} for the TensorBoard tags {tag: key} of one run. A resumed run writes a new file
    from its checkpoint's update on, which replaces what earlier files hold from there."""
    by_update: dict[int, dict[str, float]] = {}
    for file in sorted(folder.rglob("events.out.tfevents.*")):
        scalars = [s for s in read_events(file) if s.tag in tags]
        first = min((s.step for s in scalars), default=None)
        by_update = {u: values for u, values in by_update.items() if first is None or u < first}
        for s in scalars:
            by_update.setdefault(s.step, {})[tags[s.tag]] = s.value
    return by_update


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class Run:
    """One run: its config, and its curve at every update with a time/env_steps summary."""
    folder: Path
    config: dict
    update: np.ndarray  # (updates,)
    env_steps: np.ndarray  # (updates,)
    reward: np.ndarray  # (updates,) reward_mean_last100; NaN before the first episode ends
    speed: float  # the median of time/steps_per_second; NaN where never reported
    evaluations: dict[int, float]  # eval/reward_mean by update (config `evaluation`)

    @property
    def seed(self) -> Any:
        return self.config.get("seed")

    @property
    def updates(self) -> int:
        return int(self.update[-1])

    @property
    def final_evaluation(self) -> float | None:  # the trainer evaluates after its last update
        return self.evaluations.get(self.updates)

    def final_score(self, last: int = 1) -> float:
        return float(np.mean(self.reward[-last:]))

    def first_update_at(self, threshold: float) -> dict[str, int | None]:
        def first(scores) -> int | None:
            return next((int(u) for u, score in scores if score >= threshold), None)
        return {"training": first(zip(self.update, self.reward)), "evaluation": first(self.evaluations.items())}


def load_run(folder: Path) -> Run | None:
    """The run in folder (config.json, and events at or below it); None before its first update."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(f"{folder / 'config.json'}: not valid JSON ({error})") from None
    by_update = read_scalars(folder, TAGS)
    updates = sorted(u for u, values in by_update.items() if "steps" in values)
    if not updates:
        return None
    rows = [by_update[u] for u in updates]
    reward = np.array([r.get("reward", np.nan) for r in rows])
    # reward_mean_last100 is written where an episode ended; in between, the last 100 episodes are the same
    reward = reward[np.maximum.accumulate(np.where(np.isnan(reward), 0, np.arange(len(reward))))]
    speeds = [r["speed"] for r in rows if "speed" in r]
    return Run(folder, config, np.array(updates), np.array([r["steps"] for r in rows]), reward,
               float(np.median(speeds)) if speeds else np.nan,
               {u: r["eval"] for u, r in zip(updates, rows) if "eval" in r})


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Every run at or below the paths that has finished its first update."""
    runs: dict[Path, Run] = {}  # by folder: overlapping paths give each run once
    for path in map(Path, paths):
        if not path.exists():
            raise ConfigError(f"{path} does not exist")
        found = []
        for folder in sorted(c.parent for c in path.rglob("config.json")):
            if run := load_run(folder):
                found.append(run)
            else:
                print(f"warning: {folder} left out: its events hold no whole update (empty, damaged, or the run "
                      "ended before its first)", file=sys.stderr)
        if not found:
            raise ConfigError(f"no runs under {path} (a run's folder holds config.json and TensorBoard "
                             "events of at least one update)")
        runs.update((run.folder.resolve(), run) for run in found)
    return list(runs.values())


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class GridPoint:
    label: str  # the config keys that tell grid points apart, or the environment when none do
    config: dict  # without seed and EXECUTION_KEYS
    runs: list[Run]  # the runs that reached the grid point's last update: these are scored
    stopped: list[Run]  # runs with fewer updates (stopped by a scheduler, or still running): not scored

    def scores(self, last: int = 1) -> np.ndarray:
        return np.array([run.final_score(last) for run in self.runs])  # (seeds,)

    def curves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(updates (U,), env steps (U,), rewards (seeds, U)) at the U updates every scored run has."""
        common = reduce(np.intersect1d, [run.update for run in self.runs])
        rewards = np.stack([run.reward[np.isin(run.update, common)] for run in self.runs])
        return common, self.runs[0].env_steps[np.isin(self.runs[0].update, common)], rewards


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}"""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        flat.update(flatten(value, f"{prefix}{key}.") if isinstance(value, dict) and value else {prefix + key: value})
    return flat


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _order(value: Any) -> tuple:  # numbers by value (8 before 16), anything else by its text
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, _text(value))


def without(config: dict, keys: Iterable[str]) -> dict:
    """config less the dotted keys (a section's name drops the whole section)."""
    config = copy.deepcopy(config)
    for key in keys:
        *sections, last = key.split(".")
        section = config
        for name in sections:
            section = section.get(name) if isinstance(section, dict) else None
        if isinstance(section, dict):
            section.pop(last, None)
    return config


def group_runs(runs: list[Run], pooled: Iterable[str] = ()) -> list[GridPoint]:
    """Runs whose configs are equal but for the seed, EXECUTION_KEYS and the pooled keys form a grid point, labelled
    and sorted by the keys that differ between grid points. Runs of one config and seed are one run trained again
    (train.py --overwrite starts a folder named by its start time): the one whose name sorts last counts."""
    members: dict[str, dict[Any, Run]] = {}  # config -> seed -> run
    for run in sorted(runs, key=lambda r: r.folder.name):
        what = without(run.config, ["seed", *EXECUTION_KEYS, *pooled])
        seeds = members.setdefault(json.dumps(what, sort_keys=True), {})
        if run.seed in seeds:
            print(f"warning: {seeds[run.seed].folder} left out: {run.folder} is a later run of its config and seed",
                  file=sys.stderr)
        seeds[run.seed] = run
    configs = [json.loads(key) for key in members]
    flat = [flatten(config) for config in configs]
    differing = [k for k in sorted(set().union(*flat)) if len({_text(f.get(k)) for f in flat}) > 1]
    points = []
    for config, f, seeds in zip(configs, flat, members.values()):
        environment = config.get("environment", {})
        label = (", ".join(f"{k}={_text(f.get(k))}" for k in differing)
                 or " ".join(filter(None, [environment.get("type"), environment.get("name")])) or "all runs")
        group = sorted(seeds.values(), key=lambda r: _order(r.seed))
        longest = max(run.updates for run in group)
        planned = config.get("updates", longest)  # the config's, else (a foreign config.json) the longest run's
        if longest < planned:
            print(f"warning: {label} left out: none of its {len(group)} run(s) reached its config's {planned} "
                  f"updates (the furthest stopped at {longest})", file=sys.stderr)
            continue
        point = GridPoint(label, config, [r for r in group if r.updates >= planned],
                          [r for r in group if r.updates < planned])
        points.append((tuple(_order(f.get(k)) for k in differing), point))
    return [point for _, point in sorted(points, key=lambda p: p[0])]


def reference_for(config: dict) -> Path | None:
    environment = config.get("environment", {})
    file = REFERENCES.get(environment.get("type")) or REFERENCES.get(environment.get("name"))
    return REFERENCE_FOLDER / file if file else None


def read_reference(path: Path) -> np.recarray:
    """Its columns by update: env_steps, reward_mean_over_runs, reward_min_over_runs, reward_max_over_runs, runs."""
    return np.genfromtxt(path, delimiter=",", names=True).view(np.recarray)


class Published(NamedTuple):
    """A figure another project published: a point at env_steps, or with env_steps None a level."""
    env_steps: int | None
    value: float
    label: str


def parse_published(text: str) -> Published:
    """--published's 'STEPS:VALUE:LABEL' (STEPS empty: a level), as an argparse type."""
    steps, value, label = (text.split(":", 2) + ["", ""])[:3]
    try:
        published = Published(int(steps) if steps.strip() else None, float(value), label.strip())
    except ValueError:
        published = None
    if not published or not published.label or not np.isfinite(published.value) or (published.env_steps or 0) < 0:
        raise argparse.ArgumentTypeError(f"expected STEPS:VALUE:LABEL, STEPS a whole number >= 0 or empty (a level), "
                                         f"VALUE a finite number, e.g. 8192000:0.42:GRU; got {text!r}")
    return published


def _as_json(interval_: Interval) -> dict[str, Any]:
    return {key: np.asarray(value).tolist() for key, value in zip(("value", "low", "high"), interval_)}


def aggregates(scores: np.ndarray, **bootstrap: Any) -> dict[str, dict]:
    return {name: _as_json(interval(scores, statistic, **bootstrap)) for name, statistic in STATISTICS.items()}


def summarise(point: GridPoint, taus: np.ndarray, threshold: float | None, last: int, **bootstrap: Any) -> dict:
    """One grid point's numbers, as the JSON holds them."""
    scores = point.scores(last)  # (seeds,)
    updates, steps, curves = point.curves()  # (U,), (U,), (seeds, U)
    evaluations = [run.final_evaluation for run in point.runs]
    settings = [{k: r.config.get(k) for k in EXECUTION_KEYS} for r in point.runs]  # where each seed ran
    return {
        "label": point.label, "config": point.config, "seeds": len(scores),
        "runs": [{"seed": r.seed, "folder": str(r.folder), "updates": r.updates, "final_score": float(score),
                  "steps_per_second": r.speed, "execution": setting, "final_evaluation": r.final_evaluation,
                  "first_update_at_threshold": None if threshold is None else r.first_update_at(threshold),
                  "evaluations": {"update": list(r.evaluations), "reward_mean": list(r.evaluations.values())}
                  if r.evaluations else None}
                 for r, score, setting in zip(point.runs, scores, settings)],
        "final_evaluation": None if None in evaluations else aggregates(np.array(evaluations), **bootstrap),
        "stopped_early": [{"seed": r.seed, "folder": str(r.folder), "updates": r.updates} for r in point.stopped],
        "final_score": aggregates(scores, **bootstrap),
        "fraction_at_least_threshold": None if threshold is None else  # how many seeds solve the task
        _as_json(interval(scores >= threshold, np.mean, **bootstrap)),
        # None where the seeds ran in different settings (a GPU's beside a CPU's): one median would mean nothing
        "steps_per_second": float(np.median([r.speed for r in point.runs]))
        if all(setting == settings[0] for setting in settings) else None,
        "curve": {"update": updates.tolist(), "env_steps": steps.tolist(), "per_seed": curves.tolist(),
                  "iqm": _as_json(interval(curves.T, iqm, **bootstrap))},  # a resample draws whole runs
        "profile": {"tau": taus.tolist(), **_as_json(performance_profile(scores, taus, **bootstrap))},
    }


def _cell(numbers: dict[str, Any], spec: str = ".4g") -> str:
    return f"{numbers['value']:{spec}} [{numbers['low']:{spec}}, {numbers['high']:{spec}}]"


def _markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(cells) + " |" for cells in [header, *rows]]
    return [lines[0], "|" + "---|" * len(header), *lines[1:]]


def table(summaries: list[dict], settings: dict) -> str:
    """The markdown table, one row per grid point, and what the runs add below it."""
    threshold, evaluated = settings["threshold"], [s for s in summaries if s["final_evaluation"]]
    at_least = [] if threshold is None else [f"seeds >= {threshold:g}"]
    lines = [f"Final score: episode/reward_mean_last100, mean over each run's last {settings['final_updates']} "
             f"update(s). [low, high]: {settings['confidence']:.0%} percentile bootstrap interval over seeds "
             f"({settings['n_resamples']} resamples).", ""]
    lines += _markdown(["grid point", "seeds", "mean", "median", "IQM", *at_least, "steps/s", "stopped early"], [
        [s["label"], str(s["seeds"]), *map(_cell, s["final_score"].values()),
         *([_cell(s["fraction_at_least_threshold"], ".2f")] if at_least else []),
         "mixed" if s["steps_per_second"] is None else f"{s['steps_per_second']:.0f}", str(len(s["stopped_early"]))]
        for s in summaries])
    if pairs := [s["label"] for s in summaries if s["seeds"] == 2]:
        lines += ["", f"{'; '.join(pairs)}: 2 seeds, whose every [low, high] is the range of their two scores (a "
                  "bootstrap over 2 seeds draws nothing else): no 95% interval."]
    for s in (s for s in summaries if s["steps_per_second"] is None):
        per_seed = ", ".join(f"{r['seed']}: {r['steps_per_second']:.0f} ("
                             + ", ".join(f"{k} {v}" for k, v in r["execution"].items()) + ")" for r in s["runs"])
        lines += ["", "steps/s mixed: the grid point's seeds ran in different settings (device, processes or "
                  f"threads); per seed: {per_seed}."]
    if settings["published"]:
        lines += ["", "Figures drawn beside the runs (--published): " + "; ".join(
            f"{p['label']} {p['value']:g}" + ("" if p["env_steps"] is None else f" at {p['env_steps']:,} steps")
            for p in settings["published"]) + "."]
    if evaluated:
        pooled = (f" Pooled (--pool): {', '.join(settings['pooled'])} may differ between a grid point's seeds; "
                  "each seed is scored with its own run's settings.") if settings["pooled"] else ""
        lines += ["", "Final held-out evaluation: eval/reward_mean after each run's last update (config "
                  f"`evaluation`: held-out episodes, scored as enjoy.py scores).{pooled}", ""]
        lines += _markdown(["grid point", "seeds", "mean", "median", "IQM", "per seed (seed: score)"], [
            [s["label"], str(s["seeds"]), *map(_cell, s["final_evaluation"].values()),
             ", ".join(f"{r['seed']}: {r['final_evaluation']:.3f}" for r in s["runs"])] for s in evaluated])
    if threshold is not None:
        kinds = ["training", "evaluation"] if evaluated else ["training"]
        lines += ["", f"First update at which each seed reached {threshold:g} (seed: training reward_mean_last100"
                  + (" / held-out evaluation" if evaluated else "") + "; -: never):", ""]
        lines += [f"- {s['label']}: " + ", ".join(f"{r['seed']}: " + " / ".join(
            str(r["first_update_at_threshold"][k] or "-") for k in kinds) for r in s["runs"]) for s in summaries]
    return "\n".join(lines) + "\n"


def figure(summaries: list[dict], reference: Path | None, threshold: float | None, published: list[Published] = ()):
    """IQM curves with their bands (each seed's thin where there are few) and the reference's; each seed's
    held-out evaluations, when runs evaluated; the performance profiles. Published figures: a star or a level."""
    from matplotlib.figure import Figure  # no pyplot: no window, no global state
    evaluated = any(r["evaluations"] for s in summaries for r in s["runs"])
    fig = Figure(figsize=(18 if evaluated else 12, 4.5), layout="tight")
    curves, *middle, profiles = panels = fig.subplots(1, 3 if evaluated else 2)
    curves.set(xlabel="environment steps", ylabel="mean return, last 100 episodes",
               title="IQM over seeds, 95% CI; thin: each seed")
    for axes in middle:
        axes.set(xlabel="environment steps", ylabel="held-out mean return (eval/reward_mean)",
                 title="held-out evaluation, each seed")
    profiles.set(xlabel="final score τ", ylabel="fraction of runs with score > τ", title="performance profile",
                 ylim=(-0.02, 1.02))
    for i, s in enumerate(summaries):
        color, curve, profile, steps = f"C{i % 10}", s["curve"], s["profile"], s["curve"]["env_steps"]
        curves.plot(steps, curve["iqm"]["value"], color=color,
                    label=f"{s['label']} ({s['seeds']} seed{'s' if s['seeds'] > 1 else ''})")
        curves.fill_between(steps, curve["iqm"]["low"], curve["iqm"]["high"], color=color, alpha=0.25)
        for seed_curve in curve["per_seed"] if s["seeds"] <= PER_SEED_LINES else []:
            curves.plot(steps, seed_curve, color=color, linewidth=0.6, alpha=0.45)
        for evaluations in (r["evaluations"] for r in s["runs"] if r["evaluations"]):
            middle[0].plot(np.interp(evaluations["update"], curve["update"], steps), evaluations["reward_mean"],
                           color=color, linewidth=0.8, alpha=0.7, marker=".", markersize=3)
        # a fraction of runs is a step function of tau: it changes at each run's score
        profiles.plot(profile["tau"], profile["value"], color=color, drawstyle="steps-post")
        profiles.fill_between(profile["tau"], profile["low"], profile["high"], color=color, alpha=0.25, step="post")
    if reference:
        ref = read_reference(reference)
        curves.plot(ref.env_steps, ref.reward_mean_over_runs, color="black", linestyle="--",
                    label=f"reference baseline (mean, min-max of {ref.runs[0]:.0f} runs)")
        curves.fill_between(ref.env_steps, ref.reward_min_over_runs, ref.reward_max_over_runs, color="gray", alpha=0.2)
    for k, p in enumerate(published):
        color = f"C{(len(summaries) + k) % 10}"  # after the grid points' colours
        for axes in [curves, *middle]:
            if p.env_steps is None:
                axes.axhline(p.value, color=color, linestyle=":", label=p.label)
            else:
                axes.plot([p.env_steps], [p.value], color=color, marker="*", markersize=12, ls="none", label=p.label)
    if threshold is not None:
        profiles.axvline(threshold, color="gray", linestyle=":")
    for axes in panels:
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(loc="best", fontsize="small")
    return fig


def output_prefix(out: str | Path) -> Path:
    """--out is a prefix; an existing folder, or a path ending in a slash, gets stats.md, .json and .png inside."""
    return Path(out, "stats") if Path(out).is_dir() or str(out).endswith("/") else Path(out)


def report(folders: list[str | Path], out: str | Path, threshold: float | None = None, final_updates: int = 1,
           published: list[Published] = (), pooled: list[str] = (), **bootstrap: Any) -> str:
    """Writes <output_prefix(out)>.md, .json and .png for the runs below folders; returns the markdown."""
    runs = load_runs(folders)
    keys = {prefix for run in runs for key in flatten(run.config)
            for prefix in itertools.accumulate(key.split("."), lambda a, b: f"{a}.{b}")}  # keys and their sections
    for key in pooled:
        if key not in keys:
            close = difflib.get_close_matches(key, sorted(keys), n=1)
            raise ConfigError(f"--pool {key}: no run's config has that key or section"
                              + (f"; did you mean {close[0]}?" if close else ""))
    points = group_runs(runs, pooled)
    if not points:
        raise ConfigError("no run reached its config's updates: nothing to score (see the warnings)")
    for point in points:
        if not 1 <= final_updates <= len(point.runs[0].update):
            raise ConfigError(f"--final-updates {final_updates}: must be from 1 to the {len(point.runs[0].update)} "
                              f"update(s) the runs of {point.label} have")
    references = {reference_for(point.config) for point in points}  # drawn where all grid points share one
    reference = references.pop() if len(references) == 1 else None
    scores = np.concatenate([point.scores(final_updates) for point in points])
    low, high = np.nanmin(scores), np.nanmax(scores)
    if low == high:  # one run, or equal scores: a span around them, so the profile's step shows
        low, high = low - 0.1 * max(abs(low), 1.0), high + 0.1 * max(abs(high), 1.0)
    taus = np.linspace(low, high, 101)  # one axis for every grid point, so their profiles compare
    summaries = [summarise(point, taus, threshold, final_updates, **bootstrap) for point in points]
    settings = {"final_updates": final_updates, "threshold": threshold, "confidence": CONFIDENCE,
                "n_resamples": N_RESAMPLES, "seed": SEED, **bootstrap, "reference": reference and str(reference),
                "published": [p._asdict() for p in published], "pooled": list(pooled)}
    markdown = table(summaries, settings)
    text = json.dumps({**settings, "grid_points": summaries}, indent=1) + "\n"
    fig = figure(summaries, reference, threshold, published)
    prefix = output_prefix(out)
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
        write_all_atomically({Path(f"{prefix}.md"): lambda tmp: tmp.write_text(markdown),
                              Path(f"{prefix}.json"): lambda tmp: tmp.write_text(text),
                              Path(f"{prefix}.png"): lambda tmp: fig.savefig(tmp, dpi=120, format="png")})
    except OSError as error:  # a full disk
        raise script.Failed(f"could not write {prefix}.md, .json, .png ({reason(error)}); none of them was written or "
                            "changed") from None
    return markdown


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser("stats.py", description=__doc__, epilog="Exit codes: 0 written, 1 the files could not "
                            "be written (none of them changed), 2 refused (bad flag, runs or --out), "
                            f"{script.STOPPED}.")
    parser.add_argument("--runs", action="extend", nargs="+", required=True,
                        help="folders with runs below them; each config is one grid point, seeds apart")
    parser.add_argument("--out", required=True, help="writes OUT.md, OUT.json, OUT.png; a folder gets stats.*")
    parser.add_argument("--threshold", type=number(float), metavar="X", help="also report the fraction of seeds >= X")
    parser.add_argument("--final-updates", type=int, default=1,
                        help="a run's score is its mean reward_mean_last100 over this many last updates")
    parser.add_argument("--published", action="append", default=[], type=parse_published, metavar="STEPS:VALUE:LABEL",
                        help="a published figure to draw (repeatable): a point, or with STEPS empty a level")
    parser.add_argument("--pool", action="append", default=[], metavar="KEY",
                        help="a config key or section that may differ between one grid point's seeds (repeatable), "
                             "for settings that do not change training, such as evaluation")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT.md, .json and .png if they exist")

    def start():
        args = parser.parse_args(argv)
        prefix = output_prefix(args.out)
        check_output("--out", [Path(f"{prefix}{suffix}") for suffix in (".md", ".json", ".png")], args.overwrite)
        return args

    def work(args) -> int:
        try:
            markdown = report(args.runs, args.out, args.threshold, args.final_updates, args.published, args.pool)
        except OSError as error:
            return failed(f"could not read {error.filename or 'the runs'} ({reason(error)})")
        out = output_prefix(args.out)
        print(f"{markdown}wrote {out}.md, {out}.json, {out}.png")
        return 0
    return script.life(start, work)


if __name__ == "__main__":
    script.run(main)
