"""One paired row's answer check again, alone: `harness answers --rerun ROW`.

A paired row checks that its two sides compute the same thing before it times them
(harness.measure.answers, inside timing.measure_paired). Rerunning the whole benchmark to see that
check again costs asv's start, its discovery, a warm-up and a timed window; this reruns only the
check, in this process:

1. the row's suite is found as `harness bench` finds it (harness.core.project.Suites: this
   checkout's suites/benchmarks, or a project's own benchmark folder beside the packaged suites),
   copied into a scratch benchmark folder (harness.runs.asv.benchmark_subset) and imported as
   asv imports it, under the run's environment (RunSpec: the mode's sizes, the run's fixed thread
   count, the device; a private compile cache; a project's models);
2. the case is named as the results name it (`suite.Class.track_x('a', 1)`, its answer row
   `answer_x(...)` too, the parameters read with ast.literal_eval) or selected by a --bench-style
   regex;
3. asv's own Benchmark object runs it as asv does (module and class `setup`, the `track_` method,
   `teardown`), with `answers.only_the_check()` around the track method: measure_paired stops
   right after its check, so nothing is warmed up or timed.

The answer is recorded as in a run, into a scratch record (its row facts, and for the first WRONG
the reproduction file answers/first-wrong.pt). A row whose check runs outside its track method
(one with a `setup_cache`: fusion.MemoryBandwidth checks inside its timing loop there, the
distributed rows inside their torchrun workers) is not rerun here: rerunning its setup_cache is
rerunning its whole measurement, so the command names the `harness bench` line that does.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import itertools
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from harness.core import answerfacts, exits, settings
from harness.core.answerfacts import FAIL_TO_RUN, NOT_APPLICABLE, SAME, WRONG, Answer
from harness.core.exits import BadInput
from harness.runs.spec import RunSpec

PACKAGE = "benchmarks"  # the name asv imports a benchmark folder as (`harness bench`'s subset)
SHOWN = 12  # rows listed in a message naming what a pattern could have matched


@dataclasses.dataclass(frozen=True)
class Request:
    """What to rerun and how. `patterns`: full row names (timing or answer rows) or --bench-style
    regexes; `mode`: a RunSpec mode (quick and fast check at the same sizes); `record`: the
    scratch record the answers and a first WRONG's reproduction go into (None: nowhere);
    `compile_cache`: a compile cache to share (None: a private, empty one, as a run has)."""

    patterns: tuple[str, ...]
    mode: str = "quick"
    threads: int | None = None
    device: str | None = None
    suites: tuple[str, ...] = ()
    record: Path | None = None
    compile_cache: Path | None = None


@dataclasses.dataclass
class Rerun:
    """One case rerun: its answer, or why it has none here (`note`)."""

    row: str  # the timed row, as the results name it
    answer: Answer | None
    note: str = ""  # a row checked elsewhere: the command that reruns it; a row without a check
    error: str = ""  # the traceback of what a side (or the row's setup) raised
    seconds: float = 0.0

    @property
    def status(self) -> str:
        return self.answer.status if self.answer is not None else "not rerun"


@dataclasses.dataclass
class Reran:
    """Every case a request selected, with the settings they ran under."""

    cases: list[Rerun]
    mode: str
    threads: int
    device: str
    record: Path | None = None
    seconds: float = 0.0

    @property
    def code(self) -> int:
        """1 a WRONG, 2 a check that failed to run (wins), 0 every answer the same, 6 only n/a,
        3 where no selected row could be rerun here."""
        statuses = {c.status for c in self.cases}
        if FAIL_TO_RUN in statuses:
            return exits.FAILED
        if WRONG in statuses:
            return exits.REGRESSION
        if SAME in statuses:
            return exits.PASS
        if NOT_APPLICABLE in statuses:
            return exits.UNDECIDED
        return exits.BAD_INPUT

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cases:
            out[c.status] = out.get(c.status, 0) + 1
        order = (WRONG, FAIL_TO_RUN, SAME, NOT_APPLICABLE, "not rerun")
        return dict(sorted(out.items(), key=lambda kv: order.index(kv[0])))

    def summary(self) -> str:
        found = ", ".join(f"{n} {s}" for s, n in self.counts().items())
        threads = f"{self.threads} CPU thread{'s' * (self.threads > 1)}"
        return (
            f"answers --rerun: exit {self.code} ({exits.MEANING[self.code]}); {found} "
            f"({self.mode} sizes, {threads}, device {self.device}, {self.seconds:.1f} s)"
        )

    def render(self) -> str:
        from harness.core import escape

        out = []
        for c in self.cases:
            out.extend(escape.terminal(line, escape.MAX_MESSAGE) for line in _lines(c, self))
        out.append(self.summary())
        return "\n".join(out) + "\n"

    def as_json(self) -> dict:
        return {
            "schema": 1,
            "exit": self.code,
            "meaning": exits.MEANING[self.code],
            "mode": self.mode,
            "threads": self.threads,
            "device": self.device,
            "record": str(self.record) if self.record else None,
            "counts": self.counts(),
            "rows": [
                {
                    "row": c.row,
                    "answer_row": answerfacts.answer_row(c.row),
                    "status": c.status,
                    **(c.answer.to_facts() if c.answer is not None else {}),
                    **({"note": c.note} if c.note else {}),
                    **({"error": c.error} if c.error else {}),
                    "rerun_seconds": round(c.seconds, 3),
                }
                for c in self.cases
            ],
        }


def _lines(c: Rerun, reran: Reran) -> list[str]:
    from harness.verdict import answers

    a = c.answer
    if a is None:
        return [f"{c.row}: not rerun here: {c.note}"]
    head = f"{c.row}: {answers.status_text(a)}"
    lines = [head + (f" ({a.what})" if a.what else "")]
    if a.status in (SAME, WRONG):
        shown = answers.figures(a)
        if shown:
            lines.append(f"  {shown}")
        lines.append(f"  tolerance {answers.tolerance(a)}")
    if a.reason:
        label = {NOT_APPLICABLE: "why", FAIL_TO_RUN: "error"}.get(a.status, "check")
        lines.append(f"  {label}: {a.reason}")
    if a.reproduce and reran.record is not None:
        path = reran.record / a.reproduce
        lines.append(
            f"  reproduce: {path} (load it with torch.load(path, weights_only=True): the "
            "inputs and both sides' differing results)"
        )
    cost = f"  setup and check {c.seconds:.1f} s"
    if a.seconds is not None:
        cost += f"; the check {a.seconds:.2f} s"
    if a.first_call_seconds is not None:
        cost += f", the compiled side's first call (its compile) {a.first_call_seconds:.1f} s"
    lines.append(cost)
    if c.error and a.status == FAIL_TO_RUN:
        lines.extend("  " + line for line in c.error.splitlines())
    return lines


# ---- selecting rows --------------------------------------------------------------------------


def is_paired(bench) -> bool:
    """A paired row: a `track_` benchmark of unit "ratio" that is not `*_over_reference` (that one
    divides by the machine's yardstick, not by a second way of computing one thing)."""
    method = bench.name.rsplit(".", 1)[-1]
    return (
        method.startswith("track_")
        and getattr(bench, "unit", "") == "ratio"
        and not method.endswith("_over_reference")
    )


@dataclasses.dataclass(frozen=True)
class Case:
    bench: str  # the benchmark's name, no parameters
    index: int | None  # asv's parameter index (None: not parameterised)
    name: str  # the row as the results name it
    values: tuple  # the parameters' values
    paired: bool
    checked_elsewhere: bool  # the class has a setup_cache: the check runs there or beyond


def cases_of(bench) -> list[Case]:
    paired = is_paired(bench)
    elsewhere = bench.setup_cache_key is not None
    if not bench._params:
        return [Case(bench.name, None, bench.name, (), paired, elsewhere)]
    out = []
    reprs = itertools.product(*bench.params)
    for i, (values, shown) in enumerate(zip(itertools.product(*bench._params), reprs)):
        name = f"{bench.name}({', '.join(shown)})"
        out.append(Case(bench.name, i, name, tuple(values), paired, elsewhere))
    return out


_CALL = re.compile(r"^(?P<name>[^()]+)\((?P<args>.*)\)$", re.DOTALL)
_NAME = re.compile(r"^(?P<bench>\w+(\.\w+)+)(\(.*\))?$", re.DOTALL)  # a row's name, no regex


def select(patterns: tuple[str, ...], cases: list[Case], mode: str) -> list[Case]:
    """The cases the patterns name, in order, each once: a full row name (a timing or an answer
    row, parameters spelled as Python literals), else a regex searched in every paired row's
    name and its answer row's. What selects nothing, or only rows that time one side, is bad
    input naming what could have matched."""
    by_name = {c.name: c for c in cases}
    benches: dict[str, list[Case]] = {}
    for c in cases:
        benches.setdefault(c.bench, []).append(c)
    chosen: dict[str, Case] = {}
    for pattern in patterns:
        for c in _select_one(pattern, cases, by_name, benches, mode):
            chosen.setdefault(c.name, c)
    return list(chosen.values())


def _select_one(pattern, cases, by_name, benches, mode) -> list[Case]:
    row = answerfacts.timed_row(pattern) if answerfacts.is_answer_row(pattern) else pattern
    exact = by_name.get(row)
    if exact is None:
        m = _CALL.match(row)
        if m and m["name"] in benches:
            values = _literal(m["args"])
            if values is not None:  # else perhaps a regex with a group
                found = [c for c in benches[m["name"]] if c.values == values]
                if not found:
                    raise BadInput(
                        f"{row}: no such case of {m['name']} in a {mode} run; its cases: "
                        f"{_listed([c.name for c in benches[m['name']]])}"
                        + ("" if mode == "full" else " (full runs have more: --full)")
                    )
                exact = found[0]
    if exact is not None:
        if not exact.paired:
            why = (
                "it divides one side by this machine's reference workload"
                if exact.bench.endswith("_over_reference")
                else "it times one side"
            )
            raise BadInput(
                f"{exact.name} is not a paired row: {why} (only a `track_` row of unit ratio "
                "that compares two ways of computing one thing has an answer check); the paired "
                f"rows of {_owner(exact.bench)}: {_listed(_paired_of(_owner(exact.bench), cases))}"
            )
        if exact.checked_elsewhere:  # named alone, it is bad input before anything runs
            raise BadInput(
                f"{exact.name} cannot be rerun alone: {_checked_where_timed(exact, mode)}"
            )
        return [exact]
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise BadInput(
            f"--rerun {pattern!r}: neither a row's full name nor a regular expression ({exc})"
        ) from None
    hits = [
        c
        for c in cases
        if regex.search(c.name) or (c.paired and regex.search(answerfacts.answer_row(c.name)))
    ]
    paired = [c for c in hits if c.paired]
    if paired:
        return paired
    if hits:
        raise BadInput(
            f"--rerun {pattern!r} matches no paired row, only rows that time one side: "
            f"{_listed([c.name for c in hits])}"
        )
    more = "" if mode == "full" else " (full runs have more: --full)"
    m = _CALL.match(row)
    if m and m["name"] in benches:
        raise BadInput(
            f"no row {row} in a {mode} run{more} (parameters are spelled as Python literals, as "
            f"the results spell them: 'mlp', 1, True); its cases: "
            f"{_listed([c.name for c in benches[m['name']]])}"
        )
    named = _NAME.match(row)
    if named:  # spelled as a row's name: say which part is unknown
        owner = _owner(named["bench"])
        if any(c.bench.startswith(owner + ".") for c in cases):
            raise BadInput(
                f"no row {row} in a {mode} run{more}: {owner} has no benchmark "
                f"{named['bench'].rsplit('.', 1)[1]}; its paired rows: "
                f"{_listed(_paired_of(owner, cases))}"
            )
        paired = list(dict.fromkeys(c.bench for c in cases if c.paired))
        raise BadInput(
            f"no row {row} in a {mode} run: no benchmark {named['bench']}{more}; the paired "
            f"benchmarks: {_listed(paired)}"
        )
    every = [c.name for c in cases if c.paired]
    raise BadInput(
        f"--rerun {pattern!r} matches no row of a {mode} run{more}; the paired rows: "
        f"{_listed(every)}"
    )


def _literal(args: str) -> tuple | None:
    try:
        value = ast.literal_eval(f"({args},)") if args.strip() else ()
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, tuple) else None


