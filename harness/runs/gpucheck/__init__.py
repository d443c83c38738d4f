"""The GPU proof kit (`harness gpu-check`, `.ci/gpu-check`): one prepared run on a CUDA runner. Its
parts are all here: this orchestrator, the steps (steps), the CUDA measurements they make
(checks) and the wheels a bare runner needs (wheels); each step runs in its own process through
harness.runs.worker.

    .ci/gpu-check --dry-run                       what each check proves (works on any machine)
    .ci/gpu-check --list-wheels --python-version 3.12 --platform manylinux_2_28_x86_64
                  [--download DIR]
    .ci/gpu-check --wheels DIR --out OUT          on the runner: install, then every check
    .venv/bin/python .ci/gpu-check --cpu-rehearsal --out /tmp/OUT
                                                  every step on a CPU (CUDA-only ones n/a)

The runner's python3 has torch and the test tools but no asv, asv-runner or expecttest, and no
network: `--wheels DIR` installs the wheels built for it (gpucheck_wheels) into a private folder
(`--target`, default .gpu-check/site), which goes on PYTHONPATH for the steps and on
ASV_PYTHONPATH for asv's benchmark processes (asv drops PYTHONPATH for those). The harness runs
from the checkout, never installed.

Each step runs as its own process with a time budget: one over its budget is killed and
reported, one that fails is reported, and the rest still run; a step whose input another step
failed to make is "not run". The kit promises to end within TOTAL_S (8 minutes, so that it fits
one 10-minute call on a borrowed GPU machine with its start-up): the deadline (DEADLINE_S) stops
steps from starting late and leaves room for ending the last one and writing the summary, and the
step budgets with the wheels' fit inside the deadline with a margin (tests/test_gpucheck.py holds
all three). A CPU rehearsal has budgets of its own (Step.cpu_budget_s, measured on a 2-core VM).
Exit 0 when every step passed or recorded its figures (or, in a rehearsal, was n/a on a CPU),
1 when any failed (a failed check, like a regression, fails the job), 3 for bad usage.

--out collects: gpu-check.log, summary.json (every step's status and figures, the sanity bands)
and summary.md (the same for a person, with the gate tables and golden cases: page), env.json,
asv-A-result.json with its benchmarks.json and fingerprint, gate-aa.md and gate-canary.md,
report/ (report.md and PNGs), cuda-candidates/ (device variants of goldens to review),
steps/<name>.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.core import exits, processes, settings
from harness.runs.gpucheck.status import OK_STATUSES

# What the kit promises on a GPU runner, start to exit.
TOTAL_S = 8 * 60
# Ending a step over its budget, at worst: SIGINT and a grace, SIGTERM and SIGKILL with a wait
# each, a last wait (processes.end_session), then SIGTERM and SIGKILL with a wait each to what the
# step started in sessions of its own (end_step).
KILL_GRACE_S = processes.GRACE_S + 5 * processes.TERM_GRACE_S
START_S = 5  # the orchestrator's own start and its summary (no torch imported in it)
# No step starts after this; a step running then is ended, so the run ends by
# START_S + DEADLINE_S + KILL_GRACE_S <= TOTAL_S.
DEADLINE_S = 460
# Between the sum of the budgets and the deadline: the orchestrator's work between steps, and a
# killed step's grace, so that a plan in which every step uses its whole budget still runs all.
MARGIN_S = 15
WHEELS_BUDGET_S = 10  # installing the wheels, before the first step (2.1 s on the GPU runner)
# A CPU rehearsal's deadline: its budgets (cpu_budget_s, about twice what each step took on a
# loaded 2-core VM, where the whole rehearsal took about 8 minutes) with the wheels' and the margin.
REHEARSAL_DEADLINE_S = 1260
OUT_MARK = ".harness-gpu-check"


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    budget_s: int  # on a GPU runner
    proves: str
    kind: str = "step"  # "step": a gpucheck_steps function; "command": argv below
    argv: tuple = ()  # for "command"; {py} is the interpreter
    expect_exit: int = 0
    cpu_expect_exit: int | None = None  # in a CPU rehearsal, when it differs
    needs: str | None = None  # a step whose output this one reads
    # HARNESS_FULL=1: nightly model sizes (launch-bound small ones prove nothing on a GPU)
    full_sizes: bool = False
    stdout_to: str | None = None
    # in a CPU rehearsal (small sizes, 2 shared cores: torch alone takes 5-10 s to import);
    # None: budget_s
    cpu_budget_s: int | None = None

    def budget(self, rehearsal: bool) -> int:
        return self.cpu_budget_s if rehearsal and self.cpu_budget_s is not None else self.budget_s


# GPU budgets: each about 1.1-1.3x what the step took on the first GPU run (docs/gpu.md,
# "Budgets and the total"); the steps that run did not exist then (gpu-measure, gate-gpu-time)
# or changed (asv-spawn, gate-aa, gate-canary) are estimates until the next GPU run measures them.
PLAN = (
    Step(
        "env",
        8,
        "the runner's fingerprint (torch, CUDA, cuDNN, driver, GPU, card UUID, clock policy) is "
        "recorded in env.json",
        "command",
        ("{py}", "-m", "harness.runs.worker", "fingerprint"),
        stdout_to="env.json",
        cpu_budget_s=30,
    ),
    Step(
        "require-gpu",
        8,
        "`python -m harness.gate --require-gpu` passes (exit 0) on this runner; "
        "a CPU machine gets exit 4",
        "command",
        ("{py}", "-m", "harness.gate", "--require-gpu"),
        cpu_expect_exit=exits.NO_GPU,
        cpu_budget_s=30,
    ),
    Step(
        "gpu-measure",
        40,
        "GPU time at the CUDA quick sizes (harness.measure.gputime): x.cos().cos() compiled/"
        "eager <= 0.6; AMP/fp32 < 1 on AlexNet training (bf16, fp16); a 4096^2 matmul over "
        "itself reads 1 and two over one 2 within 5%; two measurements of each device-bound "
        "row within 1%; busy NN% on every row; CUDA events agree with the wall clock within "
        "10% on an 8192^3 matmul",
        cpu_budget_s=30,
    ),
    Step(
        "gate-gpu-time",
        50,
        "A/A runs of GPU-time rows pass the gate's GPU rule, and a 3% slowdown of each row's GPU "
        "time (a spin kernel calibrated on the device) is caught on that row, across processes: "
        "at least 5 of each (harness.runs.gpuproof)",
        cpu_budget_s=30,
    ),
    Step(
        "warmup",
        24,
        "the warm-up call absorbs torch.compile: the first call compiles, no timed sample "
        "holds a compile (dynamo's graph count is unchanged during samples, every sample < 10% "
        "of the first call)",
        cpu_budget_s=45,
    ),
    Step(
        "kernels",
        28,
        "x.cos().cos() launches exactly 2 kernels eager and 1 compiled (profiler); "
        "the other fusion workloads' counts are recorded",
        cpu_budget_s=30,
    ),
    Step(
        "asv-spawn",
        90,
        "asv runs the GPU selection and the canary with --launch-method spawn: CUDA works "
        "in spawned benchmark processes (kernel counts and busy fractions come back), results, "
        "row facts and fingerprint saved",
        cpu_budget_s=300,
    ),
    Step(
        "gate-aa",
        40,
        "a second GPU run of the A/A set (counters, GPU times with their facts; the canary "
        f"with {settings.CANARY_EXTRA.name}=1 rides along): `gate A B` over the A/A rows "
        "exits 0",
        needs="asv-spawn",
        cpu_budget_s=120,
    ),
    Step(
        "gate-canary",
        10,
        "the canary's rows of run B (one more op) against run A: `gate A B` exits 1 with "
        "track_ops a REGRESSION",
        needs="gate-aa",
        cpu_budget_s=30,
    ),
    Step(
        "report",
        10,
        "`harness report` of run A writes report.md, PNGs, the device facts per row and the "
        "sanity bands (ratios vs published ranges)",
        needs="asv-spawn",
        cpu_budget_s=30,
    ),
    Step(
        "transfer",
        10,
        "host-to-device copies timed apart: pageable, already pinned, pin-then-copy; "
        "non_blocking; uint8-then-convert vs float32 (nightly batch)",
        full_sizes=True,
        cpu_budget_s=30,
    ),
    Step(
        "amp",
        18,
        "fp16 + GradScaler and bf16 training steps vs fp32 for AlexNet and the LSTM "
        "(nightly sizes); AMP/fp32 ratios against the AMP recipe's 2-3x",
        full_sizes=True,
        cpu_budget_s=75,
    ),
    Step(
        "conv",
        18,
        "cudnn.benchmark and channels_last on/off for AlexNet and ResNet-18, inference "
        "and training (nightly sizes); channels_last against the tutorial's 8-35%",
        full_sizes=True,
        cpu_budget_s=180,
    ),
    Step(
        "dataloader",
        14,
        "DataLoader pin_memory off vs on (2 workers, JPEG pipeline, AlexNet steps): "
        "samples/s and compute efficiency",
        cpu_budget_s=75,
    ),
    Step(
        "goldens",
        45,
        "every zoo model under every front end captured and run on the GPU, checked "
        "against eager on the GPU and diffed against the CPU printout of the same torch; differing "
        "printouts become candidate variants; committed goldens of another torch are "
        "'not compared'",
        cpu_budget_s=60,
    ),
    Step(
        "goldens-plugin",
        20,
        f"the pytest plugin on CUDA ({settings.GOLDEN_DEVICE.name}=cuda) passes against "
        "this runner's goldens, using the cuda/ variants where the printouts differ (model gru)",
        "command",
        (
            "{py}",
            "-m",
            "pytest",
            "{plugin}",
            "-q",
            "-p",
            "no:cacheprovider",
            "suites/test_graphs.py",
            "-k",
            "gru",
        ),
        needs="goldens",
        cpu_budget_s=60,
    ),
)


# Steps left out of the default plan, run by name in a call of their own (`--only answers`): the
# default plan's budgets fill the 8-minute total (docs/gpu.md, "Budgets and the total"), and a
# step may not raise it. Each fits the deadline on its own with the wheels.
OPT_IN = (
    Step(
        "answers",
        240,
        "the answer checks of the paired rows with a CUDA meaning (compiled fusion workloads and "
        "word LM, fused and foreach optimizers, SDPA backends, checkpointing, fp16 autocast with "
        "GradScaler, channels_last, cudnn.benchmark, grad modes, copies) rerun on the GPU "
        "(`harness answers --rerun ... --quick --device cuda`): no WRONG, no fail_to_run; TF32 "
        "and cuDNN's algorithms are judged by the float64 rule",
        cpu_budget_s=60,
    ),
)


@dataclasses.dataclass
class Context:
    root: Path
    out: Path
    work: Path
    device: str

    def device_obj(self):
        import torch

        return torch.device(self.device)


def project() -> Path:
    """The checkout (.ci/gpu-check sets HARNESS_PROJECT to its own; else the cwd's)."""
    from harness.core.project import project_root

    return project_root()


def selected(only: list[str] | None) -> list[Step]:
    """The default plan, or the steps `only` names (an opt-in step among them), in plan order."""
    if not only:
        return list(PLAN)
    every = PLAN + OPT_IN
    names = [s.name for s in every]
    unknown = [o for o in only if o not in names]
    if unknown:
        raise exits.BadInput(
            f"unknown step(s) {', '.join(unknown)}; steps: {', '.join(s.name for s in PLAN)}; "
            f"opt-in (--only NAME): {', '.join(s.name for s in OPT_IN)}"
        )
    return [s for s in every if s.name in only]


def deadline_for(args) -> float:
    """The run's deadline: --deadline as given, or the default for the device (the rehearsal's
    own when --cpu-rehearsal leaves it at the GPU run's), stretched with --budget-scale."""
    rehearsal = bool(getattr(args, "cpu_rehearsal", False))
    if args.deadline != DEADLINE_S:
        return args.deadline
    base = REHEARSAL_DEADLINE_S if rehearsal else DEADLINE_S
    return base * max(getattr(args, "budget_scale", 1.0), 1.0)


def dry_run_text(rehearsal: bool = False, deadline: float = DEADLINE_S) -> str:
    if rehearsal and deadline == DEADLINE_S:
        deadline = REHEARSAL_DEADLINE_S
    where = "CPU rehearsal" if rehearsal else "GPU run"
    lines = [
        "harness gpu-check: the GPU proof kit (dry run: nothing is run)"
        + (" -- as a CPU rehearsal: CUDA-only checks say n/a" if rehearsal else ""),
        "",
        f"0. wheels (budget {WHEELS_BUDGET_S} s, with --wheels DIR): pip install --no-index "
        "--no-deps --target T; asv, asv_runner and expecttest import from T; PYTHONPATH and "
        "ASV_PYTHONPATH name the checkout and T",
        "",
    ]
    for i, step in enumerate(PLAN, 1):
        lines.append(
            f"{i}. {step.name} (budget {step.budget(rehearsal)} s"
            + (f", after {step.needs}" if step.needs else "")
            + ")"
        )
        lines.append(f"   proves: {step.proves}")
        argv = command(step, Path("OUT"), Path("OUT/work"), "cpu" if rehearsal else "cuda")
        lines.append(
            f"   runs:   {shlex.join(['python3' if a == sys.executable else a for a in argv])}"
        )
    total = sum(s.budget(rehearsal) for s in PLAN)
    lines += [
        "",
        f"{where}: budgets add up to {total} s, {total + WHEELS_BUDGET_S} s with the wheels "
        f"(each an upper bound), inside the deadline of {deadline:.0f} s: no step starts after "
        "it, a step still running then is ended and later steps are reported 'not run'.",
    ]
    if not rehearsal:
        lines.append(
            f"With its start ({START_S} s) and the ending of a step caught at the deadline "
            f"({KILL_GRACE_S:.0f} s), the kit ends within {TOTAL_S // 60} minutes "
            f"({TOTAL_S} s)."
        )
    lines.append("")
    lines.append(
        "opt-in, left out of the plan above (its budgets fill the total): run each in a call of "
        "its own with --only NAME"
    )
    for step in OPT_IN:
        lines.append(f"- {step.name} (budget {step.budget(rehearsal)} s, opt-in)")
        lines.append(f"   proves: {step.proves}")
        argv = command(step, Path("OUT"), Path("OUT/work"), "cpu" if rehearsal else "cuda")
        lines.append(
            f"   runs:   {shlex.join(['python3' if a == sys.executable else a for a in argv])}"
        )
    lines.append(
        "exit 0: every step passed or recorded its figures"
        + (" (or was n/a on the CPU)" if rehearsal else "")
        + "; 1: a step failed, was killed or could not run."
    )
    return "\n".join(lines) + "\n"


def _plugin_args() -> list[str]:
    """`-p harness.golden.plugin` unless an installed harness registers it (pytest11 entry point):
    registering the same module twice is an error."""
    from importlib.metadata import entry_points

    try:
        registered = any(
            ep.value == "harness.golden.plugin" for ep in entry_points(group="pytest11")
        )
    except Exception:
        registered = False
    return [] if registered else ["-p", "harness.golden.plugin"]


def command(step: Step, out: Path, work: Path, device: str) -> list[str]:
    if step.kind == "step":
        return [
            sys.executable,
            "-m",
            "harness.runs.worker",
            "gpu-check-step",
            step.name,
            "--out",
            str(out),
            "--work",
            str(work),
            "--device",
            device,
        ]
    argv = []
    for a in step.argv:
        if a == "{plugin}":
            argv += _plugin_args()
        else:
            argv.append(sys.executable if a == "{py}" else a)
    return argv


def step_environment(step: Step, env: dict, work: Path, device: str, budget: float) -> dict:
    env = dict(env)
    env["PYTHONUNBUFFERED"] = "1"
    env[settings.STEP_BUDGET_S.name] = f"{budget:.0f}"  # a step that repeats trials fits them in
    if step.full_sizes and device == "cuda":
        env[settings.FULL.name] = "1"
    if step.name == "goldens-plugin":
        env[settings.EXPECT_DIR.name] = str(work / "runner-expect")
        if device != "cpu":
            env[settings.GOLDEN_DEVICE.name] = device
    return env


# ---- one step, inside its own process ----


def run_step(name: str, out: str, work: str, device: str) -> int:
    """One step, in the process harness.runs.worker started for it."""
    from harness.core.files import write_json_atomic
    from harness.runs.gpucheck import steps as gpucheck_steps

    if name not in gpucheck_steps.STEPS:
        raise exits.BadInput(f"unknown step {name!r}; steps: {', '.join(gpucheck_steps.STEPS)}")
    ctx = Context(project(), Path(out), Path(work), device)
    ctx.work.mkdir(parents=True, exist_ok=True)
    result = gpucheck_steps.STEPS[name](ctx)
    write_json_atomic(ctx.out / "steps" / f"{name}.json", result)
    print(f"step {name}: {result['status']}: {result['detail']}", flush=True)
    return exits.REGRESSION if result["status"] == "fail" else exits.PASS


# ---- the orchestrator ----


@dataclasses.dataclass
class StepRun:
    name: str
    status: str  # pass, recorded, fail, killed, not run, n/a
    budget_s: float
    wall_s: float = 0.0
    exit: int | None = None
    detail: str = ""
    figures: dict = dataclasses.field(default_factory=dict)
    proves: str = ""
    command: str = ""


# "n/a" only ever comes from a CPU rehearsal: on a GPU runner a step saying n/a failed (judge)


def end_step(proc: subprocess.Popen) -> None:
    """End a step's process and everything it started. processes.end_session ends the step's own
    session (SIGINT first: a step running asv then ends asv's session itself, harness.runs.asv);
    what the step started in sessions of their own (asv, pip) is swept afterwards, in case the
    step could not end it (killed after the grace)."""
    nested = set()
    for pid in processes.descendants(proc.pid):
        st = processes.proc_stat(pid)
        if st is not None and st.session != proc.pid:
            nested.add(st.session)
    processes.end_session(proc)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = {pgrp for sid in nested for _, pgrp in processes.session_members(sid)}
        if not left:
            return
        for pgrp in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgrp, sig)
        until = time.monotonic() + processes.TERM_GRACE_S
        while time.monotonic() < until and any(processes.session_members(s) for s in nested):
            time.sleep(0.05)


