"""`harness ab`: both sides in one job, alternating processes; worktrees never left behind."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from harness.cli import main
from harness.core import records
from harness.measure import instructions
from harness.runs import ab

ROOT = pathlib.Path(__file__).resolve().parents[1]


def worktrees() -> list[str]:
    out = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def test_worktrees_are_removed_even_on_ctrl_c():
    # only this test's own worktrees: other ab tests may add theirs to the repository meanwhile
    with pytest.raises(KeyboardInterrupt):
        with ab.sides(ROOT, {"base": "HEAD", "head": "HEAD"}, {}) as side:
            trees = [side[label].project for label in ("base", "head")]
            assert all(
                str(t) in worktrees() and (t / "harness" / "cli.py").is_file() for t in trees
            )
            assert side["base"].env["ASV_PYTHONPATH"] == str(trees[0])
            raise KeyboardInterrupt
    left = worktrees()
    assert not any(str(t) in left or t.exists() for t in trees)


def test_a_side_that_is_neither_revision_nor_interpreter_is_bad_input(capsys, tmp_path):
    code = main(["ab", "no-such-rev", "HEAD", "--suite", "canary", "--results-dir", str(tmp_path)])
    assert code == 3 and "neither a git revision" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.xdist_group("ab-canary")
def test_ab_catches_the_injected_op_and_keeps_both_sides(tmp_path, capsys):
    """HEAD vs HEAD with the canary's extra op on the head side only: exit 1 on the exact op
    counter; both sides saved as run records labelled base/head, each holding every suite's
    rows (a second suite, transfer, n/a on CPU but recorded) and only those --bench selects."""
    root = tmp_path / "results"
    code = main(
        [
            "ab",
            "HEAD",
            "HEAD",
            "--suite",
            "amp",
            "--suite",
            "canary",
            "--suite",
            "transfer",
            "--pairs",
            "2",
            "--bench",
            r"canary\.",
            "--bench",
            "Uint8ThenConvert",
            "--results-dir",
            str(root),
            "--machine",
            "ab-cpu",
            "--head-env",
            "HARNESS_CANARY_EXTRA=1",
        ]
    )
    captured = capsys.readouterr()
    out = captured.out
    assert code == 1, out
    assert "no benchmark of amp matches --bench; left out" in captured.err
    ops = next(line for line in out.splitlines() if line.startswith("canary.Canary.track_ops"))
    assert "REGRESSION" in ops and "+1 ops" in ops
    # the raw time is judged across processes, never "not judged"; two pairs cannot decide it
    raw = next(line for line in out.splitlines() if line.startswith("canary.Canary.track_time "))
    assert "UNKNOWN" in raw and "across processes" in raw and "at least 3 decide" in raw, raw
    if instructions.unavailable() is None:  # counted once per side, named by the function that grew
        counted = next(
            line for line in out.splitlines() if line.startswith("canary.Canary.track_instructions")
        )
        assert (
            "REGRESSION" in counted and "instructions: +" in counted and "erf" in counted.lower()
        ), counted
        assert "canary instruction rows, one process per side" in captured.err
    base, head = sorted(records.list_runs(root, "ab-cpu"), key=lambda r: r.label)
    assert (base.label, head.label) == ("base", "head")
    kept = records.read_ab_pairs(head.path)  # per row, both processes' values of every pair
    assert kept["base_run"] == base.run_id and len(kept["pairs"]["canary.Canary.track_time"]) == 2
    for rec in (base, head):
        # pairs x suites that matched, and the canary's instruction row once
        assert rec.meta["ab"]["processes"] == 2 * 2 + (instructions.unavailable() is None)
        if instructions.unavailable() is None:
            assert "canary.Canary.track_instructions" in rec.instructions()
        fp = json.loads(rec.fingerprint_path.read_text())
        assert fp["python_hash_seed"] == (os.environ.get("PYTHONHASHSEED") or "0")
        data = json.loads(rec.result_file().read_text())
        names = set(data["results"])
        assert "canary.Canary.track_ops" in names, "the first suite's rows survive the merge"
        assert "transfer.Uint8ThenConvertOverFloat32.track_uint8_over_float32" in names
        assert not any(n.startswith("transfer.HostToDeviceCopy") for n in names), (
            "--bench restricts"
        )
        col = data["result_columns"].index("samples")
        assert len(data["results"]["canary.Canary.track_time"][col][0]) >= 2 * 3, (
            "samples of both processes"
        )


@pytest.mark.slow
@pytest.mark.xdist_group("ab-canary")
def test_a_bench_regex_matching_no_suite_is_bad_input(capsys, tmp_path):
    code = main(
        [
            "ab",
            "HEAD",
            "HEAD",
            "--suite",
            "canary",
            "--bench",
            "NoSuchBenchmark",
            "--pairs",
            "1",
            "--results-dir",
            str(tmp_path),
        ]
    )
    assert code == 3
    assert (
        "no benchmark of suite(s) canary matches --bench NoSuchBenchmark" in capsys.readouterr().err
    )
    assert not (tmp_path / "runs").exists()


def test_a_side_s_processes_share_the_paired_window(monkeypatch):
    from harness.measure import timing

    assert ab.process_window(quick=True, pairs=2) == timing.FAST["paired_window_s"] / 2
    assert ab.process_window(quick=True, pairs=5) == ab.MIN_WINDOW_S  # never below 8 blocks
    assert ab.process_window(quick=False, pairs=4) == timing.FULL["paired_window_s"] / 4
    monkeypatch.setenv("HARNESS_PAIRED_WINDOW_S", "2.5")
    assert timing.loop_settings()["paired_window_s"] == 2.5
    monkeypatch.setenv("HARNESS_PAIRED_WINDOW_S", "soon")
    from harness.core.exits import BadInput

    with pytest.raises(BadInput, match="HARNESS_PAIRED_WINDOW_S must be a number, got 'soon'"):
        timing.loop_settings()


def test_a_suite_of_instruction_rows_only_is_counted_once_and_runs_no_pairs(monkeypatch, tmp_path):
    # `harness ab ... --suite instructions`: after one counting process per side the pairs
    # select no rows (the pair's processes find none); that ends the suite, it is not a failure
    from harness.runs import asv
    from harness.runs.spec import RunSpec

    calls, said = [], []

    def fake_run(run):
        calls.append(run.benches[0])
        if "(?=" + ab.INSTRUCTION_ROWS + ")" in run.benches[0]:
            return asv.AsvResult(0, "", "", 1.0, [tmp_path / f"{len(calls)}.json"])
        return asv.AsvResult(1, "· No benchmarks selected\n", "", 1.0, [])

    monkeypatch.setattr(asv, "run", fake_run)
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    (bench_dir / "instructions.py").write_text("def track_instructions(): pass\n")
    side = {
        label: ab.Side(label, "HEAD", tmp_path, sys.executable, "c0ffee", {})
        for label in ("base", "head")
    }
    job = ab._Job(
        side,
        RunSpec(machine="m", suites=("instructions",)),
        tmp_path,
        {},
        "spawn",
        ab.Pairs(),
        None,
        bench_dir,
        said.append,
    )
    done, left_out = ab._measure(job)
    assert list(done) == ["instructions"] and left_out == []
    # each side's end is said, so the next side's first heartbeat is never 25 s after silence
    ends = [m for m in said if "side (" in m and "counted in" in m]
    assert [m.split(" side (")[0].rsplit(" ", 1)[1] for m in ends] == ["base", "head"]
    assert set(done["instructions"].instructions) == {"base", "head"}
    assert done["instructions"].pairs == []
    assert len(calls) == 2  # two counting processes; the pair's found nothing to time
