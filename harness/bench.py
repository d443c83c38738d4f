"""`harness bench`: run the asv suites in the current environment and summarise key ratios.

What it does, in order:
1. checks the suite names (an unknown one is an error listing the valid ones);
2. writes a run-time asv config beside the results (absolute paths, so the results directory can
   be moved with --results-dir / $HARNESS_RESULTS_DIR, e.g. by tests);
3. records the machine non-interactively under a name carrying the GPU model
   (harness.env.machine_name(): asv's machine record has no GPU field);
4. runs `asv run --set-commit-hash <HEAD>` (asv saves nothing from an existing environment without
   a commit hash) with forkserver on CPU (suite imported once, one fork per benchmark) and spawn
   on CUDA (a forked CUDA context is unusable);
5. saves the environment fingerprint beside the results, atomically;
6. reads the saved results back: prints the key ratios and names every benchmark that failed.

The interpreter path: asv names an existing environment after its interpreter path
(`existing-py_<path>`), so the same suites run from a venv at another path would start a new
history. The run goes through a fixed launcher, `$XDG_CACHE_HOME/harness/asv-python` (a two-line
shell script exec'ing $HARNESS_PYTHON, set to the current interpreter for each run), so the
environment name is the same for every venv of a user on a machine. What differs between venvs
(torch version, flags) is in the fingerprint saved with each result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.workloads import AREAS

SUITES = AREAS
EXIT_BAD_INPUT = 2

# (label, benchmark name, params to match (as asv stores them, repr strings) or None for all)
KEY_RATIOS = [
    ("compiled/eager, pointwise chain", "fusion.PointwiseChain.track_compiled_over_eager", None),
    ("compiled/eager, norm + activation", "fusion.NormActivationBlock.track_compiled_over_eager", None),
    ("compiled/eager, training step", "fusion.SmallModelTrainingStep.track_compiled_over_eager", None),
    ("pinned/pageable copy", "transfer.PinnedOverPageable.track_pinned_over_pageable", None),
    ("uint8+convert/float32 copy", "transfer.Uint8ThenConvertOverFloat32.track_uint8_over_float32", None),
    ("AMP/fp32 training step", "amp.AutocastOverFp32.track_autocast_over_fp32", None),
]
WORKERS_BENCH = "dataloader.LoadSyntheticImages.track_samples_per_second"


class BenchError(Exception):
    """Bad input or set-up problem; the message says what to do."""


def repo_root() -> Path:
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "asv.conf.json").is_file():
            return d
    pkg = Path(__file__).resolve().parents[1]
    if (pkg / "asv.conf.json").is_file():
        return pkg
    raise BenchError("no asv.conf.json found in the current directory or its parents; "
                     "run `harness bench` from the harness checkout")


def check_suites(names: list[str] | None) -> list[str]:
    names = list(names or SUITES)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise BenchError(f"unknown suite{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"valid suites: {', '.join(SUITES)}")
    return list(dict.fromkeys(names))


def results_dir(override: str | None = None) -> Path:
    """asv's results directory: ROOT/asv for `--results-dir ROOT` (the same root every harness
    command takes), else $HARNESS_RESULTS_DIR, else results/asv (see harness.results)."""
    from harness.results import asv_dir
    from harness.results import results_dir as results_root

    return asv_dir(results_root(override)).resolve()


def head_commit(root: Path) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True,
                              text=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        raise BenchError(f"cannot read the current commit in {root} (asv saves results per commit): {e}") from e


from harness.files import write_atomic as atomic_write_text  # noqa: E402  (one writer for all)


def python_launcher() -> Path:
    """A fixed path for asv's `existing` environment (see the module docstring)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "harness"
    path = cache / "asv-python"
    text = '#!/bin/sh\n# written by `harness bench`: asv names its environment after this path\nexec "${HARNESS_PYTHON:?}" "$@"\n'
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
        path.chmod(0o755)
    return path


