"""Every statistical row's noise between runs, learned from the machine's history
(docs/gate.md#noise-learned-from-the-history).

Within one run the gate sees a row's noise from its rounds; between two runs a shared machine
moves the row further (its load, its memory, the process's own layout). How far, the machine's
history says: every earlier run of the same machine, mode and comparable fingerprint is one
draw of that between-run spread. Nothing new is stored: the spread is computed from the run
records on demand (local ones, or pulled with `harness store pull`).

Per row, over the newest clean runs (DEFAULT_LAST, at least MIN_RUNS):
1. the series of the run's central values, in logs (a slowdown and the matching speed-up are
   symmetric there), oldest first;
2. split where `harness history` finds a step in it (harness.verdict.steps.find_steps, its
   threshold set from a first, step-robust estimate: the Shamos estimate of successive
   differences): a real step is not noise;
3. the spread `sigma` is the Shamos estimator (1.0483 x the median of all pairwise absolute
   differences; Shamos 1976, Rousseeuw & Croux 1993) over pairs of runs in the same segment:
   robust to outliers (a breakdown point of 29%), and one run, in n - 1 of the n(n - 1)/2 pairs,
   moves the median by at most 2/n of the pairs, whatever its value;
4. pooled with its kind's typical spread on the same history (the median sigma of the rows of
   its kind, weighted as PRIOR_RUNS runs against the row's own runs less its levels; never
   narrowing a row): the rows of a kind share a machine's noise, and a few runs of a quiet spell
   cannot show a row's tail;
5. the threshold for a gate of two runs: MULTIPLE x sqrt(2) x sigma in logs (each run draws its
   own between-run deviation), as a relative change exp(.) - 1. MULTIPLE is chosen so that a
   whole-suite A/A gate stays clean (the rule and its measured rate: docs/gate.md).

A run that sits off its segments for most rows at once (the median over rows of its distance
from its segment in sigmas beyond OUTLIER_RUN: a machine that was swapping) is named and left
out. A run being judged is never part of its own history. A run measured in a noisier state
than its history (its rows' spread within the run, or its reference workloads' time, beyond
the history's typical) has its thresholds widened by that factor (its own deviation is that much
larger), and from NOISIER on the gate's header says so; a row whose threshold passes CAP then is
not judged, saying why.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from harness.core import provenance, records
from harness.core.exits import BadInput
from harness.verdict import gpurows, metrics
from harness.verdict.compare import DEFAULT_THRESHOLD, central
from harness.verdict.results import ResultSet, load, not_comparable
from harness.verdict.steps import find_steps

DEFAULT_LAST = 30  # the newest clean runs a row's noise is learned from
MIN_RUNS = 5  # fewer comparable runs: the row's noise is unknown (judged as before)
CAP = 0.25  # a history threshold above this: the row moves too much to be judged
MULTIPLE = 4.0  # the threshold in sigmas of one run's deviation (docs/gate.md: the rule)
OUTLIER_RUN = 2.5  # a run whose median |deviation| over rows passes this many sigmas is left out
NOISIER = 1.5  # a judged run this many times noisier than its history is said so in the header
PRIOR_RUNS = 4  # a row's sigma is pooled with its kind's typical sigma, weighted as this many runs
SHAMOS = 1.0483  # sigma of a normal sample = SHAMOS x median |x_i - x_j|
MIN_SAMPLES = 4  # samples a row needs in a run for its within-run spread to count
STEP_SIGMAS = 2.0  # a level's step is looked for down to this many sigmas of a run's difference
MIN_STEP = 0.01  # ...and never below 1%


def statistical(unit: str | None) -> bool:
    """Rows whose noise the history can teach: paired ratios, normalised times and bandwidths,
    raw times and throughputs (counters, memory and instruction counts have rules of their own)."""
    try:
        kind = metrics.kind_of(unit)
    except KeyError:
        return False
    return kind.kind in (metrics.RATIO, metrics.NORMALISED, metrics.TIMING, metrics.THROUGHPUT)


# ---- the estimator: pure functions of one row's series ----


def shamos(diffs: list[float]) -> float | None:
    """SHAMOS x the median of absolute pairwise differences (None when there are none)."""
    return SHAMOS * statistics.median(abs(d) for d in diffs) if diffs else None


def segments(values: list[float], threshold: float) -> list[tuple[int, int]]:
    """[start, end) of each level of the series: split where `harness history` finds a step
    (confirmed or possible) at this threshold."""
    if len(values) < 2:
        return [(0, len(values))]
    cuts = sorted({f["index"] for f in find_steps(values, False, threshold)})
    bounds = [0, *cuts, len(values)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


@dataclasses.dataclass(frozen=True)
class Spread:
    """One row's spread between runs: sigma of one run's log value, within `segments` levels;
    the newest level (the median log value of its `last` runs)."""

    sigma: float
    runs: int
    segments: int
    level: float = 0.0
    last: int = 1
    own: float | None = None  # the row's own sigma, before pooling with its kind (None: same)

    @property
    def freedom(self) -> int:
        """Degrees of freedom of the estimate: runs less one per level."""
        return max(0, self.runs - self.segments)


def pooled(spreads: dict[str, Spread], kinds: dict[str, str]) -> dict[str, Spread]:
    """Each row's sigma pooled with the median sigma of the rows of its kind on the same history,
    that median weighted as PRIOR_RUNS runs, and never below the row's own: a few runs of a quiet
    spell cannot know the row's tail (rows of a kind share a machine's noise); a long history
    speaks for itself."""
    typical: dict[str, list[float]] = {}
    for name, s in spreads.items():
        typical.setdefault(kinds.get(name, ""), []).append(s.sigma)
    median = {k: statistics.median(v) for k, v in typical.items()}
    out = {}
    for name, s in spreads.items():
        prior, df = median[kinds.get(name, "")], s.freedom
        sigma = math.sqrt((df * s.sigma**2 + PRIOR_RUNS * prior**2) / (df + PRIOR_RUNS))
        out[name] = dataclasses.replace(s, sigma=sigma, own=s.sigma) if sigma > s.sigma else s
    return out


def spread(values: list[float]) -> Spread | None:
    """The row's between-run sigma (in logs) from its series, oldest first; None for fewer than
    MIN_RUNS positive values."""
    values = [v for v in values if v > 0 and math.isfinite(v)]
    if len(values) < MIN_RUNS:
        return None
    logs = [math.log(v) for v in values]
    first = shamos([b - a for a, b in zip(logs, logs[1:])]) or 0.0
    # steps are looked for down to STEP_SIGMAS of the first estimate (history's Mann-Whitney test
    # keeps noise from splitting): a step the gate would not call a change still is no noise
    levels = segments(values, max(MIN_STEP, math.expm1(STEP_SIGMAS * math.sqrt(2) * first)))
    pairs = [logs[j] - logs[i] for a, b in levels for i in range(a, b) for j in range(i + 1, b)]
    sigma = shamos(pairs)
    if sigma is None:  # every level a single run: only the successive differences are left
        sigma = first
    newest = logs[levels[-1][0] :]
    return Spread(sigma, len(values), len(levels), statistics.median(newest), len(newest))


Factors = tuple[float, float]  # each judged run's noisier-state factor (1: as its history)


def threshold_of(
    sigma: float, factors: Factors = (1.0, 1.0), multiple: float | None = None
) -> float:
    """The relative change a gate of two runs calls real: multiple (MULTIPLE) x the sd of the
    difference of two runs' logs, each run's own deviation widened by its factor (a noisier
    state)."""
    return math.expm1((multiple or MULTIPLE) * sigma * math.hypot(*factors))


def smallest_caught(
    sigma: float, factors: Factors = (1.0, 1.0), multiple: float | None = None
) -> float:
    """The smallest true change this threshold catches 9 times in 10 (z 1.2816 beyond it)."""
    return math.expm1(((multiple or MULTIPLE) + 1.2816) * sigma * math.hypot(*factors))


# ---- the history of a machine ----


@dataclasses.dataclass(frozen=True)
class RowNoise:
    name: str
    unit: str
    sigma: float
    runs: int
    segments: int
    threshold: float  # relative, the judged runs' noisier states included
    caught: float  # the smallest change caught 9 times in 10
    factors: Factors = (1.0, 1.0)  # the judged runs' noisier-state factors the threshold includes
    level: float = 0.0  # the history's newest level (log of the value)
    last: int = 1  # runs in that level
    multiple: float = MULTIPLE

    def off_level(self, value: float) -> float:
        """How far a head's value lies from the history's newest level, in logs (signed)."""
        return math.log(value) - self.level if value > 0 else 0.0

    def level_threshold(self) -> float:
        """How far, in logs, a head run's value strays from the newest level of identical code:
        multiple x its own deviation (widened by its state) and the level's own uncertainty."""
        return self.multiple * self.sigma * math.sqrt(self.factors[1] ** 2 + 1 / self.last)

    @property
    def factor(self) -> float:
        return max(self.factors)

    @property
    def moves(self) -> float:
        """How far one run moves from its level, as a relative change (one sigma)."""
        return math.expm1(self.sigma)

    @property
    def too_noisy(self) -> bool:
        return self.threshold > CAP

    def source(self) -> str:
        noisier = f", widened x{self.factor:.2g} for a noisier run" if self.factor > 1 else ""
        return f"history of {self.runs} runs: +-{self.moves:.1%} between runs{noisier}"

    def not_judged(self) -> str:
        noisier = (
            f"; the run judged was x{self.factor:.2g} noisier than its history"
            if self.factor > 1
            else ""
        )
        return (
            f"moves +-{self.moves:.0%} between runs on this machine (history: {self.runs} runs): "
            f"its threshold would be {self.threshold:.0%}, over the {CAP:.0%} cap{noisier}"
        )


