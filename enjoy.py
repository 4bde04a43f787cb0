"""Watch, record and score a trained agent.

Usage:
  enjoy.py --model=<path> [options]
  enjoy.py --help

Options:
  --model=<path>     A checkpoint written by train.py (models/<run-id>.pt).
  --episodes=<n>     Episodes to run, at most 1,000,000 [default: 10].
  --seed=<s>         Evaluation seed of the environments (disjoint from any training seed) and of
                     the policy's sampled actions: the same command gives the same scores [default: 0].
  --deterministic    Take the most probable action instead of sampling.
  --max-steps=<n>    Cut an episode at n steps, scored as it stood (a line says so). Default: the
                     config's evaluation.max_steps, whose 0 is the environment's own time limit,
                     else 100,000: a policy that loops in an environment without one still ends.
  --video=<path>     Record the episodes to a .gif (Pillow) or .mp4 (needs the video extra:
                     pip install -r requirements-video.txt). An existing file is refused.
  --overwrite        Let --video replace an existing file.
  --render           Show the episodes in a window (needs a display; without one, record
                     them with --video instead).

Without --video or --render the episodes run in parallel across the config's
number of environments. Every episode prints one line (a progress bar on a terminal);
a summary follows. Exit codes: 0 done, 2 refused (bad flag or file), 130 / 143 stopped by
Ctrl-C / SIGTERM (at any moment, start-up included: one line, no traceback).
"""
from __future__ import annotations

import sys

import stopping

if __name__ == "__main__":
    stopping.leave_at_once_on_stop_signals()  # until main() takes over: nothing is open or running yet

import errno  # noqa: E402  (the imports below take about a second: a Ctrl-C among them is handled above)
import importlib.util  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from atomic import temporary_beside  # noqa: E402
from checkpoint import CheckpointError  # noqa: E402
from config import MAX_EPISODES, ConfigError, command_line, start_up_warnings  # noqa: E402

def record(agent, episodes: int, seed: int = 0, deterministic: bool = False, on_episode=None,
           max_steps: int | None = None):
    """Runs episodes one after another in one environment; returns (stats, frames).

    Frames: the first observation of each episode and one after every step, so an
    episode of length n gives n + 1 frames. Episodes are cut at the step cap, as evaluate() cuts them.
    """
    from evaluation import evaluation_environment, evaluation_seeds
    from spaces import MASK_KEY, env_actions
    torch.manual_seed(seed)  # the policy's sampled actions: the same command gives the same scores
    env = evaluation_environment(agent.config, max_steps).make(render_mode="rgb_array")
    results, frames = [], []
    try:
        for episode, env_seed in enumerate(evaluation_seeds(seed, episodes)):
            obs, info = env.reset(seed=env_seed)
            state, t, action_taken, reward, start = None, 0, None, None, True
            frames.append(_stamp(env.render(), t))
            while True:
                mask = info[MASK_KEY][None] if MASK_KEY in info else None
                step = agent.act(obs[None], state, np.full(1, start), deterministic, mask, action_taken, reward)
                state, action_taken = step.state, step.actions
                action = env_actions(env.action_space, step.actions.reshape(1, -1))[0]  # (1, k) row -> env's form
                obs, reward, terminated, truncated, info = env.step(action)
                reward = np.array([reward], dtype=np.float32)  # (1,): act() takes it back at the next step
                t += 1
                frames.append(_stamp(env.render(), t))
                start = terminated or truncated
                if start and "episode" not in info:  # a training episode ended inside this one (a lost life)
                    obs, info = env.reset()
                elif start:
                    results.append(info["episode"])
                    if on_episode:
                        on_episode(len(results), info["episode"])
                    break
    finally:
        env.close()
    return results, frames


def _stamp(frame: np.ndarray, t: int) -> np.ndarray:
    """A step counter bar along the bottom: shows time, and keeps consecutive frames
    distinct (GIF writers merge identical frames, which would hide frozen steps)."""
    frame = np.array(frame, dtype=np.uint8, copy=True)
    height, width = frame.shape[:2]
    frame[height - 3:, :] = 0
    frame[height - 3:, : min(width, 3 * t)] = 255
    return frame


