"""Answer rows: what a run's answer checks decided, read from its record and judged absolutely.

The benchmark of a paired row checks, in the same process and outside its timed samples, that
both sides compute the same result (harness.measure.answers) and keeps the verdict as the row
facts of the row's *answer row* (harness.core.answerfacts: `suite.Class.answer_x(params)` beside
`suite.Class.track_x(params)`). Here those facts become rows of the result set (`attach`: unit
"error/tol", the error over the tolerance; n/a is a skipped row; fail_to_run a failed one with
its reason as the error), and the rules that judge them (docs/answers.md#verdicts):

- an answer row is judged absolutely: WRONG fails the gate (exit 1) whatever the base says;
  fail_to_run is a failed benchmark (exit 2); n/a is not judged (its reason shown); same passes;
- growth: a same answer whose error passed max(ANSWER_GROWTH x the base's, ANSWER_GROWTH_FLOOR)
  (harness.verdict.metrics) is a REGRESSION even within its tolerance;
- a base without the row (a record made before answer checks) leaves the head's judged as a new
  row, never MISSING; a row on the base only is not judged, with a note;
- answer rows count as judged rows, and every summary counts them apart from timing rows.

The single-run form (`harness answers RUN`: one run's answers alone, per model and per row) is
harness.verdict.accuracy.
"""

from __future__ import annotations

import math
import pathlib

from harness.core import answerfacts, escape, exits, records, trust
from harness.core.answerfacts import FAIL_TO_RUN, NOT_APPLICABLE, SAME, UNIT, WRONG, Answer
from harness.core.exits import BadInput
from harness.verdict import metrics
from harness.verdict import rows as verdicts
from harness.verdict.rerun import answer_rerun_command
from harness.verdict.resultset import Entry, ResultSet

LOAD_HINT = "torch.load(path, weights_only=True)"
BASE_ONLY = "base only"

SHOWN = 3  # WRONG rows named in a summary line; the table has them all


# ---- reading ---------------------------------------------------------------------------------


def value_of(a: Answer) -> float | None:
    """The answer row's value: the error over the tolerance (inf: an exact rule saw a
    difference), NaN for n/a (asv's skipped), None for fail_to_run (asv's failed)."""
    if a.status == FAIL_TO_RUN:
        return None
    if a.status == NOT_APPLICABLE:
        return math.nan
    if a.value is None:
        return 0.0 if a.status == SAME else math.inf
    return a.value


def attach(rs: ResultSet) -> None:
    """Every row facts entry holding an answer becomes an answer row of `rs`: an Entry of unit
    UNIT, its Answer in rs.answers, a fail_to_run's reason in rs.errors. Damaged facts are bad
    input naming the file (a record is input: harness.core.trust)."""
    for row, facts in sorted(rs.facts.items()):
        if answerfacts.FACTS_KEY not in facts:
            continue
        where = _where(rs, row)
        answer = Answer.from_facts(facts[answerfacts.FACTS_KEY], where)
        if answer.reproduce is not None:
            why = trust.why_not_record_path(answer.reproduce)
            if why:
                raise BadInput(f"{where}: the answer's reproduction file: {why}; refused")
        if row in rs.entries:
            raise BadInput(
                f"{where}: holds an answer for {trust.shown(row)}, a row the result file times; "
                "refused (an answer row is named answer_..., beside its timed track_... row)"
            )
        rs.answers[row] = answer
        rs.entries[row] = Entry(row, UNIT, value_of(answer), None)
        if answer.status == FAIL_TO_RUN:
            rs.errors[row] = answer.reason or "the answer check failed to run"


def _where(rs: ResultSet, row: str) -> str:
    if rs.folder is None:
        return str(rs.path)
    path = records.row_facts_file(rs.folder, row)
    return str(path) if path.is_file() else f"{rs.folder / records.ROW_FACTS} (row {row!r})"


def is_answer(row: verdicts.Row) -> bool:
    return row.unit == UNIT


# ---- what an answer says -------------------------------------------------------------------


def figures(a: Answer) -> str:
    """What the check saw, in figures: the output, the error over the tolerance, the largest
    difference, both sides' errors against float64, the cosine and the loss."""
    parts = []
    if a.value is not None:
        parts.append("not bit-identical" if math.isinf(a.value) else f"{a.value:.3g} x tolerance")
    if a.max_abs is not None:
        rel = f" (relative {a.max_rel:.3g})" if a.max_rel is not None else ""
        parts.append(f"max |diff| {a.max_abs:.3g}{rel}")
    if a.fp64_error is not None:
        ref = a.fp64_error_reference
        parts.append(
            f"RMSE against float64 {a.fp64_error:.3g}"
            + (f" (the reference side's {ref:.3g})" if ref is not None else "")
        )
    if a.cosine is not None:
        parts.append(f"cosine {a.cosine:.6f}")
    if a.loss_rel is not None:
        parts.append(f"loss off by {a.loss_rel:.3g}")
    shown = ", ".join(parts)
    if a.output:
        return f"output '{a.output}'" + (f": {shown}" if shown else "")
    return shown


