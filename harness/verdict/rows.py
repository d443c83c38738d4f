"""The gate's verdicts and the row they are given on: what harness.verdict.compare decides per
benchmark and harness.verdict.answers per answer row (both name them as compare.OK, ...)."""

from __future__ import annotations

import dataclasses

OK, IMPROVED, REGRESSION = "ok", "improved", "REGRESSION"
FAILED, MISSING, SKIPPED, BAD = "FAILED", "MISSING", "skipped", "BAD INPUT"
CHANGED = "changed"  # the benchmark's code differs between the sides: not compared, exit unaffected
NOT_JUDGED = "not judged"  # shown with the reason (raw time without a narrow calibrated band)
UNKNOWN = "UNKNOWN"  # harness ab: judged across processes, not decided yet (more pairs decide it)
# an answer row whose faster side computes another result (harness.verdict.answers): judged
# absolutely, a failure whatever the base says
WRONG = "WRONG"
JUDGED = (OK, IMPROVED, REGRESSION, WRONG)  # the verdicts of rows a rule decided


@dataclasses.dataclass
class Row:
    name: str
    unit: str
    base: float | None
    head: float | None
    ratio: float | None  # head / base
    verdict: str
    note: str = ""
    p: float | None = None
    threshold: float | None = None
    device: str = ""  # `busy NN%` / `ATen share NN%` (gpurows.label), also at the end of the note
    # where a judged statistical row's threshold came from: "history", "band", "drift",
    # "default" (the gate's --threshold); "" for other rows
    basis: str = ""
    history_runs: int = 0  # the runs of the machine's history its noise was learned from
    # an answer row's status on each side (same, WRONG, fail_to_run, n/a; "" where the side has
    # no answer row, and for every other row): harness.verdict.answers
    answer: str = ""
    answer_base: str = ""
