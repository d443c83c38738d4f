"""ab's interleaved pairs (harness.runs.interleave): both sides' processes alternate blocks row by
row, and each side's answers are saved as the asv result file the gate reads."""

from __future__ import annotations

import os
import pathlib
import sys
import textwrap

import pytest

from harness.runs import interleave
from harness.verdict import results

ROOT = pathlib.Path(__file__).resolve().parents[1]

SUITE = """
import json, os, time

def _log(what):
    with open(os.environ["ORDER_LOG"], "a") as f:
        f.write(os.environ["SIDE"] + " " + what + "\\n")


class Rows:
    params = ([1, 2, 3],)
    param_names = ["n"]

    def setup(self, n):
        if n == 3:
            raise NotImplementedError("n/a here")

    def track_time(self, n):
        _log(f"time-{n}")
        return {"samples": [float(n), float(n) + 0.5], "number": 1}

    track_time.unit = "seconds"


def track_count():
    return 7

track_count.unit = "ops"


def track_broken():
    raise RuntimeError("this row is broken")

track_broken.unit = "seconds"


def track_crash():
    os._exit(9)  # the row's process dies without an answer

track_crash.unit = "seconds"


def track_hang():
    time.sleep(30)

track_hang.unit = "seconds"
track_hang.timeout = 1


def track_where():
    return sorted(os.sched_getaffinity(0))[0]

track_where.unit = "ops"


class Cached:
    def setup_cache(self):
        with open(os.environ["ORDER_LOG"] + ".cache", "a") as f:
            f.write("made\\n")
        return {"k": 41}

    def track_a(self, cache):
        return cache["k"] + 1

    def track_b(self, cache):
        return cache["k"] + 2

    track_a.unit = track_b.unit = "ops"
"""


@pytest.fixture
def suite(tmp_path):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "__init__.py").write_text("")
    (bench / "rows.py").write_text(textwrap.dedent(SUITE))
    return bench


def _sides(tmp_path, bench, log, labels=("base", "head")):
    out = []
    for label in labels:
        env = dict(os.environ, SIDE=label, ORDER_LOG=str(log), PYTHONPATH=str(ROOT))
        out.append(
            interleave.SideRun(label, sys.executable, env, bench, "0" * 40, tmp_path / label)
        )
    return out


def _pair(tmp_path, suite, regex, labels=("base", "head"), mode="fork", reverse=False, **kw):
    """One pair over the rows `regex` selects; returns (result files, the order log)."""
    log = tmp_path / "order.log"
    sides = _sides(tmp_path, suite, log, labels)
    if reverse:  # as ab hands odd pairs their sides
        sides = sides[::-1]
    return interleave.run_pair(sides, regex, "m1", work=tmp_path / "w", mode=mode, **kw), log


def test_blocks_alternate_a_b_b_a_row_by_row_and_the_result_reads_as_asv_s(tmp_path, suite):
    rows = r"^rows\.(Rows|track_count|track_broken|track_crash|Cached)"
    files, log = _pair(tmp_path, suite, rows)
    order = log.read_text().split()
    # row by row: base head head base, never one side's whole run before the other's
    assert order[:8] == ["base", "time-1", "head", "time-1", "head", "time-1", "base", "time-1"]
    assert order[8:16] == ["base", "time-2", "head", "time-2", "head", "time-2", "base", "time-2"]
    # setup_cache ran once per side, not once per row
    assert pathlib.Path(str(log) + ".cache").read_text() == "made\nmade\n"
    for label in ("base", "head"):
        rs = results.load(files[label])
        e = rs.entries
        assert e["rows.Rows.track_time(1)"].samples == [1.0, 1.5, 1.0, 1.5]  # both blocks
        assert e["rows.Rows.track_time(2)"].value == 2.25
        assert e["rows.Rows.track_time(3)"].skipped  # setup raised NotImplementedError
        assert e["rows.track_count"].value == 7
        assert e["rows.track_broken"].failed
        assert e["rows.track_crash"].failed  # the process died, the pair went on
        assert e["rows.Cached.track_a"].value == 42 and e["rows.Cached.track_b"].value == 43
        assert rs.machine == "m1"


def test_odd_pairs_let_the_other_side_lead(tmp_path, suite):
    _, log = _pair(tmp_path, suite, r"^rows\.Rows", reverse=True)
    order = log.read_text().split()
    assert order[:8] == ["head", "time-1", "base", "time-1", "base", "time-1", "head", "time-1"]


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_a_row_past_its_timeout_fails_and_the_next_row_still_runs(tmp_path, suite):
    files, _ = _pair(tmp_path, suite, r"^rows\.(track_hang|track_count)", labels=("base",))
    e = results.load(files["base"]).entries
    assert e["rows.track_hang"].failed and e["rows.track_count"].value == 7


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_once_mode_starts_a_process_per_row(tmp_path, suite):
    files, _ = _pair(tmp_path, suite, r"^rows\.(Rows|track_count)", mode="once")
    assert results.load(files["head"]).entries["rows.track_count"].value == 7
    # one process per side for discovery and each of the 4 rows (3 combinations and the count)
    assert len(list((tmp_path / "w").glob("worker-head-*"))) == 4


def test_nothing_selected_is_none(tmp_path, suite):
    sides = _sides(tmp_path, suite, tmp_path / "log")
    assert interleave.run_pair(sides, r"^nothing\.", "m1", work=tmp_path / "w") is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="duet needs 2 CPUs; this has 1")
def test_duet_pins_each_side_s_row_to_its_own_cpus(tmp_path, suite):
    cpus = sorted(os.sched_getaffinity(0))
    sets = (str(cpus[0]), str(cpus[-1]))
    files, _ = _pair(tmp_path, suite, r"^rows\.track_where", duet_cpus=sets)
    where = {label: results.load(f).entries["rows.track_where"].value for label, f in files.items()}
    assert where == {"base": cpus[0], "head": cpus[-1]}
