"""`harness bench`: run the asv suites in the current environment into a new run record.

What it does, in order:
1. checks the suite names against the modules in suites/benchmarks/, and in a project of its
   own its benchmark modules too (an unknown one is bad input listing the valid ones; the
   canary runs only when named; harness.core.project.Suites);
2. opens a new run record (harness.core.records: written once, never rewritten);
3. writes a run-time asv config (harness.runs.asv) whose results directory is that record;
4. records the machine non-interactively under a name carrying the GPU model;
5. runs `asv run --set-commit-hash <HEAD>` (asv saves nothing from an existing environment
   without a commit hash), forkserver on CPU and spawn on CUDA;
6. runs the operator pass (harness.measure.profiles) in the run's environment: per-operator
   counts behind every ops/kernels row (every run), and operator-level profile summaries per
   workload (full runs, or `profile=True`), written into the record before it is renamed;
7. saves the environment fingerprint in the record, then refreshes the asv view (results/asv/).

What the suites are told (RunSpec.environment): the mode (sizes and grids, asv's --quick,
which asv does not tell a benchmark), the run's fixed CPU thread count (1 in quick and fast runs,
all cores in full runs, --threads N overrides; recorded in the fingerprint as torch_threads), a
fixed hash seed unless the caller set one (recorded as python_hash_seed), where the record is
being written, and the run's scratch folders (harness.runs.scratch: TMPDIR, a private, empty
inductor cache and the harness's scratch, all removed afterwards), so that compile-time
benchmarks fill the cache with a priming compile and then time warm compiles, and two identical
runs start from the same cache state.

Reading the saved results back and summarising them is the verdict's job (harness.verdict).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

from harness.core import provenance, records, sizes
from harness.core.exits import BadInput
from harness.core.files import write_json_atomic
from harness.core.processes import run_in_session
from harness.core.project import suites
from harness.measure.instructions import PROGRESS_FILE
from harness.runs import asv
from harness.runs.progress import EVERY_S, Heartbeat, Progress, counting
from harness.runs.scratch import RunScratch
from harness.runs.spec import RunSpec
from harness.verdict.rerun import RERUN_LABEL, rerun_command  # noqa: F401 (bench.rerun_command)

# Suites that run only when named with --suite (the canary: the gate's test subject).
ONLY_WHEN_NAMED = ("canary",)


# The main job's short selection (`harness bench --short`, what `./dev bench` runs): every area
# with one or two representative rows, about two minutes on a shared 2-core runner. Each entry is
# (suite, asv --bench regex); tests/test_bench_cli.py checks every regex selects a benchmark.
SHORT = (
    ("fusion", r"^fusion\.PointwiseChain\.track_compiled_over_eager$"),
    ("transfer", r"^transfer\.PinnedOverPageable\.track_pinned_over_pageable"),
    ("amp", r"^amp\.AutocastOverFp32\.track_autocast_over_fp32"),
    (
        "dataloader",
        r"^dataloader\.WorkersOverNoWorkers\.track_workers_over_no_workers\(2, False, 16, False\)",
    ),
    ("models", r"^models\.Inference\.track_inference_time_over_reference\('mlp', False, False\)"),
    (
        "training_loop",
        r"^training_loop\.EvalForward\.track_inference_mode_over_grad_enabled\('mlp'\)",
    ),
    (
        "distributed",
        r"^distributed\.DistributedStepOverSingleProcess\.track_step_time_over_single_process",
    ),
)


def available_suites(project: Path) -> list[str]:
    """Every benchmark module in suites/benchmarks/ (a new file there is a new suite), and in a
    project of its own its benchmark modules too (harness.core.project.Suites)."""
    return list(suites(project).modules())


def check_suites(project: Path, names: list[str] | None) -> list[str]:
    found = suites(project)
    known = list(found.modules())
    chosen = names or found.defaults(ONLY_WHEN_NAMED)
    if found.own_project and "models" in chosen:
        from harness.core import user_models

        ini, values = user_models.find_ini(project)
        if not user_models.configured(values):
            raise BadInput(
                f"the models suite covers the models {project} registers, and it names none: "
                f"name the module that registers them in the ini option "
                f"`{user_models.INI_OPTION}` ({ini or project / 'pytest.ini'}), or leave the "
                "suite out (--suite NAME)"
            )
    if not names:
        return chosen
    unknown = [n for n in names if n not in known]
    if unknown:
        where = f"modules in {found.builtin}" + (
            f" and {found.own or found.tree / 'benchmarks'}" if found.own_project else ""
        )
        raise BadInput(
            f"unknown suite{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"valid suites ({where}): {', '.join(known)}"
        )
    return list(dict.fromkeys(names))


@dataclasses.dataclass
class BenchRun:
    record: records.RunRecord | None  # None: asv saved nothing, so no run record was kept
    asv_exit: int
    wall_s: float
    suites: list[str]
    asv_tail: str = ""  # the end of asv's output, for when it saved nothing


# The operator pass profiles each workload for a few seconds; a full run's grids stay well inside.
PASS_TIMEOUT_S = 1800


def operator_pass(
    project: Path,
    staging: Path,
    names: list[str],
    env: dict,
    *,
    profile: bool,
    out=None,
    bench_dir: Path | None = None,
) -> str:
    """harness.measure.profiles over the suites just run (in `bench_dir`, default the project's
    suites/benchmarks), in a fresh process with the run's environment, writing into the staging
    record. Returns what happened (kept in run.json). A failure here is reported, never fatal:
    the asv results are the run."""
    import json

    out = out or sys.stdout  # looked up per call: a stream bound at import time may be closed since

    from harness.measure import profiles

    try:
        benchmarks = json.loads((staging / "asv" / "benchmarks.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "not run: asv wrote no benchmarks.json"
    # the rows this run ran: a --bench or --short run may have no counter row at all
    if not profiles.wanted(profiles.ran_benchmarks(staging / "asv", benchmarks), names, profile):
        return "not run: no counter rows, no profiling asked"
    cmd = [
        sys.executable,
        "-m",
        "harness.measure.profiles",
        "--benchmark-dir",
        str(bench_dir or suites(project).builtin),
        "--asv-dir",
        str(staging / "asv"),
        "--out",
        str(staging),
    ]
    cmd += [a for n in names for a in ("--suite", n)] + (["--profile"] if profile else [])
    t0 = time.perf_counter()
    try:
        proc = run_in_session(cmd, cwd=project, env=env, timeout=PASS_TIMEOUT_S, capture=True)
    except subprocess.TimeoutExpired:
        status = f"failed: no answer within {PASS_TIMEOUT_S} s"
    else:
        status = (
            "done"
            if proc.returncode == 0
            else (
                f"failed (exit {proc.returncode}): {(proc.stderr.strip().splitlines() or [''])[-1]}"
            )
        )
        if proc.returncode == 0:
            print(proc.stdout.strip(), file=out)
    took = time.perf_counter() - t0
    print(
        f"harness bench: operator pass {'(profiles) ' if profile else ''}{status} in {took:.1f} s",
        file=out if status == "done" else sys.stderr,
        flush=True,
    )
    return status


def check_models(project: Path) -> None:
    """A project of its own: its models module(s) imported here, before asv starts, so that one
    that does not import is one line of bad input (exit 3, as in `harness models` and pytest)
    rather than asv's discovery traceback. The suites import them again in their processes."""
    from harness.core import user_models

    if suites(project).own_project and user_models.configured(user_models.find_ini(project)[1]):
        user_models.load_user_models(start=project)


