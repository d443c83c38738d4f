"""How instructions are counted: callgrind over the calls of a workload, one valgrind process for
every workload of a suite run.

Wall time on a shared runner moves by tens of percent between processes; the instructions a call
executes do not move with the neighbours. `count(targets)` runs one valgrind process
(`--tool=callgrind --instr-atstart=no`: nothing is instrumented until asked) that imports torch
once, then forks children from that same state, at most two at a time: one per workload and
memory layout. A child shifts where new objects will lie (layout 0 not at all: _shift_layout),
builds its workload, makes `warmup` uninstrumented calls, then brackets `calls` calls with
client requests from a small C helper (CALLGRIND_START_INSTRUMENTATION, ZERO_STATS,
DUMP_STATS_AT, STOP_INSTRUMENTATION; `torch._C._valgrind_toggle` only toggles collection, which
counts nothing while instrumentation is off). The helper is compiled once per machine into the
cache folder. A layout's count is its dump's instructions minus those of an empty measurement
(the client requests themselves), over `calls`; the row is the mean over layouts. Python's
garbage collector is off during the counted calls and freed memory stays in the process
(harness.measure.allocator), as in the timing loop.

What is deterministic here: the same interpreter, torch build, hash seed (PYTHONHASHSEED, 0
unless set) and inputs give the same count, process after process, whatever the load. What
moves a count: the code path (an extra op, more Python or dispatcher work, another kernel);
where Python's objects lie (CPython 3.11 keys its method cache by addresses, so anything
allocated before the workload, down to the length of a path, moves a Python-heavy call's count
by up to ~0.7%: hence the canonical process (_canonical) and the mean over layouts); and what
valgrind itself decides. So every count carries an *instruction fingerprint*: the valgrind
version, the ATen CPU capability the process ran with under valgrind (valgrind does not emulate
AVX-512, so dispatch may differ from a native run, which is recorded beside it), the Python build
and the thread count (always 1: OpenMP workers spin, and their spinning would be counted).

Per workload the run record keeps, in `instructions/<suite>.<Class>.json` (when
HARNESS_RUN_RECORD names the record being written), the per-call total, the self count of each
library group (libtorch, Python interpreter, inductor kernel, other) and the top functions by
self count with their inclusive counts (harness.measure.callgrind).

`HARNESS_TEST_EXTRA_INSTRUCTIONS=F` (test-only: `harness calibrate --extra-instructions`) makes
each call of the workloads named in `HARNESS_TEST_EXTRA_INSTRUCTIONS_WORKLOADS` do F times its
own instructions of extra Python work, calibrated in the same child by counting the clean
workload and the busy loop first.
"""

from __future__ import annotations

import array
import compileall
import contextlib
import dataclasses
import gc
import hashlib
import importlib
import importlib.util
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core import settings
from harness.core.files import write_atomic, write_json_atomic

SCHEMA = 1
TOP = 40  # functions kept per workload in the run record
# children counting at once: two per core, so that on a runner shared with busy neighbours the
# counting gets a fair share of the CPU (counts do not depend on it; memory allows it)
PARALLEL = min(8, 2 * (os.cpu_count() or 1))
TIMEOUT_S = 3000  # the whole valgrind process; below the suites' asv timeouts
RECORD_ENV = settings.RUN_RECORD.name
# a folder the harness command owns and removes, also when a benchmark is killed: the counter's
# scratch (callgrind's dumps) goes below it
SCRATCH_ENV = settings.SCRATCH_DIR.name
SELECT_ENV = settings.INSTRUCTION_WORKLOADS.name
EXTRA_ENV = settings.TEST_EXTRA_INSTRUCTIONS.name
EXTRA_WORKLOADS_ENV = settings.TEST_EXTRA_INSTRUCTIONS_WORKLOADS.name
INSTALL_HINT = (
    "install valgrind (Debian/Ubuntu: `apt-get install valgrind`, which ships "
    "callgrind.h; Fedora: `dnf install valgrind valgrind-devel`)"
)
VALGRIND_OPTIONS = (
    "--tool=callgrind",
    "--instr-atstart=no",
    "--compress-strings=no",
    "--compress-pos=no",
)
BUSY_CALIBRATION = 1000  # iterations of the injection's busy loop counted to calibrate it

HELPER_SOURCE = """\
/* written by harness.measure.instructions: callgrind client requests for ctypes */
#include <valgrind/callgrind.h>
void harness_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void harness_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void harness_zero(void) { CALLGRIND_ZERO_STATS; }
void harness_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
unsigned harness_on_valgrind(void) { return RUNNING_ON_VALGRIND; }
"""


class Unavailable(Exception):
    """Instructions cannot be counted here; the message says why and how to fix it."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One row to count: `workload` from the table of `source` (a module name, or the path of a
    .py file such as a suite module: its INSTRUCTION_WORKLOADS dict, or its `workload(name)`
    function); `key` names it for a selection and for calibrate's injection (default: the
    workload's name)."""

    row: str
    source: str
    workload: str
    key: str = ""

    @property
    def name(self) -> str:
        return self.key or self.workload


@dataclasses.dataclass
class Counted:
    rows: dict[str, float]  # row -> instructions per call
    failed: dict[str, str]  # row -> why it has no count (an error)
    record: dict  # what the run record keeps (schema above)
    not_counted: dict[str, str] = dataclasses.field(default_factory=dict)  # row -> why (n/a)


# ---- what this machine has ----


def valgrind_version() -> str | None:
    exe = shutil.which("valgrind")
    if not exe:
        return None
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    return proc.stdout.strip() or None


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "harness"


