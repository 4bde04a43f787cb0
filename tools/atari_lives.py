"""What a lost life does in Breakout: this repository's environment against ale-py's AtariVectorEnv.

    python tools/atari_lives.py --games 8

CleanRL's setting (its EpisodicLifeEnv and FireResetEnv, configs/breakout_noframeskip.yaml) ends the
training episode at a lost life but not the game: the game goes on with one life fewer, and FIRE is
pressed so the ball is in play again. For each side, seeded games of uniform random actions are
stepped until their first lost life (a step that reports terminated while the game had lives left),
and the next step (NOOP; ours: the reset that follows a training episode's end) is read: how many
lives the game has then, and whether the emulator's episode frame counter started again (a new
game). Then NOOP is pressed up to IDLE_STEPS times: a ball in play is missed by a paddle that does
not move and costs a life, a ball never served costs nothing. Sides: ours (environments/atari.py),
AtariVectorEnv with episodic_life (its documented counterpart), and AtariVectorEnv with
life_loss_info (terminated at a lost life, no reset). Writes results/atari/lives.md and .json.
Environment stepping only; a few seconds of one core.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent  # the repository root
sys.path.insert(0, str(ROOT))  # its modules, and the other tools as tools.<name>

from config import load_config  # noqa: E402

MAX_STEPS = 5000  # a random Breakout game loses its first life within a few hundred steps
IDLE_STEPS = 300  # NOOPs after the lost life: a served ball is missed well within them
NOOP = 0


def ours(seed: int) -> dict:
    """Our environment as configs/breakout_noframeskip.yaml makes it: lives from the emulator."""
    env = load_config(ROOT / "configs/breakout_noframeskip.yaml").environment.make()
    ale = env.unwrapped.ale
    try:
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        for step in range(MAX_STEPS):
            lives = ale.lives()
            _, _, terminated, truncated, _ = env.step(int(rng.integers(4)))
            if terminated and ale.lives() > 0:
                frame = ale.getEpisodeFrameNumber()
                env.reset()  # the trainer's autoreset after a training episode's end: the game goes on
                after, new_game = ale.lives(), ale.getEpisodeFrameNumber() < frame
                for _ in range(IDLE_STEPS):
                    _, _, terminated, truncated, _ = env.step(NOOP)
                    if terminated or truncated:
                        break
                return {"step": step, "lives_before": lives, "lives_after": after, "new_game": new_game,
                        "ball_lost_idle": ale.lives() < after}
            if terminated or truncated:
                return {"step": step, "lives_before": lives, "lives_after": None, "new_game": None}
    finally:
        env.close()
    return {"step": None}


def vector(seed: int, **settings) -> dict:
    """One AtariVectorEnv game in CleanRL's other settings, autoreset on the next step (its default)."""
    import ale_py
    import gymnasium as gym
    from ale_py.vector_env import AtariVectorEnv
    gym.register_envs(ale_py)
    env = AtariVectorEnv("breakout", 1, num_threads=1, stack_num=1, noop_max=30, frameskip=4,
                         repeat_action_probability=0.0, use_fire_reset=True, reward_clipping=False, **settings)
    try:
        _, info = env.reset(seed=np.array([seed]))
        rng = np.random.default_rng(seed)
        for step in range(MAX_STEPS):
            lives = int(info["lives"][0])
            _, _, terminated, truncated, info = env.step(rng.integers(4, size=1))
            if terminated[0] and lives > 1:
                frame = int(info["episode_frame_number"][0])
                _, _, _, _, info = env.step(np.array([NOOP]))  # the step after the lost life: no FIRE from us
                after, new_game = int(info["lives"][0]), int(info["episode_frame_number"][0]) < frame
                for _ in range(IDLE_STEPS):
                    _, _, terminated, truncated, info = env.step(np.array([NOOP]))
                    if terminated[0] or truncated[0]:
                        break
                return {"step": step, "lives_before": lives, "lives_after": after, "new_game": new_game,
                        "ball_lost_idle": int(info["lives"][0]) < after}
            if terminated[0] or truncated[0]:
                return {"step": step, "lives_before": lives, "lives_after": None, "new_game": None}
    finally:
        env.close()
    return {"step": None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=5)
    args = parser.parse_args(argv)
    sides = {"ours (episodic_life, fire_reset)": ours,
             "AtariVectorEnv, episodic_life=True": lambda s: vector(s, episodic_life=True),
             "AtariVectorEnv, life_loss_info=True": lambda s: vector(s, episodic_life=False, life_loss_info=True)}
    rows = {name: [side(seed) for seed in range(args.games)] for name, side in sides.items()}
    import ale_py
    command = shlex.join(["python", "tools/atari_lives.py", *(argv if argv is not None else sys.argv[1:])])
    report = {"command": command, "ale_py": ale_py.__version__, "games": args.games, "rows": rows}
    out = ROOT / "results/atari/lives"
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")

    def cell(games: list[dict], key: str) -> str:
        return ", ".join("-" if g.get(key) is None else str(g[key]).lower() for g in games)

    lines = ["# Breakout after a lost life: ours against ale-py's AtariVectorEnv", "",
             f"`{command}`, ale-py {ale_py.__version__}; seeds 0..{args.games - 1}, uniform random actions, "
             "each game stepped to its first lost life, then one NOOP step more (ours: the trainer's reset after "
             "the training episode's end instead, which steps NOOP, FIRE, RIGHT itself).", "",
             "| side | lives before, per game | lives after | a new game (episode frame counter restarted) | "
             f"a life lost in {IDLE_STEPS} NOOPs after (the ball was served) |",
             "|---|---|---|---|---|",
             *(f"| {name} | {cell(g, 'lives_before')} | {cell(g, 'lives_after')} | {cell(g, 'new_game')} | "
               f"{cell(g, 'ball_lost_idle')} |" for name, g in rows.items())]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
