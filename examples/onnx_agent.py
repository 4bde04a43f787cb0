"""Plays and scores episodes of an exported agent with ONNX Runtime, numpy and gymnasium alone, without torch:
the loop another program (in any language) writes around the graph. docs/export.md describes its inputs and
outputs. The environments come from this repository's builders, which import no torch, made and seeded as
enjoy.py makes them: the same seed gives the episodes `enjoy.py --deterministic` plays.

    python export.py --model models/poc_memory_env.pt --out poc.onnx
    python examples/onnx_agent.py --model poc.onnx --episodes 10"""
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's environment builders
from config import MAX_EPISODES, SEEDS, ConfigError, EnvironmentConfig, EvaluationConfig  # noqa: E402
from enjoy import print_episode  # noqa: E402
from environments import HELD_OUT, spaces_of  # noqa: E402
from plumbing import script  # noqa: E402
from plumbing.cli import ArgumentParser, number, require  # noqa: E402
from plumbing.files import kind, reason  # noqa: E402
from spaces import env_actions  # noqa: E402
from worker import environment_seeds  # noqa: E402

DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(uint8)": np.uint8,
          "tensor(int64)": np.int64, "tensor(bool)": np.bool_}


def load(path: str):
    """(the graph, its training config) of an .onnx file export.py wrote; ConfigError in one line if it is not."""
    require("onnxruntime")
    import onnxruntime
    if (what := kind(path)) != "a file":
        raise ConfigError(f"--model {path} is {what}: give the .onnx file export.py wrote")
    try:
        graph = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        return graph, json.loads(graph.get_modelmeta().custom_metadata_map["config"])
    except Exception as error:  # ONNX Runtime's own types; a graph without export.py's metadata
        raise ConfigError(f"--model {path} is not an ONNX graph written by export.py ({reason(error, 100)}): "
                          "export a checkpoint with `python export.py --model X.pt --out X.onnx`") from None


def check_fits(graph, path: str, environment: EnvironmentConfig, spaces) -> int:
    """The state size S, once the graph's inputs and outputs fit its metadata's environment; else ConfigError."""
    def row(shape, dtype) -> str:  # "(3,) float32" from numpy's dtype or ONNX Runtime's type ("tensor(float)")
        dtype = DTYPES.get(dtype, dtype)
        return f"{tuple(shape)} {dtype if isinstance(dtype, str) else np.dtype(dtype).name}"
    declared = {node.name: row(node.shape[1:], node.type) for node in (*graph.get_inputs(), *graph.get_outputs())}
    obs, action = spaces.observation, spaces.action
    S = graph.get_modelmeta().custom_metadata_map.get("state_size", "")
    needed = {"obs": row(obs.shape, obs.dtype), "state": row([int(S) if S.isdecimal() else S], np.float32),
              "action": row([action.size], action.dtype), "params": row([action.mask_size or action.size], np.float32),
              "action_mask": row([action.mask_size], np.bool_) if spaces.masked else None,
              **({"previous_action": row([action.size], action.dtype)} if "previous_action" in declared else {})}
    for name, wanted in needed.items():
        if declared.get(name) != wanted:
            raise ConfigError(f"--model {path}: its graph's {name} is {declared.get(name) or 'absent'} per row, where "
                              f"its metadata ({environment.name or environment.type}, state size {S}) needs "
                              f"{wanted or 'none'}: a graph of another environment, or its metadata edited")
    return int(S)


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Exit codes: 0 played, 2 refused (bad "
                            f"flag or model), {script.STOPPED}.")
    parser.add_argument("--model", required=True, help="an .onnx file written by export.py")
    parser.add_argument("--episodes", type=number(int, 1, MAX_EPISODES), default=10, help="episodes to run (10)")
    parser.add_argument("--seed", type=number(int, 0, SEEDS - 1),
                        help="as enjoy.py's (default: the config's evaluation.seed + 1)")

    def start():
        args = parser.parse_args(argv)
        graph, config = load(args.model)  # the training config, as a checkpoint keeps it
        try:
            environment = EnvironmentConfig(**config["environment"]).for_evaluation()
            evaluation = EvaluationConfig(**config["evaluation"])
        except (KeyError, TypeError) as error:
            raise ConfigError(f"--model {args.model}: its config is not one this checkout reads "
                              f"({reason(error, 100)})") from None
        seed = evaluation.fresh_seed if args.seed is None else args.seed
        # As enjoy.py: W environments seeded in the held-out half of the seeds, a fixed quota of episodes each.
        W = max(1, min(config["n_workers"], args.episodes))
        envs = [environment.make(max_steps=evaluation.max_steps) for _ in range(W)]
        return graph, envs, check_fits(graph, args.model, environment, spaces_of(envs[0])), args.episodes, seed
    return script.life(start, lambda started: play(*started))


def play(graph, envs: list, S: int, episodes: int, seed: int) -> int:
    inputs = {i.name: i for i in graph.get_inputs()}  # obs, state, episode_start, [previous_*], [action_mask]
    W = len(envs)
    quota = [episodes // W + (w < episodes % W) for w in range(W)]
    obs, infos = map(list, zip(*(env.reset(seed=HELD_OUT + s) for env, s in zip(envs, environment_seeds(seed, W)))))

    # The recurrent state: one row of S float32 per environment, zeros at the start, then what the graph returns.
    state = np.zeros((W, S), np.float32)
    episode_start = np.ones(W, dtype=bool)  # the graph resets a row's state (as training did) where this is True
    action = np.zeros((W, *inputs["previous_action"].shape[1:]), DTYPES[inputs["previous_action"].type]) \
        if "previous_action" in inputs else None
    reward = np.zeros(W, np.float32)
    returns = []
    while len(returns) < episodes:
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
                    print_episode(len(returns), stats)
                obs[w], infos[w] = env.reset()
    for env in envs:
        env.close()
    print(f"{len(returns)} episodes: return {np.mean(returns):.3f} +- {np.std(returns):.3f}")
    return 0


if __name__ == "__main__":
    script.begin(__name__)
    script.run(main)
