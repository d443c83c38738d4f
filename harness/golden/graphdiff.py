"""What another torch build (or another commit) changed in the graphs: every registered model under
every front end captured on two sides, compared case by case.

`capture_all` runs on each side (harness.runs.worker graph-capture, in that side's interpreter and
checkout) exactly as the golden tests capture: seeded builds and inputs of the zoo, the same
printers, eager checked for determinism first. `compare` and `render` run here: per case
same / changed / fails on one side / on one side only, with op-count deltas, dynamo's graph and
graph-break changes and a short diff of the lines that changed in substance.
"""

from __future__ import annotations

import dataclasses
import re

from harness.core import exits
from harness.core.table import render as render_table
from harness.golden.diff import golden_diff
from harness.golden.store import op_count_changes

SAME, CHANGED, FAILS, ONE_SIDE, BOTH_FAIL = (
    "same",
    "changed",
    "fails on one side",
    "on one side only",
    "fails on both sides",
)
DIFF_LINES = 30  # a short diff per changed case; the goldens' own failures show more

_GRAPHS = re.compile(r"^graphs: (\d+)$", re.M)
_BREAKS = re.compile(r"^graph_breaks: (\d+)$", re.M)
_REASON = re.compile(r"^break: (.*) \(x(\d+)\)$", re.M)


def capture_all(size: str = "small", models=None, frontends=None) -> dict:
    """{"torch": version, "cases": {"<model>.<frontend>": {"status", "text"|"error"|"reason"}}}
    for every registered model (the user's too) under every front end."""
    import torch

    from harness.core.determinism import nondeterminism
    from harness.core.user_models import load_user_models
    from harness.core.zoo import get_model, model_names
    from harness.golden.capture import FRONTENDS, CaptureError, capture_model

    load_user_models()
    unknown = sorted(set(models or ()) - set(model_names()))
    if unknown:
        raise exits.BadInput(
            f"unknown model {unknown[0]!r} under torch {torch.__version__}; registered: "
            f"{', '.join(model_names())}"
        )
    cases = {}
    for model in models or model_names():
        spec = get_model(model)
        random = nondeterminism(spec.build(size), spec.inputs(size), label=f"model {model!r}")
        for frontend in frontends or FRONTENDS:
            key = f"{model}.{frontend}"
            if frontend in spec.unsupported:
                cases[key] = {"status": "unsupported", "reason": spec.unsupported[frontend]}
            elif random:
                cases[key] = {"status": "failed", "error": random}
            else:
                try:
                    cases[key] = {"status": "ok", "text": capture_model(model, frontend, size).text}
                except CaptureError as exc:
                    cases[key] = {"status": "failed", "error": str(exc)}
    return {"torch": torch.__version__, "size": size, "cases": cases}


def dynamo_summary(text: str) -> tuple[int | None, int | None, dict[str, int]]:
    """(graphs, graph breaks, {reason: count}) from a dynamo printout; Nones for other ones."""
    graphs, breaks = _GRAPHS.search(text), _BREAKS.search(text)
    reasons = {m.group(1): int(m.group(2)) for m in _REASON.finditer(text)}
    return (
        int(graphs.group(1)) if graphs else None,
        int(breaks.group(1)) if breaks else None,
        reasons,
    )


@dataclasses.dataclass
class CaseDiff:
    case: str  # <model>.<frontend>
    verdict: str
    ops: list[tuple[str, int, int]] = dataclasses.field(default_factory=list)
    graphs: tuple[int | None, int | None] = (None, None)
    breaks: tuple[int | None, int | None] = (None, None)
    reasons: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    diff: list[str] = dataclasses.field(default_factory=list)
    note: str = ""

    def summary(self) -> str:
        """One cell: what changed, most telling first."""
        if self.verdict != CHANGED:
            return self.note
        parts = []
        if self.graphs[0] != self.graphs[1]:
            parts.append(f"graphs {self.graphs[0]} -> {self.graphs[1]}")
        if self.breaks[0] != self.breaks[1]:
            parts.append(f"graph breaks {self.breaks[0]} -> {self.breaks[1]}")
        for reason, (a, b) in self.reasons.items():
            parts.append(f"break {reason!r} x{a} -> x{b}")
        parts += [f"{op} {a} -> {b}" for op, a, b in self.ops[:4]]
        if len(self.ops) > 4:
            parts.append(f"{len(self.ops) - 4} more ops")
        return "; ".join(parts) or "same ops, other shapes, arguments or order"


