"""`harness ab BASE HEAD`: both sides measured in one job, in pairs of processes, then gated.

Each side is a git revision of this checkout (checked out into a temporary worktree whose
harness package and suites that side's benchmark processes import, through ASV_PYTHONPATH) or a
path to a Python interpreter (e.g. two venvs holding different torch builds, both running this
checkout). Per suite, each pair starts one process per side and the two take turns row by row
in short blocks (harness.runs.interleave: A B B A, then B A A B), so frequency scaling, other
load and thermal drift hit both sides of a row alike. asv's own `--interleave-rounds` works only
between environments asv builds itself, not for existing environments or two interpreters (asv
issue 595).

Instruction rows (`track_instructions`, callgrind) are deterministic: one valgrind process per side
decides them (through `asv run`), so they run once per side before the pairs, never in every pair.

Each side's processes are merged into one asv result (samples appended, as asv's
`append_samples` does) and kept as a run record labelled `base` / `head`; the verdict is the
gate's (harness.verdict.gate) on those two records, with the same rules and exit codes, plus the
per-pair verdicts of harness.verdict.between. A side's processes share one run's paired window
(process_window), split over a row's blocks.
Worktrees are removed afterwards, also on Ctrl-C or SIGTERM, after the benchmark processes are
ended (harness.core.processes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from harness.core import escape, provenance, records, settings
from harness.core.exits import BadInput, RunnerFailed
from harness.core.files import write_json_atomic
from harness.core.processes import (
    cleanup_despite_interrupts,
    run_in_session,
    terminate_as_interrupt,
)
from harness.measure.instructions import PROGRESS_FILE, RECORD_ENV
from harness.runs import asv, estimate, interleave, progress
from harness.runs.scratch import RunScratch
from harness.runs.spec import RunSpec
from harness.verdict import between, metrics

MIN_PAIRS = 5  # fixed --pairs below this give paired rows too few samples; allowed, with a warning
DEFAULT_PAIRS = 5  # a suite without rows judged across processes stops here in sequential runs
MIN_WINDOW_S = 2.0  # a process's share of the paired window (process_window)
FUTILE = 2  # a sequential run ends early when its UNKNOWN rows need more than this x --max-pairs
# ...judged from half of --max-pairs on: five pairs of a 6% slowdown once centred at 1.03, where
# the need looked like 90 pairs, and ended UNKNOWN
FUTILE_FROM = 0.5


@dataclasses.dataclass
class Side:
    label: str  # "base" or "head"
    spec: str  # what the user wrote
    project: pathlib.Path  # the tree whose suites (harness.core.project.suites) and harness run
    python: str  # interpreter the benchmark processes run
    commit: str
    env: dict[str, str]  # extra environment for this side's processes
    # the measured tree against its commit (harness.core.provenance): a worktree of a revision
    # is clean; an interpreter side measures the project's working tree as it is
    tree: provenance.TreeState = provenance.CLEAN


def _git(root: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    # in a session of its own that an interrupt ends politely (SIGINT first): `git worktree add`
    # killed outright leaves its half-made worktree registered and locked ("initializing"),
    # which `git worktree prune` never removes; interrupted, git removes it itself
    return run_in_session(["git", *args], cwd=root, capture=True)


@contextlib.contextmanager
def sides(project: pathlib.Path, specs: dict[str, str], envs: dict[str, dict[str, str]]):
    """Yield {label: Side}; temporary worktrees live only inside the `with` block."""
    from harness.core.project import head_commit, suites

    scratch: pathlib.Path | None = None
    made: list[pathlib.Path] = []
    try:
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="harness-ab-"))
        out = {}
        for label, spec in specs.items():
            path = pathlib.Path(spec)
            if path.is_file() and os.access(path, os.X_OK):
                out[label] = Side(
                    label,
                    spec,
                    project,
                    str(path.absolute()),
                    head_commit(project),
                    {**suites(project).environment(), **envs.get(label, {})},
                    provenance.for_run(project),
                )
                continue
            rev = _git(project, "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}")
            if rev.returncode:
                raise BadInput(
                    f"{label} {spec!r} is neither a git revision of {project} nor an "
                    "executable Python interpreter; give a commit, branch or tag, or a "
                    "path like .venv-other/bin/python"
                )
            sha = rev.stdout.strip()
            tree = scratch / f"{label}-{sha[:8]}"
            made.append(tree)  # before adding: an interrupted add leaves a half-made one
            added = _git(project, "worktree", "add", "--detach", str(tree), sha)
            if added.returncode:
                raise RunnerFailed(f"git worktree add failed for {spec}: {added.stderr.strip()}")
            # a project of its own: the side's own models and benchmark modules
            env = {**suites(tree).environment(), "ASV_PYTHONPATH": str(tree), **envs.get(label, {})}
            out[label] = Side(
                label, spec, tree, sys.executable, sha, env, provenance.tree_state(tree)
            )
        yield out
    finally:

        def remove_trees():
            for tree in made:
                if tree.exists():
                    _git(project, "worktree", "remove", "--force", str(tree))

        def remove_scratch():
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)  # the harness made it

        # last: git prunes a registration only once its folder is gone (a half-made worktree)
        cleanup_despite_interrupts(
            remove_trees, remove_scratch, lambda: _git(project, "worktree", "prune")
        )


class NoMatch(Exception):
    """No benchmark of this suite matches --bench (or, for the pairs, none but instruction
    rows): the suite is left out, or keeps only its instruction rows."""


@dataclasses.dataclass
class _Job:
    """One ab run: the two sides, what to run, where, and its clock."""

    side: dict[str, Side]
    spec: RunSpec
    work: pathlib.Path
    env: dict  # the run's environment, the same for both sides (RunSpec.environment)
    method: str
    pairs: Pairs
    budget_s: float | None
    bench_dir: pathlib.Path | None
    log: object
    started: float = dataclasses.field(default_factory=time.perf_counter)
    # what the machine's earlier runs recorded of its instruction rows (harness.runs.estimate):
    # the time left of a side's counting
    history: object = None
    on_row: object = None  # told as a pair starts each row (k, n, row): the heartbeat's

    @property
    def counter(self) -> pathlib.Path | None:
        """The instruction counter's progress file of this run (in its scratch folder)."""
        folder = self.env.get(settings.SCRATCH_DIR.name)
        return pathlib.Path(folder) / PROGRESS_FILE if folder else None


