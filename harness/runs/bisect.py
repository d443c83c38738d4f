"""`harness bisect GOOD BAD`: the first commit whose benchmark rows differ from GOOD's.

Two halves:

- the search (`search`): a binary search over the first-parent commits after GOOD up to BAD,
  with a `classify(commit) -> good | bad | skip | unknown` callback. A commit classified skip or
  unknown is never guessed: the search measures the untested commit nearest the middle instead,
  as `git bisect skip` does, and when only such commits are left between the last good and the
  first bad commit it answers with that range. Pure, so tests drive it with fakes;
- the measuring (`Bisect`): each commit is measured by harness.runs.ab in a temporary worktree
  and kept as a run record labelled `bisect.<good8>.<bad8>`, then compared with GOOD's record by
  the gate's rules (harness.verdict.gate). First GOOD and BAD themselves (`Bisect.ends`): the
  rows that differ between them (REGRESSION or improved) decide every step, in the same
  direction. Exact counters and instruction counts decide in one process a commit, compared
  with GOOD's record of the ends; every other row needs ab's interleaved pairs (GOOD and the
  commit in pairs of processes taking turns row by row, SAME / DIFFERENT / UNKNOWN,
  harness.verdict.between), so a step with such rows is a whole `harness ab GOOD COMMIT`, and a
  decided timing row is also checked against both ends (classify_rows). An answer row (a paired
  row's answer check, harness.verdict.answers) whose answer changed between the ends (same ->
  WRONG) decides like a counter: one process a commit, WRONG bad, same good; the answer says
  so (`answer same -> WRONG`).

A rerun with the same ends and selection finds the records of commits already measured (by the
bisect's key in run.json) and measures nothing twice, so an interrupted bisect resumes.
docs/bisect.md has the rules, the exit codes and the JSON schema.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import subprocess
import time
from collections.abc import Callable

from harness.core import answerfacts, escape, exits, records
from harness.core.exits import BadInput, HarnessError
from harness.runs import ab
from harness.runs.spec import RunSpec
from harness.verdict import compare, metrics

GOOD, BAD, SKIP, UNKNOWN = "good", "bad", "skip", "unknown"
VERDICTS = (GOOD, BAD, SKIP, UNKNOWN)
# why a search stopped
FOUND = "found"
HIDDEN = "skipped or unknown commits hide the first bad one"
BUDGET = "the budget ran out"


# ---- the search ----


@dataclasses.dataclass
class Search:
    first_bad: str | None  # None when the range holds more than one commit
    range: list[str]  # the commits that may be the first bad one, oldest first
    measured: list[tuple[str, str]]  # (commit, verdict) in the order classified
    stopped: str  # FOUND, HIDDEN or BUDGET


def most_steps(n: int) -> int:
    """The most commits a search over `n` commits (BAD included, GOOD not) classifies when none
    is skipped: a binary search over the n - 1 commits strictly between the ends."""
    return math.ceil(math.log2(n)) if n > 1 else 0


def search(
    commits: list[str],
    classify: Callable[[str], str],
    out_of_time: Callable[[], bool] = lambda: False,
) -> Search:
    """Binary search for the first bad commit among `commits` (the first-parent commits after
    GOOD, oldest first; the last is BAD, known bad; GOOD, before them, known good). Each step
    classifies the untested commit nearest the middle of the open range; skip and unknown
    commits are set aside, never guessed. `out_of_time()` is asked before each step."""
    if not commits:
        raise ValueError("no commits between GOOD and BAD")
    lo, hi = -1, len(commits) - 1  # the last good index (-1: GOOD) and the first bad one
    untestable: set[int] = set()
    measured: list[tuple[str, str]] = []
    stopped = HIDDEN
    while True:
        inside = [i for i in range(lo + 1, hi) if i not in untestable]
        if not inside:
            stopped = FOUND if hi == lo + 1 else HIDDEN
            break
        if out_of_time():
            stopped = BUDGET
            break
        middle = (lo + hi) / 2
        i = min(inside, key=lambda j: (abs(j - middle), j))
        verdict = classify(commits[i])
        if verdict not in VERDICTS:
            raise ValueError(f"classify returned {verdict!r}, not one of {VERDICTS}")
        measured.append((commits[i], verdict))
        if verdict == GOOD:
            lo = i
        elif verdict == BAD:
            hi = i
        else:
            untestable.add(i)
    candidates = commits[lo + 1 : hi + 1]
    return Search(
        candidates[0] if stopped == FOUND else None,
        candidates,
        measured,
        stopped,
    )


# ---- classifying a commit by its rows ----

WORSE, BETTER = "worse", "better"
DIRECTION = {compare.REGRESSION: WORSE, compare.IMPROVED: BETTER, compare.WRONG: WORSE}
CANNOT_RUN = (compare.FAILED, compare.MISSING, compare.SKIPPED, compare.BAD)


def decisive(rows: list[compare.Row]) -> dict[str, str]:
    """The rows that differ between GOOD and BAD, and which way: row -> worse | better. A WRONG
    answer decides only where GOOD's answer was not WRONG too (the gate calls it WRONG whatever
    the base says; a bisect looks for where it changed)."""
    return {
        r.name: DIRECTION[r.verdict]
        for r in rows
        if r.verdict in DIRECTION
        and not (r.verdict == compare.WRONG and r.answer_base == compare.WRONG)
    }


def answer_changes(rows: list[compare.Row], decide: dict[str, str]) -> list[str]:
    """`row: answer same -> WRONG` for each deciding answer row (GOOD's answer, BAD's)."""
    return [
        f"{r.name}: answer {r.answer_base or 'not checked'} -> {r.answer or 'not checked'}"
        for r in rows
        if r.name in decide and r.unit == answerfacts.UNIT
    ]


def classify_rows(
    rows: list[compare.Row],
    decide: dict[str, str],
    levels: dict[str, float] | None = None,
    bounds: dict[str, tuple[float, float]] | None = None,
) -> tuple[str, str]:
    """(verdict, why) of a commit from its rows against GOOD's; `decide`: the deciding rows and
    their direction (decisive). Per row:

    - failed, missing or skipped: skip;
    - an exact counter or instruction count (one_process_decides): good when the same as
      GOOD's, bad when it moved as it moved between the ends, unknown when it moved the other
      way or was not judged;
    - a timing row: unknown when ab left it UNKNOWN (or it was not judged); otherwise it is
      checked against both ends: `levels` holds each row's BAD / GOOD ratio from the ends, and
      the commit's ratio to GOOD (its interval across processes from `bounds`, else the point
      ratio) must lie wholly on GOOD's side of the two levels' geometric midpoint to be good,
      wholly on BAD's side to be bad, else unknown. A false DIFFERENT (one seen on identical
      code on a loaded 2-core VM: per-pair ratio 0.80 [0.68, 0.94]) is thus never taken for
      the change the ends show.

    The commit is bad when a counter row is bad (it holds the change), or a timing row is and
    no row is good (rows that disagree make it unknown); else skip or unknown when any row is;
    else good."""
    levels, bounds = levels or {}, bounds or {}
    by_name = {r.name: r for r in rows}
    found: dict[str, list[str]] = {v: [] for v in VERDICTS}
    hard_bad = False
    for name, direction in decide.items():
        r = by_name.get(name)
        short = name.split(".", 1)[-1]
        if r is None:
            found[SKIP].append(f"{short} missing")
            continue
        if r.verdict in CANNOT_RUN:
            found[SKIP].append(f"{short} {r.verdict}")
            continue
        note = r.note.split(";")[0]
        if one_process_decides(r.unit) or name not in levels or r.ratio is None:
            if r.verdict == compare.OK:
                found[GOOD].append(f"{short} same as GOOD")
            elif r.verdict in DIRECTION and DIRECTION[r.verdict] == direction:
                found[BAD].append(f"{short} {r.verdict} ({note})")
                hard_bad = hard_bad or one_process_decides(r.unit)
            elif r.verdict in DIRECTION:
                found[UNKNOWN].append(f"{short} moved the other way ({r.verdict})")
            else:
                found[UNKNOWN].append(f"{short} {r.verdict} ({note})")
            continue
        if r.verdict not in (compare.OK, *DIRECTION):
            found[UNKNOWN].append(f"{short} {r.verdict} ({note})")
            continue
        side = _side(bounds.get(name, (r.ratio, r.ratio)), levels[name])
        found[side].append(f"{short} {r.verdict} ({note}), {_SIDE_WHY[side]}")
    if hard_bad:
        return BAD, "; ".join(found[BAD])
    if found[BAD] and found[GOOD]:
        return UNKNOWN, "rows disagree: " + "; ".join(found[BAD] + found[GOOD])
    for verdict in (BAD, SKIP, UNKNOWN, GOOD):
        if found[verdict]:
            return verdict, "; ".join(found[verdict])
    return SKIP, "no row to judge"


_SIDE_WHY = {
    GOOD: "nearer GOOD's level than BAD's",
    BAD: "nearer BAD's level than GOOD's",
    UNKNOWN: "between GOOD's and BAD's levels",
}


def _side(interval: tuple[float, float], level: float) -> str:
    """Which end a ratio to GOOD (an interval, low <= high) lies nearer: GOOD is 1, BAD is
    `level`; the boundary is their geometric midpoint."""
    low, high = interval
    if not (level > 0 and low > 0 and high > 0) or level == 1:
        return UNKNOWN
    mid = math.sqrt(level)
    nearer_bad = low > mid if level > 1 else high < mid
    nearer_good = high < mid if level > 1 else low > mid
    return BAD if nearer_bad else GOOD if nearer_good else UNKNOWN


def across_bounds(record: records.RunRecord, rows: list[compare.Row]) -> dict:
    """Row -> the (low, high) interval of its per-pair ratios, for the rows an ab record judged
    across processes (its ab-pairs.json); empty for a record measured alone."""
    from harness.verdict import between

    data = records.read_ab_pairs(record.path)
    out = {}
    for r in rows:
        if not data or not between.judged_across_processes(r.unit):
            continue
        pairs = [tuple(p) for p in (data.get("pairs") or {}).get(r.name, [])]
        ci = between.interval(between.ratios_of(pairs))
        if ci is not None:
            out[r.name] = (ci.low, ci.high)
    return out


def one_process_decides(unit: str) -> bool:
    """Exact counters, instruction counts and answers: one process of a commit decides them."""
    try:
        kind = metrics.kind_of(unit)
    except KeyError:
        return False
    return kind.exact or kind.kind in (metrics.INSTRUCTIONS, metrics.ANSWER)


# ---- git ----


def _git(project: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True)


def resolve(project: pathlib.Path, rev: str, what: str) -> str:
    """The full sha of a revision, or BadInput naming it."""
    out = _git(project, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if out.returncode or not out.stdout.strip():
        path = pathlib.Path(rev)
        hint = (
            " (an interpreter has no commits between two ends: compare two interpreters with "
            "`harness ab`)"
            if path.is_file()
            else ""
        )
        raise BadInput(
            f"{what} {rev!r} is not a commit of {project}; give a commit, branch or tag "
            f"(`git log --first-parent --oneline` lists them){hint}"
        )
    return out.stdout.strip()


def commits_between(project: pathlib.Path, good: str, bad: str) -> list[str]:
    """The first-parent commits after GOOD up to BAD, oldest first; BadInput unless GOOD is a
    strict ancestor of BAD."""
    if good == bad:
        raise BadInput(f"GOOD and BAD are the same commit ({good[:12]}); name two commits")
    anc = _git(project, "merge-base", "--is-ancestor", good, bad)
    if anc.returncode == 1:
        raise BadInput(
            f"GOOD {good[:12]} is not an ancestor of BAD {bad[:12]}: a bisect walks from an "
            "older good commit to a newer bad one (swap them, or pick GOOD from BAD's history)"
        )
    if anc.returncode:
        raise BadInput(f"git merge-base failed: {anc.stderr.strip()}")
    out = _git(project, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}")
    commits = out.stdout.split()
    if out.returncode or not commits or commits[-1] != bad:
        raise BadInput(f"cannot list the commits from {good[:12]} to {bad[:12]}: {out.stderr}")
    return commits


def describe(project: pathlib.Path, sha: str) -> dict:
    """{commit, subject, author, author_date} of a commit."""
    out = _git(project, "show", "-s", "--format=%H%x00%s%x00%an%x00%aI", sha)
    parts = out.stdout.rstrip("\n").split("\0")
    if out.returncode or len(parts) != 4:
        return {"commit": sha, "subject": "", "author": "", "author_date": ""}
    return dict(zip(("commit", "subject", "author", "author_date"), parts))


# ---- measuring ----


@dataclasses.dataclass
class Step:
    """One measured commit: its verdict against GOOD, and the records behind it."""

    commit: str
    verdict: str
    why: str
    record: records.RunRecord | None  # the commit's run record (None: nothing was saved)
    base: records.RunRecord | None  # the GOOD record it was compared with
    reused: bool = False  # found from an earlier run of the same bisect
    seconds: float = 0.0
    rows: list[compare.Row] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Ends:
    good: records.RunRecord
    bad: records.RunRecord
    rows: list[compare.Row]
    decide: dict[str, str]  # decisive(rows)
    reused: bool
    seconds: float
    message: str = ""


class Bisect:
    """Measures commits for one bisect (its ends, selection, machine and mode) and classifies
    them; every measured commit is kept as a run record found again by `key`."""

    def __init__(
        self,
        project: pathlib.Path,
        root: pathlib.Path,
        good: str,
        bad: str,
        spec: RunSpec,
        *,
        pairs: ab.Pairs,
        budget_s: float | None = None,
        log=print,
        clock: Callable[[], float] = time.perf_counter,
        started: float | None = None,
    ):
        self.project, self.root, self.good, self.bad, self.spec = project, root, good, bad, spec
        self.pairs = dataclasses.replace(pairs, counters_once=True)
        self.budget_s, self.log, self.clock = budget_s, log, clock
        self.started = clock() if started is None else started  # the budget counts from here
        self.label = f"bisect.{good[:8]}.{bad[:8]}"
        self.key = {
            "good": good,
            "bad": bad,
            "suites": list(spec.suites),
            "benches": list(spec.benches),
            "mode": spec.mode,
            "threads": spec.run_threads,
            "threshold": pairs.threshold,
            "max_pairs": pairs.most,
        }
        self.ends_: Ends | None = None
        self.levels: dict[str, float] = {}
        self.paired = False  # whether steps need ab's pairs (some decisive row is a timing row)
        self.longest_s = 0.0  # the longest measuring done in this process, for the budget

    # -- records of this bisect --

    def _meta(self, role: str, against: str | None = None) -> dict:
        return {"bisect": {**self.key, "role": role, "against": against}}

    def _mine(self) -> list[records.RunRecord]:
        """This bisect's complete records, newest first."""
        runs = records.list_runs(self.root, self.spec.machine)
        mine = [
            r
            for r in runs
            if r.meta.get("complete", True)
            and {k: (r.meta.get("bisect") or {}).get(k) for k in self.key} == self.key
        ]
        return mine[::-1]

    def _record(self, run_id: str | None) -> records.RunRecord | None:
        path = records.runs_dir(self.root) / self.spec.machine / str(run_id)
        return records.load_record(path) if run_id and (path / records.RUN_JSON).is_file() else None

    def _paired_base(self, rec: records.RunRecord) -> records.RunRecord | None:
        data = records.read_ab_pairs(rec.path)
        return self._record(data.get("base_run")) if data else None

    # -- the budget --

    def spent(self) -> float:
        return self.clock() - self.started

    def remaining(self) -> float | None:
        return None if self.budget_s is None else max(self.budget_s - self.spent(), 0.0)

    def out_of_time(self) -> bool:
        """Whether the next step would overrun --budget, judged by the longest measuring so far."""
        return self.budget_s is not None and self.spent() + self.longest_s > self.budget_s

    # -- the ends --

    def ends(self) -> Ends:
        """GOOD against BAD, measured as `harness ab` does (or found from an earlier run)."""
        from harness.verdict.gate import run_gate

        found = None
        for rec in self._mine():
            meta = rec.meta["bisect"]
            if meta.get("role") == "bad" and rec.commit == self.bad:
                base = self._paired_base(rec)
                if base is not None and (base.meta.get("bisect") or {}).get("role") == "good":
                    found = (base, rec)
                    break
        t0 = self.clock()
        reused = found is not None
        if found is None:
            self.log(f"bisect: measuring the ends, GOOD {self.good[:8]} and BAD {self.bad[:8]}")
            out = ab.run(
                self.project,
                self.root,
                {"base": self.good, "head": self.bad},
                self.spec,
                pairs=self.pairs,
                budget_s=self.remaining(),
                log=self.log,
                labels={"base": self.label, "head": self.label},
                meta={"base": self._meta("good"), "head": self._meta("bad")},
                operator_pass=True,
            )
            found = (out["records"]["base"], out["records"]["head"])
            self.longest_s = max(self.longest_s, (self.clock() - t0) / 2)  # two sides
        else:
            self.log(f"bisect: the ends were measured before: {found[1].path}")
        outcome = run_gate(
            str(found[0].path),
            str(found[1].path),
            root=self.root,
            ab_threshold=self.pairs.threshold,
            history=False,  # judged across processes, not by a history
        )
        if not outcome.rows:
            raise BadInput(f"GOOD and BAD cannot be compared: {outcome.message}")
        ends = Ends(
            found[0],
            found[1],
            outcome.rows,
            decisive(outcome.rows),
            reused,
            self.clock() - t0,
            outcome.message,
        )
        self.ends_ = ends
        # BAD's level of each deciding row, as a ratio to GOOD's: timing rows are checked
        # against both ends (classify_rows)
        self.levels = {r.name: r.ratio for r in outcome.rows if r.name in ends.decide and r.ratio}
        units = {r.name: r.unit for r in outcome.rows}
        self.paired = any(not one_process_decides(units[name]) for name in ends.decide)
        return ends

    # -- a step --

    def classify(self, commit: str) -> Step:
        """Measure `commit` (or find its record) and classify it against GOOD."""
        from harness.verdict.gate import run_gate

        assert self.ends_ is not None, "the ends come first"
        t0 = self.clock()
        found = self._find_step(commit)
        reused = found is not None
        if found is None:
            try:
                found = self._measure(commit)
            except HarnessError as exc:
                # a build that breaks, a benchmark missing at this commit, asv saving nothing:
                # the commit is skipped, never guessed
                seconds = self.clock() - t0
                self.longest_s = max(self.longest_s, seconds)
                why = str(exc).strip().splitlines()[0][:300]
                return Step(commit, SKIP, f"not measured: {why}", None, None, False, seconds)
            self.longest_s = max(self.longest_s, self.clock() - t0)
        base, rec = found
        outcome = run_gate(
            str(base.path),
            str(rec.path),
            root=self.root,
            ab_threshold=self.pairs.threshold,
            history=False,  # judged across processes, not by a history
        )
        if not outcome.rows:
            verdict, why = SKIP, f"not compared: {outcome.message}"
        else:
            verdict, why = classify_rows(
                outcome.rows, self.ends_.decide, self.levels, across_bounds(rec, outcome.rows)
            )
        return Step(commit, verdict, why, rec, base, reused, self.clock() - t0, list(outcome.rows))

    def _find_step(self, commit: str) -> tuple[records.RunRecord, records.RunRecord] | None:
        for rec in self._mine():
            meta = rec.meta["bisect"]
            if rec.commit != commit or meta.get("role") not in ("step", "bad"):
                continue
            if self.paired:
                base = self._paired_base(rec)
            else:
                base = self._record(meta.get("against")) or self._paired_base(rec)
            if base is not None and base.commit == self.good:
                return base, rec
        return None

    def _measure(self, commit: str) -> tuple[records.RunRecord, records.RunRecord]:
        if self.paired:
            out = ab.run(
                self.project,
                self.root,
                {"base": self.good, "head": commit},
                self.spec,
                pairs=self.pairs,
                budget_s=self.remaining(),
                log=self.log,
                labels={"base": self.label, "head": self.label},
                meta={"base": self._meta("good"), "head": self._meta("step")},
                operator_pass=True,
            )
            return out["records"]["base"], out["records"]["head"]
        good = self.ends_.good
        out = ab.run(
            self.project,
            self.root,
            {"head": commit},
            self.spec,
            pairs=ab.Pairs(fixed=1, threshold=self.pairs.threshold),
            log=self.log,
            labels={"head": self.label},
            meta={"head": self._meta("step", against=good.run_id)},
            operator_pass=True,
        )
        return good, out["records"]["head"]