def write_config(root: Path, results: Path, *, benchmark_dir: Path | None = None,
                 html_dir: Path | None = None) -> Path:
    """A run-time copy of the repo's asv.conf.json with absolute paths, results in `results`.

    The one place that writes asv configs: `harness calibrate` points `benchmark_dir` at a scratch
    folder holding only the modules it calibrates (asv imports every module at discovery), and
    `harness nightly` sets `html_dir`. The caller deletes the file (it lies in ROOT/.asv/).
    """
    from asv import util

    conf = util.load_json(str(root / "asv.conf.json"), js_comments=True)
    default_results = (root / conf.get("results_dir", "results/asv")).resolve()
    if html_dir is None:
        html_dir = (root / conf.get("html_dir", "results/html")).resolve() if results == default_results \
            else results.parent / (results.name + "-html")
    bench = benchmark_dir or (root / conf["benchmark_dir"])
    conf.update(repo=str(root), benchmark_dir=str(Path(bench).resolve()), results_dir=str(results),
                html_dir=str(html_dir), env_dir=str(root / ".asv" / "env"))
    # Not inside results_dir: `asv publish` would try to load every .json there as a result.
    (root / ".asv").mkdir(exist_ok=True)
    fd, path = tempfile.mkstemp(dir=root / ".asv", prefix="harness-run-", suffix=".conf.json")
    with os.fdopen(fd, "w") as f:
        json.dump(conf, f, indent=2)
    return Path(path)


def asv_env(extra: dict | None = None) -> dict:
    """The environment asv runs in: this interpreter behind the fixed launcher, its bin on PATH."""
    env = dict(os.environ, HARNESS_PYTHON=sys.executable)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra or {})
    return env


def record_machine(config: Path, machine: str, env: dict) -> None:
    """asv's machine.json, written without questions, under the name that carries the GPU."""
    subprocess.run([sys.executable, "-m", "asv", "machine", "--config", str(config), "--yes",
                    "--machine", machine], env=env, check=True, stdout=subprocess.DEVNULL)


def run_command(config: Path, sha: str, machine: str, method: str, *, quick: bool = False,
                benches: list[str] = ()) -> list[str]:
    """The `asv run` command line: existing environment behind the launcher, commit hash set
    (asv saves nothing otherwise), samples recorded for the gate's statistics."""
    cmd = [sys.executable, "-m", "asv", "run", "--config", str(config),
           "-E", f"existing:{python_launcher()}", "--set-commit-hash", sha, "--machine", machine,
           "--launch-method", method, "--record-samples", "--show-stderr"]
    if quick:
        cmd.append("--quick")
    for regex in benches:
        cmd += ["--bench", regex]
    return cmd


def fingerprint_path(results: Path, machine: str, sha: str) -> Path:
    """Where the environment fingerprint of a run is saved: beside results_dir, not inside it
    (asv publish would try to load it as a result file)."""
    return results.parent / "fingerprints" / machine / f"{sha[:8]}.json"


def launch_method(requested: str | None = None) -> str:
    if requested and requested != "auto":
        return requested
    from harness.env import cuda_available

    return "spawn" if cuda_available() else "forkserver"


def run(suites: list[str] | None = None, *, quick: bool = False, full: bool = False,
        results: str | None = None, launch: str | None = None, machine: str | None = None,
        out=sys.stdout) -> int:
    from harness.env import machine_name

    names = check_suites(suites)
    root = repo_root()
    res = results_dir(results)
    sha = head_commit(root)
    machine = machine or machine_name()
    method = launch_method(launch)
    config = write_config(root, res)
    try:
        return _run(names, root, res, sha, machine, method, config, quick, full, out)
    finally:
        config.unlink(missing_ok=True)


