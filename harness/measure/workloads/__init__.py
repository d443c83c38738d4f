"""What runs: one definition of every benchmark workload, shared by both runners.

The asv suites (suites/benchmarks/*.py) and the pytest-benchmark tests
(suites/test_benchmarks.py) only pick parameters and call into these modules; no workload is
written twice. Each module builds ready-to-call, argument-free callables for one parameter
combination; harness.measure.timing measures them.

Fast/full switch: `HARNESS_FULL=1` (set by `harness bench --full`) selects full sizes and full
parameter grids in every suite; the default is fast (small models, small grids, few samples).

A parameter combination that does not apply here (CUDA-only cases on a CPU machine, options
that need another option) raises `NotApplicable` with the reason: asv treats it as a skipped
(n/a) case because it is a NotImplementedError, and the pytest runner turns it into a skip with
the same reason.
"""

from __future__ import annotations

import torch

from harness.core import settings

AREAS = ("fusion", "transfer", "amp", "dataloader", "models", "training_loop")


class NotApplicable(NotImplementedError):
    """This case cannot run here; the message says why (shown by asv and pytest)."""


def full_mode() -> bool:
    """Full sizes and grids in this process (the run's mode)."""
    return settings.FULL.get()


def size() -> str:
    """The model-zoo size for the current mode."""
    return "full" if full_mode() else "small"


def grid(fast, full):
    """A parameter list: `fast` by default, `full` under HARNESS_FULL=1."""
    return list(full if full_mode() else fast)


def device() -> torch.device:
    from harness.core.env import pick_device

    return pick_device()


def require_cuda(dev: torch.device, what: str) -> None:
    if dev.type != "cuda":
        raise NotApplicable(f"{what} needs CUDA; this machine runs on {dev.type}")


def to_device(obj, dev, non_blocking: bool = False):
    """Tensors, and tuples/lists of them (the LSTM's hidden state), moved to `dev`."""
    if isinstance(obj, torch.Tensor):
        return obj.to(dev, non_blocking=non_blocking)
    if isinstance(obj, (tuple, list)):
        return type(obj)(to_device(o, dev, non_blocking) for o in obj)
    return obj