def helper_library() -> Path:
    """The client-request helper, compiled once per machine (and per header and compiler)."""
    header = Path("/usr/include/valgrind/callgrind.h")
    cc = shutil.which("gcc") or shutil.which("cc")
    if not shutil.which("valgrind"):
        raise Unavailable(f"valgrind not found on PATH: {INSTALL_HINT}")
    if cc is None:
        raise Unavailable(
            "no C compiler (gcc) to build the callgrind helper: install it (Debian/Ubuntu: "
            "`apt-get install gcc`; Fedora: `dnf install gcc`)"
        )
    if not header.is_file():
        raise Unavailable(f"{header} not found (valgrind's development header): {INSTALL_HINT}")
    key = hashlib.sha256((HELPER_SOURCE + header.read_text() + cc).encode()).hexdigest()[:12]
    lib = _cache_dir() / f"callgrind-helper-{key}.so"
    if lib.is_file():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="harness-callgrind-helper-") as tmp:
        src = Path(tmp) / "helper.c"
        src.write_text(HELPER_SOURCE)
        out = Path(tmp) / "helper.so"
        proc = subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", "-o", str(out), str(src)],
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            raise Unavailable(f"building the callgrind helper failed: {proc.stderr.strip()[-500:]}")
        write_atomic(lib, out.read_bytes())  # two runs building at once: either copy wins whole
    return lib


def unavailable() -> str | None:
    """Why counting cannot run here, or None."""
    try:
        helper_library()
    except Unavailable as exc:
        return str(exc)
    return None


# ---- the parent: prepare natively, run valgrind, read the dumps ----


def workload_of(target: Target):
    """The target's workload: from its source's INSTRUCTION_WORKLOADS dict, or its
    `workload(name)` function (the harness's own rows, built from the model registry)."""
    from harness.measure.workloads.instructions import TABLE, InstructionWorkload, load_module

    module = load_module(target.source)
    table = getattr(module, TABLE, None)
    if table is None and callable(getattr(module, "workload", None)):
        return module.workload(target.workload)
    if table is None:
        raise KeyError(f"{target.source} defines no {TABLE} table")
    how = "(a dict of name -> harness.instructions.InstructionWorkload: docs/own-project.md)"
    if not isinstance(table, dict):
        raise TypeError(f"{target.source}: {TABLE} is a {type(table).__name__}, not a dict {how}")
    if target.workload not in table:
        raise KeyError(
            f"unknown instruction workload {target.workload!r} in {target.source}; "
            f"known: {', '.join(map(str, table))}"
        )
    found = table[target.workload]
    if not isinstance(found, InstructionWorkload):
        raise TypeError(
            f"{target.source}: {TABLE}[{target.workload!r}] is a {type(found).__name__}, not "
            f"an InstructionWorkload {how}"
        )
    return found


def selected(targets: list[Target]) -> list[Target]:
    """The targets this run counts: those HARNESS_INSTRUCTION_WORKLOADS names (comma-separated;
    unset: all) whose rows the run's --bench regexes select (HARNESS_INSTRUCTION_BENCH; unset:
    all; re.search, as asv)."""
    import re

    wanted = settings.INSTRUCTION_WORKLOADS.get()
    regexes = settings.INSTRUCTION_BENCH.get()
    return [
        t
        for t in targets
        if (not wanted or t.name in wanted)
        and (not regexes or any(re.search(rx, t.row) for rx in regexes))
    ]


# What the counting process keeps of this process's environment: the rest (and its lengths) would
# only move where Python's objects lie, and with them CPython's method-cache collisions. Which
# models a project of its own registers reaches it through these (the project through a link).
PASSED_ENV = (
    "TORCHINDUCTOR_CACHE_DIR",
    settings.CANARY_EXTRA.name,
    settings.OWN_MODELS.name,
    settings.PROJECT.name,
    settings.MODELS.name,
)


# The counting process's scratch folder is its working directory, and nothing in it changes while
# it runs (a folder's new entries would make Python's import system list it again, at moments that
# differ from run to run): what is written during the run goes into OUT, made before it starts.
CANON = "p"  # the canonical paths (symlinks), relative to the working directory
STATE = "state"  # what the native preparation writes and the workloads load
OUT = "out"  # callgrind's dumps, the children's status files, the worker's result
INDUCTOR_LINK = f"{CANON}/inductor"
PROJECT_LINK = f"{CANON}/project"