def planned_durations(
    project: Path,
    staging: Path,
    benches: tuple[str, ...],
    mode: str,
    here: tuple[Path, str] | None = None,
):
    """The run's estimate (harness.runs.estimate.Estimate: per benchmark its seconds here, or
    None) for what this run's asv selected (read once asv has written the run's
    benchmarks.json), for the progress lines. `here`: (results root, machine) whose earlier runs
    of this mode are read (a project's second run estimates from its first)."""
    import json
    import re

    from harness.runs import estimate, shard

    listed = json.loads((staging / "asv" / "benchmarks.json").read_text(encoding="utf-8"))
    files, _ = shard.project_durations(suites(project), mode)
    selected, cases = [], {}
    for b in listed.values():
        if not (isinstance(b, dict) and "name" in b):
            continue
        chosen = [c for c in shard.case_names(b) if any(re.search(r, c) for r in benches)]
        if chosen:
            selected.append(b)
            cases[b["name"]] = chosen
    return estimate.estimate(selected, cases, files, mode, here)


def checked_size_overrides():
    """HARNESS_SIZES, every key checked before anything runs (a typo is bad input now, not a
    failed benchmark in every process); models of your own are loaded if a key names a model."""
    from harness.core import zoo

    if sizes.model_keys():
        from harness.core.user_models import load_user_models

        load_user_models()
    return zoo.check_size_overrides()