# ---- the whole bisect ----


@dataclasses.dataclass
class Result:
    code: int
    good: dict  # describe() of GOOD
    bad: dict
    commits: int  # first-parent commits after GOOD up to BAD
    ends: Ends | None
    steps: list[Step]
    search: Search | None
    message: str  # the one-line answer
    first_bad: dict | None = None  # describe() of it, with its parent's, the rows, the environment
    range: list[dict] = dataclasses.field(default_factory=list)  # describe() of each candidate
    seconds: float = 0.0


def run(
    project: pathlib.Path,
    root: pathlib.Path,
    good_rev: str,
    bad_rev: str,
    spec: RunSpec,
    *,
    pairs: ab.Pairs,
    budget_s: float | None = None,
    log=print,
    started: float | None = None,
) -> Result:
    """Resolve the ends, check that the selected rows differ between them, search; the result
    with its exit code (0 found, or no difference; 6 a range is left)."""
    good = resolve(project, good_rev, "GOOD")
    bad = resolve(project, bad_rev, "BAD")
    commits = commits_between(project, good, bad)
    b = Bisect(
        project, root, good, bad, spec, pairs=pairs, budget_s=budget_s, log=log, started=started
    )
    ends = b.ends()
    result = Result(
        exits.PASS,
        describe(project, good),
        describe(project, bad),
        len(commits),
        ends,
        [],
        None,
        "",
    )
    if not ends.decide:
        failed = [r for r in ends.rows if r.verdict in CANNOT_RUN]
        unknown = [r for r in ends.rows if r.verdict == compare.UNKNOWN]
        if failed:
            raise BadInput(
                "the selected rows must run at both ends: "
                + "; ".join(f"{r.name} {r.verdict} ({r.note})" for r in failed)
                + " (pick ends where they run)"
            )
        if unknown:
            result.code = exits.UNDECIDED
            result.message = (
                "undecided: the ends are neither the same nor different yet ("
                + ", ".join(r.name for r in unknown)
                + " UNKNOWN); more pairs (--max-pairs) or a quieter runner decide them"
            )
            result.range = [describe(project, c) for c in commits]
        elif any(r.verdict in compare.JUDGED for r in ends.rows):
            result.message = (
                "no difference between GOOD and BAD in the selected rows: nothing to bisect"
            )
        else:
            result.code = exits.UNDECIDED
            result.message = "undecided: no selected row was judged between GOOD and BAD"
        result.seconds = b.spent()
        return result
    changed = answer_changes(ends.rows, ends.decide)
    log(
        f"bisect: {len(commits)} first-parent commits after GOOD up to BAD; deciding rows: "
        + ", ".join(f"{n} ({d})" for n, d in ends.decide.items())
        + (
            "; each step is a `harness ab` of GOOD and the commit (timing rows need pairs)"
            if b.paired
            else "; one process a commit (exact counters, instruction counts and answers)"
        )
    )
    steps: list[Step] = []

    def classify(commit: str) -> str:
        step = b.classify(commit)
        steps.append(step)
        log(
            f"bisect: [{len(steps)}] {commit[:8]} {step.verdict}: {step.why}"
            + (" (measured before)" if step.reused else f" ({step.seconds:.0f} s)")
        )
        return step.verdict

    found = search(commits, classify, b.out_of_time)
    result.steps, result.search = steps, found
    result.range = [describe(project, c) for c in found.range]
    # where an answer changed (same -> WRONG), the answer names the commit (or the range) with it
    said = f" ({'; '.join(changed)})" if changed else ""
    if found.first_bad:
        result.first_bad = _explained(project, b, commits, found, steps)
        result.message = f"first bad commit: {found.first_bad} {result.range[0]['subject']}{said}"
    else:
        result.code = exits.UNDECIDED
        result.message = (
            f"{found.stopped}: the first bad commit is one of {len(found.range)} commits{said}"
        )
    result.seconds = b.spent()
    return result


