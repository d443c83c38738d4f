"""Between-process verdicts for `harness ab`: SAME, DIFFERENT or UNKNOWN from per-pair ratios.

`harness ab` runs the two sides in alternating processes (A B, B A, A B, ...). Each pair of
processes gives, per row, one ratio: the head process's value over the base process's
(process_value: the fastest call of a raw time, else the median).
Raw and reference-normalised times move between processes on a shared runner by more than the
changes worth catching, but both processes of a pair share the host's state of those seconds,
so their ratio moves far less. The verdict on such a row comes from the distribution of its
per-pair ratios:

- a Student t interval on the log ratios (their mean +- t * s / sqrt(n)) at CONFIDENCE. Log
  ratios because a slowdown and the matching speed-up are symmetric there; t because n is
  small (3 to 20 pairs). An outlier pair widens the interval more than it moves it, so a host
  hiccup makes a row UNKNOWN (more pairs) rather than DIFFERENT;
- SAME: the interval lies inside +-threshold; DIFFERENT: it lies wholly beyond +threshold (a
  regression for a lower-is-better row) or beyond -threshold (an improvement); UNKNOWN:
  neither yet. UNKNOWN is not a pass: more pairs or a quieter runner decide it.

docs/gate.md has the reasoning and docs/measurements.md the measured per-pair spreads.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

SAME, DIFFERENT, UNKNOWN = "SAME", "DIFFERENT", "UNKNOWN"
CONFIDENCE = 0.99  # two-sided; ab looks after every pair, so the level is kept high
DEFAULT_THRESHOLD = 0.02  # the band of "the same" for rows judged across processes
MIN_PAIRS = 3  # below this a t interval is wider than any threshold worth having
MAX_PAIRS_SOLVED = 100_000  # pairs_to_decide looks no further


@dataclasses.dataclass(frozen=True)
class Interval:
    """The per-pair ratios' centre and confidence interval, as ratios (head / base)."""

    n: int
    ratio: float  # exp(mean log ratio): the geometric mean of the per-pair ratios
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.ratio:.3f} [{self.low:.3f}, {self.high:.3f}] n={self.n}"


@dataclasses.dataclass(frozen=True)
class Decision:
    verdict: str  # SAME, DIFFERENT or UNKNOWN
    worse: bool | None  # for DIFFERENT: the head is worse (a regression); None otherwise
    interval: Interval | None
    why: str


def interval(ratios: list[float], confidence: float = CONFIDENCE) -> Interval | None:
    """The t interval of the per-pair ratios (None below two usable ratios)."""
    from scipy.stats import t

    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    n = len(logs)
    if n < 2:
        return None
    mean = statistics.fmean(logs)
    half = t.ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return Interval(n, math.exp(mean), math.exp(mean - half), math.exp(mean + half))


def decide(
    ratios: list[float],
    threshold: float = DEFAULT_THRESHOLD,
    *,
    higher_is_better: bool = False,
    confidence: float = CONFIDENCE,
    min_pairs: int = MIN_PAIRS,
) -> Decision:
    """SAME, DIFFERENT or UNKNOWN for one row's per-pair ratios (head / base)."""
    ci = interval(ratios, confidence)
    if ci is None or ci.n < min_pairs:
        n = 0 if ci is None else ci.n
        return Decision(UNKNOWN, None, ci, f"{n} pair(s), at least {min_pairs} decide")
    upper, lower = math.log1p(threshold), -math.log1p(threshold)
    lo, hi = math.log(ci.low), math.log(ci.high)
    if lower < lo and hi < upper:
        return Decision(SAME, None, ci, f"interval inside +-{threshold:.1%}")
    if lo > upper or hi < lower:
        slower = lo > upper  # head / base above 1
        worse = slower != higher_is_better
        return Decision(
            DIFFERENT, worse, ci, f"interval beyond {'+' if slower else '-'}{threshold:.1%}"
        )
    return Decision(UNKNOWN, None, ci, f"interval crosses +-{threshold:.1%}")


