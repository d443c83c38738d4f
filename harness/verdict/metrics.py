"""What a benchmark's number means: its kind and which direction is better.

asv stores only a benchmark's `unit`, so the unit string is the contract between the suites
(which set `unit = ...` on each `track_` benchmark) and the gate (which decides how to compare):

- timings ("seconds") come as per-iteration samples and are compared statistically;
- counters (kernel launches, graph breaks, recompiles) are deterministic and compared exactly;
- memory ("bytes") is near-deterministic and compared within a small stated tolerance;
- throughputs ("samples/s") and ratios are timings in disguise: statistics apply, and
  throughput is the one kind where higher is better.
"""

from __future__ import annotations

import dataclasses

TIMING, COUNTER, MEMORY, THROUGHPUT, RATIO = "timing", "counter", "memory", "throughput", "ratio"

# Peak memory may move by allocator rounding between runs; more than this is a change.
MEMORY_TOLERANCE = 0.02


@dataclasses.dataclass(frozen=True)
class MetricKind:
    kind: str
    higher_is_better: bool = False

    @property
    def exact(self) -> bool:
        return self.kind == COUNTER


UNITS = {
    "seconds": MetricKind(TIMING),
    "kernels": MetricKind(COUNTER),
    "ops": MetricKind(COUNTER),
    "graph breaks": MetricKind(COUNTER),
    "graphs": MetricKind(COUNTER),
    "recompiles": MetricKind(COUNTER),
    "bytes": MetricKind(MEMORY),
    "samples/s": MetricKind(THROUGHPUT, higher_is_better=True),
    # compiled/eager, pinned/pageable, amp/fp32 time ratios: lower is better, as asv assumes
    "ratio": MetricKind(RATIO),
    # compute / (compute + waiting for data): higher is better
    "efficiency": MetricKind(RATIO, higher_is_better=True),
}


def kind_of(unit: str | None) -> MetricKind:
    """The kind for an asv unit; unknown units raise so that no metric is compared blindly."""
    if unit is None or unit == "unit":  # asv's default for track_ without a unit
        raise KeyError("benchmark has no unit; set `unit = ...` to one of " + ", ".join(UNITS))
    try:
        return UNITS[unit]
    except KeyError:
        raise KeyError(f"unknown benchmark unit {unit!r}; known units: {', '.join(UNITS)}") from None
