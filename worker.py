"""W environments behind one step() call, stepped in the trainer's process or by worker processes that share
the step's arrays with it. Ended episodes are reset in place; a truncated one's final observation is kept."""
import contextlib
import math
import multiprocessing as mp
import signal
import traceback
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import wait

import gymnasium as gym
import numpy as np

from config import EnvironmentConfig
from environments import spaces_of
from plumbing import stopping
from plumbing.errors import WorkerError
from spaces import MASK_KEY, EnvSpaces, SpaceError, env_actions


@dataclass
class Step:
    """One vectorised step. The arrays are views of shared storage that the next step overwrites."""
    obs: np.ndarray  # (W, *obs_shape) the next step's observations (after autoreset)
    rewards: np.ndarray  # (W,) float32
    terminated: np.ndarray  # (W,) bool: the episode ended in a terminal state
    truncated: np.ndarray  # (W,) bool: the episode was cut (time limit); bootstrap from final_obs
    final_obs: np.ndarray  # (W, *obs_shape) last observation of truncated episodes; else stale
    episodes: list[dict]  # stats of the scored episodes that ended: reward, length[, success]
    episode_envs: list[int]  # the environment each of them ended in


def environment_seeds(seed: int, count: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(s) for s in rng.choice(2 ** 31 - 1, size=count, replace=False)]


class _Shared:
    """The step's arrays, allocated once: in shared memory for worker processes (ctx), else in this process's
    own (shared memory is a file, which a file-size limit or a full /dev/shm would refuse)."""

    def __init__(self, W: int, spaces: EnvSpaces, ctx=None):
        obs, actions, mask = spaces.observation, spaces.action, spaces.action.mask_size if spaces.masked else 0
        self.specs = {"obs": ((W, *obs.shape), obs.dtype), "final_obs": ((W, *obs.shape), obs.dtype),
                      "rewards": ((W,), np.float32), "terminated": ((W,), np.bool_), "truncated": ((W,), np.bool_),
                      "actions": ((W, actions.size), actions.dtype), "action_mask": ((W, mask), np.bool_)}
        new = bytearray if ctx is None else partial(ctx.RawArray, "b")
        self.raw = {name: new(max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize))
                    for name, (shape, dtype) in self.specs.items()}
        self.attach()

    def attach(self):
        for name, (shape, dtype) in self.specs.items():
            setattr(self, name, np.frombuffer(self.raw[name], dtype=dtype, count=int(np.prod(shape))).reshape(shape))
        self.floating = self.obs.dtype.kind == "f"  # observations that can hold NaN or inf

    def __getstate__(self):  # only the raw buffers travel to a worker; views are rebuilt there
        return {"specs": self.specs, "raw": self.raw}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.attach()


class _EnvFault(Exception):
    """Environment args[0] failed; the cause is what it raised."""


def _trace(error: BaseException) -> str:
    return "".join(traceback.format_exception(error)).rstrip()


def _failed(config: EnvironmentConfig, which: str, where: str, trace: str) -> WorkerError:
    return WorkerError(f"environment '{config.name or config.type}' {which} ({where}) failed:\n{trace}")


def make_probe(config: EnvironmentConfig, seed: int) -> tuple[gym.Env, EnvSpaces]:
    """One environment of the config, made here and reset with `seed`, and its spaces; VecEnv's environment 0."""
    env = config.make()
    try:
        return env, spaces_of(env, seed)
    except SpaceError:  # a space this project cannot use: refused as a config error
        raise
    except Exception as error:
        raise _failed(config, "#0", "in the trainer's process", _trace(error)) from None


def _store(shared: _Shared, w: int, obs, info: dict) -> None:
    shared.obs[w] = obs  # an observation of the wrong shape fails here
    if shared.action_mask.shape[1]:
        shared.action_mask[w] = info[MASK_KEY]