def _canonical(
    work: Path, helper: Path, sources: list[str]
) -> tuple[list[str], dict, dict[str, str], list[str]]:
    """The interpreter, environment and source paths of the counting process, made the same
    wherever the checkout, venv, results or scratch folder lie: CPython 3.11 keys its method
    cache by the address of a name, and every string of another length or hash allocated before
    the workload moves those addresses (3 kB more environment moved the MLP's inference count by
    0.8%). So the process runs the base interpreter with `-S` in the scratch folder, and reaches
    every path through relative symlinks (`p/00`, `p/source00.py`, `p/helper.so`,
    `p/inductor`, `p/project`) with a small fixed environment: nothing it sees differs from one
    run to the next. What lies in a folder on the path moves counts too: the import system lists
    a folder it searches, and a longer listing shifts everything allocated after it. So the
    process imports torch with only folders whose contents a run does not change on its path
    (`p/home`, holding only the harness package; the interpreter's and the venv's libraries;
    where torch and torchvision lie); the others (a project's tree, asv's benchmark folder) are
    put back in their places by each counting child, after the fork. Returns (interpreter
    command, environment, {source: its path there}, the whole path in order)."""
    canon = work / CANON
    canon.mkdir()
    (canon / "home").mkdir()
    home = Path(__file__).resolve().parents[1]  # the harness package
    (canon / "home" / home.name).symlink_to(home)
    libraries = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()] + [
        Path(spec.origin).resolve().parents[1]
        for spec in map(importlib.util.find_spec, ("torch", "torchvision"))
        if spec is not None and spec.origin
    ]
    entries, order = [f"{CANON}/home"], [f"{CANON}/home"]
    for i, entry in enumerate(dict.fromkeys(p for p in sys.path if p and Path(p).is_dir())):
        real = Path(entry).resolve()
        if real.is_relative_to(Path(sys.base_prefix).resolve()):
            entries.append(entry)  # the base interpreter's own library: the same for every venv
            order.append(entry)
            continue
        (canon / f"{i:02d}").symlink_to(entry)
        order.append(f"{CANON}/{i:02d}")
        if any(real.is_relative_to(lib) for lib in libraries):
            entries.append(f"{CANON}/{i:02d}")
    (canon / "helper.so").symlink_to(helper)
    mapped = {}
    for j, src in enumerate(s for s in sources if s.endswith(".py")):
        (canon / f"source{j:02d}.py").symlink_to(Path(src).resolve())
        mapped[src] = f"{CANON}/source{j:02d}.py"
    links = {"TORCHINDUCTOR_CACHE_DIR": INDUCTOR_LINK, settings.PROJECT.name: PROJECT_LINK}
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ and k not in links}
    for name, link in links.items():
        target = os.environ.get(name)
        if target:
            (work / link).symlink_to(Path(target).resolve())
            env[name] = link
    if settings.MODELS.name in env:  # paths relative to this process's directory: made absolute
        env[settings.MODELS.name] = settings.MODELS.encode(
            [str(Path(m).resolve()) if m.endswith(".py") else m for m in settings.MODELS.get()]
        )
    env.update(
        HOME=".",
        PATH="/usr/local/bin:/usr/bin:/bin",
        PYTHONPATH=os.pathsep.join(entries),
        PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED") or "0",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        # compile rows: inductor compiles in this process, not in a pool of workers
        TORCHINDUCTOR_COMPILE_THREADS="1",
        # children load their sources themselves, several at once: none may leave a .pyc that
        # the next one loads instead of compiling (_compile_sources made the others current)
        PYTHONDONTWRITEBYTECODE="1",
        LC_ALL="C.UTF-8",
        **_inductor_march(),
    )
    # -P (3.11): the working directory is not put on sys.path
    flags = ["-S", "-P"] if sys.version_info >= (3, 11) else ["-S"]
    return [os.path.realpath(sys.executable), *flags], env, mapped, order


# The C++ compiler inductor runs is not under valgrind: with -march=native on a machine with
# AVX-512 it emits instructions valgrind cannot run (SIGILL), while under valgrind inductor picks
# AVX2 (valgrind's CPU has no AVX-512). Its kernels are built for an AVX2 CPU instead.
VALGRIND_MARCH = "haswell"


def _inductor_march() -> dict:
    if platform.machine() not in ("x86_64", "AMD64"):
        return {}
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    return {"TORCHINDUCTOR_CPP_MARCH": VALGRIND_MARCH} if " avx2" in flags else {}


def _fingerprint(worker: dict) -> dict:
    import torch

    return {
        "valgrind": valgrind_version(),
        "cpu_capability": worker.get("cpu_capability"),
        "native_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "python": f"{platform.python_implementation()} {platform.python_version()} "
        f"({', '.join(platform.python_build())}; {platform.python_compiler()})",
        "threads": worker.get("threads"),
        "torch": torch.__version__,
        "python_hash_seed": os.environ.get("PYTHONHASHSEED", "0"),
    }


def _dump_for(prefix: Path, pid: int, tag: str) -> Path | None:
    """The last dump process `pid` wrote with trigger `tag`."""
    from harness.measure import callgrind

    found = None
    for path in callgrind.dump_files(Path(f"{prefix}.{pid}")):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("desc: Trigger:"):
                    if line.rstrip().endswith(": " + tag):
                        found = path
                    break
    return found


TASKS = "tasks"  # below OUT: one file per counting child, NNNN.json in the order they start
PATH_FILE = "path.json"  # the counting children's whole sys.path (_canonical)
PLAN_BYTES = 4096  # plan.json, padded: what the worker reads before it forks is of one size

# The counting process's import phases, fixed: a child is forked after its phase's modules (and
# those of the phases before it) were imported, so what a child starts from depends on the
# harness alone, never on which rows, models or sources a run has. A workload's `imports` pick
# the first phase holding them all; any others the child imports itself.
PHASES = (
    (),
    ("torch._dynamo",),
    ("torch._dynamo", "torch._inductor.compile_fx"),
    ("torch._dynamo", "torch._inductor.compile_fx", "torchvision"),
)


def phase_of(imports) -> int:
    wanted = set(imports)
    for i, modules in enumerate(PHASES):
        if wanted <= set(modules):
            return i
    return len(PHASES) - 1


def _task_tag(job: dict, layout: int) -> str:
    """A task's name in dumps and status files: of one length for every task, so that a child's
    strings are the same size whichever row and position it has."""
    return f"{job['tag']}-{layout:02d}"


