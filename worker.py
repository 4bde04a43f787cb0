"""Environment workers and the vectorised stepping interface.

W environments are stepped either in the trainer's own process (fastest for cheap
environments such as CartPole, where a process round trip costs more than the
step) or by P worker processes, each owning a contiguous slice of them. Worker
processes exchange nothing per step but a short command and its reply:
actions, observations, rewards and done flags live in shared memory. Finished
episodes are reset in place (autoreset), and the final observation of a
truncated episode is kept so that the trainer can bootstrap from it.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import signal
import traceback
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.connection import wait

import gymnasium as gym
import numpy as np

import stopping
from config import EnvironmentConfig
from environments import spaces_of
from spaces import MASK_KEY, EnvSpaces, env_actions


class WorkerError(RuntimeError):
    """An environment raised, or a worker process died."""


@dataclass
class Step:
    """What one vectorised step returns. The arrays are views of shared storage,
    overwritten by the next step: copy what you keep."""
    obs: np.ndarray  # (W, *obs_shape) first observation of the next step (after autoreset)
    rewards: np.ndarray  # (W,) float32
    terminated: np.ndarray  # (W,) bool: the episode ended in a terminal state
    truncated: np.ndarray  # (W,) bool: the episode was cut (time limit); bootstrap from final_obs
    final_obs: np.ndarray  # (W, *obs_shape) last observation of truncated episodes; else stale
    episodes: list[dict]  # stats of the episodes that ended and were scored: reward, length[, success]
    episode_envs: list[int]  # the environment each of them ended in (a training episode may end unscored:
    # environments.CONTINUES)


def environment_seeds(seed: int, count: int) -> list[int]:
    """Distinct seeds for `count` environments, derived from the run seed.

    Each environment is reset once with its own seed and keeps its own generator
    afterwards, so no two environments replay the same episodes.
    """
    rng = np.random.default_rng(seed)
    return [int(s) for s in rng.choice(2 ** 31 - 1, size=count, replace=False)]


class _Shared:
    """The step's arrays in shared memory, allocated once."""

    def __init__(self, W: int, spaces: EnvSpaces, ctx):
        obs, actions = spaces.observation, spaces.action
        self.specs = {
            "obs": ((W, *obs.shape), obs.dtype),
            "final_obs": ((W, *obs.shape), obs.dtype),
            "rewards": ((W,), np.float32),
            "terminated": ((W,), np.bool_),
            "truncated": ((W,), np.bool_),
            "actions": ((W, actions.size), actions.dtype),
            "action_mask": ((W, actions.mask_size if spaces.masked else 0), np.bool_),
        }
        self.raw = {name: ctx.RawArray("b", max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize))
                    for name, (shape, dtype) in self.specs.items()}
        self.attach()

    def attach(self):
        for name, (shape, dtype) in self.specs.items():
            setattr(self, name, np.frombuffer(self.raw[name], dtype=dtype, count=int(np.prod(shape))).reshape(shape))

    def __getstate__(self):  # only the raw buffers travel to a worker; views are rebuilt there
        return {"specs": self.specs, "raw": self.raw}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.attach()


class _EnvFault(Exception):
    """Raised from an environment's step or reset; remembers which environment."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


def _reset_slice(envs, lo: int, seeds, shared: _Shared):
    masked = shared.action_mask.shape[1] > 0
    for i, (env, seed) in enumerate(zip(envs, seeds)):
        try:
            shared.obs[lo + i], info = env.reset(seed=seed)
            if masked:
                shared.action_mask[lo + i] = info[MASK_KEY]
        except Exception as error:
            raise _EnvFault(lo + i) from error


def _step_slice(envs, lo: int, shared: _Shared) -> list[tuple[int, dict]]:
    """Steps envs[i] as environment lo + i; per-environment work is kept to the step itself. Returns the
    scored episodes that ended, with their environment's index."""
    hi = lo + len(envs)
    actions = env_actions(envs[0].action_space, shared.actions[lo:hi])
    masked = shared.action_mask.shape[1] > 0
    rewards, terminated, truncated, episodes = [], [], [], []
    for i, (env, action) in enumerate(zip(envs, actions)):
        try:
            obs, reward, term, trunc, info = env.step(action)
            if term or trunc:
                if trunc:
                    shared.final_obs[lo + i] = obs
                if "episode" in info:
                    episodes.append((lo + i, info["episode"]))
                obs, info = env.reset()
            if masked:
                shared.action_mask[lo + i] = info[MASK_KEY]
        except Exception as error:
            raise _EnvFault(lo + i) from error
        shared.obs[lo + i] = obs
        rewards.append(reward)
        terminated.append(term)
        truncated.append(trunc)
    shared.rewards[lo:hi] = rewards
    shared.terminated[lo:hi] = terminated
    shared.truncated[lo:hi] = truncated
    return episodes