def _step_slice(envs, lo: int, shared: _Shared) -> list[tuple[int, dict]]:
    """Steps envs[i] as environment lo + i; returns the scored episodes that ended, with their environment."""
    actions = env_actions(envs[0].action_space, shared.actions[lo:lo + len(envs)])
    episodes = []
    for w, (env, action) in enumerate(zip(envs, actions), lo):
        try:
            obs, reward, term, trunc, info = env.step(action)
            if isinstance(reward, (str, bytes)):  # numpy would read '1.5' as a number
                raise TypeError(f"its reward is {reward!r}, a {type(reward).__name__}: rewards are numbers")
            shared.rewards[w], shared.terminated[w], shared.truncated[w] = reward, term, trunc
            if term or trunc:
                if trunc:
                    shared.final_obs[w] = obs
                if "episode" in info:
                    episodes.append((w, info["episode"]))
                obs, info = env.reset()
            _store(shared, w, obs, info)
        except Exception as error:
            raise _EnvFault(w) from error
    return episodes


def _run(envs, lo: int, shared: _Shared, command: str, argument=None):
    if command == "step":
        return _step_slice(envs, lo, shared)
    if command == "get_state":
        return [env.get_state() for env in envs]
    if command == "reset":
        for w, (env, seed) in enumerate(zip(envs, argument), lo):
            try:
                _store(shared, w, *env.reset(seed=seed))
            except Exception as error:
                raise _EnvFault(w) from error
        return None
    for env, state in zip(envs, argument):  # "set_state"
        env.set_state(state)


def _worker_main(conn, config: EnvironmentConfig, lo: int, seeds: list[int], shared: _Shared):
    for number in stopping.STOP_SIGNALS:  # the trainer stops the workers, after saving, which needs them
        signal.signal(number, signal.SIG_IGN)
    envs = []
    try:
        envs = [config.make() for _ in seeds]
        while (message := conn.recv())[0] != "close":
            conn.send(("ok", _run(envs, lo, shared, *message)))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the trainer is gone (it stopped, or was killed): just leave
    except Exception as error:
        fault = (error.args[0], _trace(error.__cause__)) if isinstance(error, _EnvFault) else (None, _trace(error))
        with contextlib.suppress(OSError):  # the trainer may be gone too
            conn.send(("fault", fault))
    finally:
        for env in envs:
            env.close()