def run_process(
    argv: list[str], budget_s: float, env: dict, cwd: Path, log, stdout=None
) -> tuple[int | None, float]:
    """Run argv in a session of its own, output into `log` (stdout into `stdout` when given); end
    it and what it started (end_step) when it outlives its budget, or when the kit is interrupted
    (Ctrl-C, or SIGTERM: harness.cli turns it into an interrupt) before the interrupt goes on.
    Returns (exit code, or None when killed; seconds)."""
    t0 = time.perf_counter()
    log.flush()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=stdout or log,
        stderr=log if stdout else subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        code = proc.wait(timeout=max(budget_s, 1))
    except subprocess.TimeoutExpired:
        end_step(proc)
        return None, time.perf_counter() - t0
    except BaseException:
        end_step(proc)
        raise
    return code, time.perf_counter() - t0


def judge(
    step: Step, code: int | None, result: dict | None, rehearsal: bool, budget: float | None = None
) -> tuple[str, str]:
    """A step's status from its exit code and the result its process wrote."""
    if code is None:
        return "killed", f"over its budget of {budget or step.budget(rehearsal):.0f} s: killed"
    if result is not None:
        status, detail = result["status"], result.get("detail", "")
        if status == "n/a":
            # what needs CUDA is expected to say so on a CPU, and is a failure on a GPU runner
            return ("n/a", f"n/a on CPU: {detail}") if rehearsal else ("fail", f"n/a: {detail}")
        if status == "not run":
            return "not run", detail
        return status, detail
    want = (
        step.cpu_expect_exit if rehearsal and step.cpu_expect_exit is not None else step.expect_exit
    )
    if code == want:
        return "pass", f"exit {code} as expected"
    return "fail", f"exit {code}, expected {want}"


