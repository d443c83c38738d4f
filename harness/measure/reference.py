"""The reference workload: a fixed amount of work that no change to torch or to this project can
move, timed in the same rounds as a workload (timing.measure_over_reference) so that the
per-round ratio cancels the machine's momentary speed.

CPU: a pure-Python integer loop (interpreter work, like the Python side of eager PyTorch and of
dynamo's guards) followed by a NumPy float32 pass over a small, cache-resident buffer (vectorised
math, like a CPU kernel): about 1 ms on the 2-core CI machines. It depends on CPython and NumPy
(both recorded in the fingerprint), never on torch. The buffer is small because a
large-array reference imports the memory-system noise of a shared host instead of cancelling
it; both halves together average their different sensitivities. What no reference cancels:
the pointwise chain swings with the neighbours' memory traffic, so its judged row is the paired
compiled/eager ratio, where both sides stream the same memory (figures:
docs/measurements.md#the-measuring-rules).

CUDA: `torch.cuda._sleep(cycles)`, a kernel that spins for a fixed number of GPU clock cycles:
its time is the GPU clock (boost, thermal throttling), which is what moves a GPU time between
runs, and no torch change alters a spin loop. It runs on the current stream, so the CUDA events
of the timing loop bracket it like any workload.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

PY_LOOP = 20_000  # ~0.6 ms of CPython on the CI machines
NUMPY_FLOATS = 1 << 16  # 256 KB of float32: stays in cache
CUDA_SLEEP_CYCLES = 1_000_000  # ~0.5 ms at a 2 GHz GPU clock


def _python_loop() -> int:
    acc = 0
    for i in range(PY_LOOP):
        acc += i * i % 7
    return acc


def cpu_reference() -> Callable[[], object]:
    import numpy as np

    src = np.random.default_rng(0).random(NUMPY_FLOATS, dtype=np.float32)
    out = np.empty_like(src)

    def reference():
        _python_loop()
        np.cos(src, out=out)
        np.multiply(out, 1.0001, out=out)
        np.cos(out, out=out)
        return out

    reference.is_reference = True  # its device facts say nothing about the row (timing)
    return reference


def cuda_reference() -> Callable[[], object]:
    def reference():
        torch.cuda._sleep(CUDA_SLEEP_CYCLES)

    reference.is_reference = True
    return reference


def reference_workload(device: torch.device | str = "cpu") -> Callable[[], object]:
    """The reference for timings on `device`."""
    return cuda_reference() if torch.device(device).type == "cuda" else cpu_reference()
