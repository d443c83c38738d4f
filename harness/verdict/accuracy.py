"""The single-run form of the answer rows (`harness answers RUN`): one run's answer checks
judged alone, per model (the accuracy column of PyTorch's dashboard: pass / WRONG / fail_to_run)
and per row; exit 1 on a WRONG, 2 on a fail_to_run, 6 where no answer was judged
(harness.verdict.answers has the rules; docs/answers.md#verdicts)."""

from __future__ import annotations

import dataclasses
import math

from harness.core import answerfacts, escape, exits, records
from harness.core.answerfacts import FAIL_TO_RUN, NOT_APPLICABLE, SAME, WRONG, Answer
from harness.core.exits import BadInput
from harness.core.table import render
from harness.verdict import compare
from harness.verdict.answers import (
    ordered,
    rerun,
    sort_key,
    tolerance,
    value_of,
    wrong_note,
)
from harness.verdict.resultset import ResultSet

PASS = "pass"  # the per-model column's word for every judged answer the same (PyTorch's)


def model_of(row: str, params: dict[str, list[str]]) -> str:
    """The model an answer row is about: its benchmark's `model` parameter where its first
    parameter is one (the models, amp and training-loop suites, a project's models), else the
    benchmark itself (`fusion.PointwiseChain`)."""
    timed = answerfacts.timed_row(row)
    bench, _, rest = timed.partition("(")
    names = params.get(bench) or []
    if names[:1] == ["model"] and rest:
        first = rest.rstrip(")").split(", ")[0]
        return first[1:-1] if len(first) >= 2 and first[0] == first[-1] in "'\"" else first
    return bench.rsplit(".", 1)[0]


