"""The devices a test runs on: the CPU always, and a GPU where the machine has one. On a machine
without one (CI here) the GPU's cases are skipped, so they count only where a GPU ran them
(results/gpu/run.sh runs them on a lent GPU machine)."""
import pytest
import torch

from plumbing.machine import bfloat16_is_fast

_GPU = torch.cuda.is_available()

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not _GPU, reason="no GPU on this machine"))]

# where bfloat16 runs natively (elsewhere precision bfloat16 is refused): AVX-512 BF16 or AMX, or the GPU
BFLOAT16_DEVICES = [
    pytest.param("cpu", marks=pytest.mark.skipif(not bfloat16_is_fast(torch.device("cpu")),
                                                 reason="this CPU runs bfloat16 only emulated (no AVX-512 BF16 or "
                                                        "AMX): refused there")),
    pytest.param("cuda", marks=pytest.mark.skipif(not (_GPU and bfloat16_is_fast(torch.device("cuda"))),
                                                  reason="no GPU with bfloat16 on this machine")),
]