def _explained(
    project: pathlib.Path, b: Bisect, commits: list[str], found: Search, steps: list[Step]
) -> dict:
    """The first bad commit: who and when, its parent, the deciding rows on the parent and on
    it, the environment it ran in, and what the records say changed (operators, functions)."""
    from harness.verdict import history, operators
    from harness.verdict.gate import run_gate
    from harness.verdict.results import fingerprint_of, load

    culprit = found.first_bad
    i = commits.index(culprit)
    parent = commits[i - 1] if i else b.good
    by_commit = {s.commit: s for s in steps if s.record is not None}
    ends = b.ends_
    rec_of = {b.good: ends.good, b.bad: ends.bad} | {c: s.record for c, s in by_commit.items()}
    out = describe(project, culprit)
    out["parent"] = describe(project, parent)
    before, after = rec_of.get(parent), rec_of.get(culprit)
    out["records"] = {"parent": str(before.path) if before else None, "it": str(after.path)}
    rows, lines, ops = [], [], {}
    if before is not None and after is not None:
        outcome = run_gate(
            str(before.path),
            str(after.path),
            root=b.root,
            ab_threshold=b.pairs.threshold,
            history=False,  # judged across processes, not by a history
        )
        rows = [r for r in outcome.rows if r.name in ends.decide]
        out["environment_differences"] = [list(t) for t in outcome.env_diff]
        for r in rows:
            if r.unit in ("ops", "kernels"):
                changes, more = operators.explain_counter(
                    r.name, before, after, (r.base, r.head) if r.base is not None else None
                )
                ops[r.name] = changes
                lines += [f"{r.name}: {x}" for x in more]
            elif metrics.kind_of(r.unit).kind == metrics.INSTRUCTIONS:
                lines += [
                    f"{r.name}: {x}" for x in history.explain_instructions(r.name, before, after)
                ]
    else:
        out["environment_differences"] = []
    out["rows"] = [dataclasses.asdict(r) for r in rows]
    out["explanation"] = lines
    out["operators"] = ops
    fp = fingerprint_of(load(after.result_file())) or {}
    out["environment"] = {
        k: fp.get(k)
        for k in ("machine_name", "torch", "python", "cpu", "gpu", "torch_threads", "os")
        if k in fp
    } | {"mode": b.spec.mode}
    return out


