"""What a benchmark's number means: its kind and which direction is better.

asv stores only a benchmark's `unit`, so the unit string is the contract between the suites
(which set `unit = ...` on each `track_` benchmark) and the gate (which decides how to compare):

- counters (kernel launches, graph breaks, recompiles) are deterministic and compared exactly;
- memory ("bytes") is near-deterministic and compared within a small stated tolerance;
- paired ratios ("ratio": ratios of two sides timed in the same rounds) and
  reference-normalised times ("relative": time over the reference workload's, same rounds) carry
  no machine speed: statistics apply (docs/gate.md: which rows are judged; reference-normalised
  ones only with a calibrated band, harness.verdict.compare);
- raw times ("seconds") and throughputs ("samples/s", "bytes/s", "GB/s", higher is better) carry
  the machine's momentary speed: judged only where the machine's calibrated noise band is below the
  threshold (harness.verdict.compare).

Bandwidth rows (fusion.MemoryBandwidth): "bytes moved" per call is computed from tensor shapes
(harness.measure.traffic), so it is an exact counter; "fraction of copy bandwidth" is a workload's
GB/s over a plain copy's timed in the same rounds, higher is better: normalised by a reference of
another kind of work (a pure memory stream against kernels that also compute), so judged like the
reference-normalised times, only with a calibrated band: on a shared host they move far more
between processes than the paired fused/eager ratio (docs/measurements.md#memory-bandwidth).
"bytes saved" (gradient checkpointing) is memory where more is better.

"instructions" (instructions per call, callgrind: harness.measure.instructions) is a counter with a
relative tolerance: the count repeats between processes whatever the load, but a change in the
process's history (another set of workloads counted, another path to a temporary folder) moves
it by a few hundredths of a percent. INSTRUCTION_TOLERANCE is derived from the A/A spread
measured on the shared runner (docs/measurements.md). Lower is better.

"error/tol" (harness.core.answerfacts.UNIT) is an answer row's: the error of a paired row's
faster side over the tolerance its answer check allowed (at most 1: the same answer). Such a row
is judged absolutely, not against the base (harness.verdict.answers, docs/answers.md#verdicts):
WRONG fails whatever the base says; the base only matters for growth (ANSWER_GROWTH).
"""

from __future__ import annotations

import dataclasses

from harness.core import answerfacts

TIMING, COUNTER, MEMORY, THROUGHPUT, RATIO = "timing", "counter", "memory", "throughput", "ratio"
NORMALISED, INSTRUCTIONS = "normalised", "instructions"
ANSWER = "answer"

# Peak memory may move by allocator rounding between runs; more than this is a change.
MEMORY_TOLERANCE = 0.02
# An instruction count that moves by more than this is a change (see the module docstring).
INSTRUCTION_TOLERANCE = 0.005
# An answer still within its tolerance whose error grew past max(ANSWER_GROWTH x the base's,
# ANSWER_GROWTH_FLOOR) is a regression: a kernel that drifted tenfold is on its way to WRONG.
# The floor, in error/tol units, is `torch._dynamo.utils.same`'s tol/10 slack: below it an
# error is rounding whatever it grew from.
ANSWER_GROWTH = 10.0
ANSWER_GROWTH_FLOOR = 0.1


@dataclasses.dataclass(frozen=True)
class MetricKind:
    kind: str
    higher_is_better: bool = False
    name: str | None = None  # the table's word for it, where the kind's default does not fit

    @property
    def exact(self) -> bool:
        return self.kind == COUNTER

    @property
    def raw(self) -> bool:
        """A raw time or throughput: it moves with the machine's speed."""
        return self.kind in (TIMING, THROUGHPUT)

    @property
    def label(self) -> str:
        """How the gate's table names the kind when it says why a row is (not) judged."""
        if self.name:
            return self.name
        return {
            TIMING: "raw time",
            THROUGHPUT: "raw throughput",
            RATIO: "paired ratio",
            NORMALISED: "normalised time",
            COUNTER: "exact counter",
            MEMORY: "memory",
            INSTRUCTIONS: "instructions",
            ANSWER: "answer",
        }[self.kind]


UNITS = {
    "seconds": MetricKind(TIMING),
    "kernels": MetricKind(COUNTER),
    "ops": MetricKind(COUNTER),
    "graph breaks": MetricKind(COUNTER),
    "graphs": MetricKind(COUNTER),
    "recompiles": MetricKind(COUNTER),
    "bytes": MetricKind(MEMORY),
    "bytes saved": MetricKind(MEMORY, higher_is_better=True),
    # global memory traffic per call from tensor shapes: deterministic, more is worse
    "bytes moved": MetricKind(COUNTER),
    # instructions one call executes (callgrind): a counter with INSTRUCTION_TOLERANCE
    "instructions": MetricKind(INSTRUCTIONS),
    # an answer row: the error over the tolerance of a paired row's answer check, judged
    # absolutely (at most 1: the same answer)
    answerfacts.UNIT: MetricKind(ANSWER),
    "samples/s": MetricKind(THROUGHPUT, higher_is_better=True),
    # all-reduce bandwidth (distributed suite): tensor bytes per second, higher is better
    "bytes/s": MetricKind(THROUGHPUT, higher_is_better=True),
    "GB/s": MetricKind(THROUGHPUT, higher_is_better=True),
    # compiled/eager, pinned/pageable, AMP/fp32, workers N/0 paired time ratios: lower is better
    "ratio": MetricKind(RATIO),
    # time over the reference workload's, same rounds (harness.measure.reference): lower is better
    "relative": MetricKind(NORMALISED),
    # compute / (compute + waiting for data): higher is better
    "efficiency": MetricKind(RATIO, higher_is_better=True),
    # per round, a workload's GB/s over a plain device copy's in the same round: higher is better;
    # the copy is a reference, not the same work (see the module docstring)
    "fraction of copy bandwidth": MetricKind(
        NORMALISED, higher_is_better=True, name="normalised bandwidth"
    ),
}


# Paired ratios whose two sides are unlike work (another memory layout or attention kernel, one
# pass over memory against two, native code against the Python interpreter) drift with the host's
# state, so runs made apart can differ beyond the default threshold: judged at max(threshold,
# this allowance, the calibrated band). Keyed by benchmark name, parameters off.
# Figures: docs/measurements.md#drift-allowances.
DRIFT_ALLOWANCE = {
    "fusion.OptimizerStepOverForLoop.track_step_over_for_loop": 0.30,
    "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous": 0.10,
    "fusion.AttentionOverHandWritten.track_sdpa_over_hand_written": 0.10,
    "fusion.MemoryBandwidth.track_fused_over_eager": 0.10,
}


def drift_allowance(name: str) -> float | None:
    """The row's built-in drift allowance (DRIFT_ALLOWANCE), or None."""
    return DRIFT_ALLOWANCE.get(name.split("(")[0])


def kind_of(unit: str | None) -> MetricKind:
    """The kind for an asv unit; unknown units raise so that no metric is compared blindly."""
    if unit is None or unit == "unit":  # asv's default for track_ without a unit
        raise KeyError("benchmark has no unit; set `unit = ...` to one of " + ", ".join(UNITS))
    try:
        return UNITS[unit]
    except KeyError:
        raise KeyError(
            f"unknown benchmark unit {unit!r}; known units: {', '.join(UNITS)}"
        ) from None
