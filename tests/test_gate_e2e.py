"""End to end: real asv runs of the canary; the injected extra op is caught, clean vs clean passes.

Three asv runs of suites/benchmarks/canary.py (~10-25 s each on two shared cores): A clean,
B with HARNESS_CANARY_EXTRA=1 (one more op, ~20% more time), C clean. The 10-trial version
of this is `harness calibrate --trials 10` (see the README).
"""

from __future__ import annotations

import pathlib

import pytest

from harness.cli import main
from harness.core.project import head_commit
from harness.runs import calibrate
from harness.runs.spec import RunSpec

ROOT = pathlib.Path(__file__).resolve().parents[1]
# one xdist worker runs both tests, so the three asv runs happen once (tox: --dist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("canary-e2e")]
MACHINE = "e2e-cpu"
PAIRED = "canary.Canary.track_time_over_reference"


@pytest.fixture(scope="session")  # once per worker, also when xdist interleaves modules
def runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("e2e")
    bench_dir = calibrate._benchmark_dir(ROOT, ["canary"], work)
    commit = head_commit(ROOT)
    timing = [
        r"^canary\.Canary\.track_(?!instructions)"
    ]  # the instruction row: test_ab, test_instructions_valgrind
    spec = RunSpec(machine=MACHINE, benches=tuple(timing))
    a = calibrate.asv_run(ROOT, bench_dir, work / "A", spec, commit)
    b = calibrate.asv_run(
        ROOT, bench_dir, work / "B", spec.with_env(HARNESS_CANARY_EXTRA="1"), commit
    )
    c = calibrate.asv_run(ROOT, bench_dir, work / "C", spec, commit)
    return work, a, b, c


def gate(capsys, *args):
    code = main(["gate", *map(str, args)])
    return code, capsys.readouterr().out


def test_injected_extra_op_is_flagged(runs, capsys, tmp_path):
    work, a, b, _ = runs
    md = tmp_path / "gate.md"
    code, out = gate(capsys, a, b, "--results-dir", work, "--markdown", md)  # no noise file
    assert code == 1, out
    ops = next(line for line in out.splitlines() if line.startswith("canary.Canary.track_ops"))
    assert "REGRESSION" in ops and "exact: +1 ops" in ops
    # the ~20% slower chain is caught on the paired timing row too, not only by the counter
    paired = next(line for line in out.splitlines() if line.startswith(PAIRED))
    assert "REGRESSION" in paired and "paired ratio" in paired, paired
    print(paired)  # the margin (pytest -rP shows it)
    raw = next(line for line in out.splitlines() if line.startswith("canary.Canary.track_time "))
    assert "not judged" in raw  # a raw time on a shared runner, no calibrated band
    assert "**REGRESSION**" in md.read_text()


def test_clean_vs_clean_passes(runs, capsys):
    work, a, _, c = runs
    code, out = gate(capsys, a, c, "--results-dir", work)  # no noise file switches a row off
    assert code == 0, out
    print(next(x for x in out.splitlines() if x.startswith(PAIRED)))  # the margin (pytest -rP)
    assert "REGRESSION" not in out
