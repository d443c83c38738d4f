"""Operator by operator, what changed between two runs: the first bad night explained.

Reads what harness.measure.profiles stored in each run record:
- for an exact counter step (unit ops or kernels): the counts by operator name of that row in the
  last run before and the first after (op-counts.json), e.g. `aten::sqrt +1 (1 -> 2)`;
- for a timing step: the workload's profile summaries in both runs (profiles.json, stored by full
  runs and `harness bench --profile`): the operators whose self time per call changed most.

Each function returns structured data (for --json) and the lines to print; when a run stores
nothing to compare, the line says which run and why (a quick run, or a record made before these
files existed), never a guess.
"""

from __future__ import annotations

from harness.core import records

TOP_CHANGES = 5


def count_changes(before: dict, after: dict) -> list[dict]:
    """Operators whose count per call differs: [{op, before, after, delta}], biggest change
    first."""
    out = [
        {
            "op": op,
            "before": before.get(op, 0),
            "after": after.get(op, 0),
            "delta": after.get(op, 0) - before.get(op, 0),
        }
        for op in sorted(set(before) | set(after))
    ]
    out = [c for c in out if c["delta"] != 0]
    return sorted(out, key=lambda c: (-abs(c["delta"]), c["op"]))


def _self_us(summary: dict, device: bool) -> dict[str, float]:
    field = "self_cuda_us" if device else "self_cpu_us"
    return {
        o["name"]: float(o.get(field) or 0) for o in summary.get("ops", []) if isinstance(o, dict)
    }


def profile_changes(before: dict, after: dict, top: int = TOP_CHANGES) -> dict:
    """Two profile summaries of one target -> the operators whose self time per call changed most:
    {"time": "self CPU" | "self CUDA", "total_before", "total_after", "ops": [{op, before_us,
    after_us, delta_us, calls_before, calls_after}]}: the `top` biggest changes, and every operator
    whose calls per call changed. An operator missing from a summary's top list counts as 0 there
    (it was not among the top operators)."""
    device = before.get("device") == "cuda" and after.get("device") == "cuda"
    b, a = _self_us(before, device), _self_us(after, device)
    calls_b = {o["name"]: o.get("calls") for o in before.get("ops", []) if isinstance(o, dict)}
    calls_a = {o["name"]: o.get("calls") for o in after.get("ops", []) if isinstance(o, dict)}
    ops = [
        {
            "op": op,
            "before_us": b.get(op, 0.0),
            "after_us": a.get(op, 0.0),
            "delta_us": round(a.get(op, 0.0) - b.get(op, 0.0), 3),
            "calls_before": calls_b.get(op, 0),
            "calls_after": calls_a.get(op, 0),
        }
        for op in set(b) | set(a)
    ]
    ops = [c for c in ops if c["delta_us"] != 0 or c["calls_before"] != c["calls_after"]]
    ops.sort(key=lambda c: (-abs(c["delta_us"]), c["op"]))
    # an operator called more or less often per call is news whatever its time (the canary's
    # extra op)
    ops = ops[:top] + [c for c in ops[top:] if c["calls_before"] != c["calls_after"]]
    total = "self_cuda_us" if device else "self_cpu_us"
    return {
        "time": "self CUDA" if device else "self CPU",
        "total_before": before.get(total),
        "total_after": after.get(total),
        "ops": ops,
    }


def _why_missing(rec: records.RunRecord, what: str) -> str:
    if rec.meta.get("quick") and not rec.meta.get("profiled") and what == "profile":
        return (
            f"no profile stored in {rec.run_id} "
            "(quick run; `harness bench --profile` or --full stores one)"
        )
    if rec.meta.get("mode") == "fast" and not rec.meta.get("profiled") and what == "profile":
        return (
            f"no profile stored in {rec.run_id} "
            "(fast run; `harness bench --profile` or --full stores one)"
        )
    if "operator_pass" in rec.meta and rec.meta["operator_pass"] != "done":
        return f"no {what} stored in {rec.run_id} (operator pass {rec.meta['operator_pass']})"
    return f"no {what} stored in {rec.run_id} (a run made before they were stored, or not profiled)"


