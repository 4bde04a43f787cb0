"""The policy's share of a rollout step: model.py of a git ref against the working tree's, in one process.

    python tools/speed/rollout_step.py --against HEAD~1 --config configs/cartpole_masked.yaml \\
        --config configs/poc_memory_env.yaml

For each config, builds the model from both model.py files with the same weights and times 512
steps of what the trainer's rollout asks of it (act on W observations, the outputs read back to
the host, previous_input, reset_state and reset_previous at seeded episode ends), on one torch
thread under inference mode, alternating the two --repeats times; medians in microseconds per
step. Both must end in the same state. In one process the machine's drift hits both sides alike,
which whole-run benchmarks (tools/benchmark.py) cannot resolve below a few percent. The ref's
model.py is imported beside the working tree's other modules, so it must use their interfaces.
Writes results/speed/rollout_step.md and .json.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from tools.benchmark import machine  # noqa: E402
from tools.speed.at_ref import module_at, parse  # noqa: E402
from tools.speed.output import command, table, write  # noqa: E402

STEPS = 512


def measure(config_path: str, modules: dict, repeats: int) -> dict:
    import numpy as np
    import torch
    from config import load_config
    from environments import spaces_of
    config = load_config(ROOT / config_path)
    spaces = spaces_of(config.environment.make(), 0)
    W = config.n_workers
    models = {}
    for side, module in modules.items():
        torch.manual_seed(0)
        models[side] = module.ActorCritic(spaces.observation, spaces.action_space, config.hidden_layer_size,
                                          config.recurrence, config.vector_encoder_size, config.initialization)
    models["new"].load_state_dict(models["old"].state_dict())
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((STEPS, W, *spaces.observation.shape)).astype(spaces.observation.dtype)
    done = rng.random((STEPS, W)) < 0.03  # episode ends at about masked CartPole's rate
    rewards = np.zeros(W, np.float32)

    def rollout(model) -> torch.Tensor:
        state, previous = model.initial_state(W), torch.zeros(W, model.previous_size)
        torch.manual_seed(1)
        with torch.inference_mode():
            for t in range(STEPS):
                out = model.act(torch.from_numpy(obs[t]), state, previous=previous)
                out.actions.cpu().numpy(), out.log_probs.cpu(), out.values.cpu()  # what the buffer reads back
                previous = model.reset_previous(model.previous_input(out.actions, rewards), done[t])
                state = model.reset_state(out.state, done[t])
        return state

    same = torch.equal(rollout(models["old"]), rollout(models["new"]))
    times = {side: [] for side in models}
    for _ in range(repeats):
        for side, model in models.items():  # alternated
            start = time.perf_counter()
            rollout(model)
            times[side].append((time.perf_counter() - start) / STEPS * 1e6)
    return {"config": config_path, "workers": W, "same_final_state": same, "us_per_step": times,
            "old": statistics.median(times["old"]), "new": statistics.median(times["new"])}


def main() -> int:
    args, commit = parse(__doc__, "model.py is")
    import torch
    import model
    torch.set_num_threads(1)  # the rollout's thread count for vector observations (config.rollout_threads)
    with tempfile.TemporaryDirectory() as folder:
        modules = {"old": module_at("model", commit, Path(folder)), "new": model}
        rows = [measure(c, modules, args.repeats) for c in args.config]
    ref = commit[:7]
    report = {"command": command(), "machine": machine(), "against": ref, "repeats": args.repeats, "rows": rows}
    lines = ["# The policy's share of a rollout step, model.py against " + ref, "",
             f"`{report['command']}` on {report['machine']['cpu']}, one torch thread; {STEPS} steps per run, "
             f"alternated, median of {args.repeats} runs a side, in one process.", ""]
    lines += table(["config", "environments", f"{ref}, us/step", "working tree, us/step", "new / old", "same state"],
                   "lrrrrl", [[r["config"], str(r["workers"]), f"{r['old']:.1f}", f"{r['new']:.1f}",
                               f"{r['new'] / r['old']:.3f}", "yes" if r["same_final_state"] else "NO"]
                              for r in rows])
    write("rollout_step", report, lines)
    return 0 if all(r["same_final_state"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
