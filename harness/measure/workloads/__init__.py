"""What runs: one definition of every benchmark workload, shared by both runners.

The asv suites (suites/benchmarks/*.py) and the pytest-benchmark tests
(suites/test_benchmarks.py) only pick parameters and call into these modules; no workload is
written twice. Each module builds ready-to-call, argument-free callables for one parameter
combination; harness.measure.timing measures them.

Fast/full switch: `HARNESS_FULL=1` (set by `harness bench --full`) selects full sizes and full
parameter grids in every suite; the default is fast (small models, small grids, few samples).
Sizes also depend on the device a benchmark runs on (harness.core.sizes: CPU sizes, or CUDA
sizes that keep a data-centre GPU busy); every builder passes the device it was given, and
`device()` is this run's.

A parameter combination that does not apply here (CUDA-only cases on a CPU machine, options
that need another option) raises `NotApplicable` with the reason: asv treats it as a skipped
(n/a) case because it is a NotImplementedError, and the pytest runner turns it into a skip with
the same reason.
"""

from __future__ import annotations

import torch

from harness.core import settings
from harness.core import sizes as core_sizes

AREAS = ("fusion", "transfer", "amp", "dataloader", "models", "training_loop")


class NotApplicable(NotImplementedError):
    """This case cannot run here; the message says why (shown by asv and pytest)."""


def full_mode() -> bool:
    """Full sizes and grids in this process (the run's mode)."""
    return settings.FULL.get()


def size(dev: torch.device | str | None = None) -> str:
    """The zoo configuration benchmarks on `dev` (default: this run's device) use in this mode:
    "small", "full" or "cuda" (harness.core.sizes.model_size)."""
    return core_sizes.model_size(full_mode(), device() if dev is None else dev)


def model_config(name: str, dev: torch.device | str) -> dict:
    """The configuration of zoo model `name` that a benchmark on `dev` uses in this run, with
    HARNESS_SIZES applied (ModelSpec.benchmark_config)."""
    from harness.core.zoo import get_model

    return get_model(name).benchmark_config(full_mode(), dev)


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