def preflight() -> None:
    """The steps import torch and the summary needs tabulate, from this interpreter: without
    them every step would fail in seconds, so say so before starting (bad usage)."""
    from importlib.util import find_spec

    missing = [m for m in ("torch", "tabulate") if find_spec(m) is None]
    if missing:
        raise exits.BadInput(
            f"{sys.executable} has no {' or '.join(missing)}: run the kit with a Python that has "
            "torch and the test tools (on a runner its python3; here, for a CPU rehearsal, "
            "`.venv/bin/python .ci/gpu-check --cpu-rehearsal`)"
        )


def orchestrate(args, root: Path, plan: list[Step] | None = None) -> int:
    from harness.runs.gpucheck import wheels

    # bad names and a Python without torch fail before anything is written
    steps = plan if plan is not None else selected(args.only)
    preflight()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    from harness.core.files import check_own_folder, mark_own_folder

    # a rerun may refill its own --out; a foreign folder's files are never overwritten
    out = check_own_folder(args.out or root / ".gpu-check" / f"out-{stamp}", OUT_MARK, "--out")
    out.mkdir(parents=True, exist_ok=True)
    mark_own_folder(out, OUT_MARK, "harness gpu-check")
    work = out / "work"
    target = Path(args.target or root / ".gpu-check" / "site").resolve() if args.wheels else None
    rehearsal = bool(args.cpu_rehearsal)
    device = "cpu" if rehearsal else "cuda"
    deadline = deadline_for(args)
    t_start = time.perf_counter()
    started_at = time.time()  # summary.md embeds only the files this run wrote
    runs: list[StepRun] = []
    log_path = out / "gpu-check.log"
    with open(log_path, "a", buffering=1) as log:

        def say(text: str) -> None:
            print(text, flush=True)
            log.write(text + "\n")

        say(f"harness gpu-check {stamp}: device {device}, out {out}, deadline {deadline:.0f} s")
        env = wheels.child_environment(root, target)
        if args.wheels:
            runs.append(_install(args.wheels, target, env, say, log))
        done: dict[str, str] = {}
        for step in steps:
            budget = step.budget(rehearsal)

            def not_run(detail: str, step=step, budget=budget) -> StepRun:
                return StepRun(step.name, "not run", budget, detail=detail, proves=step.proves)

            if runs and runs[0].name == "wheels" and runs[0].status not in OK_STATUSES:
                runs.append(not_run("the wheels did not install"))
                continue
            left = deadline - (time.perf_counter() - t_start)
            if left < 5:
                runs.append(not_run(f"deadline of {deadline:.0f} s reached"))
                continue
            if (
                step.needs
                and done.get(step.needs) not in OK_STATUSES
                and any(s.name == step.needs for s in steps)
            ):
                runs.append(
                    not_run(f"needs step {step.needs}, which {done.get(step.needs, 'did not run')}")
                )
                done[step.name] = "not run"
                continue
            run_ = _run_step(
                step,
                min(budget * args.budget_scale, left),
                out,
                work,
                device,
                env,
                root,
                say,
                log,
                rehearsal,
            )
            runs.append(run_)
            done[step.name] = run_.status
        wall = time.perf_counter() - t_start
        summary = build_summary(runs, out, device, wall, args, stamp, deadline)
        from harness.core.files import write_json_atomic

        write_json_atomic(out / "summary.json", summary)
        _write_page(out, summary, started_at)
        say("")
        say(summary_table(runs))
        say(
            f"\nsummary: {out / 'summary.json'}, {out / 'summary.md'}; log: {log_path}; "
            f"exit {summary['exit']}"
        )
    return summary["exit"]


