"""Compare two result sets benchmark by benchmark: a verdict per row, no I/O, no printing.

Which rows are judged, by kind (harness.verdict.metrics); the note of every row says which rule
applied (the same table: docs/gate.md#which-rows-are-judged-and-how):

- exact counters (kernels, ops, graph breaks, graphs, recompiles): always, exactly. More is a
  regression, fewer an improvement (update the baseline).
- memory (bytes): always, ratio beyond 1 ± metrics.MEMORY_TOLERANCE.
- instruction counts ("instructions", callgrind): always, as counters with a relative
  tolerance (metrics.INSTRUCTION_TOLERANCE unless given): beyond it, more is a regression and
  fewer an improvement. Only between counts whose instruction fingerprints agree (valgrind, CPU
  capability under valgrind, Python build, threads: harness.verdict.functions); otherwise the
  row is "not judged: not comparable" with the difference. A changed row names the functions
  whose self counts moved most.
- paired ratios ("ratio": ratios of two sides timed in the same rounds, timing.measure_paired):
  always, with the statistics below. Machine speed cancels in them, which is what makes them
  trustworthy on a shared runner.
- reference-normalised times ("relative", and a bandwidth over a plain copy's, "fraction of copy
  bandwidth": harness.verdict.metrics): with the statistics below, threshold
  max(threshold, band), once the machine has a calibrated noise band for the row; without one,
  "not judged: no calibrated noise band". Unlike paired ratios, because a Python/NumPy
  reference is not the same kind of work as a torch workload: a shared host's memory bursts slow
  the two differently, so one process's level moves against the next one's, also when `harness
  ab` pools processes (the canary's reference, the same torch ops, does cancel it). Figures:
  docs/measurements.md#raw-times-between-processes.
- raw times measured on CUDA (GPU time per call, with their noise in the run record): by their
  recorded noise and a floor, between comparable GPUs (harness.verdict.gpurows); never a bare
  "not judged": the note says why (not comparable, different card, throttled, noisy).
- answer rows ("error/tol": whether a paired row's two sides computed the same result): judged
  absolutely by harness.verdict.answers (WRONG whatever the base says; a base without them is
  no MISSING), each listed right after its timed row.
- raw times ("seconds", compile times included) and throughputs ("samples/s"): only where the
  machine's calibrated noise band for that row (`harness calibrate`) is below the threshold,
  as on a dedicated GPU runner. Otherwise the row is shown, "not judged", with the band, or
  with "no calibrated noise band" when none was measured: an uncalibrated raw time on a shared
  runner moves by tens of percent between identical runs, so judging it by default would make
  the gate cry wolf; the paired ratios carry the verdict there. Compile times
  follow the same rule: quick runs take one warm compile per side, and a compile is seconds of
  Python and C++ compiler work that the neighbours on a shared machine slow down unevenly.

The statistics, for rows that are judged: a REGRESSION needs both
  (a) a significant difference: a two-sided Mann-Whitney U test on the samples (scipy,
      p < alpha; asv's `compare` uses the same test with alpha 0.002) where the sample sizes
      can reach alpha at all, else asv's own rule for few samples: the 99% confidence
      intervals of the two sides (asv_runner.statistics.compute_stats) do not overlap
      (asv._stats.is_different); and
  (b) a change of the medians, in the worse direction, beyond the row's threshold:
      max(configured threshold, its calibrated noise band, and for the few paired rows whose
      sides are unlike work, their measured drift allowance: metrics.DRIFT_ALLOWANCE).
  Run-to-run drift makes (a) alone fire on identical code; (b) alone fires on one unlucky
  sample. A statistical row without samples on both sides (a bare number) is not judged.
"""

from __future__ import annotations

import math
import re
import shlex
import statistics

from harness.core import escape
from harness.verdict import answers, functions, gpurows, instead, metrics
from harness.verdict.results import Entry, ResultSet, fingerprint_of

# the verdicts and the row they are given on (harness.verdict.rows), named here as before
from harness.verdict.rows import (  # noqa: F401
    BAD,
    CHANGED,
    FAILED,
    IMPROVED,
    JUDGED,
    MISSING,
    NOT_JUDGED,
    OK,
    REGRESSION,
    SKIPPED,
    UNKNOWN,
    WRONG,
    Row,
)

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.002
LAYOUT_SIGMAS = 3.0  # an instruction row's tolerance is at least this many standard errors


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


