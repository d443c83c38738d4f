"""`harness bench`: run the asv suites in the current environment into a new run record.

What it does, in order:
1. checks the suite names against the modules in suites/benchmarks/ (an unknown one is bad
   input listing the valid ones; the canary runs only when named);
2. opens a new run record (harness.core.records: written once, never rewritten);
3. writes a run-time asv config (harness.measure.asv) whose results directory is that record;
4. records the machine non-interactively under a name carrying the GPU model;
5. runs `asv run --set-commit-hash <HEAD>` (asv saves nothing from an existing environment
   without a commit hash), forkserver on CPU and spawn on CUDA;
6. runs the operator pass (harness.measure.profiles) in the run's environment: per-operator
   counts behind every ops/kernels row (every run), and operator-level profile summaries per
   workload (full runs, or `profile=True`), written into the record before it is renamed;
7. saves the environment fingerprint in the record, then refreshes the asv view (results/asv/).

What the suites are told (run_environment): HARNESS_FULL (sizes and grids), HARNESS_QUICK
(asv --quick: asv does not tell a benchmark), HARNESS_THREADS (the run's fixed CPU thread
count, DECISIONS §6: 1 in quick and fast runs, all cores in full runs, --threads N overrides;
recorded in the fingerprint as torch_threads), PYTHONHASHSEED (fixed, HASH_SEED, unless set:
recorded as python_hash_seed) and TORCHINDUCTOR_CACHE_DIR (a private, empty
inductor cache for this run, removed afterwards: compile-time benchmarks fill it with a priming
compile and then time warm compiles, so two identical runs start from the same cache state
instead of whatever earlier runs left in the user's cache).

Reading the saved results back and summarising them is the verdict's job (harness.verdict).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core import records, settings
from harness.core.exits import BadInput
from harness.core.files import write_json_atomic
from harness.core.processes import run_in_session
from harness.measure import asv
from harness.measure.instructions import RECORD_ENV, SCRATCH_ENV, SELECT_ENV
from harness.measure.workloads import instructions as instruction_workloads

# Suites that run only when named with --suite (DECISIONS §4).
ONLY_WHEN_NAMED = ("canary",)


def available_suites(project: Path) -> list[str]:
    """Every benchmark module in suites/benchmarks/: a new file there is a new suite."""
    folder = project / "suites" / "benchmarks"
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def check_suites(project: Path, names: list[str] | None) -> list[str]:
    known = available_suites(project)
    if not names:
        return [n for n in known if n not in ONLY_WHEN_NAMED]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BadInput(f"unknown suite{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                       f"valid suites (modules in {project / 'suites' / 'benchmarks'}): {', '.join(known)}")
    return list(dict.fromkeys(names))


def run_environment(*, quick: bool, full: bool, threads: int | None = None,
                    inductor_cache: Path | None = None) -> dict:
    """The environment asv runs the suites in (see the module docstring)."""
    from harness.measure.threads import default_threads

    extra = {settings.FULL.name: settings.FULL.encode(full), settings.QUICK.name: settings.QUICK.encode(quick),
             settings.THREADS.name: str(threads or default_threads(full, quick)),
             "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED") or HASH_SEED}
    if inductor_cache is not None:
        extra["TORCHINDUCTOR_CACHE_DIR"] = str(inductor_cache)
    return asv.environment(extra)


# Python's hash seed for the suites' processes unless the caller's environment sets one: with
# a random seed per process the MLP training step's compiled/eager ratio (dispatch-bound, 0.65 ms
# a step) moved 0.924-0.977 over 8 fresh processes under load, with the seed fixed 0.928-0.947,
# while two windows inside one process agreed within ~1% either way (the spread is the
# process's; our guess at the cause: dict and set layouts in dynamo's guards and Python-side dispatch).
HASH_SEED = "0"


@dataclasses.dataclass
class BenchRun:
    record: records.RunRecord | None  # None: asv saved nothing, so no run record was kept
    asv_exit: int
    wall_s: float
    suites: list[str]


# The operator pass profiles each workload for a few seconds; a full run's grids stay well inside.
PASS_TIMEOUT_S = 1800


def operator_pass(project: Path, staging: Path, names: list[str], env: dict, *, profile: bool,
                  out=None) -> str:
    """harness.measure.profiles over the suites just run, in a fresh process with the run's
    environment, writing into the staging record. Returns what happened (kept in run.json). A
    failure here is reported, never fatal: the asv results are the run."""
    import json

    out = out or sys.stdout  # looked up per call: a stream bound at import time may be closed since

    from harness.measure import profiles

    try:
        benchmarks = json.loads((staging / "asv" / "benchmarks.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "not run: asv wrote no benchmarks.json"
    if not profiles.wanted(benchmarks, names, profile):
        return "not run: no counter rows, no profiling asked"
    cmd = [sys.executable, "-m", "harness.measure.profiles", "--benchmark-dir",
           str(project / "suites" / "benchmarks"), "--asv-dir", str(staging / "asv"), "--out", str(staging)]
    cmd += [a for n in names for a in ("--suite", n)] + (["--profile"] if profile else [])
    t0 = time.perf_counter()
    try:
        proc = run_in_session(cmd, cwd=project, env=env, timeout=PASS_TIMEOUT_S, capture=True)
    except subprocess.TimeoutExpired:
        status = f"failed: no answer within {PASS_TIMEOUT_S} s"
    else:
        status = ("done" if proc.returncode == 0 else
                  f"failed (exit {proc.returncode}): {(proc.stderr.strip().splitlines() or [''])[-1]}")
        if proc.returncode == 0:
            print(proc.stdout.strip(), file=out)
    took = time.perf_counter() - t0
    print(f"harness bench: operator pass {'(profiles) ' if profile else ''}{status} in {took:.1f} s",
          file=out if status == "done" else sys.stderr, flush=True)
    return status


def run(project: Path, root: Path, suites: list[str] | None = None, *, sha: str, machine: str,
        quick: bool = False, full: bool = False, threads: int | None = None, launch: str | None = None,
        label: str | None = None, profile: bool | None = None, benches: list[str] | None = None,
        shard: str | None = None, out=None) -> BenchRun:
    """Run the suites through asv into a new run record under the results root `root`.
    `profile`: store operator-level profile summaries (default: in full runs only);
    `benches`: asv `--bench` regexes selecting part of the suites (harness.measure.shard);
    `shard`: 'K/N', recorded in run.json (the label carries it too)."""
    out = out or sys.stdout  # looked up per call (see operator_pass)
    from harness.core.env import fingerprint
    from harness.measure.threads import default_threads

    names = check_suites(project, suites)
    method = asv.launch_method(launch)
    threads = threads or default_threads(full, quick)
    profile = full if profile is None else profile
    run_id = records.new_run_id(sha, label)
    meta = {"commit": sha, "started": run_id.split("-")[0], "label": label or "", "suites": names,
            "mode": "full" if full else "fast", "quick": quick, "launch_method": method,
            "threads": threads, "profiled": profile, **({"shard": shard} if shard else {})}
    asv_rc, wall = -1, 0.0
    with records.writing(root, machine, run_id, meta) as staging, \
            tempfile.TemporaryDirectory(prefix="harness-inductor-cache-") as cache, \
            tempfile.TemporaryDirectory(prefix="harness-scratch-") as scratch:
        env = run_environment(quick=quick, full=full, threads=threads, inductor_cache=Path(cache))
        env[RECORD_ENV] = str(staging)  # where instruction counts keep their per-function tables
        env[SCRATCH_ENV] = scratch
        if benches:  # one valgrind process counts every instruction row: only the selected ones
            env[SELECT_ENV] = ",".join(instruction_workloads.matching(benches)) or "none"
        with asv.config(project, staging / "asv") as config:
            env = asv.record_machine(config, machine, env)
            cmd = asv.run_command(config, sha, machine, method, quick=quick,
                                  benches=benches or [rf"^{n}\." for n in names])
            print(f"harness bench: {'full' if full else 'fast'}{' quick' if quick else ''} "
                  f"{'run of shard ' + shard + ' of ' if shard else 'run of '}"
                  f"{', '.join(names)} on {machine} ({method}, {threads} CPU thread{'s' * (threads > 1)}), "
                  f"commit {sha[:8]}, run {run_id}", file=out, flush=True)
            print("$ " + " ".join(cmd[2:]), file=out, flush=True)
            t0 = time.perf_counter()
            asv_rc = run_in_session(cmd, cwd=project, env=env).returncode
            wall = time.perf_counter() - t0
        # still inside the staging record (and the run's inductor cache): written before the rename;
        # `meta` is read by records.writing when the block ends
        meta["operator_pass"] = operator_pass(project, staging, names, env, profile=profile, out=out)
        fp = fingerprint()
        # the run's thread count, not this process's: the suites set it (harness.measure.threads)
        fp.update(machine_name=machine, commit=sha, run_id=run_id, mode=meta["mode"], quick=quick,
                  suites=names, launch_method=method, asv_wall_s=round(wall, 1), torch_threads=threads,
                  python_hash_seed=env["PYTHONHASHSEED"],
                  inductor_cache="private to the run, warm compiles (cold: full mode only)")
        write_json_atomic(staging / records.FINGERPRINT, fp)
    final = records.runs_dir(root) / machine / run_id
    record = records.load_record(final) if final.is_dir() else None
    if record:
        records.rebuild_view(root)
    return BenchRun(record, asv_rc, wall, names)