def _plan(out: Path, jobs: list[dict], sources: dict[str, str]) -> None:
    """What the worker forks, in order: per phase its number of tasks (plan.json), and per task
    (a job and a memory layout) its file, costliest first within a phase. `sources` maps a source
    to its path in the counting process."""
    order = [[] for _ in PHASES]
    for job in jobs:
        order[phase_of(job["imports"])].append(job)
    k = 0
    for phase_jobs in order:
        tasks = [(j, layout) for j in phase_jobs for layout in range(j["layouts"])]
        for job, layout in sorted(tasks, key=lambda t: -t[0]["cost"]):
            task = dict(
                job,
                source=sources.get(job["source"], job["source"]),
                layout=layout,
                tag=_task_tag(job, layout),
            )
            write_atomic(out / TASKS / f"{k:04d}.json", json.dumps(task))
            k += 1
    counts = [sum(j["layouts"] for j in phase_jobs) for phase_jobs in order]
    plan = json.dumps({"phases": counts, "tasks": k})
    write_atomic(out / "plan.json", plan.ljust(max(PLAN_BYTES, len(plan))))


# Where the counting stands, for the harness command that started the run (harness.runs.progress
# shows it while asv itself says nothing): written by a thread of this (native) process into the
# run's scratch folder, read from the tasks and the status files the counting children leave.
# Nothing of it reaches the counting process: no file of its working folder changes.
PROGRESS_FILE = "instructions-progress.json"
PROGRESS_SCHEMA = 1
PROGRESS_EVERY_S = 5.0


def progress_path() -> Path | None:
    """The progress file of this run (in HARNESS_SCRATCH_DIR), or None outside a run."""
    folder = settings.SCRATCH_DIR.get()
    return Path(folder) / PROGRESS_FILE if folder else None


class _Watch:
    """A thread writing where the counting stands (progress_snapshot) to `dest` every `every`
    seconds, and once more when it stops; `phase` says what the parent is doing."""

    def __init__(self, out: Path, dest: Path, every: float | None = None):
        import threading

        self.out, self.dest, self.every = out, dest, every or PROGRESS_EVERY_S
        self.started = time.time()
        self.phase = "importing torch under valgrind"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="harness-count-watch", daemon=True)

    def __enter__(self) -> _Watch:
        self.write()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.phase = "done" if exc[0] is None else "failed"
        self.write()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.write()

    def write(self) -> None:
        try:
            snap = progress_snapshot(self.out)
            snap.update(started=self.started, phase=snap.get("phase") or self.phase)
            if self.phase in ("reading the dumps", "done", "failed"):
                snap["phase"] = self.phase
            write_atomic(self.dest, json.dumps(snap))
        except Exception:  # noqa: BLE001 (what is shown of the counting never fails it)
            pass


@contextlib.contextmanager
def _watching(out: Path):
    """A _Watch of `out` while the block runs, in a run (progress_path); a stand-in outside one."""
    dest = progress_path()
    if dest is None:
        yield _Watch(out, Path(os.devnull))  # never started: its phase is only set
        return
    with _Watch(out, dest) as watch:
        yield watch


def progress_snapshot(out: Path) -> dict:
    """Where the counting stands, from the counting process's OUT folder: its rows in the order
    it takes them (_plan: phase by phase, costliest first), per row its layouts planned and done
    and whether a layout failed, and the rows most likely being counted now (the first tasks
    without a status: a child starts when one ends, `PARALLEL` at a time) and since when (its
    first dump, or the newest status). The phase is "counting" once the counting process has
    written its first dump (the empty measurements it makes after importing torch), none
    before."""
    tasks = sorted((out / TASKS).glob("*.json")) if (out / TASKS).is_dir() else []
    rows: dict[str, dict] = {}
    waiting: list[str] = []
    dump = next(out.glob("cg.*"), None)
    # when the counting last moved on: its first dump, or the newest status a child left
    marks = [p.stat().st_mtime for p in [dump, *out.glob("status/*.json")] if p is not None]
    for path in tasks:
        try:
            task = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written
        r = rows.setdefault(
            task["row"], {"row": task["row"], "key": task["key"], "layouts": 0, "done": 0}
        )
        r["layouts"] += 1
        status = out / "status" / f"{task['tag']}.json"
        if not status.is_file():
            waiting.append(task["key"])
            continue
        r["done"] += 1
        try:
            if json.loads(status.read_text()).get("error"):
                r["failed"] = True
        except (OSError, ValueError):
            pass  # a child's status being written: done, its outcome read next time
    return {
        "schema": PROGRESS_SCHEMA,
        "pid": os.getpid(),
        "updated": time.time(),
        "parallel": PARALLEL,
        "phase": "counting" if dump else "",
        "since": max(marks, default=None),
        "rows": list(rows.values()),
        "counting": list(dict.fromkeys(waiting[:PARALLEL])),
    }


def _timing_rows(source: str, times) -> list[str]:
    """A project module's workload's `times` as asv names: "Class.track_x" of
    benchmarks/m.py is "m.Class.track_x" (its asv suite is the file's stem)."""
    return [f"{Path(source).stem}.{t}" for t in times]


def _job(i: int, t: Target, w) -> dict:
    return {
        "index": i,
        "tag": f"{i:04d}",
        "row": t.row,
        "source": t.source,
        "workload": t.workload,
        "key": t.name,
        "calls": w.calls,
        "warmup": w.warmup,
        "imports": list(w.imports),
        "cost": w.cost,
        "timeout_s": w.timeout_s,
        "layouts": w.layouts[1 if settings.FULL.get() else 0],
    }


