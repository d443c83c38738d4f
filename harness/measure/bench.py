"""`harness bench`: run the asv suites in the current environment and save what they measured.

What it does, in order:
1. checks the suite names against the modules in suites/benchmarks/ (an unknown one is bad
   input listing the valid ones; the canary runs only when named);
2. writes a run-time asv config (harness.measure.asv) with absolute paths and the results
   directory of the chosen results root;
3. records the machine non-interactively under a name carrying the GPU model;
4. runs `asv run --set-commit-hash <HEAD>` (asv saves nothing from an existing environment
   without a commit hash), forkserver on CPU and spawn on CUDA;
5. saves the environment fingerprint beside the results, atomically.

What the suites are told (run_environment): HARNESS_FULL (sizes and grids), HARNESS_QUICK
(asv --quick: asv does not tell a benchmark), HARNESS_THREADS (the run's fixed CPU thread
count, DECISIONS §6: 1 in quick and fast runs, all cores in full runs, --threads N overrides;
recorded in the fingerprint as torch_threads) and TORCHINDUCTOR_CACHE_DIR (a private, empty
inductor cache for this run, removed afterwards: compile-time benchmarks fill it with a priming
compile and then time warm compiles, so two identical runs start from the same cache state
instead of whatever earlier runs left in the user's cache).

Reading the saved results back and summarising them is the verdict's job (harness.verdict).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core.exits import BadInput
from harness.core.files import write_atomic
from harness.measure import asv

# Suites that run only when named with --suite (DECISIONS §4).
ONLY_WHEN_NAMED = ("canary",)


def available_suites(root: Path) -> list[str]:
    """Every benchmark module in suites/benchmarks/: a new file there is a new suite."""
    folder = root / "suites" / "benchmarks"
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def check_suites(root: Path, names: list[str] | None) -> list[str]:
    known = available_suites(root)
    if not names:
        return [n for n in known if n not in ONLY_WHEN_NAMED]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BadInput(f"unknown suite{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                       f"valid suites (modules in {root / 'suites' / 'benchmarks'}): {', '.join(known)}")
    return list(dict.fromkeys(names))


def fingerprint_path(results: Path, machine: str, sha: str) -> Path:
    """Where the environment fingerprint of a run is saved: beside asv's results directory, not
    inside it (asv publish would try to load it as a result file)."""
    return results.parent / "fingerprints" / machine / f"{sha[:8]}.json"


def run_environment(*, quick: bool, full: bool, threads: int | None = None,
                    inductor_cache: Path | None = None) -> dict:
    """The environment asv runs the suites in (see the module docstring)."""
    from harness.measure.threads import default_threads

    extra = {"HARNESS_FULL": "1" if full else "0", "HARNESS_QUICK": "1" if quick else "0",
             "HARNESS_THREADS": str(threads or default_threads(full, quick))}
    if inductor_cache is not None:
        extra["TORCHINDUCTOR_CACHE_DIR"] = str(inductor_cache)
    return asv.environment(extra)


@dataclasses.dataclass
class BenchRun:
    result_file: Path | None  # None: asv saved nothing
    fingerprint: Path
    asv_exit: int
    wall_s: float
    suites: list[str]


def run(root: Path, results: Path, suites: list[str] | None = None, *, sha: str, machine: str,
        quick: bool = False, full: bool = False, threads: int | None = None, launch: str | None = None,
        out=sys.stdout) -> BenchRun:
    """Run the suites through asv into `results` (asv's results directory)."""
    from harness.core.env import fingerprint
    from harness.measure.threads import default_threads

    names = check_suites(root, suites)
    method = asv.launch_method(launch)
    threads = threads or default_threads(full, quick)
    with tempfile.TemporaryDirectory(prefix="harness-inductor-cache-") as cache, \
            asv.config(root, results) as config:
        env = run_environment(quick=quick, full=full, threads=threads, inductor_cache=Path(cache))
        asv.record_machine(config, machine, env)
        cmd = asv.run_command(config, sha, machine, method, quick=quick, benches=[rf"^{n}\." for n in names])
        print(f"harness bench: {'full' if full else 'fast'}{' quick' if quick else ''} run of "
              f"{', '.join(names)} on {machine} ({method}, {threads} CPU thread{'s' * (threads > 1)}), "
              f"commit {sha[:8]}", file=out, flush=True)
        print("$ " + " ".join(cmd[2:]), file=out, flush=True)
        t0 = time.perf_counter()
        asv_rc = subprocess.run(cmd, cwd=root, env=env).returncode
        wall = time.perf_counter() - t0

    fp = fingerprint()
    # the run's thread count, not this process's: the suites set it (harness.measure.threads)
    fp.update(machine_name=machine, commit=sha, mode="full" if full else "fast", quick=quick,
              suites=names, launch_method=method, asv_wall_s=round(wall, 1), torch_threads=threads,
              inductor_cache="private to the run, warm compiles (cold: full mode only)")
    fp_path = fingerprint_path(results, machine, sha)
    write_atomic(fp_path, json.dumps(fp, indent=2, sort_keys=True) + "\n")
    files = sorted((results / machine).glob(f"{sha[:8]}-*.json"))
    return BenchRun(files[-1] if files else None, fp_path, asv_rc, wall, names)
