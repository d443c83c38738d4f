"""How much of a call the device was working: the busy fraction of a CUDA row, the ATen share of
a CPU row. One profiled call each, taken in the benchmark process right after the row's timing,
on the callable that was timed (no second pass that rebuilds the workload).

- busy fraction (CUDA): the union of GPU activity (kernels, memcpy, memset) in one profiled call
  over the row's unprofiled median GPU time per call. Below one half the GPU waited for the host
  more than it worked: the row is launch-bound at this size, and what it times is mostly
  launches and Python (bigger inputs, or CUDA graphs, make it device-bound); the verdict layer
  labels it so (harness.verdict.gpurows).
- ATen share (CPU): the union of time in top-level ATen operators and in compiled graphs' own
  calls (inductor's `## Call CompiledFxGraph` region counts as kernel time) over the profiled
  call's wall time. An overhead indicator: a low share means Python, dispatch and framework work
  dominate. Never "launch-bound": a CPU has no launch queue.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable

from harness.core import settings

COMPILED_GRAPH = "## Call CompiledFxGraph"
CALL = "harness::call"


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """The total length covered by `intervals` (overlaps counted once)."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def busy_fraction(events, per_call_s: float) -> float | None:
    """GPU activity of one profiled call (profiler events) over the unprofiled time per call,
    capped at 1 (the profiled call may run longer than an unprofiled one)."""
    import torch

    gpu = [
        (e.time_range.start, e.time_range.end)
        for e in events
        if e.device_type == torch.autograd.DeviceType.CUDA
    ]
    if per_call_s <= 0:
        return None
    return min(1.0, union_length(gpu) * 1e-6 / per_call_s)


def aten_share(events) -> float | None:
    """Top-level ATen operators and compiled graphs' calls over the `harness::call` region."""
    call = next((e for e in events if e.name == CALL), None)
    if call is None:
        return None
    wall = call.time_range.end - call.time_range.start
    kernels = []
    for e in events:
        if e.name.startswith(COMPILED_GRAPH) or (e.name.startswith("aten::") and _top_level(e)):
            kernels.append((e.time_range.start, e.time_range.end))
    return min(1.0, union_length(kernels) / wall) if wall > 0 else None


def _top_level(e) -> bool:
    parent = e.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::") or parent.name.startswith(COMPILED_GRAPH):
            return False
        parent = parent.cpu_parent
    return True


def profile_call(fn: Callable[[], object], device) -> list:
    """The profiler's events of one call of `fn` (already warm), wrapped in a `harness::call`
    region; CUDA activity included on a CUDA device."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from harness.core.env import synchronize

    device = torch.device(device)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    synchronize(device)
    with quiet_stderr(), profile(activities=activities) as prof:
        with record_function(CALL):
            fn()
        synchronize(device)
    return list(prof.events())


@contextlib.contextmanager
def quiet_stderr():
    """The CUDA build's profiler prints driver noise on CPU-only machines; keep it out of logs."""
    if settings.PROFILER_NOISE.get():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)