@dataclasses.dataclass(frozen=True)
class State:
    """How noisy a judged run was against its history: the factor (1: as usual) and why."""

    factor: float = 1.0
    within: float | None = None  # its rows' within-run spread over the history's (median)
    reference: float | None = None  # its reference workloads' time over the history's (median)

    @property
    def noisier(self) -> bool:
        return self.factor >= NOISIER

    def describe(self) -> str:
        parts = []
        if self.within is not None:
            parts.append(f"spread within the run x{self.within:.2g} the history's")
        if self.reference is not None:
            parts.append(f"reference workloads x{self.reference:.2g} the history's time")
        return ", ".join(parts) or "no within-run spread or reference time to compare"


@dataclasses.dataclass
class History:
    """What a machine's history says about each statistical row's noise between runs."""

    machine: str
    mode: str | None
    runs: list[str]  # run ids the noise was learned from, oldest first
    left_out: dict[str, str]  # run id -> why it was not used
    spreads: dict[str, Spread]  # row -> its spread
    units: dict[str, str]
    counts: dict[str, int]  # row -> comparable runs that measured it
    within: dict[str, float]  # row -> median within-run relative spread over the history
    reference: dict[str, float]  # reference-normalised row -> median reference time

    def row(
        self, name: str, factors: Factors = (1.0, 1.0), multiple: float | None = None
    ) -> RowNoise | None:
        s = self.spreads.get(name)
        if s is None:
            return None
        return RowNoise(
            name,
            self.units.get(name, ""),
            s.sigma,
            s.runs,
            s.segments,
            threshold_of(s.sigma, factors, multiple),
            smallest_caught(s.sigma, factors, multiple),
            factors,
            s.level,
            s.last,
            multiple or MULTIPLE,
        )

    def why(self, name: str) -> str:
        """Why a row has no noise from this history."""
        return (
            f"the history holds {self.counts.get(name, 0)} comparable run(s) of it "
            f"({MIN_RUNS} needed)"
        )

    def state(self, rs: ResultSet) -> State:
        """The judged run's state against this history: NOISIER or more on either measure
        widens its rows' thresholds by that factor."""
        mine = within_spreads(rs)
        ratios = [mine[n] / self.within[n] for n in mine if self.within.get(n)]
        within = _geomean(ratios) if len(ratios) >= 3 else None
        refs = reference_times(rs)
        rratios = [refs[n] / self.reference[n] for n in refs if self.reference.get(n)]
        reference = statistics.median(rratios) if rratios else None
        worst = max([x for x in (within, reference) if x is not None], default=1.0)
        # any noisier state widens (the run's own deviation is that much larger); from NOISIER
        # on the gate's header says so
        return State(max(1.0, worst), within, reference)

    def as_json(self) -> dict:
        return {
            "machine": self.machine,
            "mode": self.mode,
            "runs": self.runs,
            "left_out": self.left_out,
            "multiple": MULTIPLE,
            "cap": CAP,
            "min_runs": MIN_RUNS,
        }

    def summary(self) -> str:
        span = f"{self.runs[0]} .. {self.runs[-1]}" if self.runs else "none"
        text = (
            f"{len(self.runs)} clean {self.mode or ''} run(s) of {self.machine} ({span})"
        ).replace("  ", " ")
        if self.left_out:
            few = ", ".join(f"{r} ({why})" for r, why in list(self.left_out.items())[:3])
            more = f" and {len(self.left_out) - 3} more" if len(self.left_out) > 3 else ""
            text += f"; left out: {few}{more}"
        return text


