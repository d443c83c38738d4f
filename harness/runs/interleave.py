"""One pair of `harness ab`: both sides' processes alive at once, taking turns row by row.

A pair starts one process per side (harness.runs.rowworker, run by that side's interpreter with
that side's harness and suites). Row by row, the sides alternate short blocks, A B B A (B A A B
on odd pairs), each block one call of the benchmark, so the two values of a row are measured
seconds apart, not a whole process run apart: what the shared host does meanwhile (a
neighbour's burst, a slower minute) lands on both sides of the row alike. Duet mode sends each
block to both sides at once instead, each pinned to its own CPU set. Every row runs in a fresh
process of its own (forked from the side's process on CPU, as asv's forkserver; a new process
per row on CUDA), so nothing one row leaves behind reaches the next.

Each side's answers are saved as the asv result file `asv run` would have written (values,
samples, skipped and failed rows, benchmarks.json, machine.json), so merging, run records and
the gate read a pair exactly as they read asv's runs. The answer checks a row's calls made
(harness.measure.answers, in the side's process) come back with each block and are kept beside
the result (ANSWERS_FILE, the worst of the row's), for harness.runs.ab to keep in the record.
Figures of the per-pair spread this buys: docs/measurements.md#ab-interleaved-pairs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import pathlib
import select
import shutil
import subprocess
import time
import types

from harness.core.processes import end_session, start_in_session

BLOCKS = 2  # calls per side and row in one pair
SETUP_CACHE_TIMEOUT_S = 900.0  # a row whose open also runs its suite's setup_cache
CLOSE_S = 5.0  # a side's process given its end of input exits within this


class WorkerGone(Exception):
    """The side's process timed out or ended without an answer."""