def _plans(targets: list[Target]) -> tuple[list[tuple[Target, object]], dict, dict]:
    """Each target's workload with its plan filled in, and the rows that are not counted here:
    (counted, failed: row -> error, not counted: row -> why)."""
    from harness.measure.workloads.instructions import planned

    todo, failed, not_counted = [], {}, {}
    for t in targets:
        try:
            w = workload_of(t)
            if w.skip or (w.full_only and not settings.FULL.get()):
                # before its plan: an opted-out model is not run at all, not even natively
                not_counted[t.row] = w.skip or w.full_only
                continue
            todo.append((t, planned(w)))
        except Exception as exc:
            failed[t.row] = f"{type(exc).__name__}: {exc}"
    return todo, failed, not_counted


def _compile_sources(paths) -> None:
    """A module the counting process compiles (no .pyc yet, or a stale one) leaves its heap
    otherwise than one it loads: every .pyc it may import is made current first (the harness,
    the workload sources, the models modules loaded here)."""
    from harness.core.user_models import LOADED_FILES

    compileall.compile_dir(str(Path(__file__).resolve().parents[1]), quiet=1)
    for path in {*paths, *LOADED_FILES}:
        if str(path).endswith(".py") and Path(path).is_file():
            compileall.compile_file(str(path), quiet=1)


def count(targets: list[Target], *, timeout_s: float = TIMEOUT_S, log=None) -> Counted:
    """Count every target in one valgrind process; see the module docstring. Raises Unavailable
    when valgrind (or the helper) is missing; a workload that fails is in `failed`, one that is
    not counted here (opted out, full runs only) in `not_counted`."""
    from harness.measure import callgrind

    if not targets:
        return Counted({}, {}, {})
    helper = helper_library()
    t0 = time.perf_counter()
    todo, failed, not_counted = _plans(targets)
    if not todo:  # nothing to count here: no valgrind process, the reasons kept
        record = {"schema": SCHEMA, "rows": {}, "failed": failed, "not_counted": not_counted}
        _keep(record, targets)
        return Counted({}, failed, record, not_counted)
    with (
        tempfile.TemporaryDirectory(
            prefix="harness-callgrind-", dir=settings.SCRATCH_DIR.get()
        ) as tmp,
        _watching(Path(tmp) / OUT) as watch,
    ):
        work = Path(tmp)
        jobs = [_job(i, t, w) for i, (t, w) in enumerate(todo)]
        extra = settings.TEST_EXTRA_INSTRUCTIONS.get()
        slowed = settings.TEST_EXTRA_INSTRUCTIONS_WORKLOADS.get()
        python, env, sources, path = _canonical(work, helper, [j["source"] for j in jobs])
        _compile_sources(j["source"] for j in jobs)
        (work / STATE).mkdir()
        (work / OUT / "status").mkdir(parents=True)
        (work / OUT / TASKS).mkdir()
        prefix = work / OUT / "cg"
        ready_r, ready_w = os.pipe()  # the parent says "prepared" through it
        # What the worker reads before it forks is the same whatever the job list: a count must
        # not depend on which other rows a run selected. The jobs reach each child in a file of
        # its own (_plan), read after the fork.
        spec = {
            "helper": f"{CANON}/helper.so",
            "state": STATE,
            "out": OUT,
            "ready_fd": ready_r,
            "parallel": PARALLEL,
            "extra": {"fraction": extra, "workloads": slowed},
            "prefix": f"{OUT}/cg",
        }
        (work / "spec.json").write_text(json.dumps(spec))
        # the whole path, read by each child after the fork: the worker never holds it
        (work / PATH_FILE).write_text(json.dumps(path))
        cmd = [
            shutil.which("valgrind") or "valgrind",
            *VALGRIND_OPTIONS,
            f"--callgrind-out-file={prefix}.%p",
            *python,
            "-m",
            "harness.measure.instructions",
            "spec.json",
        ]
        workloads = {j["row"]: w for j, (_, w) in zip(jobs, todo)}

        def prepare() -> None:
            """Natively, while valgrind imports torch; the counting process waits for it."""
            for job in jobs:
                w = workloads[job["row"]]
                try:
                    if w.prepare is not None:
                        w.prepare(work / STATE)
                except Exception as exc:  # reported on the row, the others still count
                    failed[job["row"]] = (
                        f"preparing {job['key']} failed: {type(exc).__name__}: {exc}"
                    )
            _plan(work / OUT, [j for j in jobs if j["row"] not in failed], sources)
            times["prepare"] = round(time.perf_counter() - t0, 1)
            os.write(ready_w, b"r")  # one blocking read there: no polling loop moves its heap

        times: dict = {}
        from harness.core.processes import run_tied

        try:  # tied to this (benchmark) process: asv's timeout or a cancelled run ends it too
            proc = run_tied(
                cmd, env=env, timeout=timeout_s, cwd=work, meanwhile=prepare, pass_fds=(ready_r,)
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"the valgrind process ran past {timeout_s:.0f} s and was ended"
            ) from None
        finally:
            os.close(ready_r)
            os.close(ready_w)
        watch.phase = "reading the dumps"
        jobs = [j for j in jobs if j["row"] not in failed]
        try:
            worker = json.loads((work / OUT / "worker.json").read_text())
        except (OSError, ValueError):
            tail = "\n".join((proc.stderr or "").strip().splitlines()[-15:])
            raise RuntimeError(
                f"the valgrind process (exit {proc.returncode}) wrote no result:\n{tail}"
            ) from None
        kernel_dirs = tuple(
            d for d in (os.environ.get("TORCHINDUCTOR_CACHE_DIR"), INDUCTOR_LINK) if d
        ) + (str(work / STATE / "compile-caches"), "compile-caches")
        empty = _dump_for(prefix, worker["pid"], "harness-overhead")
        worker["overhead"] = _totals(empty) if empty else 0
        rows, summaries = {}, {}
        for job in jobs:
            dumps, seconds, extras, facts = [], [], [], {}
            for layout in range(job["layouts"]):
                tag = _task_tag(job, layout)
                status = worker["jobs"].get(tag) or {}
                if status.get("error"):
                    failed[job["row"]] = status["error"]
                    break
                dump = _dump_for(prefix, status.get("pid", -1), f"harness-{tag}")
                if dump is None:
                    failed[job["row"]] = (
                        "a counting child left no callgrind dump (it died: see stderr)"
                    )
                    break
                dumps.append(callgrind.parse(dump))
                seconds.append(status.get("seconds"))
                extras += [status["extra"]] if status.get("extra") else []
                facts.update(status.get("fingerprint") or {})
            if job["row"] in failed:
                continue
            summary = callgrind.summarize(
                dumps, job["calls"], TOP, kernel_dirs, overhead=worker["overhead"]
            )
            summary.update(
                workload=job["key"],
                calls=job["calls"],
                warmup=job["warmup"],
                seconds=seconds,
                **({"extra": extras} if extras else {}),
                **({"fingerprint": facts} if facts else {}),
            )
            w = workloads[job["row"]]
            summary.update(
                **({"what": w.what} if w.what else {}),
                **({"tolerance": w.tolerance} if w.tolerance else {}),
                **({"times": _timing_rows(job["source"], w.times)} if w.times else {}),
            )
            rows[job["row"]] = summary["per_call"]
            summaries[job["row"]] = summary
    record = {
        "schema": SCHEMA,
        "fingerprint": _fingerprint(worker),
        "rows": summaries,
        "failed": failed,
        "not_counted": not_counted,
        "overhead": worker.get("overhead"),
        "seconds": {
            "prepare_natively": times.get("prepare"),
            "import_under_valgrind": worker.get("import_s"),
            "total": round(time.perf_counter() - t0, 1),
        },
    }
    _keep(record, targets)
    if log:
        log(
            f"instructions: {len(rows)} counted, {len(failed)} failed, "
            f"{len(not_counted)} not counted here, {record['seconds']['total']} s"
        )
    return Counted(rows, failed, record, not_counted)