def _geomean(xs: list[float]) -> float:
    return math.exp(statistics.median(math.log(x) for x in xs if x > 0))


def within_spreads(rs: ResultSet) -> dict[str, float]:
    """Row -> its spread within the run: the interquartile range of its samples over their
    median, for statistical rows with MIN_SAMPLES samples or more."""
    out = {}
    for name, e in rs.entries.items():
        if not statistical(e.unit) or not e.samples or len(e.samples) < MIN_SAMPLES:
            continue
        q = statistics.quantiles(e.samples, n=4)
        mid = statistics.median(e.samples)
        if mid > 0 and q[2] > q[0]:
            out[name] = (q[2] - q[0]) / mid
    return out


REFERENCE_SUFFIX = "_over_reference"


def reference_times(rs: ResultSet) -> dict[str, float]:
    """Row -> the time of the reference workload timed beside it: a raw time over its
    reference-normalised twin (`X_time` and `X_time_over_reference`, same parameters). The
    reference is fixed work no change can move: its time is the machine's speed."""
    out = {}
    for name, e in rs.entries.items():
        bare, _, params = name.partition("(")
        if not bare.endswith(REFERENCE_SUFFIX):
            continue
        raw = rs.entries.get(bare[: -len(REFERENCE_SUFFIX)] + ("(" + params if params else ""))
        a, b = central(raw) if raw else None, central(e)
        if a and b and math.isfinite(a) and math.isfinite(b) and b > 0:
            out[name] = a / b
    return out


