"""How far a run's evaluation score moves by chance alone at a low success rate, and which model each rule for
keeping models/<run-id>-best.pt keeps (docs/reliability.md, "A best model that is not picked by luck").

    python tools/evaluation_noise.py play --model models/mystery_path_grid.pt --fresh 5-12 --replays 1-8 \
        --out results/best_rule/sets
    python tools/evaluation_noise.py report --fresh results/best_rule/sets/fresh_*.json ... \
        --own results/memory_gym/mpg_grid_seed0_rerun_best_on_eval_seed0.log results/best_rule/sets/replay_*.json \
        --out results/best_rule/mystery_path_grid   (results/best_rule/run.sh has the whole commands)

play: one model scored on disjoint sets of fresh held-out episodes (set s: `enjoy.py --seed s`'s episodes and
actions), alternately with its run's own evaluation set replayed with other action draws (replay r: the episodes
of evaluation.seed, the sampled actions from generator seed r); each set is one JSON file of its episodes, written
when it ends (sets already there are kept). report: the spread of a set's score, where the run's own set sits in
it, and, over simulated runs at the measured rates, the model each rule keeps and how far its recorded score
overstates it.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats as scipy_stats

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules

import stats  # noqa: E402
from agent import Agent  # noqa: E402
from cli import failed  # noqa: E402
from errors import CheckpointError, ConfigError  # noqa: E402
from evaluation import evaluate, evaluation_envs  # noqa: E402
from files import kind  # noqa: E402
from summaries import scores  # noqa: E402
from tools.benchmark import describe_tree  # noqa: E402
from tools.episode_interval import returns  # noqa: E402


def numbers(text: str) -> list[int]:
    """'4-15' or '1,3,5' -> the integers."""
    out = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


class Reseeded:
    """An agent whose sampled actions come from generator `seed`: evaluate() seeds torch with the episodes'
    seed, this reseeds it before the first action, so the same episodes are played with other draws."""

    def __init__(self, agent: Agent, seed: int):
        self.agent, self.config, self.seed = agent, agent.config, seed

    def act(self, *args, **kwargs):
        if self.seed is not None:
            torch.manual_seed(self.seed)
            self.seed = None
        return self.agent.act(*args, **kwargs)


def play(args) -> None:
    torch.set_num_threads(1)  # the same command gives the same episodes on a machine, whatever else runs there
    agent = Agent.load(args.model)
    e = agent.config.evaluation
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deterministic = e.deterministic if args.deterministic is None else args.deterministic
    fresh, replays = numbers(args.fresh), numbers(args.replays) if args.replays else []
    jobs = [job for pair in itertools.zip_longest(fresh, replays)  # alternately: a cut-short measurement has both
            for job in zip(("fresh", "replay"), pair) if job[1] is not None]
    for what, s in jobs:
        path = out / f"{what}_{s}.json"
        if path.exists():
            continue
        start = time.perf_counter()
        if what == "fresh":
            episodes = evaluate(agent, args.episodes, s, deterministic)
        else:
            envs = evaluation_envs(agent.config, args.episodes, e.seed)
            try:
                episodes = evaluate(Reseeded(agent, s), args.episodes, e.seed, deterministic, envs=envs)
            finally:
                envs.close()
        seconds = time.perf_counter() - start
        record = {"model": args.model, "kind": what, "seed": s, "evaluation_seed": e.seed,
                  "deterministic": deterministic, "seconds": seconds, "episodes": episodes}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(path)
        print(f"{what} {s}: {scores(episodes)['reward_mean']:.3f} in {seconds:.0f} s "
              f"({len(episodes) / seconds:.2f} episodes/s)", flush=True)


RULES = {  # name -> (the same set at every evaluation, the margin: "interval" or "any gain")
    "one set, any gain (before)": (True, "any gain"),
    "fresh episodes, any gain (now)": (False, "any gain"),
    "fresh episodes, beyond the interval": (False, "interval"),
}


def scenarios(p: float, E: int) -> dict[str, np.ndarray]:
    """Each evaluation's model's true success rate on fresh episodes, (E,), around the measured rate p."""
    half = E // 2
    return {"plateau": np.full(E, p),
            "rise, then plateau": np.r_[np.linspace(p / 2, p, half), np.full(E - half, p)],
            "still rising": np.linspace(p / 2, p, E),
            "peak, then decline": np.r_[np.linspace(p / 2, p, half), np.linspace(p, p / 2, E - half)],
            f"step up by {p / 2:.3f}": np.r_[np.full(half, p), np.full(E - half, 1.5 * p)]}


def low_ends(episodes: int) -> np.ndarray:
    """The low end of stats.interval's 95% interval of the mean for k successes of `episodes`, k = 0..n: with
    returns of 0 or 1 it depends on k alone."""
    return np.array([float(stats.interval(np.r_[np.ones(k), np.zeros(episodes - k)], np.mean).low)
                     for k in range(episodes + 1)])


def series(rates: np.ndarray, shown: np.ndarray, episodes: int, margin: str, lows: np.ndarray, runs: int,
           seed: int) -> dict:
    """`runs` runs of len(rates) evaluations, each scored on `episodes` episodes as binomial draws of `shown`
    (the models' rates on the scored episodes: on one set, that set's); the best kept as `margin` says."""
    counts = scipy_stats.binom.rvs(episodes, shown, size=(runs, len(rates)), random_state=seed)  # (runs, E)
    kept, which, lucky = counts[:, 0] / episodes, np.zeros(runs, dtype=int), np.zeros(runs)
    for i in range(1, len(rates)):
        score = counts[:, i] / episodes
        replace = score > kept if margin == "any gain" else lows[counts[:, i]] > kept
        lucky += replace & (rates[i] <= rates[which])
        which, kept = np.where(replace, i, which), np.where(replace, score, kept)
    return {"kept_rate": float(rates[which].mean()), "best_rate": float(rates.max()),
            "final_rate": float(rates[-1]), "replacements_not_better": float(lucky.mean()),
            "runs_with_one": float((lucky > 0).mean()), "overstatement": float((kept - rates[which]).mean())}


def report(args) -> int:
    fresh = [(f, returns(f)) for f in args.fresh]
    own = [(f, returns(f)) for f in args.own]
    n = len(fresh[0][1])
    if not set(np.unique(np.concatenate([r for _, r in fresh + own]))) <= {0.0, 1.0} \
            or any(len(r) != n for _, r in fresh + own):
        return failed("the sets must hold returns of 0 or 1 (a success rate), the same number of episodes each")
    pooled, own_pooled = np.concatenate([r for _, r in fresh]), np.concatenate([r for _, r in own])
    p, q = float(pooled.mean()), float(own_pooled.mean())
    p_interval, q_interval = stats.interval(pooled, np.mean), stats.interval(own_pooled, np.mean)
    means = np.array([r.mean() for _, r in fresh])
    table = np.array([[r.sum(), len(r) - r.sum()] for _, r in fresh])
    difference = scipy_stats.bootstrap((pooled, own_pooled), lambda x, y, axis=-1: y.mean(axis) - x.mean(axis),
                                       n_resamples=stats.N_RESAMPLES, method="percentile",
                                       rng=np.random.default_rng(stats.SEED)).confidence_interval
    played = own[0][1]  # the run's own set as its evaluations played it (action seed evaluation.seed)
    k = int(played.sum())
    out = {"code": describe_tree(ROOT)["label"], "episodes_per_set": n, "evaluations": args.evaluations,
           "runs": args.runs,
           "fresh": {"sets": [f for f, _ in fresh], "scores": means.tolist(), "pooled": p,
                     "interval": [float(p_interval.low), float(p_interval.high)],
                     "sd_of_scores": float(means.std(ddof=1)), "binomial_sd": float(np.sqrt(p * (1 - p) / n)),
                     "chi2_p_value": float(scipy_stats.chi2_contingency(table).pvalue)},
           "own_set": {"sets": [f for f, _ in own], "scores": [float(r.mean()) for _, r in own], "pooled": q,
                       "interval": [float(q_interval.low), float(q_interval.high)],
                       "sd_of_scores": float(np.std([r.mean() for _, r in own], ddof=1)),
                       "binomial_sd": float(np.sqrt(q * (1 - q) / n)),
                       "minus_fresh_interval": [float(difference.low), float(difference.high)],
                       "as_played": float(played.mean()), "fresh_sets_at_or_above": int((means >= played.mean()).sum()),
                       "binomial_tail": float(scipy_stats.binom.sf(k - 1, n, p))},
           "scenarios": {}}
    lows = low_ends(n)
    for s, (scenario, rates) in enumerate(scenarios(p, args.evaluations).items()):
        out["scenarios"][scenario] = {name: series(rates, rates * q / p if one_set else rates, n, margin, lows,
                                                   args.runs, s)
                                      for name, (one_set, margin) in RULES.items()}
    Path(args.out + ".json").write_text(json.dumps(out, indent=1) + "\n")
    Path(args.out + ".md").write_text(markdown(out, args) + "\n")
    print(Path(args.out + ".md").read_text(), end="")
    return 0


def markdown(out: dict, args) -> str:
    f, o, n = out["fresh"], out["own_set"], out["episodes_per_set"]
    scores_ = ", ".join(f"{m:.3f}" for m in f["scores"])
    lines = [f"# How far a {n}-episode evaluation moves by chance, and which model each rule keeps", "",
             f"`python tools/evaluation_noise.py {' '.join(args.raw)}` (code: {out['code']})", "",
             f"**Fresh sets**, {len(f['scores'])} of {n} episodes: {scores_}.",
             f"Pooled {f['pooled']:.3f} [{f['interval'][0]:.3f}, {f['interval'][1]:.3f}] over "
             f"{n * len(f['scores'])} episodes. The sets' scores spread with sd {f['sd_of_scores']:.3f}; binomial "
             f"draws of one rate would spread with {f['binomial_sd']:.3f} (chi-square test of one rate: p = "
             f"{f['chi2_p_value']:.2f}).", "",
             "**The run's own set** (evaluation.seed's episodes: as its evaluations played them, then the same "
             "episodes with other action draws): " + ", ".join(f"{m:.3f}" for m in o["scores"]) + ".",
             f"The draws spread with sd {o['sd_of_scores']:.3f}, where binomial draws of its rate would with "
             f"{o['binomial_sd']:.3f}: which episodes a set holds decides most of its score. "
             f"As played, {o['as_played']:.3f}: {o['fresh_sets_at_or_above']} of {len(f['scores'])} fresh sets score "
             f"as much, P(a set of {n} scores as much | rate {f['pooled']:.3f}) = {o['binomial_tail']:.3f}. Over all "
             f"its draws {o['pooled']:.3f} [{o['interval'][0]:.3f}, {o['interval'][1]:.3f}], "
             f"{o['pooled'] - f['pooled']:+.3f} [{o['minus_fresh_interval'][0]:+.3f}, "
             f"{o['minus_fresh_interval'][1]:+.3f}] from the fresh rate.", "",
             f"**The rules**, over {out['runs']} simulated runs of {out['evaluations']} evaluations each (binomial "
             f"draws of {n} episodes at the true rates below, scaled by the own set's measured rate over the fresh "
             "one where a rule scores one set): the kept model's true rate on fresh episodes, its recorded score "
             "minus that rate, and its replacements per run by a model that is not better (share of runs with one).",
             "", "| scenario (best rate, final) | rule | kept model's rate | recorded score, over | "
             "replaced by a model not better |", "|---|---|---|---|---|"]
    for scenario, rules in out["scenarios"].items():
        for name, r in rules.items():
            where = f"{scenario} ({r['best_rate']:.3f}, {r['final_rate']:.3f})"
            lines.append(f"| {where} | {name} | {r['kept_rate']:.3f} | {r['overstatement']:+.3f} | "
                         f"{r['replacements_not_better']:.2f} ({r['runs_with_one']:.2f}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("play", help="score a model on sets of fresh episodes and on replays of its run's own set")
    p.add_argument("--model", required=True)
    p.add_argument("--fresh", required=True, help="the fresh sets' seeds, e.g. 4-15")
    p.add_argument("--replays", help="the action seeds of the replays of the run's own set, e.g. 1-4")
    p.add_argument("--episodes", type=int, default=150)
    p.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=None,
                   help="default: the checkpoint's evaluation.deterministic")
    p.add_argument("--out", required=True, help="a folder: one <kind>_<seed>.json per set")
    r = sub.add_parser("report", help="the spread, the own set's place in it, and the rules' replacements")
    r.add_argument("--fresh", nargs="+", required=True, help="fresh sets: play's JSON files or enjoy.py's output")
    r.add_argument("--own", nargs="+", required=True,
                   help="the run's own set as it played it first, then its replays")
    r.add_argument("--evaluations", type=int, default=20, help="evaluations per simulated run")
    r.add_argument("--runs", type=int, default=20000, help="simulated runs")
    r.add_argument("--out", required=True, help="writes <out>.md and <out>.json")
    args = parser.parse_args(argv)
    args.raw = sys.argv[1:] if argv is None else argv
    for path in [args.model] if args.command == "play" else [*args.fresh, *args.own]:
        if kind(path) != "a file":
            return failed(f"{path} is {kind(path)}: give " + ("a checkpoint" if args.command == "play" else
                                                               "play's JSON files or enjoy.py's saved output"))
    if args.command == "play":
        try:
            play(args)
        except (CheckpointError, ConfigError) as error:
            return failed(error)
        return 0
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
