"""How a run uses this machine in each phase: torch's threads (shared with other processes: threads.py) and its
precision (float32, or bfloat16 under autocast where the CPU or GPU runs it natively)."""
import contextlib
import os

import torch

from plumbing.errors import ConfigError
from plumbing.threads import FairShare


def resolve_device(requested: str, force_cpu: bool) -> str:
    if force_cpu:
        return "cpu"
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"config key 'device' = {requested!r} is not allowed: no GPU is available here "
                          "(use auto or cpu, or pass --cpu)")
    return requested


def bfloat16_is_fast(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def uses_bfloat16(precision: str, device: torch.device) -> bool:
    """auto is bfloat16 only on a CPU that runs it natively: on a GPU our small networks train faster in float32."""
    return precision == "bfloat16" or (precision == "auto" and device.type == "cpu" and bfloat16_is_fast(device))


def autocast(precision: str, device: torch.device) -> torch.autocast:
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=uses_bfloat16(precision, device))


def compute_dtype(device_type: str) -> torch.dtype:
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else torch.float32


def no_gradient(device: torch.device):
    """The grad mode for acting: inference_mode, but no_grad under autocast (it then keeps its bfloat16 weights)."""
    if not torch.is_grad_enabled():
        return contextlib.nullcontext()
    return torch.no_grad() if torch.is_autocast_enabled(device.type) else torch.inference_mode()


class Machine:
    """The threads and precision of a run's phases. The model is built on one thread (the orthogonal init's QR rounds
    by thread count: a seed gives the same weights at any count); then the run takes `torch_threads`, or with 0 the
    cores other processes leave free, looked at again before each rollout and minibatch. The rollout and the
    evaluations step a batch of one observation per environment: on one thread, unless they are images."""

    def __init__(self, torch_threads: int, precision: str, device: torch.device):
        if precision == "bfloat16" and not bfloat16_is_fast(device):  # oneDNN cannot build a bfloat16 LSTM there
            what = "this GPU" if device.type == "cuda" else "this CPU (bfloat16 needs AVX-512 BF16 or AMX)"
            raise ConfigError(f"config key 'precision' = 'bfloat16' is not allowed on {what}: it does not run "
                              "bfloat16 natively; use auto (bfloat16 on a CPU where it is native, else float32) or "
                              "float32")
        self.torch_threads, self.precision, self.device = torch_threads, precision, device
        self.precision_used = "bfloat16" if uses_bfloat16(precision, device) else "float32"  # what auto is here
        cores = len(os.sched_getaffinity(0))
        self.threads = min(torch_threads or cores, cores)  # 0, or more than the cores here: the cores
        self.fair_share, self.images = None, False

    @contextlib.contextmanager
    def building(self, images: bool):
        """Building the model, on one thread; then the run's threads."""
        torch.set_num_threads(1)
        yield
        self.fair_share = FairShare() if self.torch_threads == 0 else None
        self.images = images
        self.share()

    def share(self) -> None:
        if self.fair_share is not None:
            self.threads = self.fair_share.update()
        self.rollout_threads = self.threads if self.images else 1  # docs/how-it-works.md
        torch.set_num_threads(self.threads)

    def __str__(self) -> str:
        """The precision and threads in use, as a run's first line says them."""
        threads = f"{self.threads} torch thread{'s' * (self.threads > 1)}"
        if self.torch_threads > self.threads:
            threads += f"; the {self.torch_threads} asked for are more than the cores here"
        return f"{self.precision_used} ({threads})"

    def autocast(self) -> torch.autocast:
        return autocast(self.precision, self.device)

    @contextlib.contextmanager
    def acting(self):
        """Stepping one observation per environment (the rollout, the evaluations): the rollout's threads."""
        torch.set_num_threads(self.rollout_threads)
        try:
            yield
        finally:
            torch.set_num_threads(self.threads)

    @contextlib.contextmanager
    def rollout(self):
        """Acting for the buffer: with the cores free now, under autocast, without gradient."""
        self.share()
        with self.acting(), self.autocast(), no_gradient(self.device):
            yield

    @contextlib.contextmanager
    def minibatch(self):
        """One minibatch's training pass: with the cores free now, under autocast."""
        self.share()
        with self.autocast():
            yield
