"""The GPU proof kit (`.ci/gpu-check`, harness gpu-check): its dry run, wheel list and step runner
on a CPU machine, and the CPU side of its checks. What needs CUDA is run on a GPU runner."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from harness.core import processes, settings
from harness.runs import gpucheck
from harness.runs.gpucheck import checks, steps, wheels

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


def test_plan_names_are_unique_and_needs_come_first():
    names = [s.name for s in gpucheck.PLAN]
    assert len(names) == len(set(names))
    for step in gpucheck.PLAN:
        assert step.needs is None or names.index(step.needs) < names.index(step.name)


def test_budgets_fit_the_total_the_kit_states():
    """Every step may use its whole budget and the run still ends within the total the kit states
    (its dry run; docs/gpu.md): the budgets with the wheels' leave a margin to the deadline, and
    the deadline with the kit's start and the ending of a step caught at it fits the total."""
    minutes = int(re.search(r"ends within (\d+) minutes", gpucheck.dry_run_text()).group(1))
    total = minutes * 60
    assert total == gpucheck.TOTAL_S == 480  # inside one 10-minute call on a borrowed GPU
    ending = processes.GRACE_S + 3 * processes.TERM_GRACE_S  # end_session, at worst
    assert gpucheck.KILL_GRACE_S >= ending
    budgets = sum(s.budget_s for s in gpucheck.PLAN) + gpucheck.WHEELS_BUDGET_S
    assert budgets + ending <= total
    assert budgets + gpucheck.MARGIN_S <= gpucheck.DEADLINE_S
    assert gpucheck.START_S + gpucheck.DEADLINE_S + gpucheck.KILL_GRACE_S <= total
    assert all(s.budget_s > 0 for s in gpucheck.PLAN)


def test_rehearsal_budgets_fit_its_deadline():
    assert all(s.cpu_budget_s for s in gpucheck.PLAN)  # measured on a CPU, never a guess
    budgets = sum(s.budget(True) for s in gpucheck.PLAN) + gpucheck.WHEELS_BUDGET_S
    assert budgets + gpucheck.MARGIN_S <= gpucheck.REHEARSAL_DEADLINE_S
    default = types.SimpleNamespace(deadline=gpucheck.DEADLINE_S, budget_scale=1.0)
    assert gpucheck.deadline_for(default) == gpucheck.DEADLINE_S
    default.cpu_rehearsal = True
    assert gpucheck.deadline_for(default) == gpucheck.REHEARSAL_DEADLINE_S
    default.budget_scale = 2.0
    assert gpucheck.deadline_for(default) == 2 * gpucheck.REHEARSAL_DEADLINE_S
    default.deadline = 99.0  # given: as given
    assert gpucheck.deadline_for(default) == 99.0
    text = gpucheck.dry_run_text(rehearsal=True)
    for step in gpucheck.PLAN:
        assert f". {step.name} (budget {step.cpu_budget_s} s" in text
    assert f"inside the deadline of {gpucheck.REHEARSAL_DEADLINE_S} s" in text


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

    for name in ("asv", "asv-runner", "expecttest", "nvidia-ml-py"):
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
    # the page for a person is written when steps failed too, and shows them as failed
    page = (tmp_path / "out" / "summary.md").read_text()
    assert page.startswith("# GPU proof kit, ") and "exit 1" in page
    for name, shown in (
        ("sleeper", "**KILLED**"),
        ("failing", "**FAIL**"),
        ("later", "pass"),
        ("dependent", "**NOT RUN**"),
    ):
        assert re.search(rf"^\| {name} +\| {re.escape(shown)} +\|", page, re.M), name


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
    assert gpucheck.judge(step, 0, na, rehearsal=True) == ("n/a", "n/a on CPU: needs CUDA")
    assert "n/a" in gpucheck.OK_STATUSES
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
        "harness.commands.gpucheck, harness.runs.gpucheck.steps, harness.runs.gpucheck.wheels, "
        "harness.runs.gpucheck.page; "
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


# ---- asv through the runs layer, and what the kit started ends with it ----