def count_rows(targets: list[Target]) -> dict:
    """What a suite's setup_cache hands its rows: row -> instructions per call, or {"n/a": why}
    (no valgrind here, not selected) or {"failed": why}; see row_value."""
    try:
        counted = count(targets, log=lambda msg: print(msg, file=sys.stderr))
    except (Unavailable, RuntimeError) as exc:
        # every row says why, in the run record too (bench's table, the gate's notes)
        key = "not_counted" if isinstance(exc, Unavailable) else "failed"
        _keep({"schema": SCHEMA, "rows": {}, key: {t.row: str(exc) for t in targets}}, targets)
        return {t.row: {"n/a" if key == "not_counted" else "failed": str(exc)} for t in targets}
    return {
        **counted.rows,
        **{row: {"failed": why} for row, why in counted.failed.items()},
        **{row: {"n/a": why} for row, why in counted.not_counted.items()},
    }


def row_value(counts: dict, row: str) -> float:
    """The row's count from count_rows; n/a (NotApplicable) or a failure (RuntimeError) else."""
    from harness.measure.workloads import NotApplicable

    value = counts.get(row)
    if value is None:
        raise NotApplicable(
            f"not counted in this run: not selected ({settings.INSTRUCTION_BENCH.name} or "
            f"{SELECT_ENV})"
        )
    if isinstance(value, dict):
        if "n/a" in value:
            raise NotApplicable(value["n/a"])
        raise RuntimeError(value["failed"])
    return value


def _keep(record: dict, targets: list[Target]) -> None:
    """Into the run record being written (HARNESS_RUN_RECORD), one file per suite class."""
    folder = settings.RUN_RECORD.get()
    if not folder or not targets:
        return
    from harness.core.records import INSTRUCTIONS

    name = targets[0].row.split("(")[0].rsplit(".", 1)[0]  # suite.Class
    write_json_atomic(Path(folder) / INSTRUCTIONS / f"{name}.json", record)


# ---- the worker: runs under valgrind ----


def _busy(n: int) -> int:
    """The injection's extra work: plain Python, as more interpreter overhead would be, the same
    instructions every iteration (no new int objects, which range() and sums beyond 256 make)."""
    flip = 0
    for _ in itertools.repeat(None, n):
        flip ^= 1
    return flip


def _totals(path: Path) -> int:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


class _Requests:
    """The helper's client requests, loaded with ctypes."""

    def __init__(self, path: str):
        import ctypes

        self.lib = ctypes.CDLL(path)
        self.lib.harness_dump.argtypes = [ctypes.c_char_p]

    def measure(self, fn, calls: int, tag: str) -> None:
        lib = self.lib
        lib.harness_start()
        lib.harness_zero()
        for _ in range(calls):
            fn()
        lib.harness_dump(tag.encode())
        lib.harness_stop()