def _owner(bench: str) -> str:
    """`suite.Class` of `suite.Class.method` (`suite` of a module-level `suite.method`)."""
    return bench.rsplit(".", 1)[0]


def _paired_of(owner: str, cases: list[Case]) -> list[str]:
    return [c.name for c in cases if c.paired and c.bench.startswith(owner + ".")]


def _listed(names: list[str]) -> str:
    more = f", +{len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more if names else "none"


def suites_named(patterns: tuple[str, ...], known: list[str]) -> list[str] | None:
    """The suites the patterns name by their first word (`models.X...`, `^fusion\\.`), or None
    where one of them names none (a regex over every suite)."""
    out: list[str] = []
    for pattern in patterns:
        m = re.match(r"^\^?(\w+)(\\\.|\.)", pattern)
        if not m or m[1] not in known:
            return None
        out.append(m[1])
    return list(dict.fromkeys(out))


# ---- running ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """os.environ with `values` for the block, as it was afterwards."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _imported_as_asv(folder: Path, tree: Path | None):
    """The scratch benchmark folder importable as asv imports it (package PACKAGE), and a
    project's tree on sys.path (asv's ASV_PYTHONPATH); afterwards the import state as it was, so
    that a second rerun imports its suites afresh, under its own mode."""
    from asv_runner._aux import update_sys_path

    saved = {k: m for k, m in sys.modules.items() if k == PACKAGE or k.startswith(PACKAGE + ".")}
    for k in saved:
        del sys.modules[k]
    meta, path = list(sys.meta_path), list(sys.path)
    update_sys_path(str(folder))
    if tree is not None:
        sys.path.insert(0, str(tree))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k == PACKAGE or k.startswith(PACKAGE + ".")]:
            del sys.modules[k]
        sys.modules.update(saved)
        sys.meta_path[:], sys.path[:] = meta, path