def _write_page(out: Path, summary: dict, started_at: float) -> None:
    from harness.core.files import write_atomic
    from harness.runs.gpucheck import page

    write_atomic(out / "summary.md", page.render(summary, page.attachments(out, since=started_at)))


def _install(wheel_dir: str, target: Path, env: dict, say, log) -> StepRun:
    from harness.runs.gpucheck import wheels

    t0 = time.perf_counter()
    run_ = StepRun(
        "wheels",
        "pass",
        WHEELS_BUDGET_S,
        proves="the runner's missing packages install offline into a "
        "private folder and import (asv, asv_runner, expecttest)",
    )
    try:
        target.mkdir(parents=True, exist_ok=True)
        wheels.install(Path(wheel_dir), target, say, timeout_s=WHEELS_BUDGET_S)
        # the import check gets what pip left of the one budget
        left = WHEELS_BUDGET_S - (time.perf_counter() - t0)
        code, _ = run_process(
            wheels.import_check_command(sys.executable), left, env, Path.cwd(), log
        )
        if code is None:
            raise RuntimeError(f"the import check ran past the {WHEELS_BUDGET_S} s budget")
        if code != 0:
            raise RuntimeError(f"import check failed (exit {code}); see the log")
        run_.detail = f"installed into {target}"
        run_.figures = {
            "target": str(target),
            "wheels": sorted(p.name for p in Path(wheel_dir).glob("*.whl")),
        }
    except RuntimeError as exc:
        run_.status, run_.detail = "fail", str(exc)
    run_.wall_s = round(time.perf_counter() - t0, 1)
    say(f"[wheels] {run_.status}: {run_.detail} ({run_.wall_s} s)")
    return run_


