"""`harness bench` end to end: one cheap suite through asv into a temporary results directory."""

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.runs import bench
from harness.verdict import summary
from harness.verdict.results import Entry, ResultSet

ROOT = Path(__file__).resolve().parents[1]


def test_unknown_suite_is_a_clear_error(capsys, tmp_path):
    rc = main(["bench", "--suite", "fusion", "--suite", "nonsense", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 3
    assert (
        "'nonsense'" in err
        and "amp, canary, dataloader, distributed, fusion, instructions, models, training_loop, "
        "transfer"
        in err
    )
    assert not any(tmp_path.iterdir()), "nothing may be written for bad input"


def _entry(benchmark, params, value, unit="ratio"):
    name = f"{benchmark}({', '.join(params)})" if params else benchmark
    return Entry(name, unit, value, None)


def test_failures_and_ratios_are_read_from_saved_results(tmp_path):
    amp = "amp.AutocastOverFp32.track_autocast_over_fp32"
    workers = "dataloader.LoadSyntheticImages.track_samples_per_second"
    entries = [
        _entry("fusion.PointwiseChain.track_compiled_over_eager", (), 0.5),
        _entry(amp, ("'alexnet'", "'bf16'"), 2.0),
        _entry(amp, ("'alexnet'", "'fp16'"), float("nan")),
        _entry(amp, ("'word_lm'", "'bf16'"), None),
        _entry(workers, ("0", "False", "16", "False"), 100.0, "samples/s"),
        _entry(workers, ("2", "False", "16", "True"), 150.0, "samples/s"),
    ]
    rs = ResultSet(tmp_path, "m", "0" * 40, "env", None, {e.name: e for e in entries})
    assert summary.failures(rs) == [f"{amp}('word_lm', 'bf16')"]
    table = summary.summary_table(rs)
    assert "compiled/eager, pointwise chain" in table and "0.5" in table
    assert "AMP/fp32 training step" in table and "(1 of 3 cases)" in table
    assert summary.workers_scaling(rs) == [
        ("workers 2/0 samples/s (pin=False, batch=16, persistent=True)", 1.5)
    ]


def _bench(tmp_path, root, *extra):
    env = {
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "bench",
            "--quick",
            "--suite",
            "transfer",
            "--results-dir",
            str(root),
            "--machine",
            "testmachine-cpu",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, **env},
    )


@pytest.mark.slow
def test_quick_runs_are_kept_as_immutable_run_records(tmp_path):
    """Two runs of one commit: two run records, the first untouched; the asv view holds the
    newest."""
    # transfer is the cheapest suite on CPU (every case n/a); on CUDA it times real copies
    root = tmp_path / "results"
    proc = _bench(tmp_path, root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    runs = sorted((root / "runs" / "testmachine-cpu").iterdir())
    assert len(runs) == 1 and re.fullmatch(
        rf"\d{{8}}T\d{{6}}Z-{sha[:8]}-[0-9a-f]{{6}}", runs[0].name
    ), runs
    first = runs[0]
    # one line per benchmark on stdout; asv's own output (its tables) kept in the record
    assert "[1/" in proc.stdout and "···" not in proc.stdout, proc.stdout[-2000:]
    assert "Discovering benchmarks" in (first / "asv.log").read_text()
    files = list((first / "asv" / "testmachine-cpu").glob(f"{sha[:8]}-existing-*.json"))
    assert len(files) == 1, list(first.rglob("*"))
    first_bytes = files[0].read_bytes()
    data = json.loads(first_bytes)
    assert data["commit_hash"] == sha
    assert data["env_name"].endswith("harness_asv-python")  # the stable launcher, not the venv path
    names = set(data["results"])
    assert {
        "transfer.HostToDeviceCopy.track_copy_time",
        "transfer.PinnedOverPageable.track_pinned_over_pageable",
        "transfer.Uint8ThenConvertOverFloat32.track_uint8_over_float32",
    } <= names
    assert not any(n.startswith("fusion.") for n in names), "only the asked-for suite runs"
    cols = data["result_columns"]
    import torch

    for name, row in data["results"].items():
        values = dict(zip(cols, row))["result"]
        assert None not in values, f"{name} failed"
        if not torch.cuda.is_available():
            assert all(math.isnan(v) for v in values), f"{name} should be n/a on CPU"
    fp = json.loads((first / "fingerprint.json").read_text())
    assert fp["commit"] == sha and fp["machine_name"] == "testmachine-cpu" and fp["torch"]
    assert fp["suites"] == ["transfer"] and fp["quick"] is True and fp["mode"] == "fast"
    meta = json.loads((first / "run.json").read_text())
    assert meta["run_id"] == first.name and meta["commit"] == sha and meta["complete"] is True
    assert fp["torch_threads"] == 1, (
        "quick runs use one CPU thread (harness.measure.threads), whatever the machine has"
    )
    assert fp["python_hash_seed"] == (os.environ.get("PYTHONHASHSEED") or "0"), (
        "the suites' hash seed is fixed and recorded"
    )
    assert "pinned/pageable copy" in proc.stdout
    assert "needs CUDA" in proc.stdout + proc.stderr or torch.cuda.is_available()

    again = _bench(tmp_path, root, "--label", "again")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    runs = sorted((root / "runs" / "testmachine-cpu").iterdir())
    assert (
        len(runs) == 2
        and runs[0] == first
        and re.fullmatch(rf"\d{{8}}T\d{{6}}Z-{sha[:8]}-[0-9a-f]{{6}}-again", runs[1].name)
    ), runs
    assert files[0].read_bytes() == first_bytes, "a rerun never rewrites an earlier run"
    view = list((root / "asv" / "testmachine-cpu").glob(f"{sha[:8]}-existing-*.json"))
    second = list((runs[1] / "asv" / "testmachine-cpu").glob("*-existing-*.json"))
    made_from = json.loads(view[0].read_text())["harness_source_sha256"]
    assert len(view) == 1 and made_from == hashlib.sha256(second[0].read_bytes()).hexdigest(), (
        "the view shows the newest (rebuilt from its checked fields: harness.core.dashboard)"
    )
    assert not list(tmp_path.rglob("*.tmp")), "atomic writes leave no temp files"
    assert not list((root / "runs" / "testmachine-cpu").glob(".staging-*")), (
        "no half-written run left"
    )
    assert not [
        p
        for p in (root / "asv" / "testmachine-cpu").glob("*.json")
        if p.name != "machine.json" and not p.name.startswith(sha[:8] + "-existing")
    ], "nothing but asv's own files in the view (asv publish loads every .json there)"


def test_a_new_module_in_suites_benchmarks_is_a_suite(tmp_path):
    """Suites are discovered from the folder; the canary runs only when named."""
    folder = tmp_path / "suites" / "benchmarks"
    folder.mkdir(parents=True)
    for name in ("__init__", "fusion", "canary", "my_kernels"):
        (folder / f"{name}.py").write_text("")
    assert bench.available_suites(tmp_path) == ["canary", "fusion", "my_kernels"]
    assert bench.check_suites(tmp_path, None) == ["fusion", "my_kernels"]
    assert bench.check_suites(tmp_path, ["my_kernels", "canary"]) == ["my_kernels", "canary"]
