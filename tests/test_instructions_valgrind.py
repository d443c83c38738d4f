"""The real instruction counter under valgrind (slow: each valgrind process imports torch, ~45 s
or more). Skipped, with the reason, where valgrind is missing."""

from __future__ import annotations

import concurrent.futures
import pathlib

import pytest

from harness.measure import instructions

SOURCE = str(pathlib.Path(__file__).with_name("instruction_workloads.py"))
WHY = instructions.unavailable()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(WHY is not None, reason=f"no instruction counts here: {WHY}"),
    pytest.mark.xdist_group("valgrind"),
]


def test_a_count_moves_with_one_added_op_and_repeats_in_another_process(tmp_path, monkeypatch):
    monkeypatch.setenv(instructions.RECORD_ENV, str(tmp_path))
    # calibrate's injection on one workload: a fifth more of its own instructions per call (the
    # tiny workload's wrapper call alone is a twentieth of it: smaller fractions round coarsely)
    monkeypatch.setenv(instructions.EXTRA_ENV, "0.2")
    monkeypatch.setenv(instructions.EXTRA_WORKLOADS_ENV, "two_ops_injected")
    first = [
        instructions.Target("t.T.track_instructions('one_op')", SOURCE, "one_op"),
        instructions.Target("t.T.track_instructions('two_ops')", SOURCE, "two_ops"),
        instructions.Target(
            "t.T.track_instructions('two_ops_in_place')", SOURCE, "two_ops_in_place"
        ),
        instructions.Target(
            "t.T.track_instructions('two_ops_injected')", SOURCE, "two_ops_injected"
        ),
    ]
    again = [instructions.Target("t.T.track_instructions('one_op')", SOURCE, "one_op")]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two valgrind processes at once
        a, b = pool.map(instructions.count, [first, again])
    assert not a.failed and not b.failed, (a.failed, b.failed)
    one, two = (
        a.rows["t.T.track_instructions('one_op')"],
        a.rows["t.T.track_instructions('two_ops')"],
    )
    assert two > one * 1.2, (one, two)  # the mul of 1024 floats and its dispatch
    # the injection adds what it was asked for, measured in the row itself (not half of it);
    # on in-place ops, whose count does not move with glibc's heap
    clean = a.rows["t.T.track_instructions('two_ops_in_place')"]
    injected = a.rows["t.T.track_instructions('two_ops_injected')"]
    assert injected / clean == pytest.approx(1.2, abs=0.01), (clean, injected)
    # another process, another list of workloads, another scratch folder: the same count, to
    # the instruction (a child's start does not depend on the other rows of its process)
    assert b.rows["t.T.track_instructions('one_op')"] == one
    record = a.record
    assert record["fingerprint"]["threads"] == 1 and record["fingerprint"]["valgrind"].startswith(
        "valgrind"
    )
    summary = record["rows"]["t.T.track_instructions('two_ops')"]
    assert len(summary["layouts"]) == 2 and summary["groups"]["libtorch"] > 0
    names = [f["function"] for f in summary["functions"]]
    assert any("mul" in n for n in names) and any("add" in n for n in names), names[:10]
    kept = tmp_path / "instructions" / "t.T.json"  # the run record's copy
    assert kept.is_file()