def significance(
    a: list[float], b: list[float], alpha: float = DEFAULT_ALPHA
) -> tuple[bool, float | None, str]:
    """(significant, p or None, how it was decided): Mann-Whitney where the sample sizes can
    reach alpha, else asv's non-overlap of 99% confidence intervals."""
    n, m = len(a), len(b)
    if min_attainable_p(n, m) < alpha:
        p = mann_whitney_p(a, b)
        return p < alpha, p, f"p={p:.2g}"
    from asv._stats import is_different
    from asv_runner.statistics import compute_stats

    different = is_different(None, None, compute_stats(a, 1)[1], compute_stats(b, 1)[1])
    how = "99% CIs do not overlap" if different else "99% CIs overlap"
    return different, None, f"{n}+{m} samples, too few for Mann-Whitney: {how}"


SKIPPED_BOTH = "skipped on both sides"
UNCALIBRATED = "no calibrated noise band"


def _not_counted(info: tuple[dict | None, dict | None]) -> str:
    """Why an instruction row has no count, as its run record says (head's first)."""
    for side in (info[1], info[0]):
        if side and side.get("not_counted"):
            return side["not_counted"]
    return ""


def with_reason(row: Row) -> bool:
    """A row skipped on both sides for a reason of its own (a model that opted out of instruction
    rows, a row counted in full runs only): shown, unlike rows a --bench selection left out."""
    return row.verdict == SKIPPED and not row.note.endswith("(n/a here, or not selected)")


def _not_judged(name, unit, bv, hv, ratio, why: str) -> Row:
    return Row(name, unit, bv, hv, ratio, NOT_JUDGED, why)


def _instructions(
    name: str,
    unit: str,
    bv: float,
    hv: float,
    ratio: float,
    tolerance: float,
    info: tuple[dict | None, dict | None],
    band: float | None = None,
) -> Row:
    """An instruction row: a counter with a relative tolerance, between comparable counts. The
    tolerance is the larger of the gate's, the row's own (a compile row's, set from its A/A
    spread and kept in the run record), LAYOUT_SIGMAS standard errors of the difference where
    the memory layouts a row was counted in spread widely (functions.layout_error), and the
    row's calibrated A/A spread (`band`, harness calibrate) where that exceeds the rest: such a
    row says so instead of flapping."""
    why = functions.not_comparable(*info)
    if why:
        return _not_judged(name, unit, bv, hv, ratio, f"instructions, not comparable: {why}")
    change = f"{ratio - 1:+.2%} ({hv - bv:+,.0f}/call)"
    reasons = []
    own = max((i or {}).get("tolerance") or 0.0 for i in info)
    if own > tolerance:
        tolerance = own
        reasons.append("the row's own, from its A/A spread")
    error = functions.layout_error(*info)
    if error is not None and LAYOUT_SIGMAS * error > tolerance:
        tolerance = LAYOUT_SIGMAS * error
        reasons = [f"{LAYOUT_SIGMAS:g} x the memory layouts' standard error {error:.2%}"]
    if band is not None and band > tolerance:
        reasons = [f"its calibrated A/A spread {band:.2%} exceeds the tolerance {tolerance:.2%}"]
        tolerance = band
    verdict = (
        REGRESSION if ratio > 1 + tolerance else IMPROVED if ratio < 1 / (1 + tolerance) else OK
    )
    note = f"instructions: {change}, tolerance {tolerance:.2%}" + (
        f" ({reasons[0]})" if reasons else ""
    )
    if verdict != OK:
        where = functions.explain(*info)
        note += f"; self counts: {where}" if where else ""
    return Row(name, unit, bv, hv, ratio, verdict, note, threshold=tolerance)


def compare_entry(
    b: Entry,
    h: Entry,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    band: float | None = None,
    *,
    instruction_tolerance: float = metrics.INSTRUCTION_TOLERANCE,
    info: tuple[dict | None, dict | None] = (None, None),
    facts: tuple[dict | None, dict | None] = (None, None),
    card: str | None = None,
    learned=None,
    unlearned: str = "",
    errors: tuple[str, str] = ("", ""),
) -> Row:
    """One row's verdict; `band` is the row's calibrated noise band (None: not calibrated);
    `learned`: its noise between runs from the machine's history (harness.verdict.noise.RowNoise;
    None: not known), `unlearned`: why the history does not know it;
    `info`: an instruction row's stored summaries (base, head) from the run records; `facts`:
    the row's device facts (base, head) from the run records; `card`: why the two runs' GPUs
    cannot judge GPU-time rows (harness.verdict.gpurows.card_difference), or None; `errors`: a
    failed case's error line (base, head) from the run records' asv logs. The row's
    `busy NN%` / `ATen share NN%` label goes into its note."""
    row = _compare_entry(
        b, h, threshold, alpha, band, instruction_tolerance, info, facts, card, learned, errors
    )
    if unlearned and row.note.endswith(UNCALIBRATED):
        row.note += f", and {unlearned}"
    row.device = gpurows.label(facts[1] or facts[0])
    if row.device:
        row.note = f"{row.note}; {row.device}" if row.note else row.device
    return row


