"""What rebuilding the asv view costs (docs/trust.md, "The dashboard"): RECORDS run records of
one machine, each its own commit, each holding one asv result file of 300 benchmarks with 10
samples (83 KB) and a benchmarks.json of 45 KB, made once under ROOT; then the view is rebuilt
from nothing and once more (as every command that writes results does), each timed.

    .venv/bin/python tests/measure_view_rebuild.py /tmp/view-100 --records 100
    git archive main harness | tar -x -C /tmp/before   # the same with the code before
    PYTHONPATH=/tmp/before .venv/bin/python tests/measure_view_rebuild.py /tmp/view-100
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import resource
import shutil
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from test_gate_support import write_set  # noqa: E402

from harness.core import records  # noqa: E402


def make(root: pathlib.Path, n: int) -> None:
    benches = {
        f"suite{i % 7}.Class{i % 13}.track_x{i}": [0.001 * (1 + j / 100) for j in range(10)]
        for i in range(300)
    }
    start = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
    for k in range(n):
        commit = f"{k + 1:08x}" + "0" * 32
        run_id = records.new_run_id(commit, "nightly", start + datetime.timedelta(hours=k))
        with records.writing(root, "m-cpu", run_id, {"commit": commit, "machine": "m-cpu"}) as d:
            write_set(d / "asv", commit, benches, machine="m-cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--records", type=int, default=100)
    args = parser.parse_args()
    if not (args.root / "runs").is_dir():
        make(args.root, args.records)
    shutil.rmtree(args.root / "asv", ignore_errors=True)
    times = []
    for _ in range(2):
        t = time.perf_counter()
        records.rebuild_view(args.root)
        times.append(time.perf_counter() - t)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{records.__file__}: {len(records.list_runs(args.root))} records, view from nothing "
        f"{times[0]:.2f} s, again {times[1]:.2f} s, peak RSS {rss:.0f} MB"
    )


if __name__ == "__main__":
    main()