def test_asv_selections_leave_cuda_only_rows_out_on_a_cpu():
    modules, benches = steps.selection("A", "cuda")
    assert modules == ["fusion", "transfer", "amp", "canary"]
    assert any("track_kernels_per_call" in b for b in benches)
    assert not any("track_ops_per_call_eager" in b for b in benches)
    modules, benches = steps.selection("A", "cpu")
    assert modules == ["fusion", "amp", "canary"]  # transfer: CUDA-only rows alone
    assert not any("kernels_per_call" in b or "transfer" in b for b in benches)
    # the A/A gate judges an exact counter on a CPU too: the CPU side of the kernel count; run B
    # carries the canary (with its extra op) for gate-canary
    modules, benches = steps.selection("B", "cpu")
    assert modules == ["fusion", "canary"]
    assert benches[:2] == [
        r"^fusion\.PointwiseChain\.track_ops_per_call_eager$",
        r"^fusion\.PointwiseChain\.track_(eager|compiled)_time$",
    ]
    for run in ("A", "B"):  # the canary's callgrind count (a minute) and raw time: read by none
        _, canary = steps.selection(run, "cuda")
        names = ["canary.Canary." + n for n in ("track_ops", "track_time_over_reference")]
        assert all(any(re.search(r, n) for r in canary) for n in names)
        for left_out in ("track_time", "track_instructions"):
            assert not any(re.search(r, "canary.Canary." + left_out) for r in canary)
    # each GPU case is a spawned process: the sets stay small
    assert len(steps.selection("A", "cuda")[1]) <= 11 and len(steps.selection("B", "cuda")[1]) <= 7


def test_asv_runs_go_through_the_runs_layers_runner(tmp_path, monkeypatch, capsys):
    from harness.runs import asv

    seen = []

    def fake_run(r):
        seen.append(r)
        for line in (
            "[ 0.00%] ·· Benchmarking existing-py_root_.cache_harness_asv-python",
            "[50.00%] ··· canary.Canary.track_ops                  11",
            "[100.00%] ··· canary.Canary.track_time          160±5μs",
        ):
            r.on_line(line)
        return asv.AsvResult(0, "", "", 0.5, [])

    monkeypatch.setattr(asv, "run", fake_run)
    ctx = gpucheck.Context(ROOT, tmp_path / "out", tmp_path / "work", "cpu")
    ran = steps.asv_run(ctx, "B")
    (r,) = seen
    assert r.method == "spawn" and not r.capture and r.repo is not None
    assert list(r.benches) == steps.selection("B", "cpu")[1]
    assert r.env[settings.CANARY_EXTRA.name] == "1"
    assert r.env[settings.RUN_RECORD.name] == str(steps.run_dir(ctx, "B"))  # facts land there
    assert sorted(p.name for p in r.bench_dir.iterdir()) == [
        "__init__.py",
        "canary.py",
        "fusion.py",
    ]
    assert ran["exit"] == 0 and ran["result"] is None
    # each benchmark's wall time: logged as it ends (asv's lines kept) and in the step's figures
    assert list(ran["benchmark_wall_s"]) == ["canary.Canary.track_ops", "canary.Canary.track_time"]
    assert ran["asv_start_s"] is not None and ran["asv_end_s"] is not None
    log = capsys.readouterr().out
    assert "canary.Canary.track_ops                  11" in log
    assert re.search(
        r"^benchmark canary\.Canary\.track_time took \d+\.\d s \(160±5μs\)$", log, re.M
    )


def _gone(pid: int, start: int, wait_s: float = 5.0) -> bool:
    until = time.monotonic() + wait_s
    while processes.alive(pid, start):
        if time.monotonic() > until:
            return False
        time.sleep(0.05)
    return True


def _started(pid_file: Path, wait_s: float = 30.0) -> int:
    until = time.monotonic() + wait_s
    while not (pid_file.is_file() and pid_file.read_text().strip()):
        assert time.monotonic() < until, f"{pid_file} never written"
        time.sleep(0.05)
    return int(pid_file.read_text())


def test_a_step_over_budget_is_ended_with_what_it_started_in_a_session_of_its_own(tmp_path):
    # the step starts a process in a session of its own (as asv runs under harness.runs.asv)
    # that ignores SIGINT; ending the step's session alone would leave it running
    pid_file = tmp_path / "pid"
    code = (
        "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)'], "
        "start_new_session=True); open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(60)"
    )
    plan = [gpucheck.Step("nested", 3, "is ended", "command", ("{py}", "-c", code, str(pid_file)))]
    assert gpucheck.orchestrate(_args(tmp_path), ROOT, plan) == 1
    pid = int(pid_file.read_text())
    assert not processes.alive(pid), "the step's own session outlived it"