def run(
    project: Path,
    root: Path,
    spec: RunSpec,
    *,
    sha: str,
    launch: str | None = None,
    profile: bool | None = None,
    shard: str | None = None,
    verbose: bool = False,
    out=None,
    tree: provenance.TreeState | None = None,
) -> BenchRun:
    """Run the spec's suites (all but the canary when it names none) through asv into a new run
    record under the results root `root`. `profile`: store operator-level profile summaries
    (default: in full runs only); `shard`: 'K/N', recorded in run.json (the label carries it).
    asv's own output goes into the record (records.ASV_LOG); this prints one line per benchmark
    (harness.runs.progress), or asv's output as it comes with `verbose`. `tree`: the working
    tree's state when the caller read it (harness.core.provenance; read here when not given)."""
    out = out or sys.stdout  # looked up per call (see operator_pass)
    from harness.core.env import fingerprint

    names = check_suites(project, list(spec.suites))
    check_models(project)
    tree = tree or provenance.for_run(project)
    overrides = checked_size_overrides()
    method = asv.launch_method(launch)
    threads = spec.run_threads
    profile = spec.full if profile is None else profile
    run_id = records.new_run_id(sha, spec.label)
    meta = {
        "commit": sha,
        "started": run_id.split("-")[0],
        "label": spec.label or "",
        "suites": names,
        # the --bench regexes asv was given (a benchmark name expanded to its anchored regex)
        **({"benches": list(spec.benches)} if spec.benches else {}),
        "mode": "full" if spec.full else "fast",
        "quick": spec.quick,
        "launch_method": method,
        "threads": threads,
        "profiled": profile,
        "sizes": sizes.override_text(overrides),
        **({"shard": shard} if shard else {}),
        **tree.as_meta(),  # "dirty": the tree differs from the commit (harness.core.provenance)
    }
    result = None
    with (
        records.writing(root, spec.machine, run_id, meta) as staging,
        RunScratch() as scratch,
    ):
        env = spec.environment(scratch, record=staging)
        env.update(suites(project).environment())  # a project of its own: which models are its
        bench_dir = asv.benchmark_subset(project, names, scratch.folder("benchmarks"))
        print(
            f"harness bench: {spec.mode} run of {'shard ' + shard + ' of ' if shard else ''}"
            f"{', '.join(names)} on {spec.machine} "
            f"({method}, {threads} CPU thread{'s' * (threads > 1)}), "
            f"commit {sha[:8]}{tree.mark}, run {run_id}",
            file=out,
            flush=True,
        )
        benches = tuple(spec.benches) or tuple(rf"^{n}\." for n in names)
        counter = scratch.harness / PROGRESS_FILE  # the instruction counter says where it is
        progress = (
            None
            if verbose
            else Progress(
                out,
                planned=lambda: planned_durations(
                    project, staging, benches, spec.mode, (root, spec.machine)
                ),
                counter=counter,
            )
        )
        beat = progress.heartbeat() if progress is not None else _verbose_heartbeat(out, counter)
        with open(staging / records.ASV_LOG, "w", encoding="utf-8") as log, beat:

            def on_line(line: str) -> None:
                log.write(line + "\n")
                if progress is None:
                    with beat.lock:
                        print(line, file=out, flush=True)
                        beat.said()
                else:
                    progress.feed(line)

            result = asv.run(
                asv.AsvRun(
                    project,
                    staging / "asv",
                    spec.machine,
                    sha,
                    env,
                    benches=benches,
                    quick=spec.quick,
                    method=method,
                    # only the run's suites: asv imports every module of the folder at discovery
                    bench_dir=bench_dir,
                    capture=False,
                    echo=out if verbose else log,
                    on_line=on_line,
                )
            )
        if progress is not None:
            progress.close()
        # still inside the staging record (and the run's inductor cache): written before the rename;
        # `meta` is read by records.writing when the block ends
        t0 = time.monotonic()
        with Heartbeat(
            lambda line: print(line, file=out, flush=True),
            lambda: f"harness bench: the operator pass is running; {time.monotonic() - t0:.0f} s",
        ):
            meta["operator_pass"] = operator_pass(
                project, staging, names, env, profile=profile, out=out, bench_dir=bench_dir
            )
        fp = fingerprint()
        # the run's thread count, not this process's: the suites set it (harness.measure.threads)
        fp.update(
            machine_name=spec.machine,
            commit=sha,
            run_id=run_id,
            mode=meta["mode"],
            quick=spec.quick,
            suites=names,
            launch_method=method,
            asv_wall_s=round(result.wall_s, 1),
            torch_threads=threads,
            python_hash_seed=env["PYTHONHASHSEED"],
            inductor_cache="private to the run, warm compiles (cold: full mode only)",
        )
        write_json_atomic(staging / records.FINGERPRINT, fp)
    final = records.runs_dir(root) / spec.machine / run_id
    record = records.load_record(final) if final.is_dir() else None
    if record:
        records.rebuild_view(root)
    return BenchRun(
        record,
        result.returncode if result else -1,
        result.wall_s if result else 0.0,
        names,
        result.output[-3000:] if result else "",
    )


