"""Watches, records and scores a trained agent: `python enjoy.py --help` says how."""
from plumbing import script

script.begin(__name__)  # the imports below take a second

import importlib.util
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from config import MAX_EPISODES, SEEDS, Config
from plumbing.atomic import write_atomically
from plumbing.cli import ArgumentParser, check_output, failed, number
from plumbing.errors import ConfigError
from plumbing.files import reason


def parser() -> ArgumentParser:
    parser = ArgumentParser(description="Watch, record and score a trained agent.", epilog=(
        "The episodes run in parallel across the config's number of environments; --video and --render show the "
        "episodes scored. Every episode prints one line; a summary follows. Exit codes: 0 done, 1 the video could "
        f"not be written, 2 refused (bad flag or file), {script.STOPPED}."))
    add = parser.add_argument
    add("--model", metavar="PATH", required=True, help="a checkpoint written by train.py (models/<run-id>.pt)")
    add("--episodes", type=number(int, 1, MAX_EPISODES), default=10, help="episodes to run (default: 10)")
    add("--seed", type=number(int, 0, SEEDS - 1), help="evaluation seed of the environments (disjoint from any "
        "training seed) and of the sampled actions: the same command gives the same scores. Default: the "
        "checkpoint's evaluation.seed + 1, episodes its run's evaluations never played (docs/config.md)")
    add("--deterministic", action="store_true", help="take the most probable action, not a sample")
    add("--training-levels", action="store_true", help="play the levels training drew from (the config's "
        "environment section without its evaluation_kwargs / evaluation_reset_params: MiniGrid's seed_pool, Memory "
        "Gym's training seeds), not held-out ones: beside the default score, the generalisation gap")
    add("--max-steps", type=number(int, 0, 2 ** 31 - 1), help="cut an episode at this many steps, scored as it "
        "stood (a line says so); 0: the environment's time limit, else 100,000. Default: the config's "
        "evaluation.max_steps")
    add("--video", metavar="PATH", type=Path, help="record the episodes to a .gif (Pillow) or .mp4 (needs the video "
        "extra: pip install -r requirements-video.txt); an existing file is refused. Every frame is held in memory "
        "until the file is written (a MiniGrid frame takes 0.7 MB): record a few episodes")
    add("--overwrite", action="store_true", help="let --video replace an existing file")
    add("--render", action="store_true", help="show the episodes in a window (needs a display; its frames are held "
        "as --video's)")
    return parser


def record(agent, episodes: int, seed: int = 0, deterministic: bool = False, on_episode=None,
           max_steps: int | None = None):
    """The episodes evaluate() plays, filmed: (stats, frames), the frames in the order the episodes ended."""
    from evaluation import evaluate
    results = evaluate(agent, episodes, seed, deterministic, on_episode=on_episode, max_steps=max_steps, filmed=True)
    return results, [_stamp(frame, t) for stats in results for t, frame in enumerate(stats.pop("frames"))]


def _stamp(frame: np.ndarray, t: int) -> np.ndarray:
    """A step counter bar along the bottom: GIF writers merge identical frames, which would hide frozen steps."""
    frame = np.array(frame, dtype=np.uint8, copy=True)
    frame[-3:] = 0
    frame[-3:, :3 * t] = 255
    return frame


