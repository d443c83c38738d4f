"""pytest-benchmark as a second runner (suites/test_benchmarks.py, harness.measure.pytest_bench):
--benchmark-only runs every case that applies here; saves carry the timing loop's samples, the
exact counters and the fingerprint; two saves gate like asv results (A/A exit 0, one injected
op exit 1).

Each check runs pytest in a subprocess on the real suite file (a fresh process: dynamo and
thread settings of this one stay out of it)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from harness.cli import main

pytestmark = pytest.mark.slow  # end to end: real pytest-benchmark runs in subprocesses

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "test_benchmarks.py"
GENERIC_SKIPS = ("Skipping non-benchmark", "timing runs only")

# Replaces the timing call only, so that all cases run in seconds: every case still builds its
# workload (where NotApplicable skips it), and the ones that reach the timing call are listed.
STUB = """
import os
from harness.measure import pytest_bench

def pytest_configure(config):
    def record(benchmark, fn, device, **kw):
        with open(os.environ["REACHED_FILE"], "a") as f:
            f.write(benchmark.fullname + "\\n")
        benchmark.skipped = True  # pytest-benchmark: no "fixture not used" warning
    pytest_bench.record = record
"""


def pytest_run(*args, cwd=ROOT, env=None, timeout=900):
    # the run's mode and threads come from `env` only: another test in this worker may have set
    # HARNESS_FULL (the golden plugin's --full does), which would select full sizes and all cores
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTEST_XDIST_WORKER", "HARNESS_FULL", "HARNESS_QUICK", "HARNESS_THREADS")
    }
    full_env.update(env or {})
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            str(SUITE),
            *args,
        ],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def outcomes(stdout: str) -> dict[str, int]:
    last = stdout.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}


def collected() -> int:
    out = pytest_run("--collect-only", "-q").stdout
    return sum(1 for line in out.splitlines() if line.startswith("suites/test_benchmarks.py::"))


def test_benchmark_only_runs_every_case_that_applies(tmp_path):
    (tmp_path / "stub_record.py").write_text(STUB)
    reached = tmp_path / "reached.txt"
    reached.write_text("")
    env = {
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "REACHED_FILE": str(reached),
    }
    proc = pytest_run("--benchmark-only", "-p", "stub_record", "-rs", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counts = outcomes(proc.stdout)
    ran = reached.read_text().split()
    total = collected()
    assert total > 0 and counts.get("passed", 0) + counts.get("skipped", 0) == total, proc.stdout[
        -2000:
    ]
    # every case either reached the timing call (it applies) or skipped with its own reason
    assert counts.get("passed", 0) == len(ran) == len(set(ran)) > 0
    skips = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert sum(int(re.search(r"\[(\d+)\]", s).group(1)) for s in skips) == counts.get("skipped", 0)
    assert not [s for s in skips if any(g in s for g in GENERIC_SKIPS)], skips


def test_plain_run_skips_the_timings_without_warnings():
    proc = pytest_run("-q", "-rs")
    assert proc.returncode == 0, proc.stdout[-3000:]
    counts = outcomes(proc.stdout)
    assert counts.get("skipped") == collected() and "passed" not in counts
    assert "timing runs only" in proc.stdout and "not used" not in proc.stdout


@pytest.mark.xdist_group("pytest-benchmark-e2e")
def test_saved_runs_gate_like_asv_results(tmp_path, capsys):
    storage = tmp_path / ".benchmarks"
    select = ("-k", "canary or (fusion and norm_activation and eager)")
    for extra in ("", "", "1"):
        proc = pytest_run(
            "--benchmark-only",
            "--benchmark-autosave",
            f"--benchmark-storage={storage}",
            *select,
            env={"HARNESS_CANARY_EXTRA": extra},
        )
        assert proc.returncode == 0 and outcomes(proc.stdout) == {
            "passed": 2,
            "deselected": collected() - 2,
        }, proc.stdout[-3000:] + proc.stderr[-2000:]
    first, second, injected = sorted(storage.glob("*/0*.json"))
    saved = json.loads(first.read_text())
    ours = saved["machine_info"]["harness"]
    # a fast run uses one thread (harness.measure.threads), and the fingerprint says so
    assert ours["fingerprint"]["torch_threads"] == 1 and ours["machine"]
    for bench in saved["benchmarks"]:
        assert isinstance(bench["extra_info"]["ops"], int) and bench["extra_info"]["ops"] > 0
        assert (
            len(bench["stats"]["data"]) == bench["stats"]["rounds"] >= 3
        )  # the samples themselves
        assert (
            bench["stats"]["iterations"] == 1
        )  # one call per sample, as timing.measure takes them

    assert main(["gate", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"test_canary\.ops\s+10 ops\s+10 ops\s+1\.000\s+ok", out), out
    assert main(["gate", str(first), str(injected)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"test_canary\.ops\s+10 ops\s+11 ops.*REGRESSION\s+exact: \+1 ops", out), out