def _verbose_heartbeat(out, counter: Path) -> Heartbeat:
    """With asv's own output shown (-v): a line whenever asv said nothing for a while, naming the
    instruction row being counted where the counter is running."""
    since = time.time()
    started = time.monotonic()

    def status() -> str:
        live = counting(counter, since)
        took = f"{time.monotonic() - started:.0f} s"
        if live is not None:
            return f"harness bench: {live.text}; {took}"
        return f"harness bench: asv is running; {took}, {EVERY_S:.0f}+ s since its last line"

    return Heartbeat(lambda line: print(line, file=out, flush=True), status)


SHOWN_FAILED = 3  # failed cases given a rerun command each; the others are named


def report(ran: BenchRun, root: Path, out=None, rerun: tuple[str, ...] = ()) -> int:
    """The summary of a run just made (key ratios, failures, where the record is) and its exit
    code: 0 done, 2 a benchmark failed, 5 asv failed or saved nothing. `rerun`: the run's flags,
    for the command that reruns a failed case alone (rerun_command)."""
    from harness.core import exits
    from harness.verdict import answers
    from harness.verdict.results import load
    from harness.verdict.summary import failures, summary_table

    out = out or sys.stdout
    if ran.record is None:
        print(
            f"{ran.asv_tail}\nharness bench: asv saved no results (asv exit code {ran.asv_exit}; "
            "the end of its output is above); no run record kept",
            file=sys.stderr,
        )
        return exits.RUNNER_FAILED
    saved = load(ran.record.result_file())
    saved.entries = {k: e for k, e in saved.entries.items() if k.split(".", 1)[0] in ran.suites}
    saved.answers = {k: a for k, a in saved.answers.items() if k in saved.entries}
    print(file=out)
    print(summary_table(saved), file=out)
    # a faster side that computes something else, loudly after the table; the exit code stays
    # the benchmarks' (`harness gate` and `harness answers` fail on it)
    wrong = answers.problems(saved, rerun)
    if wrong:
        print("\n" + "\n".join(wrong), file=out)
    run = ran.record
    print(
        f"\nrun record: {run.path} (asv's log: {records.ASV_LOG} there)"
        f"\nasv run took {ran.wall_s:.1f} s; the asv view for asv publish/compare: {root / 'asv'}"
        f"\nnext: harness gate <an earlier run> {run.run_id}   (exit 1 on a regression)"
        f"\n      harness report {run.run_id}   (Markdown summary and plots)"
        f"\n      harness advise {run.run_id}   (what each performance tip is worth here)",
        file=out,
    )
    if provenance.of_record(run.meta):
        tree = run.meta.get(provenance.WORKTREE) or {}
        changed = ", ".join(tree.get("changed", [])[:5])
        print(
            f"note: the working tree differed from commit {run.commit[:8]} when this run started "
            f"({tree.get('changed_total', '?')} changed tracked file(s): {changed}); the run is "
            "marked dirty: its figures are of that tree, not of the commit",
            file=out,
        )
    failed = failures(saved)
    if failed:
        from harness.core import escape

        print(
            f"\nharness bench: {len(failed)} benchmark case(s) failed (the others ran):", file=out
        )
        for name in failed:
            # asv's log keeps the error (harness.core.asvlog); an instruction row's record, why
            error = saved.errors.get(name) or saved.not_counted.get(name)
            said = f": {escape.terminal(error, escape.MAX_PROSE)}" if error else ""
            print(f"  FAILED {escape.terminal(name, escape.MAX_CELL)}{said}", file=out)
        print(
            f"the tracebacks are in {run.path / records.ASV_LOG}; rerun one alone, asv's output "
            f"and its traceback shown (a run record of its own, labelled {RERUN_LABEL}):",
            file=out,
        )
        for name in failed[:SHOWN_FAILED]:
            print(f"  {rerun_command(name, rerun)}", file=out)
        if len(failed) > SHOWN_FAILED:
            print(f"  (and so on for the other {len(failed) - SHOWN_FAILED})", file=out)
        return exits.FAILED
    if ran.asv_exit != 0:
        print(f"harness bench: asv exited with {ran.asv_exit}", file=sys.stderr)
        return exits.RUNNER_FAILED
    return exits.PASS