@dataclasses.dataclass(frozen=True)
class Pairs:
    """How many pairs of processes a suite gets: `fixed` pairs, or (sequential, the default)
    pairs added until every row judged across processes is SAME or DIFFERENT, from
    between.MIN_PAIRS up to `most`. `duet`: both processes of a pair at the same time, each
    pinned to its own CPUs (the sides swap CPUs from pair to pair)."""

    fixed: int | None = None
    most: int = 20
    threshold: float = between.DEFAULT_THRESHOLD
    duet: bool = False
    # stop after the first pair when every row it ran is an exact counter: one process a side
    # decides those, more pairs add nothing (harness bisect)
    counters_once: bool = False

    @property
    def planned(self) -> int:
        """The pairs a run expects (sizes each process's share of the paired window)."""
        return self.fixed or DEFAULT_PAIRS

    def describe(self) -> str:
        how = f"{self.fixed} pairs" if self.fixed else f"pairs until decided (at most {self.most})"
        return how + (", duet (both sides at once, one CPU set each)" if self.duet else "")


@dataclasses.dataclass
class SuiteRuns:
    """One suite's result files: per side its instruction process (if any), and the pairs."""

    instructions: dict[str, pathlib.Path] = dataclasses.field(default_factory=dict)
    pairs: list[dict[str, pathlib.Path]] = dataclasses.field(default_factory=list)

    def files(self, label: str) -> list[pathlib.Path]:
        once = [self.instructions[label]] if label in self.instructions else []
        return once + [p[label] for p in self.pairs]