def _fault_report(fault: _EnvFault) -> tuple[int, str]:
    return fault.index, "".join(traceback.format_exception(fault.__cause__)).rstrip()


@contextlib.contextmanager
def _deaf_to_stop_signals():
    """Starts worker processes that never act on SIGINT or SIGTERM: a Ctrl-C reaches the
    whole process group, and the trainer alone decides how to stop (it finishes the update
    and saves, which needs the workers). They leave when told to, or when the trainer's
    pipe closes.

    The two signals are blocked while the workers start (stopping.blocked), so the
    forkserver and every worker it forks begin with them blocked (each worker then also
    ignores them, _worker_main). (Ignoring them here instead, SIG_IGN, which also survives
    exec, threw away a Ctrl-C sent while the workers started: the run trained on.)

    The forkserver is started by multiprocessing after its resource tracker, and CPython's
    resource_tracker.ensure_running() unblocks both signals once it has spawned the tracker
    (bpo-33613), whatever the mask was: the forkserver, and every worker forked from it,
    then began with them unblocked, and a Ctrl-C while the forkserver was still importing
    printed its KeyboardInterrupt traceback (about 1 start-up Ctrl-C in 24 beside a busy
    core). So the tracker is started first, and the mask blocked again after it.

    A stop signal that reaches the trainer meanwhile waits until the workers have started
    (stopping.deferred): acted on while a worker's start-up data was half written, it left that
    worker reading a broken pipe."""
    with stopping.deferred(), stopping.blocked():
        resource_tracker.ensure_running()  # a no-op once it runs; else it unblocks both signals on its way out
        with stopping.blocked():
            yield


def _worker_main(conn, config: EnvironmentConfig, lo: int, seeds: list[int], shared: _Shared):
    for number in (signal.SIGINT, signal.SIGTERM):  # see _deaf_to_stop_signals
        signal.signal(number, signal.SIG_IGN)
    envs = []
    try:
        envs = [config.make() for _ in seeds]
        while True:
            command, argument = conn.recv()
            if command == "step":
                conn.send(("ok", _step_slice(envs, lo, shared)))
            elif command == "reset":
                _reset_slice(envs, lo, seeds, shared)
                conn.send(("ok", None))
            elif command == "get_state":
                conn.send(("ok", [env.get_state() for env in envs]))
            elif command == "set_state":
                for env, state in zip(envs, argument):
                    env.set_state(state)
                conn.send(("ok", None))
            else:  # "close"
                break
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the trainer is gone (it stopped, or was killed): just leave
    except _EnvFault as fault:
        _send_fault(conn, _fault_report(fault))
    except Exception:
        _send_fault(conn, (None, traceback.format_exc().rstrip()))
    finally:
        for env in envs:
            env.close()


def _send_fault(conn, report: tuple) -> None:
    try:
        conn.send(("fault", report))
    except OSError:
        pass  # the trainer is gone too