def _compare_entry(
    b, h, threshold, alpha, band, instruction_tolerance, info, facts, card, learned, errors
) -> Row:
    name = h.name
    try:
        metrics.kind_of(b.unit)
        kind = metrics.kind_of(h.unit)
    except KeyError as exc:
        return Row(name, str(h.unit), None, None, None, BAD, f"{exc.args[0]} (benchmark {name})")
    if b.unit != h.unit:
        return Row(
            name,
            h.unit,
            None,
            None,
            None,
            BAD,
            f"unit changed from {b.unit!r} to {h.unit!r}; record a new baseline",
        )
    why = _not_counted(info)  # an instruction row's own reason, from the run record
    if b.failed or h.failed:
        side = "both sides" if b.failed and h.failed else ("base" if b.failed else "head")
        # the instruction row's own reason, else the error asv's log kept (head's first)
        error = why or (errors[1] if h.failed else "") or (errors[0] if b.failed else "")
        return Row(
            name,
            h.unit,
            central(b) if not b.failed else None,
            central(h) if not h.failed else None,
            None,
            FAILED,
            f"benchmark failed on {side}: {error}"
            if error
            else f"benchmark failed on {side}; see asv's output for that run",
        )
    if b.skipped or h.skipped:
        if b.skipped and h.skipped:
            return Row(
                name,
                h.unit,
                None,
                None,
                None,
                SKIPPED,
                f"{SKIPPED_BOTH}: {why}" if why else f"{SKIPPED_BOTH} (n/a here, or not selected)",
            )
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
    if kind.kind == metrics.INSTRUCTIONS:
        return _instructions(name, h.unit, bv, hv, ratio, instruction_tolerance, info, band)
    if kind.kind == metrics.MEMORY:
        tol = metrics.MEMORY_TOLERANCE
        verdict = REGRESSION if worse > 1 + tol else IMPROVED if worse < 1 / (1 + tol) else OK
        return Row(
            name, h.unit, bv, hv, ratio, verdict, f"memory, tolerance {tol:.0%}", threshold=tol
        )

    if kind.kind == metrics.TIMING and gpurows.is_gpu(facts[0]) and gpurows.is_gpu(facts[1]):
        return _gpu_time(name, h.unit, bv, hv, ratio, worse, facts, card)
    if learned is not None:
        return _statistical(b, h, kind, threshold, alpha, band, learned)
    drift = None
    # raw times and throughputs: only below a calibrated noise band
    if kind.raw:
        if band is None:
            return _not_judged(name, h.unit, bv, hv, ratio, f"{kind.label}: {UNCALIBRATED}")
        if band >= threshold:
            return _not_judged(
                name,
                h.unit,
                bv,
                hv,
                ratio,
                f"{kind.label}: noise band {band:.0%} >= threshold {threshold:.0%}",
            )
        why = f"{kind.label}, noise band {band:.1%}"
    elif kind.kind == metrics.NORMALISED and band is None:
        # reference-normalised: only with a calibrated band (see the module docstring)
        return _not_judged(name, h.unit, bv, hv, ratio, f"{kind.label}: {UNCALIBRATED}")
    else:
        drift = metrics.drift_allowance(name) if kind.kind == metrics.RATIO else None
        why = kind.label if band is None else f"{kind.label}, noise band {band:.1%}"
        if drift is not None:
            why += f", drift allowance {drift:.0%}"
        threshold = max(threshold, band or 0.0, drift or 0.0)
    basis = "default"
    if band is not None and band >= threshold:
        basis = "band"
    elif kind.kind == metrics.RATIO and drift is not None and drift >= threshold:
        basis = "drift"
    return _judge(b, h, kind, threshold, alpha, why, basis)


# what each basis of a threshold is called in a row's note
BASES = {
    "default": "the gate's --threshold",
    "band": "calibrated noise band",
    "drift": "built-in drift allowance",
}