def _run_step(
    step: Step,
    budget: float,
    out: Path,
    work: Path,
    device: str,
    env: dict,
    root: Path,
    say,
    log,
    rehearsal: bool,
) -> StepRun:
    argv = command(step, out, work, device)
    say(f"\n[{step.name}] budget {budget:.0f} s: {step.proves}\n$ {shlex.join(argv)}")
    result_file = out / "steps" / f"{step.name}.json"
    result_file.unlink(missing_ok=True)  # only this run's result counts (a file this kit wrote)
    step_env = step_environment(step, env, work, device, budget)
    if step.stdout_to:
        with open(out / step.stdout_to, "w") as dest:
            code, wall = run_process(argv, budget, step_env, root, log, stdout=dest)
    else:
        code, wall = run_process(argv, budget, step_env, root, log)
    result = json.loads(result_file.read_text()) if result_file.is_file() else None
    status, detail = judge(step, code, result, rehearsal, budget)
    if code not in (None, 0) and result is not None and status in OK_STATUSES:
        status, detail = "fail", f"exit {code} after reporting {status}: {detail}"
    say(f"[{step.name}] {status}: {detail} ({wall:.1f} s)")
    return StepRun(
        step.name,
        status,
        step.budget(rehearsal),
        round(wall, 1),
        code,
        detail,
        (result or {}).get("figures", {}),
        step.proves,
        shlex.join(argv),
    )