def run_side(
    job: _Job,
    label: str,
    suite: str,
    out_dir: pathlib.Path,
    rows: str | None = None,
) -> pathlib.Path:
    """One `asv run` for one side and suite (the instruction rows: _once); returns its result
    file. The side's own settings go on top of the run's environment; `rows`: "instructions"
    or "timing" (suite_regex). What the process keeps beside its results (instruction counts'
    function tables) goes to out_dir/record."""
    side = job.side[label]
    env = {
        **job.env,
        **side.env,
        settings.PYTHON.name: side.python,
        RECORD_ENV: str(out_dir / "record"),
    }
    benches = list(job.spec.benches)
    result = asv.run(
        asv.AsvRun(
            side.project,
            out_dir,
            job.spec.machine,
            side.commit,
            env,
            benches=(suite_regex(suite, benches, rows),),
            quick=job.spec.quick,
            method=job.method,
            bench_dir=job.bench_dir or _suite_dir(job, label, suite),
        )
    )
    # nothing selected: --bench matched none of the suite, or the suite's only rows are
    # instruction rows (counted once per side) and the pairs' "timing" rows are none
    if (
        not result.files
        and (benches or rows == "timing")
        and "No benchmarks selected" in result.output
    ):
        raise NoMatch(suite)
    if not result.files:
        raise RunnerFailed(
            f"asv saved nothing for {side.label} ({side.spec}), suite {suite} "
            f"(exit {result.returncode}):\n{result.stdout[-1500:]}{result.stderr[-1500:]}"
        )
    return result.files[0]


def _suite_dir(job: _Job, label: str, suite: str) -> pathlib.Path:
    """The side's suite module alone in a benchmark folder of its own (asv.benchmark_subset):
    every process of a pair would otherwise import every suite at discovery."""
    dest = job.work / f"benchmarks-{label}-{suite}" / "benchmarks"
    if not dest.is_dir():
        asv.benchmark_subset(job.side[label].project, [suite], dest)
    return dest


INSTRUCTION_ROWS = r".*\.track_instructions"


def suite_regex(suite: str, benches: list[str], rows: str | None = None) -> str:
    """One asv --bench regex: the suite's benchmarks, and of them only those any of `benches`
    is found in; `rows` "instructions" keeps only instruction rows, "timing" all others.
    (asv ORs repeated --bench regexes, so passing the suite's prefix and the user's regexes
    separately would run the whole suite plus matches from every other suite.)"""
    which = {
        None: "",
        "instructions": f"(?={INSTRUCTION_ROWS})",
        "timing": f"(?!{INSTRUCTION_ROWS})",
    }[rows]
    if not benches:
        return rf"^{which}{suite}\." if which else rf"^{suite}\."
    return rf"^(?={suite}\.){which}(?=.*(?:" + "|".join(f"(?:{b})" for b in benches) + "))"


def has_instruction_rows(
    sides: dict[str, Side], suite: str, bench_dir: pathlib.Path | None
) -> bool:
    """Whether either side's suite module defines instruction rows (read from its source: asv's
    discovery would cost a process per side)."""
    from harness.core.project import suites

    files = (
        [bench_dir / f"{suite}.py"]
        if bench_dir
        else [suites(s.project).modules().get(suite) for s in sides.values()]
    )
    return any(
        f is not None and f.is_file() and "track_instructions" in f.read_text(encoding="utf-8")
        for f in files
    )


_FINGERPRINT = """
import json
try:
    from harness.core.env import fingerprint
except ImportError:  # a revision from before the core/ layout
    from harness.env import fingerprint
print(json.dumps(fingerprint()))
"""