MODES = ("quick", "fast", "full", "full-quick")


def mode_of(meta: dict) -> str:
    """A run's mode as its noise knows it: quick runs (one sample of each row) move between
    runs far more than fast or full ones, so each is a series of its own."""
    full = meta.get("mode") == "full"
    if meta.get("quick"):
        return "full-quick" if full else "quick"
    return "full" if full else "fast"


@dataclasses.dataclass(frozen=True)
class Wanted:
    """Which runs a history is learned from: those of `machine` in `mode` (mode_of), comparable with
    `like`, never the runs in `exclude` (the runs being judged), the newest `last`."""

    machine: str
    mode: str | None
    like: ResultSet | None = None
    exclude: frozenset = frozenset()
    last: int = DEFAULT_LAST


def candidates(root, want: Wanted) -> tuple[list[records.RunRecord], dict[str, str]]:
    """The machine's runs that may teach the noise (newest `last`, oldest first), and run id ->
    why each other recent run may not: another mode, a dirty tree, not whole, incomplete, a
    shard, another kind of run (ab, bisect)."""
    from harness.core import store

    runs = records.list_runs(root, want.machine)
    merged = records.merged_into_others(runs)
    kept, why = [], {}
    for rec in reversed(runs):
        if len(kept) >= want.last:
            break
        reason = ""
        if rec.run_id in want.exclude or str(rec.path) in want.exclude:
            continue  # a run being judged is never its own history (and is not "left out")
        if f"{rec.machine}/{rec.run_id}" in merged or rec.meta.get("shard"):
            continue  # counted through its merged record
        if want.mode and mode_of(rec.meta) != want.mode:
            continue  # another mode is another series, not a left-out run
        if store.kind_of(rec.meta) not in store.PUSHED_KINDS:
            reason = f"a {store.kind_of(rec.meta)} run"
        elif provenance.of_record(rec.meta):
            reason = "a dirty tree"
        elif rec.meta.get("complete") is False:
            reason = "incomplete"
        else:
            # only whole records teach: every file as its manifest lists it (a record pulled
            # from the history was checked so when it was placed; this catches later edits)
            problems = records.check_whole(rec.path, rec.machine, rec.run_id)
            if problems:
                reason = f"not a whole record: {problems[0]}"
        if reason:
            why[rec.run_id] = reason
        else:
            kept.append(rec)
    kept.reverse()
    return kept, why


