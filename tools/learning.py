"""Trains a config on several seeds and tabulates how far each run got.

    python tools/learning.py --config configs/cartpole_masked.yaml --seeds 0 1 2

Writes results/learning_<config name>.json and .md: per seed the mean episode
reward (and success) of the last update and the best update, the mean over the
last five updates, the environment steps and the wall time. With --summaries
DIR, each run's TensorBoard summaries stay in DIR/<config name>_seed<N>/.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from plumbing import script, stopping  # noqa: E402
from tools import life  # noqa: E402

life.begin(__name__)  # the imports below take seconds

from config import config_from_dict, load_config  # noqa: E402
from trainer import Trainer  # noqa: E402
from tools.benchmark import describe_tree, machine  # noqa: E402


def summarise(history) -> dict:
    rewards = [h.reward_mean for h in history if h.reward_mean is not None]
    successes = [h.success_mean for h in history if h.success_mean is not None]
    last5 = rewards[-5:]
    return {
        "final_reward": rewards[-1],
        "last5_reward": sum(last5) / len(last5),
        "best_reward": max(rewards),
        "final_success": successes[-1] if successes else None,
        "last5_success": sum(successes[-5:]) / len(successes[-5:]) if successes else None,
        "steps": history[-1].steps,
    }


def run_seed(raw: dict, name: str, seed: int, summaries: str | None) -> dict:
    config = config_from_dict(raw)
    config.seed = seed
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        trainer = Trainer(config, run_id=f"{name}_seed{seed}", summaries_dir=summaries or tmp,
                          models_dir=tmp, verbose=False)
        history = trainer.run()
        wall = time.perf_counter() - start
    return {"seed": seed, **summarise(history), "wall_s": wall}


def deaf_to_ctrl_c() -> None:
    """A seed's process, first: Ctrl-C and SIGHUP, which reach the whole group, are for the tool, which ends the seeds'
    processes (SIGTERM); it began with them blocked (stopping.starting_processes)."""
    for number in set(stopping.STOP_SIGNALS) - {signal.SIGTERM}:
        signal.signal(number, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping.STOP_SIGNALS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default=str(ROOT / "results"))
    parser.add_argument("--summaries", help="keep each run's TensorBoard summaries here (for tools/plot.py)")
    parser.add_argument("--processes", type=int, default=1,
                        help="seeds trained side by side (for configs with torch_threads: 1)")
    args = parser.parse_args(argv)
    name = Path(args.config).stem
    out = life.prefixed(Path(args.out) / f"learning_{name}")

    def start() -> dict:
        life.check_out("--out", out)
        return load_config(args.config).to_dict()  # read once (it may be a pipe); refused here in one line

    return script.life(start, lambda raw: train_seeds(args, name, out, raw),
                       at_once=lambda: ": the seeds' runs were ended")


def train_seeds(args, name: str, out: list[Path], raw: dict) -> int:
    rows = []
    jobs = [(raw, name, seed, args.summaries) for seed in args.seeds]
    with contextlib.ExitStack() as stack:  # a stop signal unwinds it: the pool ends the seeds' processes
        with stopping.starting_processes():  # a stop signal meanwhile is answered after
            pool = stack.enter_context(mp.get_context("spawn").Pool(args.processes, initializer=deaf_to_ctrl_c))
        for row in pool.starmap(run_seed, jobs):
            print(json.dumps(row), flush=True)
            rows.append(row)
    m = machine()
    machine_text = f"{m['cpu']}, {m['cores']} cores, torch {m['torch']} on the CPU"
    code = describe_tree(ROOT)
    report = {"config": args.config, "machine": machine_text, "commit": code["commit"],
              "command": f"python tools/learning.py --config {args.config} --seeds {' '.join(map(str, args.seeds))}"
                         + (f" --processes {args.processes}" if args.processes > 1 else ""),
              "runs": rows}
    side_by_side = f"; {args.processes} runs side by side" if args.processes > 1 else ""
    lines = [f"# Learning: {args.config}", "", f"Command: `{report['command']}`  ",
             f"Code: {code['label']}  ", f"Machine: {machine_text}{side_by_side}", "",
             "| seed | env steps | final reward | mean of last 5 updates | best update | final success | wall s |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        success = "-" if r["final_success"] is None else f"{r['final_success']:.3f}"
        lines.append(f"| {r['seed']} | {r['steps']} | {r['final_reward']:.3f} | {r['last5_reward']:.3f} | "
                     f"{r['best_reward']:.3f} | {success} | {r['wall_s']:.1f} |")
    life.write_out({out[0]: json.dumps(report, indent=2) + "\n", out[1]: "\n".join(lines) + "\n"})
    return 0


if __name__ == "__main__":
    script.run(main)