# ---- output ----


def _short(d: dict) -> str:
    return f"{d['commit'][:12]} {d['subject']} ({d['author_date']})"


def _step_json(s: Step) -> dict:
    return {
        "commit": s.commit,
        "verdict": s.verdict,
        "why": s.why,
        "record": str(s.record.path) if s.record else None,
        "against": str(s.base.path) if s.base else None,
        "reused": s.reused,
        "seconds": round(s.seconds, 1),
    }


def as_json(r: Result) -> dict:
    """The result for --json (schema in docs/bisect.md)."""
    ends = r.ends
    return {
        "schema": 1,
        "exit": r.code,
        "meaning": exits.MEANING[r.code],
        "message": r.message,
        "good": r.good,
        "bad": r.bad,
        "commits": r.commits,
        "first_bad": r.first_bad,
        "range": [d["commit"] for d in r.range],
        "stopped": r.search.stopped if r.search else None,
        "deciding_rows": ends.decide if ends else {},
        "ends": {
            "good_record": str(ends.good.path) if ends.good else None,
            "bad_record": str(ends.bad.path) if ends.bad else None,
            "reused": ends.reused,
            "rows": [dataclasses.asdict(x) for x in ends.rows],
        }
        if ends
        else None,
        "measured": [_step_json(s) for s in r.steps],
        "seconds": round(r.seconds, 1),
    }