def learn(root, want: Wanted, only=None) -> History:
    """The history of `want.machine`: each statistical row's spread between runs (`only`: the
    rows to keep, default every statistical row). Every row is learned all the same: a run's
    outlier test and each kind's typical spread are the whole suite's, so a row's threshold
    does not depend on which rows a --bench selects."""
    recs, left = candidates(root, want)
    sets: list[tuple[records.RunRecord, ResultSet]] = []
    for rec in recs:
        files = rec.result_files()
        if not files:
            left[rec.run_id] = "no result file"
            continue
        try:
            rs = load(files[-1])
        except BadInput as exc:
            left[rec.run_id] = f"unreadable: {str(exc)[:100]}"
            continue
        if want.like is not None:
            why = not_comparable(want.like, rs)
            if why:
                left[rec.run_id] = f"not comparable: {why[0]}"
                continue
        sets.append((rec, rs))
    versions = {n: e.version for n, e in (want.like.entries.items() if want.like else ())}
    series, units = _series(sets, versions)
    spreads = {n: s for n, vals in series.items() if (s := spread([v for _, v in vals]))}
    outliers = _outlier_runs(series, spreads)
    if outliers:
        left.update(outliers)
        sets = [(r, rs) for r, rs in sets if r.run_id not in outliers]
        series, units = _series(sets, versions)
        spreads = {n: s for n, vals in series.items() if (s := spread([v for _, v in vals]))}
    spreads = pooled(spreads, {n: _kind(u) for n, u in units.items()})
    if only is not None:
        keep = set(only)
        series = {n: v for n, v in series.items() if n in keep}
        spreads = {n: s for n, s in spreads.items() if n in keep}
    within: dict[str, list[float]] = {}
    refs: dict[str, list[float]] = {}
    for _, rs in sets:
        for n, v in within_spreads(rs).items():
            within.setdefault(n, []).append(v)
        for n, v in reference_times(rs).items():
            refs.setdefault(n, []).append(v)
    mode = want.mode
    return History(
        want.machine,
        mode,
        [r.run_id for r, _ in sets],
        dict(sorted(left.items())),
        spreads,
        units,
        {n: len(v) for n, v in series.items()},
        {n: statistics.median(v) for n, v in within.items()},
        {n: statistics.median(v) for n, v in refs.items()},
    )


def _kind(unit: str) -> str:
    try:
        return metrics.kind_of(unit).label
    except KeyError:
        return unit


def _series(sets, versions: dict) -> tuple[dict[str, list[tuple[str, float]]], dict]:
    """Row -> [(run id, central value)] oldest first, for statistical rows measured on a CPU
    (GPU times have their own rule), of the judged run's benchmark version where it has one."""
    out: dict[str, list[tuple[str, float]]] = {}
    units: dict[str, str] = {}
    for rec, rs in sets:
        for name, e in rs.entries.items():
            if not statistical(e.unit) or e.failed or e.skipped:
                continue
            if versions.get(name) and e.version and e.version != versions[name]:
                continue  # the benchmark's code changed: its old runs are another series
            if gpurows.is_gpu(rs.facts.get(name)):
                continue
            v = central(e)
            if v is not None and math.isfinite(v) and v > 0:
                out.setdefault(name, []).append((rec.run_id, float(v)))
                units[name] = e.unit
    return out, units


