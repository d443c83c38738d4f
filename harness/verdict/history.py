"""`harness history`: steps (change points) in each benchmark's series of runs, and the first bad
night explained.

Every run record of a machine is one point (harness.core.records; reruns of a commit too). Per
benchmark the series is the run's central value (median of its samples, else asv's value), oldest
first. A step is found by the benchmark's kind (harness.verdict.metrics):

- exact counters (ops, kernels, graph breaks, graphs, recompiles) step on any change of value;
  instruction counts the same way, on a change beyond their tolerance
  (metrics.INSTRUCTION_TOLERANCE), and a step names the functions whose self counts moved most;
- paired ratios, normalised times and memory: asv's own change-point method segments the series
  (`asv.step_detect.solve_potts_approx`: the L1 piecewise-constant fit of asv's regressions page;
  not a documented API, pinned by tests/test_history.py), with a penalty per segment set from the
  threshold (asv's automatic one missed a 10% step over 2% noise). asv's `detect_regressions` is
  not used: it only looks at increases and we need both directions. Each boundary between two
  segments is then a step only when the median of up to WINDOW runs after it differs from the
  median of up to WINDOW runs before it by at least the threshold (the gate's 5%, memory's 2%
  tolerance) and a Mann-Whitney test of those per-run values gives p < ALPHA;
- raw times and throughputs carry the machine's momentary speed (as in the gate): judged only when
  the machine's calibrated noise band for the row is below the threshold (then the threshold is
  the band), else listed as not judged, with the reason;
- GPU times (raw times measured on CUDA, with their noise in each run record) step at the gate's
  GPU threshold taken at the series' median noise (harness.verdict.gpurows), when every run was
  on the same card with the same clock policy.

A step needs MIN_SIDE runs on each side (`harness history --min-side N` changes it; below 4 the
Mann-Whitney test of a statistical row cannot reach p < ALPHA however clean the step, so only
exact counters can step: 2 vs 2 perfectly separated runs give p = 0.33, 3 vs 3 give 0.1).
Segments shorter than that between two long ones are outliers (or the transition) and never a
step by themselves: one outlier is not a step. A change in the last runs with fewer than MIN_SIDE
runs after it is *possible*: listed, not counted, until enough runs follow. The step's run is the
first run after the last long segment before it whose value is nearer the new level than the old
one: the first bad night.

The first bad night explained (explain, harness.verdict.operators): the fingerprint difference
between the last run before the step and the first after; for ops/kernels counters which
operators' counts changed (op-counts.json, stored by every run); for timing steps the operators
whose self time per call changed most (profiles.json, stored by full runs and `--profile`).

Acknowledged steps live in RESULTS/history-acknowledged.json (commit it):
    {"acknowledged": [{"benchmark": NAME, "run": RUN_ID, "reason": "why this step is expected"}]}
An acknowledged step is listed as such and never makes the exit code 1.

Exit codes (harness/core/exits.py): 0 no new step, 1 a new (confirmed, unacknowledged) step,
3 bad input (unknown --bench pattern, bad --since, corrupt acknowledgement file or result file,
no runs).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import pathlib
import re

from harness.core import escape, exits, provenance, records, trust
from harness.core.exits import BadInput
from harness.verdict import functions, gpurows, metrics, operators
from harness.verdict.compare import (
    DEFAULT_THRESHOLD,
    central,
    could_match,
    selects,
)
from harness.verdict.noise import CAP, MIN_RUNS, spread, statistical, threshold_of
from harness.verdict.results import (
    ResultSet,
    environment_differences,
    fingerprint_of,
    load_listed,
    load_noise,
    noise_path,
)
from harness.verdict.steps import (  # noqa: F401 (history.find_steps, history.MIN_SIDE, ...)
    ALPHA,
    CONFIRMED,
    MIN_SIDE,
    POSSIBLE,
    WINDOW,
    find_steps,
)

ACK_FILE = "history-acknowledged.json"


@dataclasses.dataclass
class Point:
    run: records.RunRecord
    value: float
    version: str | None


@dataclasses.dataclass
class Step:
    benchmark: str
    unit: str
    kind: str
    status: str  # confirmed | possible
    position: int  # 1-based position of the first run after the step in the series
    run_id: str  # the first run after the step (the first bad night)
    last_before: str  # the last run before it
    before: float  # median of the runs before
    after: float  # median of the runs after
    size: float  # after / before - 1
    direction: str  # worse | better
    evidence: str
    acknowledged: str | None = None  # the reason, when acknowledged
    environment: list = dataclasses.field(default_factory=list)  # (setting, before, after)
    explanation: list = dataclasses.field(default_factory=list)  # further lines
    # counter steps: [{op, before, after, delta}] (harness.verdict.operators.count_changes); None
    # when a run stores no per-operator counts
    operators: list | None = None
    # timing steps: {target label: operators.profile_changes}; None when a run stores no profile
    profile: dict | None = None

    @property
    def new(self) -> bool:
        return self.status == CONFIRMED and self.acknowledged is None

    def as_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["environment"] = [list(t) for t in self.environment]
        d["new"] = self.new
        return d


# ---- series ----


class _Loader:
    """Result sets of run records and their fingerprints, each read once."""

    def __init__(self):
        self.cache: dict[pathlib.Path, ResultSet | None] = {}
        self.fingerprints: dict[pathlib.Path, dict | None] = {}

    def __call__(self, rec: records.RunRecord) -> ResultSet | None:
        if rec.path not in self.cache:
            files = rec.result_files()
            self.cache[rec.path] = load_listed(files[-1], rec.path) if files else None
        return self.cache[rec.path]

    def fingerprint(self, rec: records.RunRecord) -> dict | None:
        if rec.path not in self.fingerprints:
            rs = self(rec)
            self.fingerprints[rec.path] = fingerprint_of(rs) if rs is not None else None
        return self.fingerprints[rec.path]


def series(
    runs: list[records.RunRecord], loader: _Loader
) -> tuple[dict[str, list[Point]], dict[str, str]]:
    """Benchmark name -> its points in run order (failed and skipped results left out), and
    benchmark name -> unit."""
    out: dict[str, list[Point]] = {}
    units: dict[str, str] = {}
    for rec in runs:
        rs = loader(rec)
        if rs is None:
            continue
        for name, e in rs.entries.items():
            v = central(e)
            # answer rows are judged per run, absolutely (`harness answers`, the gate), not as
            # a series: an error over its tolerance moves by orders within the same answer
            if e.failed or e.skipped or v is None or name in rs.answers:
                continue
            out.setdefault(name, []).append(Point(rec, float(v), e.version))
            units[name] = e.unit
    return out, units


# ---- the command ----


def run_start(rec: records.RunRecord) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(rec.run_id[:16], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc
        )
    except ValueError:
        return None


def parse_since(text: str) -> datetime.datetime:
    try:
        d = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(
            f"--since {text!r}: not a date; give e.g. 2026-11-30 or 2026-11-30T18:00"
        ) from None
    return d if d.tzinfo else d.replace(tzinfo=datetime.timezone.utc)


def load_acknowledged(root: pathlib.Path) -> dict[tuple[str, str], str]:
    """(benchmark, run id) -> reason, from RESULTS/history-acknowledged.json (absent: none)."""
    path = pathlib.Path(root) / ACK_FILE
    if not path.exists():
        return {}
    fix = (
        f'; expected {{"acknowledged": [{{"benchmark": NAME, "run": RUN_ID, "reason": TEXT}}]}}'
        f" — fix {path} or restore it from git"
    )
    try:
        data = trust.load(path, "acknowledgements file")
    except (OSError, BadInput) as exc:
        raise BadInput(f"{path}: unreadable or corrupt JSON ({exc}){fix}") from None
    items = data.get("acknowledged") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise BadInput(f"{path}: no 'acknowledged' list{fix}")
    out = {}
    for i, item in enumerate(items):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("benchmark"), str)
            and isinstance(item.get("run"), str)
        ):
            raise BadInput(f"{path}: entry {i} needs string 'benchmark' and 'run'{fix}")
        out[(item["benchmark"], item["run"])] = str(item.get("reason", ""))
    return out


def select(names: list[str], patterns: list[str] | None) -> list[str]:
    if not patterns:
        return sorted(names)
    picked = set()
    for pat in patterns:
        try:
            rx = re.compile(pat)
        except re.error as exc:
            raise BadInput(f"--bench {pat!r}: not a regular expression ({exc})") from None
        hit = [n for n in names if rx.search(n) or selects(pat, n)]
        if not hit:
            raise BadInput(
                f"--bench {pat!r} matches no benchmark in the runs; {could_match(names)}"
            )
        picked.update(hit)
    return sorted(picked)


@dataclasses.dataclass
class History:
    machine: str
    runs: int
    steps: list[Step]
    not_judged: dict[str, str]
    min_side: int = MIN_SIDE
    # runs that measured a working tree differing from their commit (harness.core.provenance)
    dirty: list[str] = dataclasses.field(default_factory=list)

    def shown(self, run_id: str) -> str:
        """A run id, marked where its run measured uncommitted code."""
        return f"{run_id} (dirty)" if run_id in self.dirty else run_id

    @property
    def code(self) -> int:
        return exits.REGRESSION if any(s.new for s in self.steps) else exits.PASS


def explain(step: Step, points: list[Point], idx: int, last_before: int, loader: _Loader) -> None:
    """The first bad night explained: fingerprint differences between the last run before the
    step and the first after it; for counters the change per call and which operators changed;
    for timing steps the operator-level profile difference (harness.verdict.operators); a
    benchmark code change."""
    before, after = points[last_before], points[idx]
    rb, ra = loader(before.run), loader(after.run)
    step.environment = environment_differences(rb, ra)
    if before.version != after.version:
        step.explanation.append(
            "the benchmark's code changed between these runs (asv version "
            f"{before.version} -> {after.version})"
        )
    if step.kind == metrics.COUNTER:
        delta = after.value - before.value
        step.explanation.append(
            f"{delta:+g} {step.unit} per call ({before.value:g} -> {after.value:g})"
        )
    if step.unit in ("ops", "kernels"):
        step.operators, lines = operators.explain_counter(
            step.benchmark, before.run, after.run, (before.value, after.value)
        )
        step.explanation += lines
    if step.kind == metrics.INSTRUCTIONS:
        step.explanation.append(
            f"{after.value - before.value:+,.0f} instructions per call "
            f"({before.value:,.0f} -> {after.value:,.0f})"
        )
        step.explanation += explain_instructions(step.benchmark, before.run, after.run)
        return
    if step.kind not in (metrics.COUNTER, metrics.MEMORY):
        step.profile, lines = operators.explain_timing(step.benchmark, before.run, after.run)
        step.explanation += lines


def explain_instructions(
    name: str, before: records.RunRecord, after: records.RunRecord
) -> list[str]:
    """Lines naming where an instruction row's count moved between two runs: the library
    groups and the functions whose self counts changed most (also `harness bisect`)."""
    b, a = before.instructions().get(name), after.instructions().get(name)
    if not (b and a):
        missing = before.run_id if not b else after.run_id
        return [f"no per-function instruction counts stored in {missing}"]
    lines = []
    why = functions.not_comparable(b, a)
    if why:
        lines.append(f"instruction fingerprints differ: {why}")
    groups = ", ".join(f"{g} {hv - bv:+,.0f}" for g, bv, hv in functions.group_changes(b, a))
    if groups:
        lines.append(f"self instructions per call by library: {groups}")
    where = functions.explain(b, a, top=5)
    if where:
        lines.append(f"functions whose self counts changed most: {where}")
    return lines


def detect(
    root: pathlib.Path,
    machine: str,
    patterns: list[str] | None = None,
    since: datetime.datetime | None = None,
    min_side: int = MIN_SIDE,
) -> History:
    if min_side < 2:
        raise BadInput(f"--min-side {min_side}: a step needs at least 2 runs on each side")
    runs = records.list_runs(root, machine)
    merged = records.merged_into_others(runs)  # shards count once, through their merged record
    runs = [r for r in runs if f"{r.machine}/{r.run_id}" not in merged]
    if not runs:
        raise BadInput(
            f"no run records in {records.runs_dir(root) / machine}; run `harness bench` "
            f"(with --machine {machine}) first"
        )
    loader = _Loader()
    by_name, units = series(runs, loader)
    acknowledged = load_acknowledged(root)
    bands = load_noise(noise_path(root, machine)) if noise_path(root, machine).is_file() else {}
    steps, not_judged = [], {}
    for name in select(list(by_name), patterns):
        points = by_name[name]
        try:
            kind = metrics.kind_of(units[name])
        except KeyError as exc:
            raise BadInput(f"benchmark {name!r}: {exc.args[0]}") from None
        threshold = metrics.MEMORY_TOLERANCE if kind.kind == metrics.MEMORY else DEFAULT_THRESHOLD
        counter = kind.exact or kind.kind == metrics.INSTRUCTIONS
        tolerance = metrics.INSTRUCTION_TOLERANCE if kind.kind == metrics.INSTRUCTIONS else 0.0
        gpu = None
        if kind.kind == metrics.TIMING:
            gpu = gpurows.series_threshold(
                [(loader(p.run).facts.get(name), loader.fingerprint(p.run)) for p in points]
            )
        if gpu is not None:  # a GPU time: its recorded noise and a floor (harness.verdict.gpurows)
            limit, why = gpu
            if limit is None:
                not_judged[name] = why
                continue
            threshold = limit
        elif statistical(units[name]):
            # the series' own noise between runs, as the gate learns it (harness.verdict.noise)
            band = bands.get(name, bands.get(name.split("(")[0]))
            learned = spread([p.value for p in points])
            limit = threshold_of(learned.sigma) if learned else None
            if limit is not None and limit > CAP:
                not_judged[name] = (
                    f"{kind.label}: moves +-{math.expm1(learned.sigma):.0%} between runs on this "
                    f"machine (history: {learned.runs} runs): its threshold would be "
                    f"{limit:.0%}, over the {CAP:.0%} cap"
                )
                continue
            if kind.raw and limit is None and (band is None or band >= threshold):
                not_judged[name] = f"{kind.label}: " + (
                    f"no calibrated noise band, and {len(points)} run(s) ({MIN_RUNS} teach its "
                    "noise)"
                    if band is None
                    else f"noise band {band:.0%} >= threshold {threshold:.0%}"
                )
                continue
            drift = metrics.drift_allowance(name) if kind.kind == metrics.RATIO else None
            threshold = max(threshold, band or 0.0, drift or 0.0, limit or 0.0)
        for f in find_steps([p.value for p in points], counter, threshold, min_side, tolerance):
            idx = f["index"]
            worse = f["size"] < 0 if kind.higher_is_better else f["size"] > 0
            if tolerance:
                evidence = (
                    f"instructions: {f['before']:,.0f} in {f['n_before']} runs before, "
                    f"{f['after']:,.0f} in {f['n_after']} after ({f['size']:+.2%}, "
                    f"tolerance {tolerance:.1%})"
                )
            elif kind.exact:
                evidence = (
                    f"exact counter: {f['before']:g} in {f['n_before']} runs before, "
                    f"{f['after']:g} in {f['n_after']} after"
                )
            elif f["p"] is None:
                evidence = (
                    f"{f['size']:+.1%} over {f['n_after']} run(s) after; needs {min_side} "
                    f"to confirm"
                )
            else:
                evidence = (
                    f"{f['size']:+.1%} (threshold {threshold:.0%}), Mann-Whitney p={f['p']:.2g} "
                    f"over {f['n_before']} runs before vs {f['n_after']} after"
                )
            if f["status"] == POSSIBLE and counter:
                evidence += f"; possible until {min_side} runs follow"
            run = points[idx].run
            step = Step(
                name,
                units[name],
                kind.kind,
                f["status"],
                idx + 1,
                run.run_id,
                points[f["last_before"]].run.run_id,
                f["before"],
                f["after"],
                f["size"],
                "worse" if worse else "better",
                evidence,
                acknowledged=acknowledged.get((name, run.run_id)),
            )
            if since and (run_start(run) or since) < since:
                continue
            explain(step, points, idx, f["last_before"], loader)
            steps.append(step)
    dirty = [r.run_id for r in runs if provenance.of_record(r.meta)]
    for step in steps:
        marked = [r for r in (step.last_before, step.run_id) if r in dirty]
        if marked:
            step.explanation.append(
                f"{' and '.join(marked)} measured a working tree that differed from its commit "
                "(dirty): the step may come from uncommitted code rather than the commit"
            )
    return History(machine, len(runs), steps, not_judged, min_side, dirty)


# ---- rendering ----


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def table(h: History, fmt: str = "text") -> str:
    from harness.core.table import render

    rows = [
        (
            s.benchmark,
            f"{h.shown(s.run_id)} (#{s.position})",
            s.status + (" (acknowledged)" if s.acknowledged else ""),
            f"{s.size:+.1%}",
            _fmt(s.before),
            _fmt(s.after),
            s.direction,
            s.evidence,
        )
        for s in h.steps
    ]
    return render(
        [
            "benchmark",
            "first run after (position)",
            "status",
            "size",
            "median before",
            "median after",
            "direction",
            "evidence",
        ],
        rows,
        fmt,
    )


def explanations(h: History, fmt: str = "text") -> list[str]:
    # names, settings and notes come from run records: escaped for the target, each line cut
    # (a name at escape.MAX_CELL characters) so that no record makes the output long
    if fmt == "markdown":

        def one(x):
            return escape.markdown_text(x, limit=escape.MAX_PROSE)
    else:

        def one(x):
            return escape.terminal(x, escape.MAX_PROSE)

    lines = []
    for s in h.steps:
        name = escape.cut(s.benchmark, escape.MAX_CELL)
        head = f"{name} at {h.shown(s.run_id)} (last run before: {h.shown(s.last_before)}):"
        lines.append(f"### {one(head)}" if fmt == "markdown" else one(head))
        env = ", ".join(f"{k} {b} -> {a}" for k, b, a in s.environment) or "none (same fingerprint)"
        lines.append(f"- environment differences: {one(env)}")
        lines += [f"- {one(x)}" for x in s.explanation]
        if s.acknowledged is not None:
            lines.append(f"- acknowledged: {one(s.acknowledged)}")
    return lines


NOT_JUDGED_SHOWN = 20  # rows named in the "not judged" line; --json has them all


def render_text(h: History) -> str:
    new = sum(s.new for s in h.steps)
    out = [
        f"history: {h.machine}, {h.runs} runs; {new} new step(s), "
        f"{sum(s.status == POSSIBLE for s in h.steps)} possible, "
        f"{sum(s.acknowledged is not None for s in h.steps)} acknowledged "
        f"(a step needs {h.min_side} runs on each side)"
    ]
    if h.dirty:
        out.append(
            f"{len(h.dirty)} of {h.runs} runs measured a working tree that differed from its "
            f"commit (dirty): {', '.join(h.dirty[:8])}{' ...' if len(h.dirty) > 8 else ''}"
        )
    if h.steps:
        out += [table(h).rstrip(), ""] + explanations(h)
    if h.not_judged:
        out.append(
            "not judged: "
            + "; ".join(
                f"{escape.terminal(n, escape.MAX_CELL)} ({escape.terminal(why, escape.MAX_PROSE)})"
                for n, why in sorted(h.not_judged.items())[:NOT_JUDGED_SHOWN]
            )
            + (
                f"; and {len(h.not_judged) - NOT_JUDGED_SHOWN} more (--json lists them)"
                if len(h.not_judged) > NOT_JUDGED_SHOWN
                else ""
            )
        )
    out.append(f"exit {h.code} ({exits.MEANING[h.code]})")
    return "\n".join(out) + "\n"


def render_markdown(h: History) -> str:
    """A summary fit for an issue or a chat message: the new steps and what changed with them."""
    new = [s for s in h.steps if s.new]
    lines = [
        f"# New step(s) in the benchmark history of {escape.markdown_text(h.machine)}",
        "",
        f"{len(new)} new step(s) over {h.runs} runs (a step needs {h.min_side} runs on each side).",
        "",
    ]
    sub = History(h.machine, h.runs, new, {}, h.min_side, h.dirty)
    lines += [table(sub, "markdown"), ""] + explanations(sub, "markdown") + [""]
    return "\n".join(lines)


def as_json(h: History) -> dict:
    return {
        "machine": h.machine,
        "runs": h.runs,
        "min_side": h.min_side,
        "window": WINDOW,
        "alpha": ALPHA,
        "exit_code": h.code,
        "steps": [s.as_json() for s in h.steps],
        "not_judged": h.not_judged,
        "dirty_runs": h.dirty,
    }