def explain_counter(
    row: str,
    before: records.RunRecord,
    after: records.RunRecord,
    values: tuple[float, float] | None = None,
) -> tuple[list | None, list[str]]:
    """(changes or None, lines) for a counter row's step between two runs; `values`: the row's
    values in those runs as asv stored them (a breakdown that sums to another total says so)."""
    sides, notes = [], []
    for rec in (before, after):
        rows = records.read_op_counts(rec.path)
        entry = (rows or {}).get(row)
        if not isinstance(entry, dict) or not isinstance(entry.get("counts"), dict):
            error = entry.get("error") if isinstance(entry, dict) else None
            why = (
                f"counting failed in {rec.run_id}: {error}"
                if error
                else f"the operator pass of {rec.run_id} did not count this row"
                if rows is not None
                else _why_missing(rec, "per-operator counts")
            )
            return None, [f"which operators: {why}"]
        sides.append(entry["counts"])
        if values is not None and entry.get("total") != values[len(sides) - 1]:
            notes.append(
                f"{rec.run_id}: the operator pass counted {entry.get('total')}, asv "
                f"{values[len(sides) - 1]:g} (a count that varies between calls)"
            )
    changes = count_changes(*sides)
    if not changes:
        return [], [
            "which operators: the same operators and counts in both runs' operator pass "
            "(the change did not repeat there)"
        ] + notes
    return changes, [
        "which operators: "
        + ", ".join(f"{c['op']} {c['delta']:+d} ({c['before']} -> {c['after']})" for c in changes)
    ] + notes


def explain_timing(
    row: str, before: records.RunRecord, after: records.RunRecord
) -> tuple[dict | None, list[str]]:
    """(per target label: profile_changes, lines) for a timing row's step between two runs."""
    workload = records.workload_of(row)
    stored = []
    for rec in (before, after):
        data = records.read_profiles(rec.path)
        if data is None:
            return None, [f"operator-level profile difference: {_why_missing(rec, 'profile')}"]
        entry = data["workloads"].get(workload)
        if not isinstance(entry, dict):
            why = (data.get("skipped") or {}).get(
                workload, "its benchmark class has no profile_targets"
            )
            return None, [
                "operator-level profile difference: "
                f"no profile of {workload} in {rec.run_id} ({why})"
            ]
        if isinstance(entry.get("error"), str):
            return None, [
                f"operator-level profile difference: profiling {workload} failed in "
                f"{rec.run_id} ({entry['error']})"
            ]
        stored.append(entry)
    out, lines = {}, []
    for label in [k for k in stored[0] if k in stored[1]]:
        b, a = stored[0][label], stored[1][label]
        if not (isinstance(b, dict) and isinstance(a, dict)):
            continue
        if "error" in b or "error" in a:
            lines.append(f"profile of {label}: failed ({b.get('error') or a.get('error')})")
            continue
        ch = profile_changes(b, a)
        out[label] = ch
        ops = (
            "; ".join(
                f"{c['op']} {c['before_us']:.4g} -> {c['after_us']:.4g} ({c['delta_us']:+.4g}"
                + (
                    f"; calls {c['calls_before']:g} -> {c['calls_after']:g})"
                    if c["calls_before"] != c["calls_after"]
                    else ")"
                )
                for c in ch["ops"]
            )
            or "no operator's self time changed"
        )
        lines.append(
            f"operator-level profile, {label} ({ch['time']} us per call; total "
            f"{ch['total_before']:.4g} -> {ch['total_after']:.4g}): {ops}"
        )
    return out, lines or [
        f"operator-level profile difference: no target of {workload} in both runs"
    ]