def write_video(path: Path, frames: list[np.ndarray], fps: int = 8, overwrite: bool = False) -> None:
    """Writes to a temporary name beside `path` (atomic.py's rule, keeping the suffix the writer reads)
    and renames it: a failed write leaves no half file. Without overwrite, a file at `path` is never
    replaced, even one that appeared while the episodes ran: the temporary file is hard-linked to
    `path`, which fails if anything is there."""
    tmp = temporary_beside(path, keep_suffix=True)
    try:
        _write_frames(tmp, frames, fps)
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise FileExistsError(errno.EEXIST, "a file appeared there meanwhile; pass --overwrite to "
                                      "replace it", str(path)) from None
            except OSError as error:  # a file system without hard links: the check before the episodes stands
                if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP) or os.path.lexists(path):
                    raise
                os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_frames(path: Path, frames: list[np.ndarray], fps: int) -> None:
    if path.suffix.lower() == ".gif":
        from PIL import Image
        images = [Image.fromarray(f) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    elif path.suffix.lower() == ".mp4":
        try:
            import imageio.v2 as imageio
            import imageio_ffmpeg  # noqa: F401  (the ffmpeg binary imageio writes MP4 with)
        except ImportError:
            raise ConfigError("writing .mp4 needs the video extra: pip install -r requirements-video.txt "
                              "(or use a .gif)") from None
        # h264 wants even sides: pad by a row/column where needed
        h, w = frames[0].shape[:2]
        frames = [np.pad(f, ((0, h % 2), (0, w % 2), (0, 0))) for f in frames]
        imageio.mimwrite(path, frames, fps=fps, codec="libx264", macro_block_size=1)
    else:
        raise ConfigError(f"--video {path}: use a .gif or .mp4 file name")


def show(frames: list[np.ndarray], fps: int = 8) -> None:
    import pygame
    pygame.init()
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


def _options(args: dict) -> tuple[int, int, Path | None, bool, int | None]:
    """(episodes, seed, video path or None, show a window, step cap or None: the config's), every flag
    checked before anything runs.
    Nothing is written where the user did not ask: --render without a display is refused, not
    turned into a file of an invented name."""
    episodes, seed = args["--episodes"], args["--seed"]
    if not episodes.isdigit() or not 1 <= int(episodes) <= MAX_EPISODES:
        raise ConfigError(f"--episodes must be an integer from 1 to {MAX_EPISODES:,}, got {episodes!r}")
    if not seed.isdigit() or int(seed) >= 2 ** 32:
        raise ConfigError(f"--seed must be an integer in [0, 2**32), got {seed!r}")
    max_steps = args["--max-steps"]
    if max_steps is not None and (not max_steps.isdigit() or not 1 <= int(max_steps) < 2 ** 31):
        raise ConfigError(f"--max-steps must be an integer from 1 to 2**31 - 1, got {max_steps!r}")
    video = Path(args["--video"]) if args["--video"] else None
    if args["--overwrite"] and video is None:
        raise ConfigError("--overwrite is for --video FILE: nothing else is written")
    window = False
    if args["--render"]:
        window = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
        if not window and video is None:
            raise ConfigError("--render needs a display and there is none here (no DISPLAY or WAYLAND_DISPLAY): "
                              "record the episodes with --video FILE.gif instead")
    if video is not None:
        if video.suffix.lower() not in (".gif", ".mp4"):
            raise ConfigError(f"--video {video}: use a .gif or .mp4 file name")
        if video.is_dir() or not (video.parent.is_dir() and os.access(video.parent, os.W_OK)):
            raise ConfigError(f"--video {video}: {video.parent}/ is not a writable folder (or the path is a folder)")
        if os.path.lexists(video) and not args["--overwrite"]:
            raise ConfigError(f"--video {video} exists: choose another name, or pass --overwrite to replace it")
        if video.suffix.lower() == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
            raise ConfigError("writing .mp4 needs the video extra: pip install -r requirements-video.txt "
                              "(or use a .gif)")
    return int(episodes), int(seed), video, window, None if max_steps is None else int(max_steps)


def main(argv=None) -> int:
    from agent import Agent
    from spaces import SpaceError
    stopped = []  # the stop signal that ended the episodes, once one has come
    try:
        with start_up_warnings():  # a refusal is its one line alone; a start that succeeds shows them
            args = command_line(__doc__, argv)
            episodes, seed, video, window, max_steps = _options(args)
            agent = Agent.load(args["--model"])
        with stopping.raising(stopped):  # from here SIGINT and SIGTERM stop with KeyboardInterrupt
            return _episodes(agent, args, episodes, seed, video, window, max_steps)
    except (CheckpointError, ConfigError, SpaceError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return stopping.report(stopped)


def _episodes(agent, args: dict, episodes: int, seed: int, video: Path | None, window: bool,
              max_steps: int | None) -> int:
    """main()'s work once started: the episodes, then the video or the window, then the summary."""
    from evaluation import evaluate, summary
    with Progress(episodes) as progress:
        if video or window:
            results, frames = record(agent, episodes, seed, args["--deterministic"], progress.episode, max_steps)
        else:
            results = evaluate(agent, episodes, seed, args["--deterministic"], on_episode=progress.episode,
                               max_steps=max_steps)
    if video:
        try:
            write_video(video, frames, overwrite=args["--overwrite"])
        except OSError as error:  # e.g. a full disk: the episodes' scores are still printed below
            print(f"error: could not write {video} ({error.strerror or error})", file=sys.stderr)
            print(summary(results))
            return 1
        print(f"wrote {video} ({len(frames)} frames)")
    if window:
        show(frames)
    print(summary(results))
    return 0


class Progress:
    """A bar on a terminal, else one line per episode (as train.py does per update)."""

    def __init__(self, episodes: int):
        self.bar = None
        if sys.stdout.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=episodes, unit="episode", dynamic_ncols=True)

    def episode(self, i: int, stats: dict) -> None:
        success = f"  success {int(stats['success'])}" if "success" in stats else ""
        line = f"episode {i:4d}  return {stats['reward']:9.3f}  length {stats['length']:5d}{success}"
        if stats.get("capped"):
            line += "  cut at the step cap (--max-steps): scored as it stood"
        if self.bar is None:
            print(line, flush=True)
        elif stats.get("capped"):
            self.bar.write(line)
            self.bar.update(1)
        else:
            self.bar.set_postfix_str(line.split("  ", 1)[1], refresh=False)
            self.bar.update(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()


if __name__ == "__main__":
    sys.exit(main())
