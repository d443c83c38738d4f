"""The gate on pytest-benchmark saves (harness.verdict.pytest_benchmark): same rows, rules, table
and exit codes as for asv results; one of each is exit 3."""

from __future__ import annotations

import json

from test_gate import pair, run_cli, verdicts
from test_gate_support import draw

from harness.verdict.results import fingerprint_of, load

FP = {
    "torch": "2.14.1",
    "cpu": "Some CPU",
    "gpu": None,
    "cuda_available": False,
    "torch_threads": 1,
}


def save(path, samples, ops, *, commit="c0ffee00aa", fingerprint=FP, machine="m1-cpu", data=True):
    """A file as pytest-benchmark writes it with --benchmark-autosave and our machine_info hook."""
    stats = {"median": sorted(samples)[len(samples) // 2], "rounds": len(samples), "iterations": 1}
    if data:
        stats["data"] = samples
    doc = {
        "machine_info": {
            "node": "host",
            "harness": {"machine": machine, "fingerprint": fingerprint},
        },
        "commit_info": {"id": commit, "dirty": False},
        "benchmarks": [
            {
                "name": "test_x",
                "fullname": "suites/t.py::test_x",
                "params": None,
                "extra_info": {"ops": ops, "label": "not a counter"},
                "stats": stats,
            }
        ],
        "datetime": "2026-11-30T19:40:37.1+00:00",
        "version": "5.3.1",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_loader_builds_time_and_counter_rows_with_the_saved_fingerprint(tmp_path):
    rs = load(save(tmp_path / "0001_a.json", draw(20, seed=1), 10))
    assert sorted(rs.entries) == ["suites/t.py::test_x", "suites/t.py::test_x.ops"]
    t, ops = rs.entries["suites/t.py::test_x"], rs.entries["suites/t.py::test_x.ops"]
    assert t.unit == "seconds" and len(t.samples) == 20 and ops.unit == "ops" and ops.value == 10
    assert rs.machine == "m1-cpu" and rs.commit == "c0ffee00aa" and rs.runner == "pytest-benchmark"
    assert fingerprint_of(rs) == FP


def test_same_counters_pass_and_an_extra_op_is_a_regression(tmp_path, capsys):
    a = save(tmp_path / "0001_a.json", draw(30, seed=1), 10)
    b = save(tmp_path / "0002_b.json", draw(30, seed=2), 10)
    c = save(tmp_path / "0003_c.json", draw(30, seed=3), 11)
    code, out, _ = run_cli(capsys, a, b)
    assert code == 0, out
    assert verdicts(out) == {"suites/t.py::test_x": "not judged", "suites/t.py::test_x.ops": "ok"}
    assert "raw time: no calibrated noise band" in out
    code, out, _ = run_cli(capsys, a, c)
    assert code == 1 and verdicts(out)["suites/t.py::test_x.ops"] == "REGRESSION", out


def test_raw_time_is_judged_below_a_calibrated_band(tmp_path, capsys):
    a = save(tmp_path / "0001_a.json", draw(30, seed=1), 10)
    b = save(tmp_path / "0002_b.json", draw(30, seed=2, scale=1.3), 10)
    noise = tmp_path / "noise.json"
    noise.write_text(
        json.dumps({"machine": "m1-cpu", "benchmarks": {"suites/t.py::test_x": {"band": 0.02}}})
    )
    code, out, _ = run_cli(capsys, a, b, "--noise", noise)
    assert code == 1 and verdicts(out)["suites/t.py::test_x"] == "REGRESSION", out


def test_a_save_without_samples_is_shown_not_judged(tmp_path, capsys):
    a = save(tmp_path / "0001_a.json", draw(30, seed=1), 10, data=False)
    b = save(tmp_path / "0002_b.json", draw(30, seed=2), 10)
    noise = tmp_path / "noise.json"
    noise.write_text(
        json.dumps({"machine": "m1-cpu", "benchmarks": {"suites/t.py::test_x": {"band": 0.02}}})
    )
    code, out, _ = run_cli(capsys, a, b, "--noise", noise)
    assert code == 0 and "no samples on base" in out, out


def test_other_cpu_or_threads_is_not_comparable(tmp_path, capsys):
    a = save(tmp_path / "0001_a.json", draw(30, seed=1), 10)
    b = save(tmp_path / "0002_b.json", draw(30, seed=2), 10, fingerprint=dict(FP, torch_threads=2))
    code, out, err = run_cli(capsys, a, b)
    assert code == 3 and "CPU threads 1 vs 2" in err
    b = save(tmp_path / "0002_b.json", draw(30, seed=2), 10, fingerprint=dict(FP, torch="2.15.0"))
    code, out, _ = run_cli(capsys, a, b)
    assert code == 0 and "environment differences" in out and "2.15.0" in out


def test_asv_result_against_pytest_benchmark_save_is_exit_3(tmp_path, capsys):
    asv_base, _ = pair(
        tmp_path / "asv",
        {"t.ratio": draw(30, seed=1)},
        {"t.ratio": draw(30, seed=2)},
        units={"t.ratio": "ratio"},
    )
    pb = save(tmp_path / "0001_a.json", draw(30, seed=1), 10)
    code, _, err = run_cli(capsys, asv_base, pb)
    assert (
        code == 3
        and "cannot compare results of different runners: base is asv" in err
        and "head is pytest-benchmark" in err
    )


def test_damaged_save_is_exit_3_naming_the_file(tmp_path, capsys):
    a = save(tmp_path / "0001_a.json", draw(30, seed=1), 10)
    bad = tmp_path / "0002_b.json"
    doc = json.loads(a.read_text())
    doc["benchmarks"][0]["stats"]["data"] = []
    bad.write_text(json.dumps(doc))
    code, _, err = run_cli(capsys, a, bad)
    assert code == 3 and "0002_b.json" in err and "empty or malformed sample list" in err


def test_a_folder_of_saves_names_its_newest(tmp_path, capsys):
    a = save(tmp_path / "m" / "0001_a.json", draw(30, seed=1), 10)
    save(tmp_path / "m" / "0002_b.json", draw(30, seed=2), 12)
    code, out, _ = run_cli(capsys, a, tmp_path / "m")
    assert code == 1 and "0002_b.json" in out