def side_fingerprint(side: Side) -> dict:
    """The environment that side's benchmark processes ran in: its interpreter, its harness."""
    import json

    env = {**os.environ, "PYTHONPATH": str(side.project)}
    proc = subprocess.run(
        [side.python, "-c", _FINGERPRINT], env=env, capture_output=True, text=True, cwd=side.project
    )
    if proc.returncode:
        raise RunnerFailed(
            f"cannot read the environment of {side.label} ({side.python}): "
            f"{proc.stderr.strip()[-1500:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def merge(
    result_files: list[pathlib.Path], benchmarks: dict, dest_dir: pathlib.Path
) -> pathlib.Path:
    """One asv result holding every process's samples (asv's append_samples); counters keep the
    last process's value. Written to dest_dir/<machine>/ under the first file's name."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    def wrapped(res, key, params):
        # one entry per parameter combination (a single one for an unparametrised benchmark)
        return list(res.get_result_value(key, params)), list(res.get_result_samples(key, params))

    merged = Results.load(str(result_files[0]))
    for path in result_files[1:]:
        res = Results.load(str(path))
        for key in res.get_result_keys(benchmarks):
            bench = benchmarks[key]
            params = res.get_result_params(key) or []
            values, samples = wrapped(res, key, params)
            if key in merged.get_result_keys(benchmarks):
                _, old = wrapped(merged, key, params)
                samples = [
                    a + b if a is not None and b is not None else b for a, b in zip(old, samples)
                ]
            numbers = [1 if s is not None else None for s in samples]
            merged.add_result(
                bench,
                BenchmarkResult(
                    result=values,
                    samples=samples,
                    number=numbers,
                    errcode=0,
                    stderr="",
                    profile=None,
                ),
                record_samples=True,
            )
    merged.save(str(dest_dir))
    return dest_dir / merged._filename


def merge_side(
    by_suite: dict[str, list[pathlib.Path]],
    benchmarks: dict,
    work: pathlib.Path,
    dest_dir: pathlib.Path,
) -> pathlib.Path:
    """One side's result file from its processes' files, per suite: each suite's processes merged
    in a folder of its own (asv names every result file after the commit and environment alone,
    so the suites' merged files share one name), then folded into one file under dest_dir."""
    merged = [merge(group, benchmarks, work / suite) for suite, group in by_suite.items()]
    return merge(merged, benchmarks, dest_dir)


def process_window(quick: bool, pairs: int) -> float:
    """Seconds each process spreads a paired comparison over: a side pools `pairs` processes
    spread over the whole job, so they share one run's window (timing FAST/FULL), at least
    MIN_WINDOW_S each (eight quarter-second blocks)."""
    from harness.measure import timing

    window = (timing.FAST if quick else timing.FULL)["paired_window_s"]
    return round(max(MIN_WINDOW_S, window / max(pairs, 1)), 3)


def _once(job: _Job, runs: SuiteRuns, suite: str) -> bool:
    """The suite's instruction rows, one process per side (their counts do not move between
    processes); False when the suite has none that --bench selects."""
    if not has_instruction_rows(job.side, suite, job.bench_dir):
        return False
    t0 = time.perf_counter()
    try:
        for k, label in enumerate(job.side):
            status = _counting_status(job, suite, label, (k + 1, len(job.side)))
            started = time.perf_counter()
            with progress.Heartbeat(job.log, status):
                runs.instructions[label] = run_side(
                    job,
                    label,
                    suite,
                    job.work / f"{suite}-{label}-instructions",
                    rows="instructions",
                )
            # a line as each side ends: the next side's heartbeat starts its own 25 s (without
            # it a side's end and the next one's start left 47 s of silence)
            job.log(
                f"ab: {suite} instruction rows, {label} side ({k + 1} of {len(job.side)}) "
                f"counted in {time.perf_counter() - started:.0f} s"
            )
    except NoMatch:
        return False
    job.log(
        f"ab: {suite} instruction rows, one process per side, took {time.perf_counter() - t0:.0f} s"
    )
    return True


def _counting_status(job: _Job, suite: str, label: str, which: tuple[int, int]):
    """What a side's counted run says while valgrind counts (the heartbeat's line): the row
    being counted, rows done of rows planned, the time left of this side."""
    since, t0 = time.time(), time.perf_counter()
    side = f"{label} side ({which[0]} of {which[1]})" if which[1] > 1 else f"{label} side"
    head = f"ab: {suite} instruction rows, one counted run a side; {side}"

    def status() -> str:
        took = f"{time.perf_counter() - t0:.0f} s"
        live = progress.counting(job.counter, since, job.history)
        if live is None:
            return f"{head}: asv is starting it; {took}"
        left = (
            "time left unknown (a row left was never counted on this machine)"
            if live.left is None
            else f"~{live.left:.0f} s left of this side"
        )
        return f"{head}: {live.text}; {took}, {left}"

    return status


def what_ran(out: dict, rows: list, policy: Pairs) -> str:
    """What ab ran, suite by suite, for its closing line: a suite's instruction rows as one
    counted run a side with their rows' verdicts (a count does not move between processes, so
    no pairs), its other rows as the pairs run under `policy`. `out`: run()'s answer; `rows`:
    the gate's rows of the two sides."""
    from harness.verdict import metrics

    parts = []
    for suite, n in out["pairs"].items():
        mine = [
            r
            for r in rows
            if r.name.split(".", 1)[0] == suite and _kind(r.unit) == metrics.INSTRUCTIONS
        ]
        said = []
        if suite in out.get("counted", ()):
            verdicts: dict[str, int] = {}
            for r in mine:
                verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
            tally = ", ".join(f"{k} {v}" for v, k in sorted(verdicts.items()))
            said.append(
                f"one counted run a side (valgrind: a count does not move between processes), "
                f"{len(mine)} instruction row{'s' * (len(mine) != 1)}"
                + (f": {tally}" if tally else "")
            )
        if n or suite not in out.get("counted", ()):
            said.append(f"{n} pair{'s' * (n != 1)} ({policy.describe()})")
        elif not n:
            said.append("no pairs (no other rows)")
        parts.append(f"{suite}: {'; '.join(said)}")
    return "; ".join(parts)


def _kind(unit) -> str:
    from harness.verdict import metrics

    try:
        return metrics.kind_of(unit).kind
    except KeyError:
        return ""


def duet_cpus() -> tuple[str, str] | None:
    """Two disjoint CPU sets, the halves of this process's CPUs ("0,1" form), or
    None where fewer than two CPUs are available."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    half = len(cpus) // 2
    return ",".join(map(str, cpus[:half])), ",".join(map(str, cpus[half:]))


def _pair(job: _Job, suite: str, i: int) -> dict[str, pathlib.Path]:
    """Pair i (harness.runs.interleave): both sides' processes at once, row by row in short
    blocks, A B B A on even pairs and B A A B on odd ones; in duet mode each block on both
    sides at the same time, the CPU sets swapped on odd pairs. A job of one side (a commit
    measured alone) runs one process."""
    labels = list(job.side)
    order = labels if i % 2 == 0 else labels[::-1]
    cpus = None
    if job.pairs.duet:
        cpus = duet_cpus()
        if cpus is None:
            raise BadInput("--duet needs at least 2 CPUs (one set per side); this process has 1")
    runs = [_side_run(job, label, suite, job.work / f"{suite}-{label}-{i}") for label in order]
    files = interleave.run_pair(
        runs,
        suite_regex(suite, list(job.spec.benches), "timing"),
        job.spec.machine,
        duet_cpus=cpus,
        work=job.work / f"{suite}-pair-{i}",
        **({"on_row": job.on_row} if getattr(job, "on_row", None) else {}),
    )
    if files is None:
        raise NoMatch(suite)
    return files


def _side_run(job: _Job, label: str, suite: str, out_dir: pathlib.Path):
    """One side's process of a pair, with the environment asv would give its benchmark
    processes: the run's and the side's settings, PYTHONPATH from ASV_PYTHONPATH (the side's
    worktree) and no other."""
    side = job.side[label]
    env = {**job.env, **side.env}
    env.pop("PYTHONPATH", None)
    if "ASV_PYTHONPATH" in env:
        env["PYTHONPATH"] = env.pop("ASV_PYTHONPATH")
    bench_dir = job.bench_dir or _suite_dir(job, label, suite)
    return interleave.SideRun(label, side.python, env, bench_dir, side.commit, out_dir)


def pair_values(pairs: list[dict[str, pathlib.Path]]) -> tuple[dict, dict]:
    """Per row, (base, head) values of every pair's two processes (between.process_value;
    None where the row failed or was skipped), and the rows' units."""
    from harness.verdict.results import load

    def central(e):
        return between.process_value(e.samples, e.value, e.unit)

    values: dict[str, list[tuple[float | None, float | None]]] = {}
    units: dict[str, str] = {}
    for p in pairs:
        sets = {label: load(f) for label, f in p.items()}
        for name in sorted(set(sets["base"].entries) & set(sets["head"].entries)):
            b, h = sets["base"].entries[name], sets["head"].entries[name]
            units[name] = h.unit
            ok = [
                central(e) if not (e.failed or e.skipped) and central(e) is not None else None
                for e in (b, h)
            ]
            values.setdefault(name, []).append((ok[0], ok[1]))
    return values, units


