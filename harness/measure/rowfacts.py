"""Per-row facts into the run record: what a timing row's measurement saw beyond its samples.

`harness bench` tells its benchmark processes where the record is being written
(HARNESS_RUN_RECORD); the timing functions (harness.measure.timing) hand their facts here after
each row's timing, and they land in `row-facts/` of that record (harness.core.records), where
the gate, report and advice read them. Outside such a run (pytest-benchmark, ab's pairs, a test)
nothing is written and nothing extra is measured.

asv gives a benchmark no handle on its own name, but the runner's Benchmark object (asv's
forkserver and spawn runners, and `harness ab`'s row worker alike call its `do_run`) is on the
stack while the row runs: its name and current parameters make the row's name as the results
spell it (`suite.Class.track_x('mlp', False)`).
"""

from __future__ import annotations

import contextlib
import sys

from harness.core import records, settings

_suppressed = 0


@contextlib.contextmanager
def suppressed():
    """Measurements inside are not the row's own (a compile time's steady calls): no facts."""
    global _suppressed
    _suppressed += 1
    try:
        yield
    finally:
        _suppressed -= 1


def is_suppressed() -> bool:
    return _suppressed > 0


def recording() -> bool:
    """Whether facts are wanted: inside a run that writes a record, not suppressed."""
    return not _suppressed and settings.RUN_RECORD.get() is not None and current_row() is not None


def current_row() -> str | None:
    """The name of the asv row running in this process, or None outside one."""
    frame = sys._getframe(1)
    while frame is not None:
        bench = frame.f_locals.get("self")
        if type(bench).__module__.startswith("asv_runner.benchmarks") and hasattr(bench, "name"):
            params = getattr(bench, "_current_params", ()) or ()
            return bench.name + (f"({', '.join(_repr(p) for p in params)})" if params else "")
        frame = frame.f_back
    return None


def _repr(value) -> str:
    """A parameter as asv's result files spell it (repr without a memory address)."""
    try:
        from asv_runner.benchmarks._base import _repr_no_address

        return _repr_no_address(value)
    except ImportError:
        return repr(value)


def record(facts: dict) -> None:
    """The current row's facts into the run record (a no-op where `recording()` is False)."""
    row = current_row()
    folder = settings.RUN_RECORD.get()
    if _suppressed or row is None or folder is None:
        return
    records.write_row_facts(folder, row, facts)
