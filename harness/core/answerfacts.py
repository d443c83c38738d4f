"""An answer check's verdict as a run record keeps it, and the answer row named after it.

A paired row (`suite.Class.track_x_over_y(params)`) times two ways of computing one thing;
harness.measure.answers checks, in the same process, that both give the same result and writes
the verdict as the row facts (harness.core.records) of the row's *answer row*,
`suite.Class.answer_x_over_y(params)`. asv never sees answer rows (no benchmark has that name,
so no benchmark's asv version changes); the readers (harness.verdict.results) derive them from
the record, and the gate judges them absolutely (docs/answers.md).

The row's value is the error over the tolerance, unit UNIT: at most 1 is the same answer.
"""

from __future__ import annotations

import dataclasses
import math
import re

from harness.core.exits import BadInput

SAME, WRONG, FAIL_TO_RUN, NOT_APPLICABLE = "same", "WRONG", "fail_to_run", "n/a"
STATUSES = (SAME, WRONG, FAIL_TO_RUN, NOT_APPLICABLE)
EXACT, TOLERANCE, COSINE = "exact", "tolerance", "cosine"
RULES = (EXACT, TOLERANCE, COSINE)
UNIT = "error/tol"  # the error over the tolerance: <= 1 is the same answer
FACTS_KEY = "answer"
MAX_TEXT = 2000  # a reason or name longer than this is cut (a record's text is input)

_ROW = re.compile(r"^(?P<cls>[^()]+\.)(?P<method>[^.()]+)(?P<params>\(.*\))?$", re.DOTALL)


def answer_row(row: str) -> str:
    """`suite.Class.track_x(params)` -> `suite.Class.answer_x(params)`; a method named
    otherwise gets the prefix in front (`suite.Class.answer_time_x`)."""
    m = _ROW.match(row)
    if not m:
        return f"{row}.answer"
    method = m["method"]
    tail = method[len("track_") :] if method.startswith("track_") else method
    return f"{m['cls']}answer_{tail}{m['params'] or ''}"


def is_answer_row(row: str) -> bool:
    m = _ROW.match(row)
    return bool(m and m["method"].startswith("answer_"))


def timed_row(row: str) -> str:
    """The timing row an answer row belongs to (answer_row's inverse for `track_` rows)."""
    m = _ROW.match(row)
    if not m or not m["method"].startswith("answer_"):
        return row
    return f"{m['cls']}track_{m['method'][len('answer_') :]}{m['params'] or ''}"


_NUMBERS = (
    "value",
    "max_abs",
    "max_rel",
    "cosine",
    "loss_rel",
    "fp64_error",
    "fp64_error_reference",
    "seconds",
    "first_call_seconds",
)
_TEXTS = ("what", "reason", "output", "reproduce", "tolerance_source")


@dataclasses.dataclass(frozen=True)
class Answer:
    """One pair's verdict: `status` (SAME, WRONG, FAIL_TO_RUN, NOT_APPLICABLE), the `rule` that
    decided it, and what it saw. `value` is the error over the tolerance (None where nothing was
    compared; inf where an exact rule found a difference)."""

    status: str
    what: str  # what the two sides compute, e.g. "torch.compile(model) vs eager, inference"
    rule: str = TOLERANCE
    reason: str = ""
    value: float | None = None
    output: str | None = None  # the first differing output, or the worst one when all agree
    outputs: int = 0  # how many outputs were compared
    max_abs: float | None = None
    max_rel: float | None = None
    cosine: float | None = None
    loss_rel: float | None = None
    fp64_error: float | None = None  # the faster side's RMSE against the float64 run
    fp64_error_reference: float | None = None  # the reference side's
    rtol: float | None = None
    atol: float | None = None
    min_cosine: float | None = None
    max_loss_rel: float | None = None
    tolerance_source: str = ""
    reproduce: str | None = None  # a file in the record: inputs and both results (first WRONG)
    # what the check cost: all of it, and the compiled side's first call within it (the compile
    # a warm-up call would otherwise pay: not added time)
    seconds: float | None = None
    first_call_seconds: float | None = None

    @property
    def judged(self) -> bool:
        return self.status in (SAME, WRONG)

    def tolerance_text(self) -> str:
        if self.rule == EXACT:
            return "bit-identical"
        if self.rule == COSINE:
            loss = f", loss within {self.max_loss_rel:g}" if self.max_loss_rel else ""
            return f"cosine >= {self.min_cosine:g}{loss}"
        if self.rtol is None:
            return "tolerance"
        return f"rtol {self.rtol:g}, atol {self.atol:g}"

    def to_facts(self) -> dict:
        # NaN (an RMSE of a float64 run that is NaN itself) is left out: from_facts refuses it
        out = {
            k: v
            for k, v in dataclasses.asdict(self).items()
            if v is not None and not (isinstance(v, float) and math.isnan(v))
        }
        if self.value is not None and math.isinf(self.value):
            out.pop("value")  # JSON has no infinity; an exact mismatch reads back as inf
            out["differs"] = True
        return out

    @classmethod
    def from_facts(cls, data, where) -> Answer:
        """The verdict a record keeps; anything else is bad input naming `where`."""
        if not isinstance(data, dict):
            raise BadInput(f"{where}: the answer is not a JSON object; refused")

        def bad(key, want):
            raise BadInput(f"{where}: answer {key!r} is not {want}; refused")

        status, rule = data.get("status"), data.get("rule", TOLERANCE)
        if status not in STATUSES:
            bad("status", f"one of {', '.join(STATUSES)}")
        if rule not in RULES:
            bad("rule", f"one of {', '.join(RULES)}")
        kwargs = {"status": status, "rule": rule}
        for key in _TEXTS:
            if key in data:
                if not isinstance(data[key], str):
                    bad(key, "text")
                kwargs[key] = data[key][:MAX_TEXT]
        kwargs.setdefault("what", "")
        for key in (*_NUMBERS, "rtol", "atol", "min_cosine", "max_loss_rel"):
            x = data.get(key)
            if x is None:
                continue
            if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):
                bad(key, "a number")
            kwargs[key] = float(x)
        outputs = data.get("outputs", 0)
        if isinstance(outputs, bool) or not isinstance(outputs, int) or outputs < 0:
            bad("outputs", "a count")
        kwargs["outputs"] = outputs
        if data.get("differs") is True and "value" not in kwargs:
            kwargs["value"] = math.inf
        return cls(**kwargs)