def build_summary(
    runs: list[StepRun], out: Path, device: str, wall: float, args, stamp: str, deadline: float
) -> dict:
    failed = [r.name for r in runs if r.status not in OK_STATUSES]
    env_file = out / "env.json"
    try:
        runner = json.loads(env_file.read_text()) if env_file.is_file() else None
    except ValueError:
        runner = None
    return {
        "started": stamp,
        "device": device,
        "cpu_rehearsal": bool(args.cpu_rehearsal),
        "wall_s": round(wall, 1),
        "deadline_s": deadline,
        "exit": exits.REGRESSION if failed else exits.PASS,
        "failed_steps": failed,
        "runner": runner,
        "bands": band_figures(runs, device),
        "steps": [dataclasses.asdict(r) for r in runs],
    }


def band_figures(runs: list[StepRun], device: str) -> list[dict]:
    """The in-process figures that have a published range, judged (harness.verdict.bands)."""
    from harness.verdict import bands

    by = {r.name: r.figures for r in runs}
    out = []

    def add(key, case, value):
        if value is not None:
            out.append(
                {"key": key, "case": case, "value": value, **bands.judge_figure(key, value, device)}
            )

    for case, value in (by.get("amp", {}).get("ratios") or {}).items():
        add("amp", case, value)
    for case, value in (by.get("conv", {}).get("ratios") or {}).items():
        if "channels_last" in case:
            add("channels_last", case, value)
    transfer = by.get("transfer", {}).get("ratios") or {}
    add(
        "pin_then_copy",
        "float32, non_blocking pin-then-copy / blocking pageable",
        transfer.get("pin_then_copy_over_pageable"),
    )
    return out


