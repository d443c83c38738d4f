"""Environment switches, parsed one way everywhere.

A switch is on for any value except empty, 0, false, no and off (case-insensitive), so that
`CI=true`, `CI=woodpecker` and `HARNESS_FULL=1` are on, and `HARNESS_FULL=off` is off for the
goldens, the workloads and the canary alike.
"""

from __future__ import annotations

import os

OFF = frozenset({"", "0", "false", "no", "off"})


def is_on(value: str | None) -> bool:
    return (value or "").strip().lower() not in OFF


def flag(name: str) -> bool:
    """Whether the environment variable `name` is set to an "on" value."""
    return is_on(os.environ.get(name))


def full_mode() -> bool:
    """Full sizes and grids (`--full`, HARNESS_FULL): nightly runs. Off: the fast CI sizes."""
    return flag("HARNESS_FULL")


def quick_mode() -> bool:
    """asv's --quick run (`harness bench --quick`, HARNESS_QUICK): CI and the gate. asv itself
    does not tell a benchmark that it runs in quick mode, so harness bench sets this for it."""
    return flag("HARNESS_QUICK")


def in_ci() -> bool:
    """CI is set (any CI system's value): goldens are compared, never accepted."""
    return flag("CI")


def paired_window_s() -> float | None:
    """HARNESS_PAIRED_WINDOW_S: the wall seconds one process spreads each paired comparison over
    (timing.measure_paired). `harness ab` sets it: a side there pools several processes, which
    share the side's window. Unset: timing's fast or full default."""
    value = os.environ.get("HARNESS_PAIRED_WINDOW_S", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"HARNESS_PAIRED_WINDOW_S must be a number of seconds, got {value!r}") from None
    if not seconds >= 0:
        raise ValueError(f"HARNESS_PAIRED_WINDOW_S must be >= 0 seconds, got {value!r}")
    return seconds