@dataclasses.dataclass
class Single:
    """One run's answers judged alone: the rows selected, each model's column, the exit code."""

    rs: ResultSet
    rows: list[tuple[str, Answer]]
    models: list[tuple[str, str, dict[str, int]]]  # (model, its column, statuses counted)
    code: int
    message: str
    model_of: dict[str, str] = dataclasses.field(default_factory=dict)

    def count(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, a in self.rows:
            out[a.status] = out.get(a.status, 0) + 1
        return dict(ordered(out))

    def summary(self) -> str:
        found = ", ".join(f"{n} {s}" for s, n in self.count().items()) or "no answer rows"
        return f"answers: exit {self.code} ({exits.MEANING[self.code]}); {found}"

    def as_json(self) -> dict:
        return {
            "schema": 1,
            "exit": self.code,
            "meaning": exits.MEANING[self.code],
            "run": str(self.rs.path),
            "commit": self.rs.commit,
            "machine": self.rs.machine,
            "message": self.message,
            "counts": self.count(),
            "models": [{"model": m, "answer": col, "counts": dict(c)} for m, col, c in self.models],
            "rows": [
                {
                    "row": name,
                    "timed_row": answerfacts.timed_row(name),
                    "model": self.model_of.get(name, ""),
                    **a.to_facts(),
                    **({"rerun": rerun(name, self.rs)} if a.status in (WRONG, FAIL_TO_RUN) else {}),
                }
                for name, a in self.rows
            ],
        }

    def render(self, fmt: str = "text") -> str:
        """The per-model column, the per-row table, then each WRONG / fail_to_run spelled out
        with its reproduction and rerun; what the record says is escaped (render, escape)."""
        md = fmt == "markdown"
        rec = records.record_of(self.rs.path)
        dirty = " (dirty)" if self.rs.dirty else ""
        title = (
            f"answers of run {rec.run_id if rec else self.rs.path}, commit "
            f"{self.rs.commit[:8]}{dirty}, on {self.rs.machine}"
        )
        out = [f"### {escape.markdown_text(title)}\n" if md else escape.terminal(title)]
        if self.models:
            out.append(
                "per model (pass: every judged answer the same; WRONG: a faster side computes "
                "another result; fail_to_run: a side or the check could not run):"
            )
            cells_ = [
                (m, col, ", ".join(f"{n} {s}" for s, n in c.items()), _first_problem(self, m))
                for m, col, c in self.models
            ]
            out.append(render(("model", "answer", "rows", "first problem"), cells_, fmt))
            out.append("per row (error/tol: the error over the tolerance, at most 1 the same):")
            rows = [
                (
                    name,
                    a.status,
                    _shown(value_of(a)),
                    a.output or "",
                    tolerance(a) if a.status in (SAME, WRONG) else "",
                    a.reason,
                )
                for name, a in self.rows
            ]
            out.append(
                render(("row", "answer", "error/tol", "output", "tolerance", "reason"), rows, fmt)
            )
        bad = [(n, a) for n, a in self.rows if a.status in (WRONG, FAIL_TO_RUN)]
        text = escape.markdown_text if md else escape.terminal
        for name, a in bad:
            said = (
                wrong_note(name, a, self.rs)
                if a.status == WRONG
                else (
                    f"answer check failed to run: {a.reason}; "
                    f"rerun it alone: {rerun(name, self.rs)}"
                )
            )
            out.append(text(f"{a.status} {name}: {said}", limit=escape.MAX_MESSAGE))
        if md:
            said = escape.markdown_text(self.message, lines=True) if self.message else ""
            out.append(escape.strong(self.summary()) + (f"\n\n{said}" if said else ""))
        else:
            out.append(self.summary() + (f"\n{self.message}" if self.message else ""))
        return ("\n\n" if md else "\n").join(x.rstrip("\n") for x in out) + "\n"


def _shown(v: float | None) -> str:
    if v is None or math.isnan(v):
        return ""
    return "inf (not bit-identical)" if math.isinf(v) else f"{v:.3g}"


def _first_problem(s: Single, model: str) -> str:
    for name, a in s.rows:
        if s.model_of.get(name) == model and a.status in (WRONG, FAIL_TO_RUN):
            short = name.split(".", 1)[-1]
            return f"{short}: {a.reason}" if a.reason else short
    return ""


def column(statuses: dict[str, int]) -> str:
    """A model's accuracy column, as PyTorch's dashboard has it: WRONG where any answer of it is
    WRONG, else fail_to_run where any failed to run, else pass where any was judged, else n/a."""
    for status, word in ((WRONG, WRONG), (FAIL_TO_RUN, FAIL_TO_RUN), (SAME, PASS)):
        if statuses.get(status):
            return word
    return NOT_APPLICABLE


def code_of(statuses: dict[str, int]) -> int:
    """2 on a fail_to_run, else 1 on a WRONG, else 6 when no answer was judged, else 0."""
    if statuses.get(FAIL_TO_RUN):
        return exits.FAILED
    if statuses.get(WRONG):
        return exits.REGRESSION
    if not (statuses.get(SAME) or statuses.get(WRONG)):
        return exits.UNDECIDED
    return exits.PASS


def single(
    rs: ResultSet,
    only: list[str] | None = None,
    suites: list[str] | None = None,
    params: dict[str, list[str]] | None = None,
) -> Single:
    """One run's answer rows judged alone (`harness answers`): `suites` keeps those of these
    suites, `only` those whose name or timed row's name a --bench pattern selects; a suite or a
    pattern that selects no answer row is bad input naming what could."""
    names = sorted(rs.answers, key=sort_key)
    if suites:
        held = sorted({n.split(".", 1)[0] for n in names})
        unknown = [s for s in suites if s not in held]
        if unknown:
            raise BadInput(
                f"--suite {', '.join(map(repr, unknown))}: {rs.path} holds no answer row of "
                f"{'it' if len(unknown) == 1 else 'them'}; its answer rows are of: "
                f"{', '.join(held) or 'none (a run made before answer checks)'}"
            )
        names = [n for n in names if n.split(".", 1)[0] in suites]
    if only:

        def both(p: str, n: str) -> bool:
            return compare.selects(p, n) or compare.selects(p, answerfacts.timed_row(n))

        unknown = [p for p in only if not any(both(p, n) for n in names)]
        if unknown:
            raise BadInput(
                f"--bench {', '.join(map(repr, unknown))} selects no answer row of {rs.path} "
                f"(matched against each answer row's name and its timed row's); "
                f"{compare.could_match(names)}"
            )
        names = [n for n in names if any(both(p, n) for p in only)]
    rows = [(n, rs.answers[n]) for n in names]
    params = params or {}
    by_model: dict[str, dict[str, int]] = {}
    model = {n: model_of(n, params) for n in names}
    for n, a in rows:
        c = by_model.setdefault(model[n], {})
        c[a.status] = c.get(a.status, 0) + 1
    models = [(m, column(c), dict(ordered(c))) for m, c in sorted(by_model.items())]
    statuses: dict[str, int] = {}
    for _, a in rows:
        statuses[a.status] = statuses.get(a.status, 0) + 1
    code = code_of(statuses)
    message = ""
    if not rows:
        message = (
            "undecided: the run holds no answer rows (a run made before answer checks, or no "
            "paired row ran); `harness bench` records them"
        )
    elif code == exits.UNDECIDED:
        message = "undecided: no answer was judged (every one n/a: its reason is in the table)"
    return Single(rs, rows, models, code, message, model)