def write_video(path: Path, frames: list[np.ndarray], fps: int = 8, overwrite: bool = False) -> None:
    """A .gif with Pillow, else an .mp4 with imageio's ffmpeg (check_options checked both), written atomically;
    without overwrite, never over a file, even one that appeared meanwhile."""
    def write(tmp: Path) -> None:
        if tmp.suffix.lower() == ".gif":
            from PIL import Image
            images = [Image.fromarray(f) for f in frames]
            images[0].save(tmp, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
            return
        import imageio.v2 as imageio
        h, w = frames[0].shape[:2]
        padded = [np.pad(f, ((0, h % 2), (0, w % 2), (0, 0))) for f in frames]  # h264 wants even sides
        imageio.mimwrite(tmp, padded, fps=fps, codec="libx264", macro_block_size=1)
    write_atomically(path, write, keep_suffix=True, replace=overwrite)


def show(pygame, frames: list[np.ndarray], fps: int = 8) -> None:
    h, w = frames[0].shape[:2]
    screen = pygame.display.set_mode((w * 2, h * 2))
    clock = pygame.time.Clock()
    for frame in frames:
        pygame.event.pump()
        surface = pygame.surfarray.make_surface(frame.swapaxes(0, 1))
        screen.blit(pygame.transform.scale(surface, (w * 2, h * 2)), (0, 0))
        pygame.display.flip()
        clock.tick(fps)
    pygame.quit()


def check_options(args):
    """Refuses a video or a window that could not be made, before anything runs; the pygame of a window or None."""
    video = args.video
    if args.overwrite and video is None:
        raise ConfigError("--overwrite is for --video FILE: nothing else is written")
    if video is not None:
        check_output("--video", [video], args.overwrite, (".gif", ".mp4"), "run.gif", folder_made=False)
        if video.suffix.lower() == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
            raise ConfigError("writing .mp4 needs the video extra: pip install -r requirements-video.txt "
                              "(or use a .gif)")
    if not args.render:
        return None
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):  # refused beside --video too
        hint = "drop it, --video records the episodes" if video else "record the episodes with --video FILE.gif instead"
        raise ConfigError(f"--render needs a display and there is none here (no DISPLAY or WAYLAND_DISPLAY): {hint}")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    os.environ.setdefault("DBUS_SESSION_BUS_ADDRESS", "disabled:")  # else SDL may launch a bus that outlives us
    os.environ.setdefault("SDL_VIDEODRIVER", "x11" if os.environ.get("DISPLAY") else "wayland")
    import pygame
    try:
        pygame.display.init()
    except pygame.error as error:  # where SDL finds no window; a driver showing nothing is refused below
        raise ConfigError(f"--render: no window opens here ({error}): record the episodes with --video FILE.gif "
                          "instead") from None
    if pygame.display.get_driver() in ("dummy", "offscreen"):
        raise ConfigError(f"--render: SDL's video driver {pygame.display.get_driver()!r} shows no window: record "
                          "the episodes with --video FILE.gif instead")
    return pygame


def on_training_levels(config: Config, model: str) -> Config:
    """The config with its held-out levels replaced by training's; refused where the two are one set of levels."""
    environment = config.environment
    if not environment.has_evaluation_levels:
        raise ConfigError(f"--training-levels: {model}'s config has no evaluation_kwargs or evaluation_reset_params, "
                          "so its levels are its training seeds, which enjoy.py never plays")
    return replace(config, environment=replace(environment, evaluation_kwargs={}, evaluation_reset_params={}))


def main(argv=None) -> int:
    from agent import Agent
    from spaces import SpaceError

    def start():
        args = parser().parse_args(argv)
        window = check_options(args)
        agent = Agent.load(args.model)
        if args.training_levels:
            agent.config = on_training_levels(agent.config, args.model)
        if args.seed is None:  # not the episodes the run's own evaluations played (--help)
            args.seed = agent.config.evaluation.fresh_seed
        return agent, args, window
    return script.life(start, lambda started: play(*started), (SpaceError,))


def play(agent, args, window) -> int:
    from evaluation import evaluate, summary
    played = []

    def on_episode(i: int, stats: dict) -> None:
        played.append(stats)
        print_episode(i, stats)
    try:
        if args.video or window:
            results, frames = record(agent, args.episodes, args.seed, args.deterministic, on_episode, args.max_steps)
        else:
            results = evaluate(agent, args.episodes, args.seed, args.deterministic, on_episode=on_episode,
                               max_steps=args.max_steps)
    except KeyboardInterrupt:  # a stop signal: the scores of the episodes played so far, nothing written
        if played:
            print(f"{summary(played)} (stopped after {len(played)} of {args.episodes})", flush=True)
        raise
    code = 0
    if args.video:
        try:
            write_video(args.video, frames, overwrite=args.overwrite)
            print(f"wrote {args.video} ({len(frames)} frames)")
        except FileExistsError:
            code = failed(f"{args.video} appeared while the episodes ran: pass --overwrite to replace it", 1)
        except OSError as error:  # e.g. a full disk: the episodes' scores are still printed
            code = failed(f"could not write {args.video} ({reason(error)})", 1)
    if window:
        show(window, frames)
    print(summary(results))
    return code


def print_episode(i: int, stats: dict) -> None:
    success = f"  success {int(stats['success'])}" if "success" in stats else ""
    capped = "  cut at the step cap (--max-steps): scored as it stood" if stats.get("capped") else ""
    print(f"episode {i:4d}  return {stats['reward']:9.3f}  length {stats['length']:5d}{success}{capped}", flush=True)


if __name__ == "__main__":
    script.run(main)
