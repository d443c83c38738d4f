"""Two `harness bench` runs started at the same moment into one results folder: both are kept."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.cli import main
from harness.core import records

pytestmark = pytest.mark.slow  # end to end: real asv runs

TIMING = r"^canary\.Canary\.track_(?!instructions)"  # the valgrind row is not what this is about


@pytest.mark.xdist_group("concurrent-runs")
def test_two_benches_started_together_both_end_as_run_records(tmp_path, capsys):
    root = tmp_path / "results"
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "bench",
        "--quick",
        "--suite",
        "canary",
        "--bench",
        TIMING,
        "--results-dir",
        str(root),
        "--machine",
        "together-cpu",
    ]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outs)
    runs = records.list_runs(root, "together-cpu")
    assert len(runs) == 2 and runs[0].run_id != runs[1].run_id
    assert records.unfinished(root) == []
    code = main(["gate", str(runs[0].path), str(runs[1].path), "--results-dir", str(root)])
    out = capsys.readouterr().out
    assert code == 0, out
    print(next(x for x in out.splitlines() if x.startswith("canary.Canary.track_time_over")))  # -rP