def summary_table(runs: list[StepRun]) -> str:
    from harness.core.table import render

    rows = [(r.name, r.status, f"{r.wall_s:.1f}", f"{r.budget_s:.0f}", r.detail[:90]) for r in runs]
    return render(["step", "status", "seconds", "budget", "detail"], rows).rstrip("\n")


def list_wheels(args) -> int:
    from harness.runs.gpucheck import wheels

    found = wheels.list_wheels(args.python_version)
    print(
        f"wheels a bare runner (Python {args.python_version}, {args.platform}) needs beyond "
        f"{', '.join(wheels.RUNNER_HAS)}:"
    )
    for w in found:
        print("  " + w.describe(args.python_version, args.platform))
    missing = [w.name for w in found if w.version is None]
    if missing:
        print(
            f"warning: {', '.join(missing)} not installed in {sys.executable}: their versions "
            "and needs are unknown here; run this with the harness venv "
            "(.venv/bin/python .ci/gpu-check --list-wheels ...)"
        )
    dest = args.download or ".gpu-check/wheels-cp" + args.python_version.replace(".", "")
    cmd = wheels.download_command(found, args.python_version, args.platform, dest)
    print("\nfetch them (where pip reaches PyPI):\n  " + shlex.join(cmd))
    print(f"then on the runner:\n  .ci/gpu-check --wheels {dest} --out OUT")
    if args.download:
        cmd[0] = sys.executable
        code = subprocess.run(cmd).returncode
        if code:
            print(f"harness gpu-check: pip download failed (exit {code})", file=sys.stderr)
            return exits.RUNNER_FAILED
        print(
            f"downloaded into {args.download}: "
            + ", ".join(sorted(p.name for p in Path(args.download).glob("*.whl")))
        )
    return exits.PASS
