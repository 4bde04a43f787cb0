"""A minibatch step of the update: model.py and optimizer.py of a git ref against the working tree's, in one process.

    python tools/speed/update_step.py --against HEAD~1 --config configs/cartpole_masked.yaml \\
        --config configs/poc_memory_env.yaml

For each config, collects one rollout with the trainer (one torch thread), then takes the same
minibatch steps (the config's epochs and minibatches, the same order) on each side's model (the same
weights), stepped by that side's AdamW, alternating the sides --repeats times.
Each step is timed in its parts: the forward pass and loss, zero_grad and backward, the gradient
clipping, the optimiser's step. The old side clips as the trainer did before AdamW.clip_grad_norm
(torch.nn.utils.clip_grad_norm_ over the parameters) when its AdamW has none. Medians over the
repeats of each part's microseconds per step. Before the clock starts, both sides take the first
minibatch step from the same weights and must end it with the same parameters (to 1e-6: a matrix
product over other rows, or the clipping scale, may round differently; over many steps Adam's
normalised steps let such roundings grow, so the sides are not compared at the end). In one
process the machine's drift hits both sides alike. The ref's two files are imported beside the working tree's other modules, so they must
use their interfaces.
Writes results/speed/update_step.md and .json.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import load_snapshot, machine  # noqa: E402
from tools.speed.at_ref import module_at, parse  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402

PARTS = ("forward", "backward", "clip", "step")


def measure(config_path: str, modules: dict, repeats: int) -> dict:
    import torch
    from config import load_config
    from losses import ppo_loss
    from summaries import PhaseTimes
    from trainer import Trainer
    config = load_config(ROOT / config_path, ["torch_threads=1", "evaluation.interval=0"])
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(config, "update_step", summaries_dir=folder, models_dir=folder, verbose=False)
        try:
            trainer.collect(PhaseTimes())
            trainer.advantages()
            torch.manual_seed(0)
            batches = [mb for _ in range(config.epochs) for mb in trainer.buffer.minibatches(config.n_mini_batch)]
        finally:
            trainer.close()
    models = {}
    for side, (model_module, _) in modules.items():
        models[side] = model_module.ActorCritic(
            trainer.spaces.observation, trainer.spaces.action_space, config.hidden_layer_size, config.recurrence,
            config.vector_encoder_size, config.initialization)
        models[side].load_state_dict(trainer.model.state_dict())
    optimizers = {side: module.AdamW(models[side].parameters(), lr=3e-4) for side, (_, module) in modules.items()}

    def clip(side: str) -> torch.Tensor:
        if hasattr(optimizers[side], "clip_grad_norm"):
            return optimizers[side].clip_grad_norm(config.max_grad_norm)
        return torch.nn.utils.clip_grad_norm_(models[side].parameters(), config.max_grad_norm, foreach=True)

    def update(side: str, steps: list) -> dict:
        """Minibatch steps -> each part's microseconds per step."""
        model, optimizer, spent = models[side], optimizers[side], dict.fromkeys(PARTS, 0.0)
        for mb in steps:
            start = time.perf_counter()
            out = model.evaluate(mb.obs, mb.states, mb.actions, mb.action_mask, mb.mask, mb.previous, mb.burn_in)
            loss = ppo_loss(out, mb, 0.2, 1e-3, config.value_loss_coefficient).total
            forward = time.perf_counter()
            optimizer.zero_grad()
            loss.backward()
            backward = time.perf_counter()
            clip(side)
            clipped = time.perf_counter()
            optimizer.step()
            stepped = time.perf_counter()
            for part, (a, b) in zip(PARTS, ((start, forward), (forward, backward), (backward, clipped),
                                            (clipped, stepped))):
                spent[part] += (b - a) * 1e6 / len(steps)
        return spent

    for side in modules:
        update(side, batches[:1])
    same = all(torch.allclose(a, b, rtol=0, atol=1e-6)
               for a, b in zip(models["old"].parameters(), models["new"].parameters()))

    times = {side: {part: [] for part in PARTS} for side in modules}
    for _ in range(repeats):
        for side in modules:  # alternated
            for part, us in update(side, batches).items():
                times[side][part].append(us)
    medians = {side: {part: statistics.median(v) for part, v in parts.items()} for side, parts in times.items()}
    for side in medians:
        medians[side]["total"] = statistics.median(
            sum(times[side][part][i] for part in PARTS) for i in range(repeats))
    return {"config": config_path, "minibatch_steps": len(batches), "same_parameters": same,
            "us_per_step": times, "medians": medians}


def main() -> int:
    args, commit = parse(__doc__, "model.py and optimizer.py are")
    import model
    import optimizer
    before = load_snapshot()
    with tempfile.TemporaryDirectory() as folder:
        modules = {"old": (module_at("model", commit, Path(folder)), module_at("optimizer", commit, Path(folder))),
                   "new": (model, optimizer)}
        rows = [measure(c, modules, args.repeats) for c in args.config]
    load = load_snapshot(before)
    ref = commit[:7]
    report = {"command": command(), "machine": machine(), "against": ref, "repeats": args.repeats, "load": load,
              "rows": rows}
    lines = ["# A minibatch step of the update, model.py and optimizer.py against " + ref, "",
             f"`{report['command']}` on {report['machine']['cpu']}, one torch thread; {load['summary']}. "
             f"Alternated, median of {args.repeats} passes a side over one rollout's minibatch steps, in one "
             "process; microseconds per minibatch step.", ""]
    body = []
    for r in rows:
        old, new = r["medians"]["old"], r["medians"]["new"]
        for part in (*PARTS, "total"):
            body.append([r["config"], part, f"{old[part]:.0f}", f"{new[part]:.0f}", f"{new[part] / old[part]:.3f}",
                         "yes" if r["same_parameters"] else "NO"])
    lines += table(["config", "part", ref, "working tree", "new / old", "same first step"], "llrrrl", body)
    write("update_step", report, lines)
    return 0 if all(r["same_parameters"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
