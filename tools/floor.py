"""How fast training could be if the loop cost nothing beyond the model's own calls.

    python tools/floor.py --config configs/cartpole_masked.yaml

Builds the trainer for a config, trains two updates (so the buffer holds real
episodes), then times per update, with the thread counts training uses:

- env: the same workers stepping T times on random actions (the env-only ceiling);
- act: T calls of model.act on W rows, nothing else (the rollout's inference floor);
- forward+backward: model.evaluate and a backward pass on every minibatch of
  an update (epochs x minibatches), pre-gathered, with no loss terms and no
  optimizer: the model's own arithmetic in the update;
- and the trainer's own phases for one update, measured the same way.

The sum of the first three is a floor for this model, these hyperparameters and
this machine: what training would cost if everything else were free. The output
is a markdown table (and a JSON beside it with --out).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

import torch  # noqa: E402

from tools.benchmark import machine, random_actions  # noqa: E402
from config import load_config  # noqa: E402
from trainer import PhaseTimes, Trainer  # noqa: E402


def timed(function, repeats: int) -> float:
    """Median wall seconds of `repeats` calls."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--repeats", type=int, default=7, help="median over this many updates' worth of each")
    parser.add_argument("--out", help="write OUT.md and OUT.json")
    args = parser.parse_args()

    config = load_config(ROOT / args.config, args.set)
    W, T = config.n_workers, config.worker_steps
    trainer = Trainer(config, run_id="floor", summaries_dir="/tmp/floor_summaries", models_dir="/tmp/floor_models",
                      verbose=False)
    for _ in range(2):
        trainer.one_update()
    model, envs, buffer, device = trainer.model, trainer.envs, trainer.buffer, trainer.device

    # the trainer's own phases of one update (the same code train.py runs)
    phases = []
    for _ in range(args.repeats):
        log = trainer.one_update()
        phases.append(log.times)
    trainer_ms = {f.name: 1e3 * statistics.median(getattr(p, f.name) for p in phases)
                  for f in dataclasses.fields(PhaseTimes)}

    # env: random actions, the same workers, T steps
    actions = random_actions(envs.spaces.action_space, W, T)  # (T, W, k)

    def env_only():
        for a in actions:
            envs.step(a)

    # act: T calls on W rows, the state carried, nothing stored
    obs = torch.from_numpy(trainer.normalizers.observation(trainer.obs, update=False).copy()).to(device)

    def act_only():
        state = trainer.state
        for _ in range(T):
            state = model.act(obs, state, previous=trainer.previous).state

    # forward+backward: every minibatch of one update, gathered beforehand
    batches = [mb for _ in range(config.epochs) for mb in buffer.minibatches(config.n_mini_batch)]

    def forward_backward():
        for mb in batches:
            out = model.evaluate(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask, mb.previous, mb.burn_in)
            (out.log_probs.sum() + out.values.sum() + out.entropy.sum()).backward()
        model.zero_grad(set_to_none=True)

    env_ms = 1e3 * timed(env_only, args.repeats)
    act_ms = 1e3 * timed(act_only, args.repeats)
    fb_ms = 1e3 * timed(forward_backward, args.repeats)
    trainer.close()

    steps = W * T
    floor_ms = env_ms + act_ms + fb_ms
    trainer_total = sum(trainer_ms.values())
    report = {"config": args.config, "overrides": args.set, "machine": machine(),
              "threads": trainer.threads, "steps_per_update": steps,
              "floor_ms": {"env": env_ms, "act": act_ms, "forward_backward": fb_ms, "total": floor_ms},
              "trainer_ms": {**trainer_ms, "total": trainer_total},
              "floor_steps_per_second": steps / floor_ms * 1e3,
              "trainer_steps_per_second": steps / trainer_total * 1e3,
              "env_only_steps_per_second": steps / env_ms * 1e3}
    m = report["machine"]
    command = ("python tools/floor.py --config " + args.config + "".join(f" --set {s}" for s in args.set)
               + (f" --repeats {args.repeats}" if args.repeats != 7 else "") + (f" --out {args.out}" if args.out else ""))
    lines = [
        f"# Floor: {args.config}", "",
        f"Command: `{command}`  ",
        f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} on the CPU "
        f"({trainer.threads} torch thread(s) throughout); "
        f"median of {args.repeats} updates' worth of each", "",
        "| per update of " + f"{W} x {T} steps | model calls and env steps only (ms) | the trainer (ms) |",
        "|---|---:|---:|",
        f"| env stepping (random actions / the rollout's) | {env_ms:.1f} | {trainer_ms['env']:.1f} |",
        f"| policy during the rollout ({T} act calls / collect minus env stepping) | {act_ms:.1f} | "
        f"{trainer_ms['inference']:.1f} |",
        f"| buffer (GAE, sequence index) | - | {trainer_ms['buffer']:.1f} |",
        f"| update ({len(batches)} minibatch forward+backward passes / the PPO epochs) | {fb_ms:.1f} | "
        f"{trainer_ms['update']:.1f} |",
        f"| total | {floor_ms:.1f} | {trainer_total:.1f} |",
        f"| steps/s | {report['floor_steps_per_second']:.0f} | {report['trainer_steps_per_second']:.0f} |",
        f"| share of the env-only speed ({report['env_only_steps_per_second']:.0f} steps/s) | "
        f"{100 * report['floor_steps_per_second'] / report['env_only_steps_per_second']:.1f}% | "
        f"{100 * report['trainer_steps_per_second'] / report['env_only_steps_per_second']:.1f}% |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).with_suffix(".md").write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