def _run(names, root, res, sha, machine, method, config, quick, full, out) -> int:
    from harness.env import fingerprint

    env = asv_env({"HARNESS_FULL": "1" if full else "0"})
    record_machine(config, machine, env)
    cmd = run_command(config, sha, machine, method, quick=quick, benches=[rf"^{n}\." for n in names])
    print(f"harness bench: {'full' if full else 'fast'}{' quick' if quick else ''} run of "
          f"{', '.join(names)} on {machine} ({method}), commit {sha[:8]}", file=out, flush=True)
    print("$ " + " ".join(cmd[2:]), file=out, flush=True)
    t0 = time.perf_counter()
    asv_rc = subprocess.run(cmd, cwd=root, env=env).returncode
    wall = time.perf_counter() - t0

    fp = fingerprint()
    fp.update(machine_name=machine, commit=sha, mode="full" if full else "fast", quick=quick,
              suites=names, launch_method=method, asv_wall_s=round(wall, 1))
    fp_path = fingerprint_path(res, machine, sha)
    atomic_write_text(fp_path, json.dumps(fp, indent=2, sort_keys=True) + "\n")

    result_files = sorted((res / machine).glob(f"{sha[:8]}-*.json"))
    if not result_files:
        print(f"harness bench: asv saved no results under {res / machine} (asv exit code {asv_rc})", file=out)
        return 1
    from harness.results import BadInput, load

    try:
        saved = load(result_files[-1])
    except BadInput as exc:
        print(f"harness bench: cannot read what asv saved: {exc}", file=out)
        return 1
    saved.entries = {k: e for k, e in saved.entries.items() if k.split(".", 1)[0] in names}
    print(file=out)
    print(summary_table(saved), file=out)
    failed = failures(saved)
    print(f"\nresults: {result_files[-1]}\nfingerprint: {fp_path}\nasv run took {wall:.1f} s", file=out)
    if failed:
        print(f"\nharness bench: {len(failed)} benchmark case(s) failed (the others ran):", file=out)
        for name in failed:
            print(f"  FAILED {name}", file=out)
        print("its traceback is in the asv output above; rerun one alone with "
              "`asv run --python=same --quick --show-stderr --bench <name>` (saves nothing)", file=out)
        return 1
    if asv_rc != 0:
        print(f"harness bench: asv exited with {asv_rc}", file=out)
        return asv_rc
    return 0


# --------------------------------------------------------------------------------------------
# Reading saved results (through harness.results, asv's own loader with checks)


def failures(rs) -> list[str]:
    """Benchmark cases that raised (asv stores None), named with their parameters."""
    return [name for name, e in sorted(rs.entries.items()) if e.failed]


def _fmt(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.3g}"
    return f"{min(values):.3g} .. {max(values):.3g}"


def _cases(rs, benchmark: str) -> list[tuple[tuple[str, ...], object]]:
    """(parameter values, entry) for every case of `benchmark`; asv names a case
    `bench(p1, p2, ...)` with the parameter values as it stores them."""
    out = []
    for name, e in sorted(rs.entries.items()):
        if name == benchmark:
            out.append(((), e))
        elif name.startswith(benchmark + "(") and name.endswith(")"):
            out.append((tuple(name[len(benchmark) + 1:-1].split(", ")), e))
    return out


def workers_scaling(rs) -> list[tuple[str, float]]:
    """samples/s with N workers over samples/s with 0 workers, the other settings equal (a
    persistent pool needs workers, so its baseline is the non-persistent 0-worker case)."""
    by = {params: e.value for params, e in _cases(rs, WORKERS_BENCH)
          if len(params) == 4 and not e.failed and not e.skipped}
    rows = []
    for (workers, pin, batch, persistent), value in sorted(by.items()):
        base = by.get(("0", pin, batch, "False"))
        if workers != "0" and base:
            rows.append((f"workers {workers}/0 samples/s (pin={pin}, batch={batch}, persistent={persistent})",
                         value / base))
    return rows


def summary_table(rs) -> str:
    rows = []
    for label, name, _ in KEY_RATIOS:
        cases = [e for _, e in _cases(rs, name)]
        if not cases:
            continue
        vals = [e.value for e in cases if not e.failed and not e.skipped]
        detail = "" if len(cases) == 1 else f"  ({len(vals)} of {len(cases)} cases)"
        rows.append((label, _fmt(vals) + detail))
    rows += [(label, f"{v:.3g}") for label, v in workers_scaling(rs)]
    if not rows:
        return "key ratios: none of the summarised benchmarks ran in these suites"
    width = max(len(r[0]) for r in rows)
    lines = ["key ratios (lower is better for time ratios; workers scaling: higher is better)",
             f"{'':<{width}}  value", f"{'-' * width}  -----"]
    lines += [f"{label:<{width}}  {value}" for label, value in rows]
    return "\n".join(lines)