def tolerance(a: Answer) -> str:
    """The tolerance the check allowed and where it comes from."""
    try:
        text = a.tolerance_text()
    except (TypeError, ValueError):  # a record that names a rule without its bound
        text = f"{a.rule} (its bound is not recorded)"
    return text + (f" ({a.tolerance_source})" if a.tolerance_source else "")


def reproduce(a: Answer, rs: ResultSet) -> str:
    """Where the record keeps the inputs and both sides' differing results (the run's first
    WRONG only), and how to load them; "" where it keeps none."""
    if not a.reproduce:
        return ""
    path = rs.folder / a.reproduce if rs.folder is not None else pathlib.Path(a.reproduce)
    return f"{path} (load it with {LOAD_HINT}: the inputs and both sides' differing results)"


def rerun(row: str, rs: ResultSet, flags: tuple[str, ...] | None = None) -> str:
    """The command that reruns the answer row's check alone (`harness answers --rerun`, or the
    timed row where its check runs only there: answer_rerun_command), in the run's mode: `flags`,
    the run's `harness bench` flags where the caller has them (bench), else the record's."""
    return answer_rerun_command(row, rs.mode_flags if flags is None else flags)


def wrong_note(row: str, a: Answer, rs: ResultSet) -> str:
    """A WRONG row's note: what differs and by how much, the tolerance and its source, where the
    record keeps the reproduction, and the command that reruns the check alone."""
    parts = [f"WRONG answer ({a.what})" if a.what else "WRONG answer"]
    parts[0] += f": {a.reason}" if a.reason else ""
    parts.append(figures(a))
    parts.append(f"tolerance {tolerance(a)}")
    kept = reproduce(a, rs)
    if kept:
        parts.append(f"reproduce: {kept}")
    parts.append(f"rerun the check alone: {rerun(row, rs)}")
    return "; ".join(p for p in parts if p)


def status_text(a: Answer | None) -> str:
    """A cell of an answer column: `same 0.012`, `WRONG 5.2e+03`, `fail_to_run`, `n/a`."""
    if a is None:
        return ""
    if a.status in (SAME, WRONG):
        v = value_of(a)
        return f"{a.status} " + ("(not bit-identical)" if math.isinf(v) else f"{v:.3g}")
    return a.status


def cell(rs: ResultSet, timed: str) -> str:
    """The answer column's cell of a timed row ("" where it has no answer row)."""
    return status_text(rs.answers.get(answerfacts.answer_row(timed)))


def cells(rs: ResultSet, timed: list[str]) -> str:
    """One cell for several cases of a benchmark: their one status, or how many of each."""
    found = [rs.answers.get(answerfacts.answer_row(t)) for t in timed]
    found = [a for a in found if a is not None]
    if not found:
        return ""
    if len(found) == 1:
        return status_text(found[0])
    by: dict[str, int] = {}
    for a in found:
        by[a.status] = by.get(a.status, 0) + 1
    if len(by) == 1:
        return f"{next(iter(by))} ({len(found)} cases)"
    return ", ".join(f"{n} {s}" for s, n in ordered(by))


_ORDER = (WRONG, FAIL_TO_RUN, SAME, NOT_APPLICABLE, BASE_ONLY)


def ordered(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: _ORDER.index(kv[0]) if kv[0] in _ORDER else 9)


# ---- judging against a base ----------------------------------------------------------------


def judge(name: str, base: ResultSet, head: ResultSet) -> verdicts.Row:
    """An answer row's verdict (the module docstring's rules): head's answer judged absolutely,
    the base's consulted only for growth."""
    b, h = base.answers.get(name), head.answers.get(name)
    bv, hv = (value_of(b) if b else None), (value_of(h) if h else None)
    # a ratio only between two errors within tolerance: what the growth rule reads
    both = b is not None and h is not None and b.status == h.status == SAME
    ratio = hv / bv if both and _number(bv) and _number(hv) and bv > 0 else None

    def row(verdict: str, note: str) -> verdicts.Row:
        return verdicts.Row(
            name,
            UNIT,
            bv,
            hv,
            ratio,
            verdict,
            note,
            answer=h.status if h else "",
            answer_base=b.status if b else "",
        )

    if h is None:
        return row(
            verdicts.NOT_JUDGED,
            f"answer on {BASE_ONLY}: the head ran no answer check for it (a run made before "
            "answer checks, or the row did not run there); not judged",
        )
    said = _base_said(b)
    if h.status == NOT_APPLICABLE:
        return row(verdicts.NOT_JUDGED, f"answer n/a: {h.reason or 'no reason recorded'}")
    if h.status == FAIL_TO_RUN:
        return row(
            verdicts.FAILED,
            f"answer check failed to run on head: {h.reason or 'no reason recorded'}; "
            f"rerun it alone: {rerun(name, head)}",
        )
    if h.status == WRONG:
        return row(verdicts.WRONG, f"{wrong_note(name, h, head)}; {said}")
    note = f"answer same ({h.what})" if h.what else "answer same"
    note += f": {figures(h)}; tolerance {tolerance(h)}; {said}"
    if b is not None and b.status == WRONG:
        return row(verdicts.IMPROVED, note)
    if b is not None and b.status == SAME and _number(bv) and _number(hv):
        limit = max(metrics.ANSWER_GROWTH * bv, metrics.ANSWER_GROWTH_FLOOR)
        if hv > limit:
            return row(
                verdicts.REGRESSION,
                f"answer error grew: {hv:.3g} x tolerance, past max({metrics.ANSWER_GROWTH:g} x "
                f"the base's {bv:.3g}, {metrics.ANSWER_GROWTH_FLOOR:g}) = {limit:.3g}, still "
                f"within its tolerance; {note}",
            )
    return row(verdicts.OK, note)