def _statistical(b, h, kind, threshold, alpha, band, learned) -> Row:
    """A statistical row whose noise between runs the machine's history knows: judged at the
    largest of the gate's threshold, its built-in drift allowance, its calibrated band and its
    history threshold; not judged where that passes the cap (harness.verdict.noise)."""
    name, bv, hv = h.name, central(b), central(h)
    ratio = _ratio(bv, hv)
    if learned.too_noisy:
        return _not_judged(name, h.unit, bv, hv, ratio, f"{kind.label}: {learned.not_judged()}")
    drift = metrics.drift_allowance(name) if kind.kind == metrics.RATIO else None
    bases = [
        (threshold, "default", BASES["default"]),
        (band or 0.0, "band", f"{BASES['band']} {band or 0:.1%}"),
        (drift or 0.0, "drift", f"{BASES['drift']} {drift or 0:.0%}"),
        (learned.threshold, "history", learned.source()),
    ]
    limit, basis, source = max(bases, key=lambda t: t[0])
    if basis != "history":  # the history was heard all the same: say what it said
        source += f"; history of {learned.runs} runs: +-{learned.moves:.1%} between runs"
    row = _judge(b, h, kind, limit, alpha, kind.label, basis, source)
    row.history_runs = learned.runs
    if row.verdict in (REGRESSION, IMPROVED):
        # the head must stand out of its history's newest level too, the same way: a base run
        # that strayed from that level on its own is no change of the head's
        off = learned.off_level(hv)
        worse_off = -off if kind.higher_is_better else off
        beyond = learned.level_threshold()
        if (worse_off <= beyond) if row.verdict == REGRESSION else (worse_off >= -beyond):
            row.note += (
                f"; head within its history's level ({math.expm1(off):+.1%} off, threshold "
                f"{math.expm1(beyond):.1%}): base strayed from it"
            )
            row.verdict = OK
    return row


def _judge(b, h, kind, threshold, alpha, why, basis, source=None) -> Row:
    """A statistical row's verdict: significant within the runs and beyond `threshold`."""
    name, bv, hv = h.name, central(b), central(h)
    ratio = _ratio(bv, hv)
    worse = _worse(ratio, kind.higher_is_better)
    if not (b.samples and h.samples):
        side = (
            "either side" if not (b.samples or h.samples) else ("base" if not b.samples else "head")
        )
        return _not_judged(
            name,
            h.unit,
            bv,
            hv,
            ratio,
            f"{why}: no samples on {side}; a bare number cannot be tested",
        )
    significant, p, how = significance(b.samples, h.samples, alpha)
    beyond = worse > 1 + threshold
    better = worse < 1 / (1 + threshold)
    note = f"{why}: {how}, threshold {threshold:.1%} ({source or BASES[basis]})"
    verdict = OK
    if significant and beyond:
        verdict = REGRESSION
    elif significant and better:
        verdict = IMPROVED
    elif beyond:
        note += " (beyond threshold, not significant)"
    return Row(name, h.unit, bv, hv, ratio, verdict, note, p=p, threshold=threshold, basis=basis)


def _gpu_time(name, unit, bv, hv, ratio, worse, facts, card) -> Row:
    """A raw CUDA time judged by its recorded noise and a floor (harness.verdict.gpurows)."""
    if card:
        return _not_judged(name, unit, bv, hv, ratio, f"GPU time: {card}")
    limit, why = gpurows.threshold(*facts)
    if limit is None:
        return _not_judged(name, unit, bv, hv, ratio, why)
    verdict = REGRESSION if worse > 1 + limit else IMPROVED if worse < 1 / (1 + limit) else OK
    return Row(name, unit, bv, hv, ratio, verdict, why, threshold=limit)


def _info(rs: ResultSet, name: str) -> dict | None:
    """An instruction row's summary from the run record, or why the run did not count it."""
    if name in rs.instructions:
        return rs.instructions[name]
    return {"not_counted": rs.not_counted[name]} if name in rs.not_counted else None


def _failed_one_side(name: str, e: Entry, side: str, ran: ResultSet, why: str) -> Row:
    """A row in one run only, failed there: FAILED, with the error asv's log kept (or the
    instruction row's own reason), then why the other run lacks it."""
    other = "base" if side == "head" else "head"
    error = ran.not_counted.get(name) or ran.errors.get(name)
    said = f": {error}" if error else "; see asv's output for that run"
    return Row(
        name,
        e.unit or "?",
        None,
        None,
        None,
        FAILED,
        f"benchmark failed on {other}{said}; not in {side}{why}",
    )