def render(r: Result, fmt: str = "text") -> str:
    """The answer as text (terminal) or Markdown: the first bad commit with its rows, its
    environment and what changed; or the range left; then every commit measured."""
    from harness.core.table import render as render_table
    from harness.core.units import format_ratio, format_value
    from harness.verdict.gate import tally

    def esc(line: str) -> str:
        return escape.markdown_text(line, lines=True)

    md = fmt == "markdown"
    tables: list[str] = []  # rendered (and escaped) by harness.core.table

    def table(*args) -> str:
        tables.append(render_table(*args).rstrip())
        return tables[-1]

    ends = f"{r.good['commit'][:12]} {r.bad['commit'][:12]}"
    out = [f"## harness bisect {escape.markdown_text(ends)}", ""] if md else []
    if r.first_bad:
        fb = r.first_bad
        out.append(f"first bad commit: {_short(fb)}")
        out += answer_changes(r.ends.rows, r.ends.decide) if r.ends else []
        out.append(f"parent: {_short(fb['parent'])}")
        # as every comparison: the environment first, then the rows with how they were judged
        env = ", ".join(f"{k} {v}" for k, v in fb["environment"].items())
        out.append(f"environment: {env}")
        diffs = ", ".join(f"{k} {b} -> {a}" for k, b, a in fb["environment_differences"])
        out.append(f"environment differences, parent -> it: {diffs or 'none'}")
        if fb["rows"]:
            cells = [
                (
                    x["name"],
                    format_value(x["base"], x["unit"]),
                    format_value(x["head"], x["unit"]),
                    format_ratio(x["ratio"]),
                    x["verdict"],
                    x["note"],
                )
                for x in fb["rows"]
            ]
            shown = [compare.Row(**x) for x in fb["rows"]]
            out += [
                "",
                table(("row", "parent", "it", "ratio", "verdict", "note"), cells, fmt),
                f"parent -> it: {tally(shown)}",
                "",
            ]
        out += fb["explanation"]
    else:
        out.append(f"bisect: {r.message}")
        if r.range:
            out += [f"  {_short(d)}" for d in r.range]
    if md:  # what the records say is escaped (the heading and the tables already are)
        out = [
            line if not line or line is out[0] or line in tables else f"{esc(line)}  "
            for line in out
        ]
    measured = [
        (
            s.commit[:12],
            s.verdict,
            s.why,
            "reused" if s.reused else f"{s.seconds:.0f} s",
        )
        for s in r.steps
    ]
    if measured:
        out += [
            "",
            f"commits measured besides GOOD and BAD: {len(measured)} of {r.commits - 1}",
            "",
            table(("commit", "verdict", "why", "time"), measured, fmt),
        ]
    return "\n".join(out) + "\n"
