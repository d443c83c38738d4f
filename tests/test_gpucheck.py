"""The GPU proof kit (`.ci/gpu-check`, harness gpu-check): its dry run, wheel list and step runner
on a CPU machine, and the CPU side of its checks. What needs CUDA is run on a GPU runner."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from harness.runs import gpucheck
from harness.runs.gpucheck import checks, wheels

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "gpu-check"


def test_dry_run_lists_every_check_and_exits_0_without_torch_or_asv():
    # `-I -S`: no site-packages, no PYTHONPATH, so neither torch nor asv can be imported: the
    # dry run needs the standard library and the checkout only.
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(SCRIPT), "--dry-run"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr
    for step in gpucheck.PLAN:
        assert f". {step.name} (budget {step.budget_s} s" in proc.stdout
        assert step.proves[:40] in proc.stdout
    assert "pip install --no-index --no-deps --target T" in proc.stdout
    assert "ends within 8 minutes" in proc.stdout


def test_plan_fits_the_deadline_and_names_are_unique():
    names = [s.name for s in gpucheck.PLAN]
    assert len(names) == len(set(names))
    assert gpucheck.DEADLINE_S + 10 <= 8 * 60  # installation included, kill grace left over
    # the budgets are upper bounds that fit the deadline together, not a plan that overruns it
    assert sum(s.budget_s for s in gpucheck.PLAN) + gpucheck.WHEELS_BUDGET_S <= gpucheck.DEADLINE_S
    for step in gpucheck.PLAN:
        assert step.needs is None or names.index(step.needs) < names.index(step.name)


def test_unknown_step_name_is_bad_input(capsys):
    from harness.cli import main

    assert main(["gpu-check", "--only", "no-such-step", "--out", "/nonexistent-gpu-check/x"]) == 3
    assert "no-such-step" in capsys.readouterr().err
    assert not Path("/nonexistent-gpu-check").exists()


def test_list_wheels_pins_what_is_installed_here(capsys):
    from harness.cli import main

    assert (
        main(
            [
                "gpu-check",
                "--list-wheels",
                "--python-version",
                "3.12",
                "--platform",
                "manylinux_2_28_x86_64",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    import importlib.metadata as md

    for name in ("asv", "asv-runner", "expecttest"):
        assert f"{name}=={md.version(name)}" in out
    assert "pip download --no-deps --only-binary=:all: --python-version 3.12" in out
    assert "--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64" in out
    # what the runner already holds is not brought along
    for name in ("torch==", "numpy==", "tabulate==", "pytest=="):
        assert f" {name}" not in out


def test_wheel_closure_follows_markers():
    found = {w.name for w in wheels.list_wheels("3.12")}
    assert {"asv", "asv-runner", "expecttest"} <= found
    assert "tomli" not in found  # asv needs it only below Python 3.11
    assert wheels.platforms("manylinux_2_28_x86_64")[:2] == [
        "manylinux_2_28_x86_64",
        "manylinux_2_27_x86_64",
    ]
    assert "manylinux_2_28_x86_64" not in wheels.platforms("manylinux_2_17_x86_64")


def test_child_environment_reaches_asv_benchmark_processes(tmp_path):
    env = wheels.child_environment(ROOT, tmp_path / "site", {"PYTHONPATH": "/old"})
    assert env["PYTHONPATH"].split(":") == [str(ROOT), str(tmp_path / "site"), "/old"]
    assert env["ASV_PYTHONPATH"] == env["PYTHONPATH"]  # asv drops PYTHONPATH, keeps this one


def test_install_refuses_two_versions_of_one_project(tmp_path):
    for name in ("asv-0.6.5-py3-none-any.whl", "asv-0.6.6-py3-none-any.whl"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(RuntimeError, match="several versions"):
        wheels.install(tmp_path, tmp_path / "site", print)
    with pytest.raises(RuntimeError, match="no .whl files"):
        wheels.install(tmp_path / "empty", tmp_path / "site", print)


def _args(tmp_path, **kw):
    base = dict(
        out=str(tmp_path / "out"),
        wheels=None,
        target=None,
        cpu_rehearsal=True,
        only=None,
        deadline=60.0,
        budget_scale=1.0,
    )
    base.update(kw)
    return types.SimpleNamespace(**base)


def test_orchestrator_kills_a_step_over_budget_and_runs_the_rest(tmp_path):
    py = "{py}"
    plan = [
        gpucheck.Step(
            "sleeper", 1, "is killed", "command", (py, "-c", "import time; time.sleep(60)")
        ),
        gpucheck.Step("failing", 10, "fails", "command", (py, "-c", "raise SystemExit(2)")),
        gpucheck.Step("later", 10, "still runs", "command", (py, "-c", "print('ran')")),
        gpucheck.Step(
            "dependent", 10, "needs failing", "command", (py, "-c", "pass"), needs="failing"
        ),
    ]
    code = gpucheck.orchestrate(_args(tmp_path), ROOT, plan)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    status = {s["name"]: s["status"] for s in summary["steps"]}
    assert status == {
        "sleeper": "killed",
        "failing": "fail",
        "later": "pass",
        "dependent": "not run",
    }
    assert (
        code == 1
        and summary["exit"] == 1
        and summary["failed_steps"] == ["sleeper", "failing", "dependent"]
    )
    assert "ran" in (tmp_path / "out" / "gpu-check.log").read_text()


def test_orchestrator_stops_starting_steps_at_the_deadline(tmp_path):
    plan = [gpucheck.Step("first", 10, "runs", "command", ("{py}", "-c", "pass"))]
    assert gpucheck.orchestrate(_args(tmp_path, deadline=0.0), ROOT, plan) == 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (
        summary["steps"][0]["status"] == "not run" and "deadline" in summary["steps"][0]["detail"]
    )


def test_judge_treats_cuda_checks_as_failures_on_a_gpu_and_expected_exits():
    step = gpucheck.Step("x", 5, "p", cpu_expect_exit=4)
    na = {"status": "n/a", "detail": "needs CUDA"}
    assert gpucheck.judge(step, 0, na, rehearsal=False)[0] == "fail"
    assert gpucheck.judge(step, 0, na, rehearsal=True)[0] == "recorded"
    assert gpucheck.judge(step, 4, None, rehearsal=True)[0] == "pass"
    assert gpucheck.judge(step, 4, None, rehearsal=False)[0] == "fail"
    assert gpucheck.judge(step, None, None, rehearsal=False)[0] == "killed"


def test_band_figures_judge_step_figures():
    runs = [
        gpucheck.StepRun("amp", "recorded", 1, figures={"ratios": {"alexnet/fp16_over_fp32": 0.4}}),
        gpucheck.StepRun(
            "transfer", "recorded", 1, figures={"ratios": {"pin_then_copy_over_pageable": 3.0}}
        ),
    ]
    got = {f["key"]: f["verdict"] for f in gpucheck.band_figures(runs, "cuda")}
    assert got == {
        "amp": "within the published range",
        "pin_then_copy": "outside the published range: check the set-up",
    }


# ---- the measuring checks: their CPU side, and the judgements their GPU side uses ----


def test_relative_difference_and_compile_judgement():
    assert checks.relative_difference([1.0, 1.1, 1.2], [1.0, 1.0, 1.0]) == pytest.approx(0.1)
    assert checks.compile_kept_out(2.0, [1e-4, 2e-4], 0)
    assert not checks.compile_kept_out(2.0, [1e-4, 0.5], 0)  # a sample holding a compile
    assert not checks.compile_kept_out(2.0, [1e-4], 1)


def test_judge_kernels_wants_exact_counts():
    assert checks.judge_kernels({"pointwise_chain": {"eager": 2, "compiled": 1}})[0]
    assert not checks.judge_kernels({"pointwise_chain": {"eager": 2, "compiled": 2}})[0]
    assert not checks.judge_kernels({})[0]


def test_timing_check_on_cpu_records_without_a_pass_mark():
    out = checks.check_timing(torch.device("cpu"), n=64)
    assert out["status"] == "recorded" and "CUDA events not exercised" in out["figures"]["timer"]
    assert out["figures"]["samples"] >= 3 and out["figures"]["wall_median_s"] > 0


def test_paired_pass_mark_wants_one_and_two_a_sample_per_quiet_block_and_no_overrun():
    # 16 blocks in a 4 s window, of which measure_paired keeps the quieter half
    assert checks.expected_samples(4.0, 0.25) == 8
    ok, detail = checks.judge_paired([1.0, 1.01] * 4, [2.0, 1.98] * 4, 4.4, 4.0, 0.25)
    assert ok, detail
    for same, double, seconds, says in (
        ([1.1] * 16, [2.0] * 16, 4.2, "over itself read 1.100"),
        ([1.0] * 16, [1.6] * 16, 4.2, "two kernels over one read 1.600"),
        ([1.0] * 5, [2.0] * 5, 4.2, "5 samples from a 4 s window"),
        ([1.0] * 16, [2.0] * 16, 9.0, "took 9.0 s"),
    ):
        ok, detail = checks.judge_paired(same, double, seconds, 4.0, 0.25)
        assert not ok and says in detail


def test_paired_check_on_cpu_runs_the_window_and_records_without_a_pass_mark(monkeypatch):
    monkeypatch.setenv("HARNESS_PAIRED_WINDOW_S", "0.5")
    out = checks.check_paired(torch.device("cpu"), n=32)
    assert out["status"] == "recorded" and out["figures"]["window_s"] == 0.5
    assert out["figures"]["samples"] >= 1 and out["figures"]["double_over_single_median"] > 1.0


def test_warmup_check_keeps_compilation_out_of_samples():
    # dynamo without inductor: fast. Only the counts are asserted (no timed assertion: the pass
    # mark also compares the slowest sample with the compiling call, seconds apart on a GPU).
    out = checks.check_warmup(torch.device("cpu"), backend="eager")
    assert out["status"] in ("pass", "fail") and out["figures"]["samples"] >= 3
    assert out["figures"]["graphs_compiled_in_warmup"] == 1
    assert out["figures"]["graphs_compiled_during_samples"] == 0


def test_cuda_only_checks_say_why_on_cpu():
    from harness.measure.workloads import NotApplicable

    for name in ("kernels", "transfer"):
        with pytest.raises(NotApplicable, match="needs CUDA"):
            checks.CHECKS[name](torch.device("cpu"))


def test_kit_modules_import_without_torch():
    code = (
        "import sys; import harness.runs.gpucheck.checks, harness.golden.devicecheck, "
        "harness.commands.gpucheck, harness.runs.gpucheck.steps, harness.runs.gpucheck.wheels; "
        "print('torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.stdout.strip() == "False", proc.stderr


def test_out_folder_of_someone_else_is_refused_and_its_own_is_refilled(tmp_path):
    """--out may be new, empty, or an earlier gpu-check output; a foreign folder's files are
    kept."""
    plan = [gpucheck.Step("first", 10, "runs", "command", ("{py}", "-c", "pass"))]
    foreign = tmp_path / "out"
    foreign.mkdir()
    (foreign / "summary.json").write_text("mine")
    with pytest.raises(Exception, match="not made by the harness"):
        gpucheck.orchestrate(_args(tmp_path), ROOT, plan)
    assert (foreign / "summary.json").read_text() == "mine"
    own = _args(tmp_path, out=str(tmp_path / "own"))
    assert gpucheck.orchestrate(own, ROOT, plan) == 0
    assert gpucheck.orchestrate(own, ROOT, plan) == 0  # its own folder: refilled in place