def _first_line(error: str) -> str:
    return error.strip().splitlines()[0][:160] if error.strip() else "failed"


def compare_case(case: str, base: dict | None, head: dict | None) -> CaseDiff:
    if base is None or head is None:
        side = "base" if head is None else "head"
        return CaseDiff(case, ONE_SIDE, note=f"only on {side} (model not registered on the other)")
    kinds = (base["status"], head["status"])
    if kinds == ("unsupported", "unsupported"):
        return CaseDiff(case, SAME, note=f"unsupported: {head['reason']}")
    if "ok" not in kinds:
        return CaseDiff(case, BOTH_FAIL, note=_first_line(head.get("error", head.get("reason"))))
    if kinds != ("ok", "ok"):
        bad, side = (head, "head") if kinds[0] == "ok" else (base, "base")
        why = bad.get("error") or f"unsupported: {bad.get('reason')}"
        return CaseDiff(case, FAILS, note=f"{side}: {_first_line(why)}")
    a, b = base["text"], head["text"]
    if a == b:
        return CaseDiff(case, SAME)
    ops = op_count_changes(a, b)
    ga, ba, ra = dynamo_summary(a)
    gb, bb, rb = dynamo_summary(b)
    reasons = {r: (ra.get(r, 0), rb.get(r, 0)) for r in sorted(set(ra) | set(rb))}
    reasons = {r: counts for r, counts in reasons.items() if counts[0] != counts[1]}
    return CaseDiff(
        case,
        CHANGED,
        ops=ops,
        graphs=(ga, gb),
        breaks=(ba, bb),
        reasons=reasons,
        diff=golden_diff(a, b, (f"{case} base", f"{case} head"), DIFF_LINES),
    )


def compare(base: dict, head: dict) -> list[CaseDiff]:
    cases = sorted(set(base["cases"]) | set(head["cases"]))
    return [compare_case(c, base["cases"].get(c), head["cases"].get(c)) for c in cases]


def exit_code(rows: list[CaseDiff]) -> int:
    """0 all the same, 1 something changed, 2 a case fails or exists on one side only."""
    verdicts = {row.verdict for row in rows}
    if verdicts & {FAILS, ONE_SIDE}:
        return exits.FAILED
    return exits.REGRESSION if CHANGED in verdicts else exits.PASS


def render(rows: list[CaseDiff], sides: dict[str, str], fmt: str = "text") -> str:
    """The table (every case not the same), then a short diff per changed case."""
    counts = {v: sum(r.verdict == v for r in rows) for v in (SAME, CHANGED, FAILS, ONE_SIDE)}
    both = sum(r.verdict == BOTH_FAIL for r in rows)
    head_line = (
        f"graph-diff: {len(rows)} case{'' if len(rows) == 1 else 's'}; {counts[SAME]} same, "
        f"{counts[CHANGED]} changed, "
        f"{counts[FAILS]} fail on one side, {counts[ONE_SIDE]} on one side only"
        + (f", {both} fail on both sides" if both else "")
    )
    shown = [r for r in rows if r.verdict != SAME]
    md = fmt == "markdown"
    out = [f"**{head_line}**" if md else head_line, ""]
    out += [f"- {label}: {what}" for label, what in sides.items()]
    out.append("")
    if shown:
        table_rows = [(*r.case.split(".", 1), r.verdict, r.summary()) for r in shown]
        out.append(render_table(["model", "front end", "verdict", "what changed"], table_rows, fmt))
    for row in shown:
        if row.verdict != CHANGED:
            continue
        if md:
            out += [f"<details><summary>{row.case}</summary>", "", "```diff", *row.diff, "```"]
            out += ["", "</details>", ""]
        else:
            out += [f"{row.case}:", *(f"  {line}" for line in row.diff), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def as_json(rows: list[CaseDiff], sides: dict[str, str]) -> dict:
    return {
        "sides": sides,
        "exit": exit_code(rows),
        "cases": [
            {
                "case": r.case,
                "verdict": r.verdict,
                "ops": [{"op": op, "base": a, "head": b} for op, a, b in r.ops],
                "graphs": list(r.graphs),
                "graph_breaks": list(r.breaks),
                "break_reasons": {k: list(v) for k, v in r.reasons.items()},
                "note": r.note,
                "diff": r.diff,
            }
            for r in rows
        ],
    }