def selects(pattern: str, name: str) -> bool:
    """Whether a --bench PATTERN selects a row: a regex found in the full name (anchor it,
    `^name$`, for one row) or in the name without its parameters (`Inference.track_time$`
    selects every case of that benchmark), or the name itself, with or without parameters
    (names hold parentheses and dots that a regex would read otherwise)."""
    bare = name.split("(", 1)[0]
    if pattern in (name, bare):
        return True
    try:
        rx = re.compile(pattern)
    except re.error:
        return False
    return rx.search(name) is not None or (bare != name and rx.search(bare) is not None)


def could_match(names, limit: int = 30) -> str:
    """What a --bench pattern that matched nothing could have matched, in forms a pattern can
    use: each benchmark's name without parameters (selects all its cases) with one full case
    name (selects that case exactly), `limit` benchmarks at most."""
    cases: dict[str, list[str]] = {}
    for name in sorted(names):
        cases.setdefault(name.split("(", 1)[0], []).append(name)
    lines = []
    for bare, full in list(cases.items())[:limit]:
        one = full[0] if full[0] != bare else ""
        # names come from result files: one line each, cut (harness.core.escape)
        more = f" ({len(full)} cases, e.g. {escape.terminal(one, escape.MAX_CELL)})" if one else ""
        lines.append(f"  {escape.terminal(bare, escape.MAX_CELL)}{more}")
    if len(cases) > limit:
        lines.append(f"  ... and {len(cases) - limit} more benchmarks")
    return (
        "a pattern is a regex searched in each full name and in the name without its "
        "parameters (anchor it, ^...$, for one benchmark); or give a name as listed:\n"
        + "\n".join(lines)
    )


def compare(
    base: ResultSet,
    head: ResultSet,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    noise: dict[str, float] | None = None,
    only: list[str] | None = None,
    instruction_tolerance: float = metrics.INSTRUCTION_TOLERANCE,
    learned=None,
) -> list[Row]:
    """One Row per benchmark in either set (or in `only`), sorted by name. `learned`: row ->
    its noise between runs from the machine's history (harness.verdict.noise.RowNoise), or a
    function giving why a statistical row has none (`learned.why(name)`)."""
    noise = noise or {}
    card = gpurows.card_difference(fingerprint_of(base), fingerprint_of(head))
    names = sorted(set(base.entries) | set(head.entries), key=answers.sort_key)
    if only:
        names = [n for n in names if any(selects(o, n) for o in only)]
    rows = []
    for name in names:
        if name in base.answers or name in head.answers:  # judged absolutely, never MISSING
            rows.append(answers.judge(name, base, head))
            continue
        b, h = base.entries.get(name), head.entries.get(name)
        if b is None or h is None:
            e = b or h
            side, lacking = ("head", head) if b else ("base", base)
            suite = name.split(".", 1)[0]
            if lacking.suites is not None and suite not in lacking.suites:
                why = (
                    f": suite {suite} was not run there (its run held {', '.join(lacking.suites)})"
                )
            elif lacking.benches and not any(selects(p, name) for p in lacking.benches):
                shown = " ".join(f"--bench {shlex.quote(p)}" for p in lacking.benches)
                why = f": not selected there (its run was restricted to {shown})"
            else:
                why = f" ({lacking.path})"
            if e.failed:  # failed where it ran: the failure is what matters, with its error
                rows.append(_failed_one_side(name, e, side, base if b else head, why))
                continue
            rows.append(
                Row(
                    name,
                    e.unit or "?",
                    central(b) if b else None,
                    central(h) if h else None,
                    None,
                    MISSING,
                    f"not in {side}{why}",
                )
            )
            continue
        if b.version and h.version and b.version != h.version:
            rows.append(
                Row(
                    name,
                    h.unit,
                    central(b),
                    central(h),
                    None,
                    CHANGED,
                    "benchmark changed, not compared (asv version differs)",
                )
            )
            continue
        band = noise.get(name, noise.get(name.split("(")[0]))
        rows.append(
            compare_entry(
                b,
                h,
                threshold,
                alpha,
                band,
                instruction_tolerance=instruction_tolerance,
                info=(_info(base, name), _info(head, name)),
                facts=(base.facts.get(name), head.facts.get(name)),
                card=card,
                learned=learned.get(name) if learned is not None else None,
                unlearned=learned.why(name) if learned is not None else "",
                errors=(base.errors.get(name, ""), head.errors.get(name, "")),
            )
        )
    own = instead.declared(base.instructions, head.instructions)
    return instead.annotate(rows, NOT_JUDGED, set(base.entries) & set(head.entries), own)
