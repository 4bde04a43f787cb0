"""Plays and scores episodes of an exported agent with ONNX Runtime, numpy and gymnasium alone, without torch:
the loop another program (in any language) writes around the graph. docs/export.md describes its inputs and
outputs. The environments come from this repository's builders, which import no torch, made and seeded as
enjoy.py makes them: the same seed gives the episodes `enjoy.py --deterministic` plays.

    python export.py --model models/poc_memory_env.pt --out poc.onnx
    python examples/onnx_agent.py --model poc.onnx --episodes 10
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's environment builders
from config import EnvironmentConfig, EvaluationConfig  # noqa: E402
from environments import HELD_OUT  # noqa: E402
from spaces import env_actions  # noqa: E402
from worker import environment_seeds  # noqa: E402

DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(uint8)": np.uint8,
          "tensor(int64)": np.int64, "tensor(bool)": np.bool_}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="an .onnx file written by export.py")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, help="as enjoy.py's (default: the config's evaluation.seed + 1)")
    args = parser.parse_args()

    graph = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    metadata = graph.get_modelmeta().custom_metadata_map
    config = json.loads(metadata["config"])  # the training config, as a checkpoint keeps it
    environment = EnvironmentConfig(**config["environment"]).for_evaluation()
    evaluation = EvaluationConfig(**config["evaluation"])
    inputs = {i.name: i for i in graph.get_inputs()}  # obs, state, episode_start, [previous_*], [action_mask]
    seed = evaluation.fresh_seed if args.seed is None else args.seed

    # As enjoy.py: W environments seeded in the held-out half of the seeds, each playing a fixed quota of episodes.
    W = max(1, min(config["n_workers"], args.episodes))
    quota = [args.episodes // W + (w < args.episodes % W) for w in range(W)]
    envs = [environment.make(max_steps=evaluation.max_steps) for _ in range(W)]
    obs, infos = zip(*(env.reset(seed=HELD_OUT + s) for env, s in zip(envs, environment_seeds(seed, W))))
    obs, infos = list(obs), list(infos)

    # The recurrent state: one row of S float32 per environment, zeros at the start, then what the graph returns.
    state = np.zeros((W, int(metadata["state_size"])), np.float32)
    episode_start = np.ones(W, dtype=bool)  # the graph resets a row's state (as training did) where this is True
    action = np.zeros((W, *inputs["previous_action"].shape[1:]), DTYPES[inputs["previous_action"].type]) \
        if "previous_action" in inputs else None
    reward = np.zeros(W, np.float32)
    returns = []
    while len(returns) < args.episodes:
        feed = {"obs": np.stack(obs).astype(DTYPES[inputs["obs"].type]), "state": state,
                "episode_start": episode_start, "previous_action": action, "previous_reward": reward,
                "action_mask": np.stack([info.get("action_mask", ()) for info in infos]).astype(bool)}
        params, action, value, state = graph.run(None, {name: feed[name] for name in inputs})[:4]
        for w, env in enumerate(envs):
            # a Box action is clipped to the bounds for the environment; the graph takes it back unclipped
            step = env.step(env_actions(env.action_space, action[w:w + 1])[0])
            obs[w], reward[w], terminated, truncated, infos[w] = step
            episode_start[w] = terminated or truncated
            if episode_start[w]:
                stats = infos[w].get("episode")  # the scored episode's (an Atari life lost is not its end)
                if stats is not None and quota[w] > 0:
                    quota[w] -= 1
                    returns.append(stats["reward"])
                    success = f"  success {int(stats['success'])}" if "success" in stats else ""
                    capped = "  cut at the step cap (--max-steps): scored as it stood" if stats.get("capped") else ""
                    print(f"episode {len(returns):4d}  return {stats['reward']:9.3f}  length {stats['length']:5d}"
                          f"{success}{capped}", flush=True)
                obs[w], infos[w] = env.reset()
    for env in envs:
        env.close()
    print(f"{len(returns)} episodes: return {np.mean(returns):.3f} +- {np.std(returns):.3f}")


if __name__ == "__main__":
    main()