def _shift_layout(layout: int) -> list:
    """Move where the workload's objects will lie, differently for each `layout` (0: not at all):
    small blocks of several sizes kept alive, and new types looked up once (each takes the next
    method-cache version tag). Returned to be kept alive."""
    keep: list = [bytearray(16 * (k % 7 + 1)) for k in range(13 * layout)]
    for k in range(7 * layout):
        kind = type(f"_Layout{k}", (), {"a": k})
        keep.append(kind)
        kind.a  # noqa: B018 (the lookup assigns the version tag)
    return keep


def _count_one(
    req: _Requests, job: dict, folder: Path, extra: dict, prefix: Path, path: list[str]
) -> dict:
    import torch

    from harness.measure.allocator import freed_memory_retained

    t0 = time.perf_counter()
    keep = _shift_layout(job["layout"])
    sys.path[:] = path + [e for e in sys.path if e not in path]  # the whole path (_canonical)
    for module in job["imports"]:  # those its phase did not import (phase_of)
        importlib.import_module(module)
    torch.manual_seed(0)
    w = workload_of(Target(job["row"], job["source"], job["workload"], job["key"]))
    out: dict = {}
    tag = job["tag"]

    def work():
        fn = w.build(folder)
        with freed_memory_retained():
            for _ in range(job["warmup"]):
                fn()
            gc.collect()
            gc.disable()
            if extra["fraction"] and job["key"] in extra["workloads"]:
                fn, out["extra"] = _slowed(req, fn, job, tag, extra["fraction"], prefix, w.inject)
            req.measure(fn, job["calls"], f"harness-{tag}")

    _in_own_arena(work)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["cpu_s"] = round(time.process_time(), 1)
    out["fingerprint"] = _row_facts()
    del keep
    return out


def _in_own_arena(work) -> None:
    """Run `work` (build, warm-up, counted calls) in a thread of its own. glibc's malloc serves a
    new thread from an arena of its own (a new one, or one left from before the fork: the same
    in every child), so what the calls allocate and free (tensors, grads) meets bins shaped by
    the workload alone. In the main thread's arena it met whatever the child did before: loading
    a models module with one more model moved a training step's count by 0.1%, most of it in
    glibc's _int_malloc and malloc_consolidate, and a Python-heavy call's count moved by 0.3%
    from one memory layout to the next (docs/measurements.md)."""
    import threading

    failed = []

    def run():
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 (raised again in the caller)
            failed.append(exc)

    t = threading.Thread(target=run, name="harness-count")
    t.start()
    t.join()
    if failed:
        raise failed[0]


def _row_facts() -> dict:
    """What a row's count depends on beyond the process's fingerprint: where inductor ran, the
    vector instruction set it picked under valgrind (valgrind does not emulate AVX-512, so it
    picks another than a native run would)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None or not utils.counters["inductor"]:  # inductor compiled nothing here
        return {}
    from torch._inductor import config
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    return {
        "inductor_vec_isa": str(pick_vec_isa()) or "none",
        "inductor_march": config.cpp.march or "native",
    }


def _after(fn, work):
    """calibrate's extra work after each call of fn (the default placement)."""

    def slowed():
        out = fn()
        work()
        return out

    return slowed


def _slowed(req: _Requests, fn, job: dict, tag: str, fraction: float, prefix: Path, inject=None):
    """fn with busy work of `fraction` x fn's own instructions per call, both counted here first
    (test-only, see the module docstring). `inject(fn, work)` places the work inside fn's own
    work (a compile's: harness.measure.workloads.instructions.inside_compile); default: after
    each call."""
    pid = os.getpid()
    calls = job["calls"]
    place = inject or _after

    def with_busy(n: int):
        slowed = place(fn, lambda: _busy(n))
        # specialised, as the counted calls will be (a call that is a whole compile needs none:
        # its own busy loop specialises within it)
        for _ in range(0 if inject else job["warmup"]):
            slowed()
        return slowed

    # Every count holds the client requests' own instructions (ctypes calls, thousands): an
    # empty measurement's count is taken off, the last of three, warm (as the worker's is). The
    # wrapper's own call is part of the extra work.
    for _ in range(3):
        req.measure(lambda: None, 1, f"empty-{tag}")
    req.measure(fn, calls, f"calibrate-{tag}")
    req.measure(with_busy(0), calls, f"wrapper-{tag}")
    for _ in range(20):
        _busy(BUSY_CALIBRATION)
    for k in (1, 3):  # two lengths: the instructions of one iteration
        req.measure(lambda k=k: _busy(k * BUSY_CALIBRATION), 1, f"busy{k}-{tag}")

    def net(name: str) -> int:
        return _totals(_dump_for(prefix, pid, f"{name}-{tag}")) - empty

    empty = 0
    empty = net("empty")
    clean = net("calibrate") / calls
    wrapper = net("wrapper") / calls - clean  # the wrapper and an empty _busy call
    per_iteration = (net("busy3") - net("busy1")) / (2 * BUSY_CALIBRATION)
    n = max(1, round((fraction * clean - wrapper) / per_iteration))
    slowed = with_busy(n)
    req.measure(slowed, calls, f"slowed-{tag}")  # what the extra work adds, as counted
    added = net("slowed") / calls - clean
    return slowed, {
        "fraction": fraction,
        "iterations": n,
        "added_per_call": round(added),
        "clean_per_call": round(clean),
        "placed": "inside the call" if inject else "after each call",
    }


