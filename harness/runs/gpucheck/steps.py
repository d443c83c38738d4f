"""The steps of `harness gpu-check` that run inside a harness process (the plan, budgets and
orchestration are in harness.runs.gpucheck).

Each step runs in its own process (`python -m harness.runs.worker gpu-check-step NAME ...`) so
that a step over its budget can be killed without losing the others, and returns a JSON-able dict
(`status`, `figures`, `detail`) that the orchestrator writes into summary.json. A step needing
CUDA on a machine without it returns status "n/a" with the reason: a failure on a GPU runner,
expected in a CPU rehearsal.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness.core import settings
from harness.runs.progress import Progress


@dataclasses.dataclass(frozen=True)
class Rows:
    """asv --bench regexes (on `name(param, ...)`) and where they can be measured: "any", or
    "cuda" for rows that are n/a on a CPU, or "cpu" for the CPU side of a CUDA-only row."""

    regexes: tuple[str, ...]
    where: str = "any"


# The A/A set holds exact counters and GPU times with their facts; the report set adds the ratios
# that the report plots and holds against published figures. Run A = A/A + report + canary; run B
# = A/A + the canary with one more op (gate-aa judges the A/A rows of A against B, gate-canary the
# canary's). Each case is a spawned process (~6 s on the GPU runner), so the sets are small.
AA_SET = (
    Rows(
        (r"^fusion\.KernelLaunchesPerCall\.track_kernels_per_call\('pointwise_chain', 'eager'",),
        "cuda",
    ),
    # the CPU side of the kernel count: an exact counter, so the A/A gate judges a row on a CPU too
    Rows((r"^fusion\.PointwiseChain\.track_ops_per_call_eager$",), "cpu"),
    Rows((r"^fusion\.PointwiseChain\.track_(eager|compiled)_time$",)),
    Rows((r"^transfer\.HostToDeviceCopy\.track_copy_time\('pinned', True, 'float32'\)",), "cuda"),
)
REPORT_SET = (
    Rows((r"^fusion\.PointwiseChain\.track_compiled_over_eager$",)),
    Rows(
        (r"^transfer\.PinnedOverPageable\.track_pinned_over_pageable\(True, 'float32'\)",), "cuda"
    ),
    Rows((r"^amp\.AutocastOverFp32\.track_autocast_over_fp32\('alexnet', 'fp16'\)",), "cuda"),
    Rows((r"^amp\.AutocastOverFp32\.track_autocast_over_fp32\('alexnet', 'bf16'\)",), "cpu"),
)
# What gate-canary judges; the canary's instruction count is left out (callgrind takes over a
# minute where valgrind is installed) and so is its raw time (never judged without a band).
CANARY_ROWS = ("canary.Canary.track_ops", "canary.Canary.track_time_over_reference")
CANARY_SET = (Rows(tuple(rf"^{re.escape(r)}$" for r in CANARY_ROWS)),)
RUNS = {
    "A": {"rows": AA_SET + REPORT_SET + CANARY_SET},
    "B": {"rows": AA_SET + CANARY_SET, "env": {settings.CANARY_EXTRA.name: "1"}},
}
# The compile caches runs A and B share (a folder of the kit's work folder: the kit's to remove)
KIT_COMPILE_CACHE = "compile-cache"
# Launch method under test: a forked CUDA context is unusable, so GPU runs must spawn.
LAUNCH = "spawn"


def selection(run: str, device: str) -> tuple[list[str], list[str]]:
    """(suite modules, asv --bench regexes) of run A, B or C on `device`. On a CPU the CUDA-only
    rows are left out: each would cost a spawned process importing torch only to say n/a."""
    wanted = ("any", "cuda") if device != "cpu" else ("any", "cpu")
    benches = [r for rows in RUNS[run]["rows"] if rows.where in wanted for r in rows.regexes]
    modules = []
    for regex in benches:  # asv imports every module it finds: only the ones selected
        module = re.match(r"\^(\w+)\\\.", regex).group(1)
        if module not in modules:
            modules.append(module)
    return modules, benches


def _result(status: str, figures: dict, detail: str) -> dict:
    return {"status": status, "figures": figures, "detail": detail}


# ---- measuring checks (harness.runs.gpucheck.checks) ----


def measuring(name: str):
    def step(ctx) -> dict:
        from harness.measure.workloads import NotApplicable
        from harness.runs.gpucheck import checks as gpucheck

        try:
            return gpucheck.CHECKS[name](ctx.device_obj())
        except NotApplicable as exc:
            return _result("n/a", {}, str(exc))

    return step


# ---- asv runs: spawn, A/A, canary ----


def _commit(ctx) -> tuple[Path, str, str]:
    """(repo, commit, note): the checkout's HEAD; a copied checkout without .git gets a scratch
    repository in the work folder, only so that asv can file results under a commit."""
    from harness.core.exits import BadInput
    from harness.core.project import head_commit

    try:
        return ctx.root, head_commit(ctx.root), "checkout HEAD"
    except BadInput as exc:
        repo = ctx.work / "scratch-repo"
        if not (repo / ".git").is_dir():
            repo.mkdir(parents=True, exist_ok=True)
            git = [
                "git",
                "-C",
                str(repo),
                "-c",
                "user.name=gpu-check",
                "-c",
                "user.email=gpu-check@localhost",
            ]
            subprocess.run(git[:3] + ["init", "-q"], check=True)
            subprocess.run(
                git + ["commit", "-q", "--allow-empty", "-m", "gpu-check scratch"], check=True
            )
        sha = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return repo, sha, f"scratch repository ({exc})"


def run_dir(ctx, run: str) -> Path:
    return ctx.work / f"run{run}"


def asv_run(ctx, run: str) -> dict:
    """One `asv run` of a selection with the spawn launch method into work/run<X>/asv, with the
    environment fingerprint where the gate looks for it. It goes through the runs layer's asv
    runner (harness.runs.asv.run): asv in a session of its own, ended with everything in it when
    this step is interrupted or killed over its budget."""
    from harness.core import records
    from harness.core.env import fingerprint, machine_name
    from harness.core.files import write_json_atomic
    from harness.runs import asv
    from harness.runs.scratch import RunScratch
    from harness.runs.spec import RunSpec

    modules, benches = selection(run, ctx.device)
    root = run_dir(ctx, run)
    # the kit's own folder (its --out is marked as the kit's): a rerun into the same --out must
    # not gate the results, facts or benchmark modules an earlier call left there
    shutil.rmtree(root, ignore_errors=True)
    results = root / "asv"
    bench_dir = asv.benchmark_subset(ctx.root, modules, root / "benchmarks")
    # a copied checkout without .git runs against a scratch repository (see _commit)
    repo, sha, note = _commit(ctx)
    machine = machine_name()
    # each benchmark's wall time goes into the log as it ends (a step killed over its budget has
    # still said where its seconds went) and into the step's figures
    timing = Progress(echo=False, on_done=_log_benchmark)

    def on_line(line: str) -> None:
        print(line, flush=True)  # asv's own output stays in the step's log
        timing.feed(line)

    # asv's TMPDIR is the run's own; the compile caches are the kit's, shared by runs A and B
    # (run B's compiles hit what run A's filled: see docs/gpu.md)
    # the run's environment as `harness bench` makes it (mode, threads, hash seed, scratch,
    # where the rows' facts go: the run folder is laid out as a run record)
    spec = RunSpec(
        machine=machine, benches=tuple(benches), env=tuple(RUNS[run].get("env", {}).items())
    )
    with RunScratch(shared_cache=ctx.work / KIT_COMPILE_CACHE) as scratch:
        ran = asv.run(
            asv.AsvRun(
                project=ctx.root,
                results=results,
                machine=machine,
                commit=sha,
                env=spec.environment(scratch, record=root),
                benches=tuple(benches),
                method=LAUNCH,
                bench_dir=bench_dir,
                repo=repo,
                capture=False,
                on_line=on_line,
                echo=sys.stdout,
            )
        )
    timing.close()
    seconds = timing.timing()
    print(
        f"asv took {ran.wall_s:.1f} s: start {seconds['asv_start_s']} s, "
        f"{len(seconds['benchmark_wall_s'])} benchmark(s) "
        f"{sum(seconds['benchmark_wall_s'].values()):.1f} s, "
        f"{len(seconds['setup_cache_s'])} setup_cache(s) "
        f"{sum(seconds['setup_cache_s'].values()):.1f} s, end {seconds['asv_end_s']} s",
        flush=True,
    )
    fp = fingerprint()
    fp.update(
        machine_name=machine,
        commit=sha,
        launch_method=LAUNCH,
        asv_wall_s=round(ran.wall_s, 1),
        mode=spec.mode,
        quick=spec.quick,
        suites=modules,
    )
    # laid out as a run record (run.json, fingerprint.json, asv/), where the gate looks for it
    write_json_atomic(root / records.FINGERPRINT, fp)
    write_json_atomic(
        root / records.RUN_JSON,
        {"run_id": root.name, "machine": machine, "commit": sha, "label": f"gpu-check-{run}"},
    )
    return {
        "exit": ran.returncode,
        "result": str(ran.files[-1]) if ran.files else None,
        "wall_s": round(ran.wall_s, 1),
        "machine": machine,
        "commit": sha,
        "commit_source": note,
        "benches": benches,
        **seconds,
    }


def _log_benchmark(name: str, seconds: float, result: str) -> None:
    print(f"benchmark {name} took {seconds:.1f} s ({result[:60]})", flush=True)


def _loaded(path: str):
    from harness.verdict.results import load

    return load(path)


def step_asv_spawn(ctx) -> dict:
    """Run A: the GPU selection and the canary under asv with `--launch-method spawn`."""
    from harness.core.env import cuda_available
    from harness.verdict.summary import failures

    ran = asv_run(ctx, "A")
    figures = {"launch_method": LAUNCH, **ran}
    if ran["result"] is None:
        return _result("fail", figures, f"asv saved no result (exit {ran['exit']})")
    rs = _loaded(ran["result"])
    measured = {n: e.value for n, e in rs.entries.items() if not e.skipped and not e.failed}
    figures.update(
        cases_measured=len(measured), cases_failed=failures(rs), cuda_in_benchmarks=cuda_available()
    )
    kernels = {n: v for n, v in measured.items() if "kernels_per_call" in n}
    figures["kernels_per_call_under_asv"] = kernels
    _collect_run(ctx, ran, "asv-A")
    ok = ran["exit"] == 0 and not failures(rs) and len(measured) > 0
    if ctx.device == "cuda":
        ok = ok and len(kernels) == 2  # both counts ran: CUDA worked inside spawned processes
    return _result(
        "pass" if ok else "fail",
        figures,
        f"{len(measured)} cases measured, {len(failures(rs))} failed, asv exit {ran['exit']}",
    )


def _collect_run(ctx, ran: dict, label: str) -> None:
    """The result JSON, its benchmarks.json and fingerprint into --out."""
    from harness.core import records

    src = Path(ran["result"])
    shutil.copy(src, ctx.out / f"{label}-result.json")
    shutil.copy(src.parent.parent / "benchmarks.json", ctx.out / f"{label}-benchmarks.json")
    fp = src.parent.parent.parent / records.FINGERPRINT
    if fp.is_file():
        shutil.copy(fp, ctx.out / f"{label}-fingerprint.json")


def _gate(ctx, base: str, head: str, only: list[str], markdown: Path) -> dict:
    from harness.core.files import write_atomic
    from harness.verdict.gate import run_gate

    outcome = run_gate(base, head, root=ctx.work, only=only)
    write_atomic(markdown, outcome.render("markdown"))
    print(outcome.render("text"), flush=True)
    rows = {r.name: {"verdict": r.verdict, "ratio": r.ratio, "note": r.note} for r in outcome.rows}
    return {
        "exit": outcome.code,
        "rows": rows,
        "summary": outcome.summary(),
        "message": outcome.message,
    }


def _result_of(ctx, run: str) -> str | None:
    from harness.verdict.results import result_files

    files = [f for d in sorted((run_dir(ctx, run) / "asv").glob("*/")) for f in result_files(d)]
    return str(files[-1]) if files else None


def _run_a(ctx) -> str | None:
    return _result_of(ctx, "A")


def _against_run_a(ctx, run: str) -> tuple[str | None, dict, dict | None]:
    """(run A's result, run `run`'s outcome, a result dict when the step cannot go on)."""
    base = _run_a(ctx)
    if base is None:
        return None, {}, _result("not run", {}, "needs run A (step asv-spawn)")
    ran = asv_run(ctx, run)
    if ran["result"] is None:
        return (
            base,
            ran,
            _result("fail", ran, f"asv saved no result for run {run} (exit {ran['exit']})"),
        )
    return base, ran, None


def step_gate_aa(ctx) -> dict:
    """Run B (the A/A set again, a second process tree, with the canary's extra op for
    gate-canary), then the gate A vs B over the A/A rows: must exit 0."""
    base, ran, stop = _against_run_a(ctx, "B")
    if stop:
        return stop
    head = _loaded(ran["result"])
    only = sorted(
        n for n, e in head.entries.items() if not e.skipped and not n.startswith("canary.")
    )
    gate = _gate(ctx, base, ran["result"], only, ctx.out / "gate-aa.md")
    ok = gate["exit"] == 0
    return _result(
        "pass" if ok else "fail",
        {"run_b": ran, "gate": gate},
        f"gate A/A exit {gate['exit']} (want 0): {gate['summary']}",
    )


def step_gate_canary(ctx) -> dict:
    """The canary's rows of run B (HARNESS_CANARY_EXTRA=1: one more op) against run A's: the
    gate must exit 1, with the exact op counter among the regressions."""
    base, head = _run_a(ctx), _result_of(ctx, "B")
    if base is None or head is None:
        return _result("not run", {}, "needs runs A and B (steps asv-spawn and gate-aa)")
    gate = _gate(ctx, base, head, list(CANARY_ROWS), ctx.out / "gate-canary.md")
    ops = gate["rows"].get("canary.Canary.track_ops", {}).get("verdict")
    ok = gate["exit"] == 1 and ops == "REGRESSION"
    return _result(
        "pass" if ok else "fail",
        {"gate": gate},
        f"gate clean vs extra op exit {gate['exit']} (want 1); track_ops {ops}",
    )


def step_gate_gpu_time(ctx) -> dict:
    """A/A runs of GPU-time rows and a 3% slowdown of their GPU time, across processes, judged
    by the gate's GPU rule (harness.runs.gpuproof): every A/A passes, every slowdown is caught,
    at least GPU_PROOF_AT_LEAST of each."""
    from harness.core.exits import NoGPU
    from harness.core.files import write_atomic
    from harness.runs import gpuproof

    budget = settings.STEP_BUDGET_S.get()
    try:
        result = gpuproof.run(
            ctx.device,
            GPU_PROOF_TRIALS,
            ctx.work / "gpu-time",
            budget_s=None if budget is None else budget - GPU_PROOF_RESERVE_S,
        )
    except NoGPU as exc:
        return _result("n/a", {}, f"GPU time needs CUDA: {exc}")
    write_atomic(ctx.out / "gate-gpu-time.md", gpuproof.render(result, "markdown") + "\n")
    print(gpuproof.render(result), flush=True)
    ok = gpuproof.proven(result, GPU_PROOF_AT_LEAST)
    aa, slowed = result["aa"], result["slowed"]
    return _result(
        "pass" if ok else "fail",
        result,
        f"A/A {aa['passed']}/{aa['runs']} passed ({aa['false_alarms']} false alarms); "
        f"{result['slowdown']:.0%} slower {slowed['caught']}/{slowed['runs']} caught; "
        f"{result['trials_run']} trial processes in {result['seconds']:.0f} s",
    )


# gate-gpu-time: trial processes (each adds one A/A and one slowed comparison per proof row),
# the fewest comparisons of each kind that prove it, and the seconds kept for writing the result
GPU_PROOF_TRIALS = 4
GPU_PROOF_AT_LEAST = 5
GPU_PROOF_RESERVE_S = 5


def step_report(ctx) -> dict:
    """`harness report` of run A: report.md, its PNGs and the sanity bands."""
    from harness.verdict import bands
    from harness.verdict.report import write_report

    base = _run_a(ctx)
    if base is None:
        return _result("not run", {}, "needs run A (step asv-spawn)")
    rs = _loaded(base)
    md = write_report(rs, ctx.out / "report", run_dir(ctx, "A"))
    device = bands.device_of(rs)
    rows = [
        dict(zip(("ratio", "case", "measured", "figure", "published", "verdict", "source"), r))
        for r in bands.rows(bands.measured(rs), device)
    ]
    text = md.read_text()
    ok = "## Sanity bands" in text and any(p.suffix == ".png" for p in md.parent.iterdir())
    return _result(
        "pass" if ok else "fail",
        {"report": str(md), "device": device, "bands": rows},
        f"report with {len(rows)} banded ratio(s)",
    )


# ---- graph goldens on the device ----

# On a CPU the device printout is the CPU printout, and `pytest suites` checks every model's CPU
# goldens anyway: a rehearsal runs the model that the goldens-plugin step reads (-k gru) alone.
REHEARSAL_GOLDEN_MODELS = ("gru",)


def step_goldens(ctx) -> dict:
    """Every zoo model under every front end captured and run on the device, against eager on
    the device and against the CPU printout of the same torch; candidates into --out."""
    from harness.golden import devicecheck

    tree = ctx.work / "runner-expect"
    models = list(REHEARSAL_GOLDEN_MODELS) if ctx.device == "cpu" else None
    results = devicecheck.run(ctx.device, "small", ctx.root / "expect", tree, models)
    cases = {
        r.golden_id: {
            "status": r.status,
            "semantic": r.semantic,
            "max_abs_diff": r.max_abs_diff,
            "committed": r.committed,
            "error": r.error,
            "diff": r.diff,
            "capture": r.capture,
        }
        for r in results
    }
    candidates = sorted((tree / ctx.device).glob("*.expect")) if ctx.device != "cpu" else []
    if candidates:
        dest = ctx.out / "cuda-candidates"
        dest.mkdir(parents=True, exist_ok=True)
        for p in candidates:
            shutil.copy(p, dest / p.name)
    failed = [r.golden_id for r in results if r.failed]
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return _result(
        "fail" if failed else "pass",
        {
            "device": ctx.device,
            "counts": counts,
            "failed": failed,
            "candidates": [p.name for p in candidates],
            "cases": cases,
        },
        f"{len(results)} cases: {counts}; failed: {', '.join(failed) or 'none'}"
        + (f" (CPU rehearsal: model {', '.join(models)} only)" if models else ""),
    )


# ---- answer checks on the device ----

# The paired rows whose answer has a CUDA meaning: Triton's generated code, TF32 and cuDNN's
# algorithms, fused and flash kernels, autocast to fp16 with GradScaler, atomics in backward
# kernels, pinned memory and non_blocking copies. Left out: the rows checked inside a setup_cache
# (fusion.MemoryBandwidth, distributed: `harness answers --rerun` cannot check them apart from
# their measurement) and the DataLoader's (the labels and shapes of an epoch, on any device).
ANSWER_ROWS = (
    r"^fusion\.(PointwiseChain|NormActivationBlock|SmallModelTrainingStep|CompiledCrossEntropyLoss)"
    r"\.track_compiled_over_eager$",
    r"^fusion\.OptimizerStepOverForLoop\.track_step_over_for_loop\(",
    r"^fusion\.AttentionOverHandWritten\.track_sdpa_over_hand_written\(",
    r"^fusion\.GradientCheckpointing\.track_checkpointed_over_plain",
    r"^amp\.AutocastOverFp32\.track_autocast_over_fp32\(",
    r"^models\.(CompiledOverEager|ChannelsLastOverContiguous|CudnnBenchmarkOnOverOff)\.track_",
    r"^training_loop\.",
    r"^transfer\.(PinnedOverPageable|Uint8ThenConvertOverFloat32|NonBlockingOverBlocking)\.track_",
)
# A CPU rehearsal checks one row of each kind of outcome: a compile (tolerance), a bit-identical
# pair, and a CUDA-only row (n/a on a CPU); every compiled row is ~25 s of inductor on 2 cores.
REHEARSAL_ANSWER_ROWS = (
    r"^fusion\.PointwiseChain\.track_compiled_over_eager$",
    r"^training_loop\.EvalForward\.track_no_grad_over_grad_enabled\('mlp'\)$",
    r"^transfer\.PinnedOverPageable\.track_pinned_over_pageable\(",
)
ANSWERS_RECORD = "answers-record"  # the rerun's record, in the kit's work folder
ANSWERS_WRONG = "answers-first-wrong.pt"  # the first WRONG's inputs and results, into --out


def answer_rows(device: str) -> tuple[str, ...]:
    return REHEARSAL_ANSWER_ROWS if device == "cpu" else ANSWER_ROWS


def answers_command(device: str) -> list[str]:
    """The `harness answers --rerun` line the answers step runs (in-process), for a person to
    run by hand."""
    words = ["harness", "answers"]
    for regex in answer_rows(device):
        words += ["--rerun", regex]
    return words + ["--quick", "--device", device]


def step_answers(ctx) -> dict:
    """The answer checks of the paired rows with a CUDA meaning, rerun on the device as
    `harness answers --rerun ROWS --quick --device cuda` does (harness.runs.answercheck: the
    check alone, no timing): pass when every row judged is the same (n/a rows listed), fail on a
    WRONG or a check that failed to run (the first WRONG's reproduction copied into --out)."""
    from harness.core import escape, exits
    from harness.core.exits import BadInput
    from harness.core.files import write_atomic, write_json_atomic
    from harness.measure import answers
    from harness.runs import answercheck

    record = ctx.work / ANSWERS_RECORD
    shutil.rmtree(record, ignore_errors=True)  # the kit's own folder: only this call's answers
    command = escape.shell_join(answers_command(ctx.device))
    print(f"$ {command}", flush=True)
    request = answercheck.Request(
        answer_rows(ctx.device), mode="quick", device=ctx.device, record=record
    )
    try:
        reran = answercheck.rerun(ctx.root, request, say=lambda line: print(line, flush=True))
    except BadInput as exc:  # a selection the suites no longer match: the kit's own mistake
        return _result("fail", {"command": command}, f"harness answers --rerun: {exc}")
    text = reran.render()
    print(text, end="", flush=True)
    write_atomic(ctx.out / "answers.txt", text)
    write_json_atomic(ctx.out / "answers.json", reran.as_json())
    kept = record / answers.REPRODUCE_DIR / answers.REPRODUCE_FILE
    if kept.is_file():
        shutil.copy(kept, ctx.out / ANSWERS_WRONG)
    status = {exits.PASS: "pass", exits.UNDECIDED: "n/a"}.get(reran.code, "fail")
    figures = {
        "command": command,
        "exit": reran.code,
        "counts": reran.counts(),
        "seconds": round(reran.seconds, 1),
        "rows": {
            c.row: {
                "status": c.status,
                "value": c.answer.value if c.answer is not None else None,
                "output": c.answer.output if c.answer is not None else None,
                "reason": (c.answer.reason if c.answer is not None else c.note)[:300],
                "seconds": round(c.seconds, 1),
            }
            for c in reran.cases
        },
        **({"reproduce": ANSWERS_WRONG} if kept.is_file() else {}),
    }
    return _result(status, figures, reran.summary())


STEPS = {
    "gpu-measure": measuring("gpu-measure"),
    "gate-gpu-time": step_gate_gpu_time,
    "warmup": measuring("warmup"),
    "kernels": measuring("kernels"),
    "transfer": measuring("transfer"),
    "amp": measuring("amp"),
    "conv": measuring("conv"),
    "dataloader": measuring("dataloader"),
    "asv-spawn": step_asv_spawn,
    "gate-aa": step_gate_aa,
    "gate-canary": step_gate_canary,
    "report": step_report,
    "goldens": step_goldens,
    "answers": step_answers,
}