def out_of_reach(values: dict, left: list[str], threshold: float, most: int) -> int | None:
    """The fewest pairs any of the UNKNOWN rows `left` would need at its present spread
    (between.pairs_to_decide), when that is beyond FUTILE x `most` for every one of them, else
    None: more pairs up to --max-pairs would almost surely leave them UNKNOWN. The factor allows
    for a spread estimated from a few pairs."""
    needs = []
    for row in left:
        need = between.pairs_to_decide(between.ratios_of(values[row]), threshold)
        if need is not None and need <= FUTILE * most:
            return None
        needs.append(need or FUTILE * most + 1)
    return min(needs) if needs else None


def undecided(values: dict, units: dict, threshold: float) -> list[str]:
    """The rows judged across processes that are still UNKNOWN."""
    out = []
    for name, pairs in values.items():
        if not between.judged_across_processes(units[name]):
            continue
        ratios = between.ratios_of(pairs)
        if not ratios:
            continue  # n/a or failed on a side: never decided by more pairs
        higher = metrics.kind_of(units[name]).higher_is_better
        if between.decide(ratios, threshold, higher_is_better=higher).verdict == between.UNKNOWN:
            out.append(name)
    return out


def _alternate(job: _Job, runs: SuiteRuns, suite: str) -> None:
    """One suite's pairs, A B / B A / A B ... (or duets), appended to runs.pairs: a fixed count,
    or until every row judged across processes is decided; stops early when the next pair
    would overrun the budget, and says why it stopped. Instruction rows are left out (_once
    counts them)."""
    policy = job.pairs
    most = policy.fixed or policy.most
    why = f"{most} pairs" + ("" if policy.fixed else " (--max-pairs), rows still UNKNOWN")
    for i in range(most):
        t0 = time.perf_counter()
        at: list = []  # the row the pair is at: (k, n, row)

        def status(i=i, t0=t0, at=at) -> str:
            name = f"ab: {suite} pair {i + 1}{'/' + str(most) if policy.fixed else ''}"
            where = ""
            if at:
                k, n, row = at[-1]
                where = f": row {k} of {n} ({escape.terminal(row, escape.MAX_CELL)})"
            return f"{name}{where}; {time.perf_counter() - t0:.0f} s in this pair"

        job.on_row = lambda *row, at=at: at.append(row)
        with progress.Heartbeat(job.log, status):
            runs.pairs.append(_pair(job, suite, i))
        pair_s = time.perf_counter() - t0
        job.log(
            f"ab: {suite} pair {i + 1}{'/' + str(most) if policy.fixed else ''} took {pair_s:.0f} s"
        )
        n = i + 1
        if not policy.fixed and policy.counters_once and n == 1:
            _, units = pair_values(runs.pairs)
            if units and all(metrics.kind_of(u).exact for u in units.values()):
                why = "one pair: every row it ran is an exact counter"
                break
        if not policy.fixed and n >= between.MIN_PAIRS:
            values, units = pair_values(runs.pairs)
            judged = [r for r in values if between.judged_across_processes(units[r])]
            left = undecided(values, units, policy.threshold)
            if judged and not left:
                why = f"every row judged across processes decided after {n} pairs"
                break
            if not judged and n >= DEFAULT_PAIRS:
                why = f"{n} pairs (no row of this suite is judged across processes)"
                break
            futile_from = max(DEFAULT_PAIRS, round(FUTILE_FROM * most))
            need = out_of_reach(values, left, policy.threshold, most) if n >= futile_from else None
            if need is not None and n < most:
                why = (
                    f"{n} pairs: at this runner's spread the rows left UNKNOWN would need "
                    f"{need}+ pairs each, beyond {FUTILE}x --max-pairs ({most}); a quieter runner "
                    "decides them"
                )
                break
        spent = time.perf_counter() - job.started
        if job.budget_s is not None and n < most and spent + pair_s > job.budget_s:
            why = f"the budget of {job.budget_s:.0f} s after {n} pairs"
            break
    job.log(f"ab: {suite}: stopped at {why}")