def _worker(spec_path: str) -> int:
    """The valgrind process: import torch, then, phase by phase (PHASES), import the phase's
    modules and fork one zygote for it, which forks one guardian per task, which forks the
    counting child and waits for it. So a child starts from the state of its phase's imports, its
    zygote and its guardian, the same whatever the job list: this process forks exactly one zygote
    per phase whichever rows it counts, a zygote forks guardians that leave its heap as they found
    it, nothing of the job list is read here but the number of tasks per phase, and no workload
    source is loaded here. At most `parallel` children count at once, all phases together: a
    token pipe (a guardian returns its token when its child has ended, however it ended)."""
    t0 = time.perf_counter()
    spec = json.loads(Path(spec_path).read_text())
    req = _Requests(spec["helper"])
    import torch

    torch.set_num_threads(1)
    result = {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "import_s": round(time.perf_counter() - t0, 1),
        "pid": os.getpid(),
        "jobs": {},
    }
    out = Path(spec["out"])
    os.read(spec["ready_fd"], 1)  # the parent has prepared what the workloads load
    plan_file = out / "plan.json"
    plan = json.loads(plan_file.read_text()) if plan_file.is_file() else {}
    plan = {"phases": [0] * len(PHASES), "tasks": 0, **plan}
    for _ in range(3):  # the last of three: the client requests' own instructions, warm
        req.measure(lambda: None, 1, "harness-overhead")
    tokens = os.pipe()
    os.write(tokens[1], b"t" * spec["parallel"])
    # where the next task is, in a C array: no counter stays alive as a Python object (an int
    # past 256 is one) when a later phase imports and forks
    cursor = array.array("q", bytes(8))
    for modules, n in zip(PHASES, plan["phases"]):
        if cursor[0] == plan["tasks"]:
            break  # no later phase has a task: its imports would only cost time
        for module in modules:
            importlib.import_module(module)
        pid = os.fork()
        if pid == 0:
            _zygote(req, spec, cursor, n, tokens)
        del pid
        cursor[0] += n
    _wait_all()
    for k in range(plan["tasks"]):
        task = json.loads((out / TASKS / f"{k:04d}.json").read_text())
        path = out / "status" / f"{task['tag']}.json"
        result["jobs"][task["tag"]] = (
            json.loads(path.read_text()) if path.is_file() else {"error": _death(task, None)}
        )
    (out / "worker.json").write_text(json.dumps(result))
    return 0


def _wait_all() -> None:
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def _zygote(req: _Requests, spec: dict, cursor, n: int, tokens: tuple[int, int]) -> None:
    """One phase's tasks: one guardian each, forked when a token is free."""
    from harness.core.processes import die_with_parent

    die_with_parent()
    _tag_every_type()
    for _ in itertools.repeat(None, n):
        os.read(tokens[0], 1)  # a free slot, of `parallel`
        pid = os.fork()
        if pid == 0:
            _guardian(req, spec, cursor, tokens)
        del pid
        cursor[0] += 1
    _wait_all()
    os._exit(0)


def _tag_every_type() -> None:
    """Give every type that exists now its method-cache version tag, in one order. CPython 3.11
    hands tags out on a type's first attribute lookup, and keys its method cache by them: left
    lazy, a torch type first looked up in a child would take a tag that depends on how many types
    the child made before (a second model in the user's module moved the first's count by 0.1%)."""
    stack = [object]
    while stack:
        kind = stack.pop()
        getattr(kind, "__harness_version_tag__", None)  # a lookup: assigns the tag
        stack.extend(type.__subclasses__(kind))


def _guardian(req: _Requests, spec: dict, cursor, tokens: tuple[int, int]) -> None:
    """Fork the counting child of task cursor[0], wait for it, say why it wrote no result if it
    wrote none (crashed, ran past its time limit), and give the token back."""
    from harness.core.processes import die_with_parent

    die_with_parent()
    name = f"{cursor[0]:04d}"  # the same size for every task: so is the child's heap
    pid = os.fork()
    if pid == 0:
        _child(req, name, spec)
    _, status = os.waitpid(pid, 0)
    out = Path(spec["out"])
    task = json.loads((out / TASKS / f"{name}.json").read_text())
    path = out / "status" / f"{task['tag']}.json"
    if not path.is_file():
        write_atomic(path, json.dumps({"error": _death(task, status), "pid": pid}))
    os.write(tokens[1], b"t")
    os._exit(0)


def _death(task: dict, status: int | None) -> str:
    """Why a counting child wrote no result, from its wait status."""
    import signal

    what = f"the counting child ({task['key']}, layout {task['layout']})"
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGALRM:
            return f"{what} ran past its time limit of {task['timeout_s']:.0f} s and was ended"
        return f"{what} crashed under valgrind ({signal.Signals(sig).name})"
    if status is not None and os.WIFEXITED(status):
        return f"{what} exited with {os.WEXITSTATUS(status)} before writing its result"
    return f"{what} died before writing its result"


def _child(req: _Requests, name: str, spec: dict) -> None:
    """A counting child: read its task, limit its own time (SIGALRM's default action ends it),
    count, say how it went, leave without cleaning up."""
    import math
    import signal

    from harness.core.processes import die_with_parent

    die_with_parent()
    out = Path(spec["out"])
    task = json.loads((out / TASKS / f"{name}.json").read_text())
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(math.ceil(task["timeout_s"]))
    try:
        path = json.loads(Path(PATH_FILE).read_text())
        status = _count_one(
            req, task, Path(spec["state"]), spec["extra"], Path(spec["prefix"]), path
        )
    except BaseException as exc:  # noqa: BLE001 (any failure is this row's, reported)
        status = {"error": f"{type(exc).__name__}: {exc}"}
    signal.alarm(0)
    status["pid"] = os.getpid()
    (out / "status" / f"{task['tag']}.json").write_text(json.dumps(status))
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