def pairs_to_decide(
    ratios: list[float], threshold: float, confidence: float = CONFIDENCE
) -> int | None:
    """About how many pairs would make this row SAME or DIFFERENT if its ratios kept their
    centre and spread: the fewest n whose t interval (n - 1 degrees of freedom) fits between
    the centre and the nearer edge of the band (None when the spread is zero, the centre sits
    on an edge, or more than MAX_PAIRS_SOLVED pairs would be needed)."""
    import numpy as np
    from scipy.stats import t

    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    if len(logs) < 2:
        return None
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    room = abs(abs(mean) - math.log1p(threshold))  # how far the centre is from the edge
    if sd == 0 or room == 0:
        return None
    n = np.arange(len(logs) + 1, MAX_PAIRS_SOLVED + 1)
    fits = np.nonzero(t.ppf(0.5 + confidence / 2, n - 1) * sd / np.sqrt(n) < room)[0]
    return int(n[fits[0]]) if fits.size else None


def process_value(samples: list[float] | None, value: float | None, unit: str) -> float | None:
    """One process's value of a row, for its pair's ratio. A raw time: the process's fastest
    call, since a shared runner's noise only adds time and the median of one process moved as
    much between the halves of its own window as between processes (docs/measurements.md);
    a throughput: its highest; other rows: the median of the samples. Without samples, asv's
    stored value."""
    from harness.verdict import metrics

    if not samples:
        return value
    try:
        kind = metrics.kind_of(unit)
    except KeyError:
        kind = None
    if kind is not None and kind.raw:
        return max(samples) if kind.higher_is_better else min(samples)
    return statistics.median(samples)


def judged_across_processes(unit: str) -> bool:
    """Rows ab judges from per-pair ratios: raw and reference-normalised times and throughputs
    (paired ratios keep their within-process samples; counters, memory and instruction counts
    their own rules)."""
    from harness.verdict import metrics

    try:
        kind = metrics.kind_of(unit)
    except KeyError:
        return False
    return kind.raw or kind.kind == metrics.NORMALISED


def ratios_of(pairs: list[tuple[float | None, float | None]]) -> list[float]:
    """head / base of every pair where both processes gave a positive value."""
    return [h / b for b, h in pairs if b and h and b > 0 and h > 0]


def judge(
    rows: list,
    pairs: dict[str, list[tuple[float | None, float | None]]],
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = CONFIDENCE,
) -> list:
    """The gate's rows (harness.verdict.compare.Row) with every row judged across processes
    replaced by its per-pair verdict: SAME is ok, DIFFERENT a regression or an improvement by
    direction, UNKNOWN stays UNKNOWN. Rows the gate found failed, missing or skipped keep
    that verdict."""
    from harness.verdict import compare, metrics

    out = []
    for row in rows:
        if (
            row.name not in pairs
            or not judged_across_processes(row.unit)
            or row.verdict
            in (
                compare.FAILED,
                compare.MISSING,
                compare.SKIPPED,
                compare.BAD,
                compare.CHANGED,
            )
        ):
            out.append(row)
            continue
        kind = metrics.kind_of(row.unit)
        ratios = ratios_of(pairs[row.name])
        d = decide(ratios, threshold, higher_is_better=kind.higher_is_better, confidence=confidence)
        verdict = {SAME: compare.OK, UNKNOWN: compare.UNKNOWN}.get(
            d.verdict, compare.REGRESSION if d.worse else compare.IMPROVED
        )
        note = f"{kind.label} across processes: {d.verdict}, {d.why}"
        if d.interval:
            note = (
                f"{kind.label} across processes: per-pair ratio {d.interval} "
                f"({confidence:.0%}), {d.verdict}: {d.why}"
            )
        if d.verdict == UNKNOWN:
            more = pairs_to_decide(ratios, threshold, confidence)
            note += (
                f"; about {more} pairs would decide it" if more else "; a quieter runner decides it"
            )
        note += f"; {row.device}" if row.device else ""
        ratio = d.interval.ratio if d.interval else row.ratio
        out.append(
            dataclasses.replace(row, ratio=ratio, verdict=verdict, note=note, threshold=threshold)
        )
    return out