class VecEnv:
    def __init__(self, config: EnvironmentConfig, seeds: list[int], processes: int = 0, probe: gym.Env | None = None,
                 spaces: EnvSpaces | None = None):
        """probe, spaces: make_probe()'s, if already made (the probe becomes environment 0, or is closed)."""
        self.config = config
        self.seeds = [int(s) for s in seeds]
        if probe is None:
            probe, spaces = make_probe(config, self.seeds[0])
        self.spaces = spaces
        self.n = W = len(self.seeds)
        ctx = mp.get_context("forkserver")
        self._shared = _Shared(W, self.spaces, ctx if processes else None)
        self._envs, self._workers = [], []
        if processes == 0:
            self._envs = [probe] + [config.make() for _ in range(W - 1)]
            return
        probe.close()
        bounds = np.linspace(0, W, processes + 1).astype(int)
        try:
            with stopping.starting_processes():  # start-up data cut halfway would break a worker's pipe
                for p in range(processes):
                    lo, hi = int(bounds[p]), int(bounds[p + 1])
                    parent, child = ctx.Pipe()
                    process = ctx.Process(target=_worker_main, args=(child, config, lo, self.seeds[lo:hi],
                                                                     self._shared), daemon=True, name=f"env-worker-{p}")
                    self._workers.append((process, parent, lo, hi))
                    process.start()
                    child.close()
        except BaseException:  # e.g. Ctrl-C during start-up: no worker may outlive the trainer
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        return [process.pid for process, *_ in self._workers]

    def reset(self, seeds: list[int] | None = None) -> np.ndarray:
        """Resets each environment with its seed, or with new seeds (W) kept for later resets; obs (W, *obs_shape)."""
        if seeds is not None:
            self.seeds = [int(s) for s in seeds]
        self._each("reset", [self.seeds[lo:hi] for *_, lo, hi in self._workers] or [self.seeds])
        self._finite()
        return self._shared.obs

    def step(self, actions: np.ndarray) -> Step:
        """actions (W, k) stored rows (spaces.py) -> Step. Ended episodes are reset before returning."""
        self._shared.actions[:] = actions
        ended = [e for part in self._each("step") for e in part]
        self._finite()
        s = self._shared
        return Step(s.obs, s.rewards, s.terminated, s.truncated, s.final_obs, [stats for _, stats in ended],
                    [w for w, _ in ended])

    def _finite(self) -> None:
        """NaN or inf from an environment is named as its fault, not left to stop the run later as a non-finite loss."""
        s, W = self._shared, self.n
        total = float(s.rewards.sum())  # NaN or inf in any term makes it so (an overflow too: then looked at)
        if s.floating:
            total += float(s.obs.sum()) + (float(s.final_obs[s.truncated].sum()) if s.truncated.any() else 0.0)
        if math.isfinite(total):
            return
        bad = ~np.isfinite(s.rewards)  # (W,)
        if s.floating:
            bad |= ~np.isfinite(s.obs.reshape(W, -1)).all(axis=1)
            bad |= s.truncated & ~np.isfinite(s.final_obs.reshape(W, -1)).all(axis=1)
        if not bad.any():
            return
        w = int(np.flatnonzero(bad)[0])
        if not np.isfinite(s.rewards[w]):
            what = f"its reward is {s.rewards[w]} as float32"
        else:
            obs = s.obs[w] if not np.isfinite(s.obs[w]).all() else s.final_obs[w]
            at = tuple(int(i) for i in np.argwhere(~np.isfinite(obs))[0])
            what = f"its observation holds {obs[at]} at index {at}"
        where = next((f"in worker process {p}, pid {process.pid}" for p, (process, _, lo, hi) in
                      enumerate(self._workers) if lo <= w < hi), "in the trainer's process")
        self.close()
        raise _failed(self.config, f"#{w}", where, f"{what}: rewards and observations must be finite numbers")

    @property
    def action_mask(self) -> np.ndarray | None:
        """(W, A) the actions allowed at the current observations; None if the env masks nothing."""
        return self._shared.action_mask if self.spaces.masked else None

    def get_state(self) -> list[dict]:
        return [state for part in self._each("get_state") for state in part]

    def set_state(self, states: list[dict]) -> None:
        if len(states) != self.n:
            raise ValueError(f"{len(states)} environment states for {self.n} environments")
        self._each("set_state", [states[lo:hi] for *_, lo, hi in self._workers] or [states])

    def _each(self, command: str, arguments: list | None = None) -> list:
        """Runs a command on each slice of environments (one slice: all of them, in this process); the replies."""
        if self._envs:
            try:
                return [_run(self._envs, 0, self._shared, command, None if arguments is None else arguments[0])]
            except _EnvFault as fault:
                self.close()
                trace = _trace(fault.__cause__)
                raise _failed(self.config, f"#{fault.args[0]}", "in the trainer's process", trace) from None
        for p, (process, conn, _, _) in enumerate(self._workers):
            try:
                conn.send((command, None if arguments is None else arguments[p]))
            except OSError:  # broken pipe: the worker is gone
                self._died(p)
        replies = []
        for p, (process, conn, lo, hi) in enumerate(self._workers):
            if conn not in wait([conn, process.sentinel]):  # a killed worker is noticed at once
                self._died(p)
            try:
                status, payload = conn.recv()
            except (EOFError, OSError):
                self._died(p)
            if status == "fault":
                index, trace = payload
                self.close()
                raise _failed(self.config, f"#{index}" if index is not None else f"{lo}..{hi - 1}",
                              f"in worker process {p}, pid {process.pid}", trace)
            replies.append(payload)
        return replies

    def _died(self, p: int):
        process, _, lo, hi = self._workers[p]
        process.join(timeout=5)
        self.close()
        raise WorkerError(f"worker process {p} (pid {process.pid}, environments {lo}..{hi - 1}) died "
                          f"with exit code {process.exitcode}")

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []
        for process, conn, _, _ in self._workers:
            with contextlib.suppress(OSError):
                conn.send(("close", None))
        for process, conn, _, _ in self._workers:
            if process.pid is not None:
                process.join(timeout=5)
                if process.is_alive():
                    process.kill()
                    process.join()
            conn.close()
        self._workers = []
