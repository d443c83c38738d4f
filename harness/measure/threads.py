"""The run's CPU thread count: fixed for the whole run, chosen once, recorded in the fingerprint.

Quick mode (CI, the gate) uses 1 thread, as torch.utils.benchmark.Timer does;
full mode (nightly, advice) uses every core; `harness bench --threads N` (HARNESS_THREADS)
overrides both. A fast run that is neither quick nor full uses 1 thread too, so that it compares
with quick runs. Why 1 thread on a shared runner: inductor's CPU kernels use OpenMP, and with
busy neighbours an OpenMP team waits for its slowest thread, so a paired ratio swings wildly
from round to round (figures: docs/measurements.md#the-measuring-rules).

Every suite module has an asv module-level `setup` calling `fix_threads()`, so every benchmark
(and every compile, which specialises its C++ kernels on torch.get_num_threads()) runs with it.
"""

from __future__ import annotations

import os

from harness.core import settings
from harness.core.exits import BadInput

ENV = settings.THREADS.name


def default_threads(full: bool | None = None, quick: bool | None = None) -> int:
    """All cores for a full run that is not quick, else 1; None: read the run's switches."""
    full = settings.FULL.get() if full is None else full
    quick = settings.QUICK.get() if quick is None else quick
    if full and not quick:
        return os.cpu_count() or 1
    return 1


def parse_threads(value: str | int | None) -> int | None:
    """A thread count from the command line or $HARNESS_THREADS; bad values are bad input."""
    if value is None or str(value).strip() == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise BadInput(
            f"thread count must be a whole number >= 1, got {value!r} (--threads or ${ENV})"
        ) from None
    if n < 1:
        raise BadInput(f"thread count must be >= 1, got {n} (--threads or ${ENV})")
    return n


def run_threads() -> int:
    """The thread count of this run: $HARNESS_THREADS, else the mode's default."""
    return parse_threads(settings.THREADS.raw()) or default_threads()


def fix_threads() -> int:
    """Set torch's intra-op thread count to the run's; returns it."""
    import torch

    n = run_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