class VecEnv:
    """W environments behind one step(actions) call; see the module docstring."""

    def __init__(self, config: EnvironmentConfig, seeds: list[int], processes: int = 0, probe: gym.Env | None = None,
                 spaces: EnvSpaces | None = None):
        """probe: an environment of this config already made (it becomes environment 0 or is
        closed); spaces: its description, if already made (environments.spaces_of)."""
        self.config = config
        self.seeds = [int(s) for s in seeds]
        probe = probe or config.make()
        self.spaces = spaces or spaces_of(probe, self.seeds[0])
        self.masked = self.spaces.masked
        W = len(self.seeds)
        ctx = mp.get_context("forkserver")
        self._shared = _Shared(W, self.spaces, ctx)
        self._envs, self._workers = [], []
        if processes == 0:
            self._envs = [probe] + [config.make() for _ in range(W - 1)]
            return
        probe.close()
        bounds = np.linspace(0, W, processes + 1).astype(int)
        try:
            with _deaf_to_stop_signals():
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
    def n(self) -> int:
        return len(self.seeds)

    @property
    def pids(self) -> list[int]:
        return [process.pid for process, *_ in self._workers]

    def reset(self) -> np.ndarray:
        """Resets every environment with its own seed; returns obs (W, *obs_shape)."""
        if self._envs:
            self._run_in_process(_reset_slice, self._envs, 0, self.seeds, self._shared)
        else:
            self._command("reset")
        return self._shared.obs

    def step(self, actions: np.ndarray) -> Step:
        """actions (W, k) stored rows (spaces.py) -> Step. Ended episodes are reset before returning."""
        self._shared.actions[:] = actions
        if self._envs:
            ended = self._run_in_process(_step_slice, self._envs, 0, self._shared)
        else:
            ended = [e for part in self._command("step") for e in part]
        s = self._shared
        return Step(s.obs, s.rewards, s.terminated, s.truncated, s.final_obs, [stats for _, stats in ended],
                    [w for w, _ in ended])

    @property
    def action_mask(self) -> np.ndarray | None:
        """(W, A) the actions allowed at the current observations; None if the env masks nothing."""
        return self._shared.action_mask if self.masked else None

    def get_state(self) -> list[dict]:
        """Every environment's state as plain data (EpisodeStats.get_state), for a checkpoint
        that resumes exactly; one entry per environment, whatever the number of processes."""
        if self._envs:
            return [env.get_state() for env in self._envs]
        return [state for part in self._command("get_state") for state in part]

    def set_state(self, states: list[dict]) -> None:
        if len(states) != self.n:
            raise ValueError(f"{len(states)} environment states for {self.n} environments")
        if self._envs:
            for env, state in zip(self._envs, states):
                env.set_state(state)
        else:
            self._command("set_state", [states[lo:hi] for _, _, lo, hi in self._workers])

    def _run_in_process(self, function, *args):
        try:
            return function(*args)
        except _EnvFault as fault:
            index, trace = _fault_report(fault)
            raise WorkerError(f"environment '{self.config.type}' #{index} (stepped in the trainer's process) "
                              f"raised:\n{trace}") from None

    def _command(self, command: str, arguments: list | None = None) -> list:
        """Sends a command to every worker process; returns their replies in order."""
        for p, (process, conn, _, _) in enumerate(self._workers):
            try:
                conn.send((command, None if arguments is None else arguments[p]))
            except OSError:  # broken pipe: the worker is gone
                self._died(p)
        replies = []
        for p, (process, conn, lo, hi) in enumerate(self._workers):
            # Wait on the pipe and on the process itself, so a killed worker is
            # noticed at once instead of blocking recv() forever.
            ready = wait([conn, process.sentinel])
            if conn not in ready:
                self._died(p)
            try:
                status, payload = conn.recv()
            except (EOFError, OSError):
                self._died(p)
            if status == "fault":
                index, trace = payload
                which = f"#{index}" if index is not None else f"{lo}..{hi - 1}"
                self.close()
                raise WorkerError(f"environment '{self.config.type}' {which} in worker process {p} "
                                  f"(pid {process.pid}) raised:\n{trace}")
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
            try:
                conn.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
        for process, conn, _, _ in self._workers:
            if process.pid is None:  # never started
                conn.close()
                continue
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
            conn.close()
        self._workers = []