class Worker:
    """One side's benchmark process and its line protocol (harness.runs.rowworker)."""

    def __init__(self, python: str, env: dict, bench_dir, work: pathlib.Path, cache, mode: str):
        """`work`: this process's own folder; `cache`: the side's, where setup_cache results
        are kept for every process of the side in this pair."""
        work.mkdir(parents=True, exist_ok=True)
        cache.mkdir(parents=True, exist_ok=True)
        self.stderr_path = work / "stderr.txt"
        # a copy of the script, run by path: the side's interpreter imports its own harness
        script = work / "rowworker.py"
        shutil.copyfile(pathlib.Path(__file__).with_name("rowworker.py"), script)
        with open(self.stderr_path, "ab") as err:
            self.proc = start_in_session(
                [python, str(script), str(bench_dir), str(cache), mode],
                env=env,
                cwd=work,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self._buf = b""

    def send(self, msg: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerGone(f"the process is gone ({exc})") from None

    def receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerGone(f"no answer within {timeout:.0f} s (the benchmark's timeout)")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise WorkerGone(f"the process ended (exit {self.proc.poll()})")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def ask(self, msg: dict, timeout: float) -> dict:
        self.send(msg)
        return self.receive(timeout)

    def stderr_tail(self, chars: int = 3000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> None:
        """Its stdin closed, the process ends by itself; whatever is left is ended."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=CLOSE_S)
        end_session(self.proc)


@dataclasses.dataclass(frozen=True)
class SideRun:
    """What one side's process of a pair needs: its interpreter, environment (the run's and the
    side's own), suite folder, commit and where its result goes."""

    label: str
    python: str
    env: dict
    bench_dir: pathlib.Path
    commit: str
    out_dir: pathlib.Path


@dataclasses.dataclass
class _Row:
    """One side's answers for one row (a benchmark and, if parametrised, one combination)."""

    values: list = dataclasses.field(default_factory=list)
    skipped: bool = False
    error: str = ""
    # timed row -> the facts of its answer check (harness.measure.answers), the worst of the
    # row's blocks (worst_answer)
    checks: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Side:
    run: SideRun
    benchmarks: dict  # name -> asv's benchmark dict (all discovered)
    rows: list[str]  # the selected row ids, asv's "name" or "name-idx"
    worker: Worker | None
    answers: dict = dataclasses.field(default_factory=dict)  # row id -> _Row
    started: float = dataclasses.field(default_factory=time.time)


def launch_mode() -> str:
    """fork on CPU (the suite imported once per pair), once on CUDA (a forked CUDA context is
    unusable): harness.runs.asv.launch_method's choice, for these processes."""
    from harness.core.env import cuda_available

    return "once" if cuda_available() else "fork"


def run_pair(
    sides: list[SideRun],
    regex: str,
    machine: str,
    *,
    duet_cpus: tuple[str, str] | None = None,
    work: pathlib.Path,
    mode: str | None = None,
    on_row=None,
) -> dict[str, pathlib.Path] | None:
    """One pair: every row `regex` selects (asv --bench semantics), blocks alternating between
    the sides in `sides`' order (the first side leads); with `duet_cpus`, both sides at once on
    those CPU sets. Returns each side's asv result file; None when the regex selects no row on
    any side. `on_row(k, n, row)` is told as row k of n starts (what `harness ab` shows)."""
    mode = mode or launch_mode()
    state: dict[str, _Side] = {}
    try:
        for s in sides:
            state[s.label] = _start(s, regex, work, mode, fresh=False)
        rows = _row_order([state[s.label] for s in sides])
        if not rows:
            return None
        cpus = dict(zip([s.label for s in sides], _cpu_lists(duet_cpus))) if duet_cpus else {}
        for k, row in enumerate(rows):
            if on_row is not None:
                on_row(k + 1, len(rows), row)
            here = [state[s.label] for s in sides if row in state[s.label].rows]
            _run_row(here, row, work, mode, regex, cpus)
        return {label: _save(st, machine) for label, st in state.items()}
    finally:
        for st in state.values():
            if st.worker is not None:
                st.worker.close()


def _cpu_lists(sets: tuple[str, str]) -> list[list[int]]:
    return [[int(c) for c in s.split(",")] for s in sets]


def _start(s: SideRun, regex: str, work: pathlib.Path, mode: str, *, fresh: bool) -> _Side:
    """The side's process, its suite discovered and the rows `regex` selects."""
    from asv.benchmarks import Benchmarks

    cache = work / f"cache-{s.label}"
    worker = Worker(s.python, s.env, s.bench_dir, _worker_dir(work, s.label), cache, mode)
    try:
        found = worker.receive(SETUP_CACHE_TIMEOUT_S)
    except WorkerGone as exc:
        worker.close()
        from harness.core.exits import RunnerFailed

        raise RunnerFailed(
            f"the benchmark process of {s.label} ({s.python}) could not discover the suites in "
            f"{s.bench_dir}: {exc}\n{worker.stderr_tail()}"
        ) from None
    listed = json.loads(pathlib.Path(found["benchmarks"]).read_text())
    chosen = Benchmarks(types.SimpleNamespace(benchmark_dir=str(s.bench_dir)), listed, [regex])
    rows = []
    for name in sorted(chosen):
        picked = chosen.benchmark_selection.get(name)
        rows += [name] if picked is None else [f"{name}-{i}" for i in picked]
    if fresh:  # a replacement process: the side's rows and answers are kept by the caller
        return _Side(s, {}, rows, worker)
    return _Side(s, {b["name"]: b for b in listed}, rows, worker)


def _worker_dir(work: pathlib.Path, label: str) -> pathlib.Path:
    n = 0
    while (work / f"worker-{label}-{n}").exists():
        n += 1
    return work / f"worker-{label}-{n}"


def _row_order(sides: list[_Side]) -> list[str]:
    """The rows of every side, the leading side's order first."""
    seen: dict[str, None] = {}
    for st in sides:
        seen.update(dict.fromkeys(st.rows))
    return list(seen)


def _timeout(st: _Side, row: str) -> float:
    bench = st.benchmarks.get(row.split("-", 1)[0]) or {}
    t = float(bench.get("timeout") or 60.0)
    return max(t, SETUP_CACHE_TIMEOUT_S) if bench.get("setup_cache_key") else t


def _run_row(sides: list[_Side], row: str, work, mode, regex, cpus: dict) -> None:
    """Open the row on every side, run its blocks, end it. A side whose process stops answering
    gets the row as failed and a fresh process for the next row."""
    for st in sides:
        st.answers[row] = _Row()
    live = [st for st in sides if _open(st, row, cpus.get(st.run.label), work, mode, regex)]
    if cpus:  # duet: each block on both sides at once
        for _ in range(BLOCKS):
            sent = [st for st in live if _send(st, row)]
            live = [st for st in sent if _take(st, row)]
    else:  # A B B A: each side leads and follows alike
        for k in range(BLOCKS):
            for st in live if k % 2 == 0 else live[::-1]:
                if st in live and not (_send(st, row) and _take(st, row)):
                    live = [x for x in live if x is not st]
    for st in live:
        _end(st, row, mode)


def _open(st: _Side, row: str, cpus, work, mode, regex) -> bool:
    if st.worker is None:
        _restart(st, work, mode, regex)
    try:
        reply = st.worker.ask({"row": row, "cpus": cpus}, _timeout(st, row))
    except WorkerGone as exc:
        _lose(st, row, str(exc))
        return False
    if reply.get("ready"):
        return True
    _note(st.answers[row], reply)
    if not reply.get("died"):  # skipped or failed in setup: the row's process waits for "end"
        _end(st, row, mode)
    return False


def _send(st: _Side, row: str) -> bool:
    try:
        st.worker.send({"block": True})
        return True
    except WorkerGone as exc:
        _lose(st, row, str(exc))
        return False


def _take(st: _Side, row: str) -> bool:
    """One block's answer; False when the row's process is gone (no "end" then)."""
    try:
        reply = st.worker.receive(_timeout(st, row))
    except WorkerGone as exc:
        _lose(st, row, str(exc))
        return False
    if "value" in reply:
        st.answers[row].values.append(reply["value"])
        checks = reply.get("answers")
        for timed, facts in checks.items() if isinstance(checks, dict) else ():
            kept = st.answers[row].checks
            kept[timed] = worst_answer(kept.get(timed), facts)
        return True
    _note(st.answers[row], reply)
    return not reply.get("died")  # a block that failed or skipped: the row still ends


def _note(ans: _Row, reply: dict) -> None:
    if reply.get("skipped"):
        ans.skipped = True
    else:
        ans.error = ans.error or reply.get("error") or reply.get("died") or str(reply)


def _end(st: _Side, row: str, mode: str) -> None:
    try:
        st.worker.ask({"end": True}, _timeout(st, row))
    except WorkerGone as exc:
        _lose(st, row, str(exc))
        return
    if mode == "once":  # its one row done, the process exits; the next row starts a new one
        st.worker.close()
        st.worker = None


def _lose(st: _Side, row: str, why: str) -> None:
    """The side's process stopped answering: the row failed, with the process's last words."""
    ans = st.answers[row]
    ans.error = ans.error or f"{why}\n{st.worker.stderr_tail()}"
    st.worker.close()
    st.worker = None


def _restart(st: _Side, work, mode, regex) -> None:
    st.worker = _start(st.run, regex, work, mode, fresh=True).worker


ANSWERS_FILE = "answers.json"  # beside a side's result of a pair: timed row -> answer facts
_RANK = {"n/a": 0, "same": 1, "fail_to_run": 2, "WRONG": 3}


def worst_answer(a, b):
    """Of two answer checks' facts of one row (None: none), the one that says most: WRONG over
    fail_to_run over same (the larger error) over n/a. A row's blocks and pairs each check its
    answer again; one WRONG among them is the row's answer."""

    def key(facts):
        if not isinstance(facts, dict):
            return (-1, 0.0)
        value = facts.get("value")
        value = float("inf") if facts.get("differs") is True else value
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return (_RANK.get(facts.get("status"), -1), value if number and value == value else 0.0)

    return b if key(b) > key(a) else a


def _save(st: _Side, machine: str) -> pathlib.Path:
    """The side's answers as the asv result file (and benchmarks.json, machine.json) `asv run
    --record-samples` would have written for the same rows; the rows' answer checks beside it
    (ANSWERS_FILE), for harness ab to keep in the side's run record."""
    from asv import util
    from asv.environment import get_env_name
    from asv.results import Results
    from asv.runner import BenchmarkResult

    from harness.runs.asv import python_launcher

    launcher = str(python_launcher())
    out = st.run.out_dir
    util.write_json(str(out / "benchmarks.json"), st.benchmarks, api_version=2)
    util.write_json(str(out / machine / "machine.json"), {"machine": machine}, api_version=1)
    res = Results(
        {"machine": machine, "python": launcher},
        {},
        st.run.commit,
        _commit_date_ms(st.run.bench_dir, st.run.commit),
        launcher,
        get_env_name("existing", launcher, {}, {}),
        {},
    )
    for name in sorted({r.split("-", 1)[0] for r in st.answers}):
        bench = st.benchmarks[name]
        combos = math.prod(len(p) for p in bench["params"]) if bench["params"] else 1
        result, samples, number, errors = [], [], [], []
        for idx in range(combos):
            ans = st.answers.get(f"{name}-{idx}" if bench["params"] else name)
            value, samp, num = _one(ans)
            result.append(value)
            samples.append(samp)
            number.append(num)
            if ans is not None and ans.error:
                errors.append(ans.error)
        res.add_result(
            bench,
            BenchmarkResult(
                result=result,
                samples=samples,
                number=number,
                errcode=1 if errors else 0,
                stderr="\n\n".join(errors),
                profile=None,
            ),
            started_at=None,
            duration=time.time() - st.started,
            record_samples=True,
        )
    res.save(str(out))
    checks: dict = {}
    for ans in st.answers.values():
        for timed, facts in ans.checks.items():
            checks[timed] = worst_answer(checks.get(timed), facts)
    if checks:
        (out / ANSWERS_FILE).write_text(json.dumps(checks, indent=2, sort_keys=True))
    return out / res._filename


def _one(ans: _Row | None):
    """(result, samples, number) of one combination, as asv's runner reports them: not selected
    or skipped NaN, failed None, a timing's samples of every block joined, a plain value the
    last block's."""
    if ans is None or (ans.skipped and not ans.values):
        return math.nan, None, None
    if ans.error or not ans.values:
        return None, None, None
    if all(isinstance(v, dict) and "samples" in v and "number" in v for v in ans.values):
        joined = [x for v in ans.values for x in v["samples"]]
        return True, joined, ans.values[-1]["number"]
    return ans.values[-1], None, None


def _commit_date_ms(where: pathlib.Path, commit: str) -> int:
    """The commit's date as asv records it (JavaScript ms); now, when git cannot tell."""
    proc = subprocess.run(
        ["git", "show", "-s", "--format=%ct", commit],
        cwd=where,
        capture_output=True,
        text=True,
    )
    try:
        return int(proc.stdout.strip()) * 1000
    except ValueError:
        return int(time.time() * 1000)
