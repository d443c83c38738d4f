"""Keep freed memory in the process while a CPU benchmark runs (glibc), so that every timed call
reuses resident pages instead of page-faulting fresh ones.

By default glibc serves a large block with mmap and returns it to the OS with munmap when freed,
and trims the top of its heap; its thresholds move with the process's allocation history. A
repeated call then page-faults its outputs and temporaries afresh, or not, depending on what the
process did before, and a paired ratio of identical work moves from one process to the next.
Retained, the steady state is what a long-running training process sees (and what PyTorch's
caching allocator gives on a GPU). Every CPU timing loop runs retained (harness.measure.timing).
Figures: docs/measurements.md#the-measuring-rules.
A no-op where the C library is not glibc.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc mallopt parameters (malloc.h)
_DEFAULT_TRIM, _DEFAULT_MMAP_MAX = 128 * 1024, 65536


def _libc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt  # noqa: B018 (glibc only)
        return libc
    except (OSError, AttributeError):
        return None


_depth = [0]  # nested retains (a benchmark's setup, then its timing loop): the outermost restores


def retain_freed_memory() -> Callable[[], None]:
    """Serve large blocks from the heap and never trim it; returns the function that restores
    glibc's defaults (which also ends its dynamic mmap threshold) and trims what was kept.
    Nests: only the restore of the outermost retain changes anything."""
    libc = _libc()
    if libc is None:
        return lambda: None
    if _depth[0] == 0:
        libc.mallopt(_M_MMAP_MAX, 0)
        libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    _depth[0] += 1
    restored = []

    def restore():
        if restored:  # twice is once
            return
        restored.append(True)
        _depth[0] -= 1
        if _depth[0] == 0:
            libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
            libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM)
            libc.malloc_trim(0)

    return restore


@contextlib.contextmanager
def freed_memory_retained():
    restore = retain_freed_memory()
    try:
        yield
    finally:
        restore()
