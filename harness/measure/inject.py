"""Test-only: slow the measured side of named rows, to prove the gate catches what it should.

With HARNESS_TEST_SLOWDOWN_ROWS="REGEX=F[;REGEX=F...]", a timing row (harness.measure.timing)
whose name (rowfacts.current_row) one REGEX is found in has its measured side slowed: each call
of it is followed by busy CPU work of F times that call's own CPU time, measured once, before
the row's warm-up (the fastest of at least CALLS calls and SECONDS of them, by thread CPU time).
The measured side is the workload of a raw time, the numerator of a paired ratio (compiled in
compiled/eager) and the workload of a reference-normalised time (never the reference). So a raw
time reads about 1 + F times slower, a paired or normalised one 1 + F times higher, while the
rows keep their names and code: a run made so is gated against the real history. CPU work, not
a wall-clock wait: the neighbours on a shared machine stretch it as they stretch the workload
(harness.runs.slowdown does the same for `harness calibrate --slowdown`'s wrapped suites).
Unset, nothing is read per call: the switch is read once per row.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from harness.core import settings

CALLS = 20
SECONDS = 0.2
MAX_CALLS = 5000


def fraction_for(row: str | None, spec: str | None = None) -> float:
    """The fraction this row is slowed by (0: not named)."""
    spec = settings.TEST_SLOWDOWN_ROWS.get() if spec is None else spec
    if not spec or not row:
        return 0.0
    for part in spec.split(";"):
        pattern, _, value = part.rpartition("=")
        if pattern and re.search(pattern, row):
            return float(value)
    return 0.0


def _busy(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def fastest_cpu(fn: Callable[[], object]) -> float:
    """The fastest thread CPU time of at least CALLS calls of fn and SECONDS of them."""
    cpu: list[float] = []
    while len(cpu) < MAX_CALLS and (len(cpu) < CALLS or sum(cpu) < SECONDS):
        t0 = time.thread_time()
        fn()
        cpu.append(time.thread_time() - t0)
    return min(cpu)


def slowed(fn: Callable[[], object], fraction: float) -> Callable[[], object]:
    """fn, then `fraction` x its own CPU time of busy work on the calling thread."""
    extra = fraction * fastest_cpu(fn)

    def call():
        out = fn()
        _busy(extra)
        return out

    return call


def measured_side(fns: list, row: str | None = None) -> list:
    """`fns` with the first (the measured side) slowed where the switch names the row."""
    if not settings.TEST_SLOWDOWN_ROWS.get():
        return fns
    from harness.measure.rowfacts import current_row

    fraction = fraction_for(row or current_row())
    return [slowed(fns[0], fraction), *fns[1:]] if fraction > 0 else fns
