"""Compare two result sets benchmark by benchmark: a verdict per row, no I/O, no printing.

How each kind of metric (harness.verdict.metrics) is compared:

- counters (kernels, ops, graph breaks, graphs, recompiles): exactly. More is a regression,
  fewer is an improvement (update the baseline).
- memory (bytes): ratio beyond 1 ± metrics.MEMORY_TOLERANCE.
- timings, throughputs and ratios: a REGRESSION needs both
  (a) a significant Mann-Whitney U test on the per-iteration samples (scipy, two-sided,
      p < alpha; asv's `compare` uses the same test with alpha 0.002), and
  (b) a change of the medians, in the worse direction, beyond the benchmark's threshold:
      max(configured threshold, its calibrated noise band).
  Run-to-run drift on a shared machine makes (a) alone fire on identical code; (b) alone
  fires on one unlucky sample. Without samples on both sides only (b) applies (noted).
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from harness.verdict import metrics
from harness.verdict.results import Entry, ResultSet

OK, IMPROVED, REGRESSION = "ok", "improved", "REGRESSION"
FAILED, MISSING, SKIPPED, BAD = "FAILED", "MISSING", "skipped", "BAD INPUT"
CHANGED = "changed"  # the benchmark's code differs between the sides: not compared, exit unaffected

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.002


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


def central(e: Entry) -> float | None:
    """The median of the samples when there are samples, else asv's stored value."""
    if e.samples:
        return statistics.median(e.samples)
    return e.value


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    from scipy.stats import mannwhitneyu

    if len(set(a) | set(b)) == 1:  # all values equal: nothing to test
        return 1.0
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def min_attainable_p(n: int, m: int) -> float:
    """The smallest two-sided p an exact Mann-Whitney test can give for these sizes."""
    if not (n and m):
        return 1.0
    ways = math.comb(n + m, min(n, m))
    return 0.0 if ways.bit_length() > 1000 else 2.0 / ways  # hundreds of samples: below any alpha


def _ratio(base: float, head: float) -> float:
    if base == 0:
        return 1.0 if head == 0 else math.inf
    return head / base


def _worse(ratio: float, higher_is_better: bool) -> float:
    """>1 means worse, whatever the direction of the metric."""
    if higher_is_better:
        return math.inf if ratio == 0 else 1.0 / ratio
    return ratio


def compare_entry(b: Entry, h: Entry, threshold: float = DEFAULT_THRESHOLD,
                  alpha: float = DEFAULT_ALPHA) -> Row:
    name = h.name
    try:
        metrics.kind_of(b.unit)
        kind = metrics.kind_of(h.unit)
    except KeyError as exc:
        return Row(name, str(h.unit), None, None, None, BAD, f"{exc.args[0]} (benchmark {name})")
    if b.unit != h.unit:
        return Row(name, h.unit, None, None, None, BAD,
                   f"unit changed from {b.unit!r} to {h.unit!r}; record a new baseline")
    if b.failed or h.failed:
        side = "both sides" if b.failed and h.failed else ("base" if b.failed else "head")
        return Row(name, h.unit, central(b) if not b.failed else None,
                   central(h) if not h.failed else None, None, FAILED,
                   f"benchmark failed on {side}; see asv's output for that run")
    if b.skipped or h.skipped:
        if b.skipped and h.skipped:
            return Row(name, h.unit, None, None, None, SKIPPED, "skipped on both sides (n/a here)")
        side = "base" if b.skipped else "head"
        return Row(name, h.unit, central(b), central(h), None, MISSING, f"skipped on {side} only")

    bv, hv = central(b), central(h)
    ratio = _ratio(bv, hv)
    worse = _worse(ratio, kind.higher_is_better)
    if kind.exact:
        if hv == bv:
            return Row(name, h.unit, bv, hv, ratio, OK, "exact")
        verdict = REGRESSION if worse > 1 else IMPROVED
        return Row(name, h.unit, bv, hv, ratio, verdict, f"exact: {hv - bv:+g} {h.unit}")
    if kind.kind == metrics.MEMORY:
        tol = metrics.MEMORY_TOLERANCE
        verdict = REGRESSION if worse > 1 + tol else IMPROVED if worse < 1 / (1 + tol) else OK
        return Row(name, h.unit, bv, hv, ratio, verdict, f"tolerance {tol:.0%}", threshold=tol)

    # timings, throughputs, ratios
    beyond = worse > 1 + threshold
    better = worse < 1 / (1 + threshold)
    if b.samples and h.samples:
        n, m = len(b.samples), len(h.samples)
        if min_attainable_p(n, m) >= alpha:
            note = f"only {n}+{m} samples: threshold only"
            p = None
            significant = True
        else:
            p = mann_whitney_p(b.samples, h.samples)
            significant = p < alpha
            note = f"p={p:.2g}"
    else:
        p, significant, note = None, True, "no samples: threshold only"
    note += f", threshold {threshold:.1%}"
    verdict = OK
    if significant and beyond:
        verdict = REGRESSION
    elif significant and better:
        verdict = IMPROVED
    elif beyond:
        note += " (beyond threshold, not significant)"
    return Row(name, h.unit, bv, hv, ratio, verdict, note, p=p, threshold=threshold)


def compare(base: ResultSet, head: ResultSet, threshold: float = DEFAULT_THRESHOLD,
            alpha: float = DEFAULT_ALPHA, noise: dict[str, float] | None = None,
            only: list[str] | None = None) -> list[Row]:
    """One Row per benchmark in either set (or in `only`), sorted by name."""
    noise = noise or {}
    names = sorted(set(base.entries) | set(head.entries))
    if only:
        names = [n for n in names if any(n == o or n.startswith(o + "(") for o in only)]
    rows = []
    for name in names:
        b, h = base.entries.get(name), head.entries.get(name)
        if b is None or h is None:
            e = b or h
            side = "head" if b else "base"
            rows.append(Row(name, e.unit or "?", central(b) if b else None, central(h) if h else None,
                            None, MISSING, f"not in {side} ({(head if b else base).path})"))
            continue
        if b.version and h.version and b.version != h.version:
            rows.append(Row(name, h.unit, central(b), central(h), None, CHANGED,
                            "benchmark changed, not compared (asv version differs)"))
            continue
        thr = max(threshold, noise.get(name, noise.get(name.split("(")[0], 0.0)))
        rows.append(compare_entry(b, h, thr, alpha))
    return rows