def _outlier_runs(series, spreads) -> dict[str, str]:
    """Runs off their level for most rows at once: the median over rows of |log value - its
    segment's median| / sigma beyond OUTLIER_RUN."""
    dev: dict[str, list[float]] = {}
    for name, vals in series.items():
        s = spreads.get(name)
        if s is None or s.sigma <= 0:
            continue
        values = [v for _, v in vals]
        threshold = max(DEFAULT_THRESHOLD, math.expm1(MULTIPLE * math.sqrt(2) * s.sigma))
        for a, b in segments(values, threshold):
            level = statistics.median(math.log(v) for v in values[a:b])
            for run_id, v in vals[a:b]:
                dev.setdefault(run_id, []).append(abs(math.log(v) - level) / s.sigma)
    rows = len(spreads)
    out = {}
    for run_id, ds in dev.items():
        if len(ds) >= max(2, rows // 2) and statistics.median(ds) > OUTLIER_RUN:
            out[run_id] = (
                f"an outlier for most rows at once: {statistics.median(ds):.1f} sigmas off its "
                f"level in the median row (a machine busier than usual, or swapping)"
            )
    return out


@dataclasses.dataclass
class Learned:
    """What a gate of two runs takes from a history: each row's noise at the two runs' states
    (base, head)."""

    history: History
    states: tuple[State, State]

    @property
    def factors(self) -> Factors:
        return (self.states[0].factor, self.states[1].factor)

    def get(self, name: str) -> RowNoise | None:
        return self.history.row(name, self.factors)

    def why(self, name: str) -> str:
        return self.history.why(name)

    def header(self) -> list[str]:
        """What the gate's header says of the history and of each run's state."""
        h = self.history
        if len(h.runs) >= MIN_RUNS:
            lines = [f"noise between runs learned from {h.summary()}"]
        else:
            have = f"only {len(h.runs)}" if h.runs else "no"
            lines = [
                f"noise between runs: {have} earlier clean {h.mode or ''} run(s) of {h.machine} "
                f"to learn it from ({MIN_RUNS} teach it); rows are judged without it".replace(
                    "  ", " "
                )
                + (f"; {h.summary().split('; ', 1)[1]}" if h.left_out else "")
            ]
        for side, st in zip(("base", "head"), self.states):
            if st.noisier:
                lines.append(
                    f"{side} was measured in a noisier state than its history "
                    f"({st.describe()}): its rows' thresholds are widened x{st.factor:.2g}, and "
                    f"rows whose threshold then passes {CAP:.0%} are not judged"
                )
        return lines

    def as_json(self) -> dict:
        return {
            **self.history.as_json(),
            "states": [
                {"side": side, "factor": st.factor, "within": st.within, "reference": st.reference}
                for side, st in zip(("base", "head"), self.states)
            ],
        }


# ---- the table `harness noise` shows ----

HEADER = ("benchmark", "kind", "runs", "levels", "between runs", "threshold", "catches", "judged")


def rows(h: History, names=None) -> list[tuple]:
    """Per row of the history: its kind, runs, levels, spread (one run from its level),
    the threshold a gate of two usual runs would use and the smallest change it catches 9 times
    in 10, and whether the gate judges it."""
    out = []
    for name in sorted(names if names is not None else set(h.spreads) | set(h.counts)):
        unit = h.units.get(name)
        kind = metrics.kind_of(unit).label if unit else "?"
        r = h.row(name)
        if r is None:
            out.append((name, kind, h.counts.get(name, 0), "", "", "", "", f"no: {h.why(name)}"))
            continue
        floor = max(DEFAULT_THRESHOLD, metrics.drift_allowance(name) or 0.0)
        limit = max(r.threshold, floor)
        own = h.spreads[name].own
        pooled = f" (own +-{math.expm1(own):.1%})" if own is not None else ""
        out.append(
            (
                name,
                kind,
                r.runs,
                r.segments,
                f"+-{r.moves:.1%}{pooled}",
                f"{limit:.1%}" + ("" if r.threshold >= floor else " (floor)"),
                f"{max(r.caught, limit):.1%}",
                f"no: over the {CAP:.0%} cap" if r.too_noisy else "yes",
            )
        )
    return out


def as_table_json(h: History, names=None) -> dict:
    return {"schema": 1, **h.as_json(), "rows": [dict(zip(HEADER, r)) for r in rows(h, names)]}