def test_sigterm_to_the_kit_ends_the_running_step(tmp_path):
    pid_file = tmp_path / "pid"
    script = (
        "import sys, types\n"
        "from harness.core import exits\n"
        "from harness.core.processes import terminate_as_interrupt\n"
        "from harness.runs import gpucheck\n"
        "code = \"import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
        'time.sleep(60)"\n'
        f"plan = [gpucheck.Step('sleeper', 60, 'waits', 'command', ('{{py}}', '-c', code, "
        f"{str(pid_file)!r}))]\n"
        f"args = types.SimpleNamespace(out={str(tmp_path / 'out')!r}, wheels=None, target=None, "
        "cpu_rehearsal=True, only=None, deadline=100.0, budget_scale=1.0)\n"
        "with terminate_as_interrupt():\n"
        "    sys.exit(exits.guarded('gpu-check', lambda: gpucheck.orchestrate(args, "
        f"{str(ROOT)!r}, plan)))\n"
    )
    kit = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    try:
        pid = _started(pid_file)
        start = processes.proc_stat(pid).start
        kit.send_signal(signal.SIGTERM)
        assert kit.wait(timeout=30) == 143
        assert _gone(pid, start), "the step outlived the kit"
    finally:
        if kit.poll() is None:
            kit.kill()


# ---- a CPU rehearsal through the real worker entry point ----


def _rehearse(tmp_path, only: list[str]) -> dict:
    out = tmp_path / "out"
    code = gpucheck.orchestrate(_args(tmp_path, only=only, deadline=gpucheck.DEADLINE_S), ROOT)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cpu_rehearsal"] and summary["device"] == "cpu"
    assert [s["name"] for s in summary["steps"]] == only
    for step in summary["steps"]:
        # what the kit calls passing: a pass mark, figures without one, or n/a with its reason
        assert step["status"] in ("pass", "recorded", "n/a"), step
        if step["status"] == "n/a":
            assert step["detail"].startswith("n/a on CPU: ") and "needs CUDA" in step["detail"]
        assert step["wall_s"] < step["budget_s"]
    assert code == summary["exit"] == 0
    page = (out / "summary.md").read_text()  # beside summary.json, in a rehearsal too
    assert "exit 0" in page and "CPU rehearsal" in page
    for step in summary["steps"]:
        assert re.search(rf"^\| {step['name']} +\| {step['status']} +\|", page, re.M), step
    return {s["name"]: s for s in summary["steps"]}


@pytest.mark.slow  # the second tier: ~7 s of the default tier's budget under load
def test_cpu_rehearsal_of_a_cuda_only_step_through_the_worker(tmp_path):
    got = _rehearse(tmp_path, ["kernels"])
    assert got["kernels"]["status"] == "n/a"
    assert "harness.runs.worker gpu-check-step kernels" in got["kernels"]["command"]


@pytest.mark.slow
def test_cpu_rehearsal_of_the_cheap_steps(tmp_path):
    got = _rehearse(tmp_path, ["env", "require-gpu", "gate-gpu-time", "kernels", "transfer"])
    assert got["require-gpu"]["detail"] == "exit 4 as expected"  # no GPU: the gate says so
    assert got["gate-gpu-time"]["detail"].startswith("n/a on CPU: GPU time needs CUDA: no CUDA")
    assert {got[n]["status"] for n in ("gate-gpu-time", "kernels", "transfer")} == {"n/a"}
    assert json.loads((tmp_path / "out" / "env.json").read_text())


@pytest.mark.slow  # asv with spawned benchmark processes: minutes on a CPU
def test_cpu_rehearsal_of_asv_spawn_logs_and_keeps_each_benchmarks_wall_time(tmp_path):
    got = _rehearse(tmp_path, ["asv-spawn", "report"])
    figures = got["asv-spawn"]["figures"]
    walls = figures["benchmark_wall_s"]
    result = json.loads((tmp_path / "out" / "asv-A-result.json").read_text())
    assert set(walls) == set(result["results"])  # every benchmark asv ran, and only those
    assert all(s > 0 for s in walls.values()) and figures["asv_start_s"] > 0
    assert sum(walls.values()) + figures["asv_start_s"] <= got["asv-spawn"]["wall_s"]
    log = (tmp_path / "out" / "gpu-check.log").read_text()
    for name in walls:
        assert re.search(rf"^benchmark {re.escape(name)} took \d+\.\d s", log, re.M), name
    page = (tmp_path / "out" / "summary.md").read_text()
    section = page.split("## Where the asv steps' seconds went")[1].split("\n## ")[0]
    assert all(f"| {name} " in section for name in walls)
    assert "### Advice: what each tip is worth" in page  # the report's section, embedded