def run(
    project: pathlib.Path,
    root: pathlib.Path,
    specs: dict[str, str],
    spec: RunSpec,
    *,
    pairs: Pairs,
    budget_s: float | None = None,
    envs: dict[str, dict[str, str]] | None = None,
    bench_dir: pathlib.Path | None = None,
    log=print,
    labels: dict[str, str] | None = None,
    meta: dict[str, dict] | None = None,
    operator_pass: bool = False,
) -> dict:
    """Alternate the sides per suite of `spec` (its machine, mode, threads, --bench selection);
    save each side as a run record. Returns what was run and left out, and the run records.
    Scratch folders (the asv runs before merging, the run's TMPDIR and compile caches:
    harness.runs.scratch) and worktrees are removed afterwards, also when a run fails or is
    interrupted (Ctrl-C, SIGTERM: the asv processes are ended first): the records hold the data.

    `specs` holds "base" and "head", or one side alone (a commit measured by itself, with a
    fixed number of processes: `harness bisect`). `labels`: each side's run label (default its
    name); `meta`: more run.json fields per side; `operator_pass`: also store the per-operator
    counts behind ops/kernels rows (harness.runs.bench.operator_pass) in each record."""
    if len(specs) == 1 and not pairs.fixed:
        raise ValueError("a side measured alone needs a fixed number of processes")
    from harness.runs.bench import checked_size_overrides

    checked_size_overrides()  # a bad HARNESS_SIZES: bad input before any side starts
    with (
        terminate_as_interrupt(),
        RunScratch() as scratch,
        sides(project, specs, envs or {}) as side,
    ):
        env = spec.environment(scratch)
        # each of a row's blocks (harness.runs.interleave) is one call: they share the window
        window = process_window(spec.quick, pairs.planned) / interleave.BLOCKS
        env[settings.PAIRED_WINDOW_S.name] = str(round(window, 3))
        job = _Job(
            side,
            spec,
            scratch.folder("runs"),  # the asv runs before merging
            env,
            asv.launch_method(),
            pairs,
            budget_s,
            bench_dir,
            log,
            history=estimate.row_seconds(root, spec.machine, spec.mode),
        )
        done, left_out = _measure(job)
        labels, meta = labels or {}, meta or {}

        def keep(label: str, ab_pairs=None) -> records.RunRecord:
            return _keep(
                job,
                root,
                label,
                done,
                ab_pairs,
                run_label=labels.get(label),
                extra=meta.get(label),
                operators=operator_pass,
            )

        values, units = {}, {}
        if len(side) == 2:
            values, units = pair_values([p for r in done.values() for p in r.pairs])
            saved = {"base": keep("base")}
            saved["head"] = keep("head", (saved["base"].run_id, values, units))
        else:
            saved = {label: keep(label) for label in side}
    records.rebuild_view(root)
    return {
        "records": saved,
        "suites": list(done),
        "left_out": left_out,
        "pairs": {suite: len(r.pairs) for suite, r in done.items()},
        # suites whose instruction rows one counted run a side decided (_once)
        "counted": [suite for suite, r in done.items() if r.instructions],
        "values": values,
        "seconds": time.perf_counter() - job.started,
    }