def _checked_where_timed(case: Case, mode: str) -> str:
    """Why a case with a setup_cache is not rerun here, and the line that reruns it timed."""
    from harness.verdict.rerun import rerun_command

    return (
        f"its check runs where it is timed ({_owner(case.bench)} measures in its setup_cache: "
        "fusion.MemoryBandwidth's timing loop, the distributed rows' torchrun workers), so "
        "rerunning the check is rerunning that measurement: "
        + rerun_command(case.name, ("--full",) if mode == "full" else ("--quick",))
    )


def rerun(project: Path, request: Request, say: Callable[[str], None] | None = None) -> Reran:
    """Rerun the answer checks of the rows `request` selects (module docstring), in this process.
    Bad input (no such suite or row, a row that times one side) raises BadInput before anything
    runs. `say` hears a line as each row starts."""
    import torch

    from harness.core.project import suites
    from harness.measure.threads import fix_threads
    from harness.runs import asv
    from harness.runs.scratch import RunScratch

    say = say or (lambda line: None)
    found = suites(project)
    modules = found.modules()
    chosen_suites = list(request.suites)
    unknown = [s for s in chosen_suites if s not in modules]
    if unknown:
        raise BadInput(f"unknown suite(s) {', '.join(unknown)}; valid: {', '.join(modules)}")
    if not chosen_suites:
        chosen_suites = suites_named(request.patterns, list(modules)) or [
            m for m in modules if m != "canary"
        ]
    spec = RunSpec(mode=request.mode, threads=request.threads)
    t0 = time.perf_counter()
    threads_before = torch.get_num_threads()
    with RunScratch(shared_cache=request.compile_cache) as scratch:
        env = {
            settings.FULL.name: settings.FULL.encode(spec.full),
            settings.QUICK.name: settings.QUICK.encode(spec.quick),
            settings.THREADS.name: str(spec.run_threads),
            **scratch.environment(),
            **{k: v for k, v in found.environment().items() if k != "ASV_PYTHONPATH"},
        }
        if request.device:
            env[settings.DEVICE.name] = request.device
        if request.record is not None:
            request.record.mkdir(parents=True, exist_ok=True)
            env[settings.RUN_RECORD.name] = str(request.record)
        folder = asv.benchmark_subset(project, chosen_suites, scratch.folder(PACKAGE))
        with (
            _environment(env),
            _imported_as_asv(folder, found.tree if found.own_project else None),
        ):
            from harness.core.env import pick_device

            device = str(pick_device())
            selected = select(request.patterns, _discover(folder), spec.mode)
            cases = []
            for case in selected:
                say(f"answers --rerun: {case.name} ...")
                cases.append(_run_case(folder, case, spec, fix_threads))
    torch.set_num_threads(threads_before)
    return Reran(
        cases,
        spec.mode,
        spec.run_threads,
        device,
        request.record,
        time.perf_counter() - t0,
    )