def _number(x) -> bool:
    return x is not None and math.isfinite(x)


def _base_said(b: Answer | None) -> str:
    if b is None:
        return (
            "new row: the base has no answer row (a record made before answer checks), so it "
            "is judged absolutely"
        )
    if b.status in (SAME, WRONG):
        return f"base {status_text(b)}"
    return f"base {b.status}"


def answer_rows(rows: list[verdicts.Row]) -> list[verdicts.Row]:
    """The answer rows among `rows`."""
    return [r for r in rows if is_answer(r)]


def counts(rows: list[verdicts.Row]) -> dict[str, int]:
    """Answer rows by head's status (BASE_ONLY for a row the head lacks)."""
    out: dict[str, int] = {}
    for r in answer_rows(rows):
        key = r.answer or BASE_ONLY
        out[key] = out.get(key, 0) + 1
    return dict(ordered(out))


def tally(rows: list[verdicts.Row]) -> str:
    """`answers: 24 same, 1 WRONG, 2 n/a` ("" where there are no answer rows)."""
    found = counts(rows)
    if not found:
        return ""
    grew = sum(is_answer(r) and r.verdict == verdicts.REGRESSION for r in rows)
    parts = []
    for status, n in found.items():
        text = f"{n} {status}"
        if status == SAME and grew:
            text += f" ({grew} grew past {metrics.ANSWER_GROWTH:g}x the base's error: REGRESSION)"
        if status == NOT_APPLICABLE:
            text += " (not judged)"
        if status == BASE_ONLY:
            text = f"{n} on the base only (not judged)"
        parts.append(text)
    return "answers: " + ", ".join(parts)


def lead(rows: list[verdicts.Row]) -> str:
    """`2 WRONG answer(s) (exit 1 on its own): row, row` for the summary line ("" where no
    answer is WRONG): exit 2 wins over 1, so a WRONG must not hide behind a failure."""
    wrong = [r for r in rows if r.verdict == verdicts.WRONG]
    if not wrong:
        return ""
    shown = ", ".join(escape.terminal(r.name, 100) for r in wrong[:SHOWN])
    more = f", +{len(wrong) - SHOWN} more" if len(wrong) > SHOWN else ""
    return f"{len(wrong)} WRONG answer(s) (exit {exits.REGRESSION} on its own): {shown}{more}"


def sort_key(name: str) -> tuple[str, bool]:
    """Rows in name order, each answer row right after its timed row."""
    if answerfacts.is_answer_row(name):
        return (answerfacts.timed_row(name), True)
    return (name, False)


# ---- a run's wrong answers, loudly ---------------------------------------------------------


def problems(rs: ResultSet, flags: tuple[str, ...] | None = None) -> list[str]:
    """`harness bench`'s block after its table: every WRONG and fail_to_run answer of the run,
    with its output, error and tolerance and the command that reruns its check alone (`flags`:
    the run's `harness bench` flags, for rerun), escaped for a terminal; empty where there are
    none."""
    bad = [(n, a) for n, a in sorted(rs.answers.items()) if a.status in (WRONG, FAIL_TO_RUN)]
    if not bad:
        return []
    wrong = sum(a.status == WRONG for _, a in bad)
    failed = len(bad) - wrong
    said = [f"{wrong} WRONG answer(s)"] if wrong else []
    said += [f"{failed} answer check(s) that failed to run"] if failed else []
    out = [
        f"!!! {' and '.join(said)}: the faster side of a paired row computes something else (or "
        "could not be checked); its speed-up is no speed-up, and `harness gate` fails on it:"
    ]
    for name, a in bad:
        if a.status == WRONG:
            line = f"{figures(a)}; tolerance {tolerance(a)}; {a.reason}"
            kept = reproduce(a, rs)
            line += f"; reproduce: {kept}" if kept else ""
        else:
            line = a.reason or "no reason recorded"
        out.append(
            f"  {a.status} {escape.terminal(name, escape.MAX_CELL)}: "
            f"{escape.terminal(line, escape.MAX_PROSE)}"
        )
        # escaped for a shell (shell_join), then for the terminal; cut only past MAX_PROSE (a
        # name that long is a hostile record's, with nothing worth pasting)
        said = escape.terminal(rerun(name, rs, flags), escape.MAX_PROSE)
        out.append(f"    rerun the check alone: {said}")
    rec = records.record_of(rs.path)
    name = escape.shell(rec.run_id if rec else str(rs.path))
    out.append(f"  (`harness answers {name}` lists every answer of the run, per model and per row)")
    return out
