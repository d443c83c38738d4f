"""How a value with a unit is shown: one scale table for the gate's table and the report's plots."""

from __future__ import annotations

import math

SCALES = {
    "seconds": [(1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")],
    "bytes": [(2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")],
}
SCALES["bytes moved"] = SCALES["bytes saved"] = SCALES["bytes"]
SCALES["instructions"] = [(1e9, "G instr"), (1e6, "M instr"), (1e3, "k instr"), (1, "instr")]
# "error/tol": an answer row's error over its tolerance (harness.core.answerfacts.UNIT)
UNITLESS = ("ratio", "relative", "efficiency", "fraction of copy bandwidth", "error/tol")


def scale(unit: str, magnitude: float) -> tuple[float, str]:
    """(factor, label) to show values of about `magnitude` in: the largest unit they reach."""
    steps = SCALES.get(unit)
    if not steps:
        return 1.0, unit
    for factor, label in steps:
        if abs(magnitude) >= factor:
            return factor, label
    return steps[-1]


def format_value(x: float | None, unit: str) -> str:
    """`4.2 ms`, `1.5 MiB`, `12 ops`, `0.873`; an em dash for no value, n/a for NaN."""
    if x is None:
        return "—"
    if isinstance(x, float) and math.isnan(x):
        return "n/a"
    if unit in SCALES:
        factor, label = scale(unit, x)
        # instruction counts are judged to a fraction of a percent: four digits
        return f"{x / factor:.{4 if unit == 'instructions' else 3}g} {label}"
    if unit == "samples/s":
        return f"{x:.4g}/s"
    if unit == "GB/s":
        return f"{x:.3g} GB/s"
    if float(x).is_integer() and unit not in UNITLESS:
        return f"{int(x)} {unit}"
    return f"{x:.3g}"


def format_ratio(r: float | None) -> str:
    if r is None:
        return "—"
    return "inf" if math.isinf(r) else f"{r:.3f}"