def _discover(folder: Path) -> list[Case]:
    from asv_runner.discovery import disc_benchmarks

    return [c for b in disc_benchmarks(str(folder)) for c in cases_of(b)]


def _run_case(folder: Path, case: Case, spec: RunSpec, fix_threads) -> Rerun:
    from asv_runner.benchmarks.mark import SkipNotImplemented
    from asv_runner.discovery import get_benchmark_from_name

    from harness.measure import answers

    t0 = time.perf_counter()
    if case.checked_elsewhere:  # selected by a regex beside others: listed, not judged
        return Rerun(case.name, None, _checked_where_timed(case, spec.mode))
    what = _what(case.bench)
    answers.LAST.pop(case.name, None)
    bench = get_benchmark_from_name(
        str(folder), case.bench if case.index is None else f"{case.bench}-{case.index}"
    )
    bench.set_cache(None)
    fix_threads()  # a module without asv's module-level setup runs with the run's threads too
    skipped, error = _setup(bench)
    try:
        if error is not None:
            answer = Answer(FAIL_TO_RUN, what, reason=f"the row's setup raised {_line(error)}")
            return Rerun(case.name, answer, error=_trace(error), seconds=_since(t0))
        if skipped is not None:  # NotApplicable: the row is n/a here (a setup may say why first)
            answer = answers.LAST.get(case.name) or Answer(
                NOT_APPLICABLE, what, reason=f"the row cannot run here: {skipped}"
            )
            return Rerun(case.name, answer, seconds=_since(t0))
        try:
            with answers.only_the_check() as caught:
                bench.do_run()
        except SkipNotImplemented as exc:
            reason = f"the row skipped itself: {exc}"
            return Rerun(case.name, Answer(NOT_APPLICABLE, what, reason=reason), seconds=_since(t0))
        except Exception as exc:  # the track method failed before its check: the row fails
            answer = Answer(FAIL_TO_RUN, what, reason=f"the row raised {_line(exc)}")
            return Rerun(case.name, answer, error=_trace(exc), seconds=_since(t0))
        if not caught.reached or caught.answer is None:
            return Rerun(
                case.name,
                None,
                "its track method reached no answer check (timing.measure_paired was not "
                "called, or only over the reference workload): it has no answer to rerun",
                seconds=_since(t0),
            )
        return Rerun(
            case.name,
            caught.answer,
            error=_trace(caught.error) if caught.error is not None else "",
            seconds=_since(t0),
        )
    finally:
        if error is None:
            try:
                bench.do_teardown()
            except Exception:
                traceback.print_exc()  # the answer stands; stderr shows the teardown's error


def _setup(bench) -> tuple[str | None, BaseException | None]:
    """asv's do_setup, keeping what it drops: (why the row skipped itself, or None; what a
    setup raised, or None)."""
    if tuple(bench._current_params) in bench._skip_tuples:
        return "asv's skip_params", None
    try:
        for setup in bench._setups:
            setup(*bench._build_params())
    except NotImplementedError as exc:
        return str(exc) or type(exc).__name__, None
    except Exception as exc:
        return None, exc
    return None, None


def _what(bench: str) -> str:
    from harness.measure.workloads import pairs

    entry = pairs.ROWS.get(bench)
    return entry.what if entry is not None else ""


def _line(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:500]


def _trace(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).rstrip()


def _since(t0: float) -> float:
    return time.perf_counter() - t0