def _measure(job: _Job) -> tuple[dict[str, SuiteRuns], list[str]]:
    """Every suite's processes (suite -> SuiteRuns, in the order run) and the suites left out."""
    done: dict[str, SuiteRuns] = {}
    left_out, unmatched = [], []
    for suite in job.spec.suites:
        spent = time.perf_counter() - job.started
        if job.budget_s is not None and done and spent >= job.budget_s:
            left_out.append(suite)
            continue
        runs = SuiteRuns()
        counted = _once(job, runs, suite)
        try:
            _alternate(job, runs, suite)
        except NoMatch:
            if not counted:
                unmatched.append(suite)
                continue
        done[suite] = runs
    if not done and unmatched:
        raise BadInput(
            f"no benchmark of suite(s) {', '.join(unmatched)} matches --bench "
            f"{' '.join(job.spec.benches)}; list the names with `harness bench --list`"
        )
    if unmatched:
        job.log(f"ab: no benchmark of {', '.join(unmatched)} matches --bench; left out")
    if not done:
        raise BadInput("nothing ran within the budget; raise --budget")
    return done, left_out


def _keep(
    job: _Job,
    root: pathlib.Path,
    label: str,
    done: dict[str, SuiteRuns],
    ab_pairs=None,
    *,
    run_label: str | None = None,
    extra: dict | None = None,
    operators: bool = False,
) -> records.RunRecord:
    """One side's processes merged into one run record labelled `run_label` (default the side's
    name); the head's also keeps the per-pair values (`ab_pairs`: base run id, values, units;
    records.AB_PAIRS). `extra`: more run.json fields; `operators`: run the operator pass."""
    import json

    by_suite = {suite: runs.files(label) for suite, runs in done.items()}
    ran_suites = list(done)
    s, machine = job.side[label], job.spec.machine
    run_id = records.new_run_id(s.commit, run_label or label)
    meta = {
        **(extra or {}),
        "commit": s.commit,
        "started": run_id.split("-")[0],
        "label": run_label or label,
        "suites": ran_suites,
        "mode": "fast" if job.spec.quick else "full",
        "quick": job.spec.quick,
        "threads": job.env[settings.THREADS.name],
        **s.tree.as_meta(),
        "ab": {
            "spec": s.spec,
            "python": s.python,
            "pairs": {suite: len(runs.pairs) for suite, runs in done.items()},
            "policy": job.pairs.describe(),
            "processes": sum(map(len, by_suite.values())),
        },
    }
    with records.writing(root, machine, run_id, meta) as staging:
        benchmarks: dict[str, dict] = {}
        for files in by_suite.values():
            for f in files:
                benchmarks.update(json.loads((f.parent.parent / "benchmarks.json").read_text()))
        write_json_atomic(staging / "asv" / "benchmarks.json", benchmarks)
        merge_side(by_suite, benchmarks, job.work / f"merged-{label}", staging / "asv")
        for files in by_suite.values():
            for f in files:  # instruction counts' tables, one file per valgrind process
                for kept in (f.parent.parent / "record" / records.INSTRUCTIONS).glob("*.json"):
                    dest = staging / records.INSTRUCTIONS / kept.name
                    dest.parent.mkdir(exist_ok=True)
                    shutil.copy2(kept, dest)
        first = next(iter(by_suite.values()))[0]
        shutil.copy2(first.parent / "machine.json", staging / "asv" / machine / "machine.json")
        fp = side_fingerprint(s)
        fp.update(
            machine_name=machine,
            commit=s.commit,
            run_id=run_id,
            ab_side=label,
            torch_threads=int(job.env[settings.THREADS.name]),
            python_hash_seed=job.env["PYTHONHASHSEED"],
        )
        write_json_atomic(staging / records.FINGERPRINT, fp)
        _keep_answers(by_suite, staging, label, job.log)
        if ab_pairs is not None:
            records.write_ab_pairs(staging, *ab_pairs)
        if operators:
            t0 = time.perf_counter()
            took = lambda: f"{time.perf_counter() - t0:.0f} s"  # noqa: E731
            with progress.Heartbeat(
                job.log, lambda: f"ab: the operator pass of {label} is running; {took()}"
            ):
                meta["operator_pass"] = _operator_pass(job, s, staging, ran_suites)
    return records.load_record(records.runs_dir(root) / machine / run_id)


def _keep_answers(
    by_suite: dict[str, list[pathlib.Path]], staging: pathlib.Path, label: str, log
) -> int:
    """The answer checks the side's processes made (harness.runs.interleave.ANSWERS_FILE beside
    each pair's result), the worst of each row's over its blocks and pairs, kept as the record's
    answer rows (harness.verdict.answers reads them, so the gate of the two records shows each
    side's answer beside the row's ratio). One that does not read as an answer is left out, said
    in a line. Returns how many were kept."""
    import json

    from harness.core import answerfacts
    from harness.core.exits import BadInput

    checks: dict = {}
    for files in by_suite.values():
        for f in files:
            path = f.parent.parent / interleave.ANSWERS_FILE
            try:
                data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            except ValueError:
                data = {}
            for timed, facts in data.items() if isinstance(data, dict) else ():
                checks[timed] = interleave.worst_answer(checks.get(timed), facts)
    kept = 0
    for timed, facts in sorted(checks.items()):
        try:
            answerfacts.Answer.from_facts(facts, f"{label}'s answer check of {timed}")
        except BadInput as exc:
            log(f"ab: {exc}; left out of the record")
            continue
        row = answerfacts.answer_row(timed)
        records.write_row_facts(staging, row, {answerfacts.FACTS_KEY: facts})
        kept += 1
    return kept


def _operator_pass(job: _Job, s: Side, staging: pathlib.Path, suites: list[str]) -> str:
    """The per-operator counts behind the record's ops/kernels rows, counted by the side's own
    harness (its worktree first on the path), as `harness bench` stores them."""
    from harness.runs.bench import operator_pass

    env = {**job.env, **s.env, "PYTHONPATH": str(s.project)}
    folder = job.bench_dir or asv.benchmark_subset(
        s.project, suites, job.work / f"operators-{s.label}" / "benchmarks"
    )
    return operator_pass(
        s.project, staging, suites, env, profile=False, out=sys.stderr, bench_dir=folder
    )
