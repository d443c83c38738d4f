"""Noise floors: run chosen benchmarks repeatedly against themselves (A/A) and store the band.

`harness calibrate --bench canary --runs 5` runs the benchmark modules named by `--bench` N
times through asv (each run its own process tree and results directory), and stores for every
statistical benchmark (timings, throughputs, ratios) its *noise band*: the largest relative
difference between the medians of any two clean runs, max(median) / min(median) - 1. The gate
uses max(--threshold, band) for that benchmark. Bands are merged into
RESULTS/noise/<machine>.json (atomic write; other benchmarks' bands are kept).

`--trials N` is the gate's end-to-end proof (slow, for the report, not for tests): per trial a
clean run A, a run B with HARNESS_CANARY_EXTRA=1 (one more op), and another clean run C, in
that order; `gate A B` must exit 1 (caught) and `gate A C` must exit 0 (no false alarm).

`--trials N --slowdown F --workload NAME` is the same proof on a real workload (test-only, see
harness.runs.slowdown): quick runs of a scratch benchmark folder wrapping the real suite's
class, B slowed by the fraction F; `--route ab` runs it through `harness ab` instead (per trial
one ab run clean vs slowed, which must exit 1, and one clean vs clean, which must exit 0).
`--workload` repeats: the workloads share each run. `--no-aa` runs only the slowed half of each
trial (half the cost; the A/A evidence must then come from runs made apart, said in the output). Per
benchmark row the table says how often the gate flagged it, and how often it would have
flagged it if every timing row were judged without a calibrated band (compare.compare with a
band of 0): the evidence for or against judging raw and reference-normalised rows uncalibrated.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import tempfile
import time

from harness.core import settings
from harness.core.exits import RunnerFailed
from harness.runs import asv
from harness.runs.bench import check_suites
from harness.runs.scratch import RunScratch
from harness.runs.spec import RunSpec
from harness.verdict import metrics
from harness.verdict.results import ResultSet, load, noise_path, save_noise


def _benchmark_dir(
    root: pathlib.Path, bench_modules: list[str], work: pathlib.Path
) -> pathlib.Path:
    return asv.benchmark_subset(root, check_suites(root, bench_modules), work / "benchmarks")


def asv_run(
    project: pathlib.Path,
    bench_dir: pathlib.Path,
    results: pathlib.Path,
    spec: RunSpec,
    commit: str,
) -> pathlib.Path:
    """One `asv run` of the modules in `bench_dir` into `results` as `spec` says (mode, machine,
    --bench selection, extra environment); returns the result file. Instruction counts keep their
    tables beside the results (results.load reads them there)."""
    with RunScratch() as scratch:
        env = spec.environment(scratch, record=results)
        result = asv.run(
            asv.AsvRun(
                project,
                results,
                spec.machine,
                commit,
                env,
                benches=tuple(spec.benches),
                quick=spec.quick,
                bench_dir=bench_dir,
            )
        )
    if result.returncode != 0 or not result.files:
        raise RunnerFailed(
            f"asv run failed (exit {result.returncode}) for {results}:\n"
            + result.stdout[-2000:]
            + result.stderr[-2000:]
        )
    return result.files[0]


def instruction_keys(project: pathlib.Path) -> list[str]:
    """The instructions suite's row keys in `project` (its models' and its benchmark modules'
    rows in a project of its own), as its benchmark processes will see them."""
    import os
    import sys
    from unittest import mock

    from harness.core.project import suites
    from harness.measure.workloads import instructions

    env = suites(project).environment()
    # its benchmark modules import its own modules (`from models import ...`), as there
    path = [p for p in env.get("ASV_PYTHONPATH", "").split(os.pathsep) if p]
    with mock.patch.dict(os.environ, env), mock.patch.object(sys, "path", path + sys.path):
        return instructions.keys()


def noise_bands(runs: list[ResultSet]) -> dict[str, dict]:
    """Per statistical benchmark: band = max/min - 1 over the run medians."""
    from harness.verdict.compare import central

    out = {}
    for name in sorted(set.intersection(*(set(r.entries) for r in runs))):
        entries = [r.entries[name] for r in runs]
        try:
            kind = metrics.kind_of(entries[0].unit)
        except KeyError:
            continue
        if kind.exact or kind.kind in (metrics.MEMORY, metrics.ANSWER):
            continue
        meds = [central(e) for e in entries]
        if any(m is None or m != m or m <= 0 for m in meds):
            continue
        out[name] = {
            "band": round(max(meds) / min(meds) - 1, 4),
            "runs": len(meds),
            "medians": meds,
            "unit": entries[0].unit,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
    return out


def calibrate(
    project: pathlib.Path,
    modules: list[str],
    runs: int,
    root: pathlib.Path,
    machine: str,
    work: pathlib.Path | None = None,
) -> dict[str, dict]:
    from harness.core.project import head_commit

    work = pathlib.Path(work or tempfile.mkdtemp(prefix="harness-calibrate-"))
    bench_dir = _benchmark_dir(project, modules, work)
    commit = head_commit(project)
    spec = RunSpec(machine=machine)
    sets = [load(asv_run(project, bench_dir, work / f"aa{i}", spec, commit)) for i in range(runs)]
    bands = noise_bands(sets)
    save_noise(noise_path(root, machine), machine, bands)
    return bands


def _tally(per_bench: dict, rows, key: str, if_judged=None) -> dict[str, str]:
    """Count each row's REGRESSION under the gate's rules (`key`) and, where given, under the
    rule "every timing row judged, uncalibrated" (`key` + "_if_judged"); the row's cells."""
    from harness.verdict.compare import NOT_JUDGED, REGRESSION, SKIPPED

    cells = {}
    what_if = {r.name: r for r in if_judged or []}
    for r in rows:
        counts = per_bench.setdefault(
            r.name,
            {
                "caught": 0,
                "false_alarms": 0,
                "caught_if_judged": 0,
                "false_alarms_if_judged": 0,
                "judged": r.verdict != NOT_JUDGED,
                "skipped": True,  # until a trial runs the row
            },
        )
        counts["skipped"] = counts["skipped"] and r.verdict == SKIPPED
        counts[key] += r.verdict == REGRESSION
        w = what_if.get(r.name)
        if w is not None:
            counts[key + "_if_judged"] += w.verdict == REGRESSION
        cells[r.name] = f"{r.ratio:.3f} {r.verdict}" if r.ratio is not None else r.verdict
        if w is not None and w.verdict != r.verdict:
            cells[r.name] += f" (if judged: {w.verdict})"
    return cells


def if_all_judged(outcome, threshold: float) -> list:
    """The outcome's rows as if every timing row were judged without calibration (a band of 0):
    what raw and reference-normalised rows would say under the gate's statistics."""
    from harness.verdict import compare

    if not (outcome.base and outcome.head):
        return []
    zero = {name: 0.0 for name in set(outcome.base.entries) | set(outcome.head.entries)}
    return compare.compare(outcome.base, outcome.head, threshold, noise=zero)


def trials(
    project: pathlib.Path,
    n: int,
    root: pathlib.Path,
    work: pathlib.Path,
    threshold: float,
    spec: RunSpec,
    *,
    bench_dir: pathlib.Path | None = None,
    slowed_env: dict | None = None,
    aa: bool = True,
    log=print,
) -> dict:
    """The end-to-end proof on stored results: per trial a clean run A, a run B with the injected
    regression (default: the canary's extra op; `bench_dir` + `slowed_env`: a slowed real workload,
    harness.runs.slowdown), another clean run C; `gate A B` must exit 1, `gate A C` exit 0.
    `spec`: the runs' mode, machine, --bench selection (each benchmark is a process of its own
    under asv's forkserver, so leaving some out changes no measurement, only the time a trial
    takes) and the environment of every run (the slowed run's `slowed_env` goes on top).
    `aa=False`: no run C (false alarms are then None: not measured)."""
    from harness.core.project import head_commit
    from harness.verdict.gate import run_gate

    if (
        bench_dir is None
    ):  # the canary; its instruction row has a proof of its own (--extra-instructions)
        bench_dir = _benchmark_dir(project, ["canary"], work)
        spec = (
            spec
            if spec.benches
            else dataclasses.replace(spec, benches=(r"^canary\.Canary\.track_(?!instructions)",))
        )
    slowed = spec.with_env(**(slowed_env or {settings.CANARY_EXTRA.name: "1"}))
    commit = head_commit(project)
    npath = noise_path(root, spec.machine)
    caught = false_alarms = 0
    per_bench: dict[str, dict] = {}  # benchmark -> regression trials caught, A/A alarms
    gate_seconds, rows, run_seconds = [], [], []
    for i in range(n):
        t0 = time.perf_counter()
        a = asv_run(project, bench_dir, work / f"t{i}-A", spec, commit)
        b = asv_run(project, bench_dir, work / f"t{i}-B", slowed, commit)
        c = asv_run(project, bench_dir, work / f"t{i}-C", spec, commit) if aa else None
        run_seconds.append((time.perf_counter() - t0) / (3 if aa else 2))
        t0 = time.perf_counter()
        reg = run_gate(
            str(a), str(b), root=root, threshold=threshold, noise_file=str(npath), history=False
        )
        gate_seconds.append(time.perf_counter() - t0)
        same = (
            run_gate(
                str(a), str(c), root=root, threshold=threshold, noise_file=str(npath), history=False
            )
            if aa
            else None
        )
        caught += reg.code == 1
        row = {"trial": i, "regression_exit": reg.code}
        checks = [("B/A", reg, "caught")]
        if same is not None:
            false_alarms += same.code != 0
            row["aa_exit"] = same.code
            checks.append(("C/A", same, "false_alarms"))
        for label, outcome, key in checks:
            cells = _tally(per_bench, outcome.rows, key, if_all_judged(outcome, threshold))
            row.update({f"{label} {name}": cell for name, cell in cells.items()})
        rows.append(row)
        log(json.dumps(row))
    return {
        "route": "gate",
        "trials": n,
        "caught": caught,
        "false_alarms": false_alarms if aa else None,
        "per_benchmark": per_bench,
        "gate_seconds_median": sorted(gate_seconds)[len(gate_seconds) // 2],
        "asv_run_seconds_median": sorted(run_seconds)[len(run_seconds) // 2],
        "rows": rows,
    }


def ab_trials(
    project: pathlib.Path,
    n: int,
    work: pathlib.Path,
    threshold: float,
    spec: RunSpec,
    bench_dir: pathlib.Path,
    slowed_env: dict,
    pairs,
    aa: bool = True,
    log=print,
) -> dict:
    """The same proof through `harness ab`: per trial one ab run (base clean, head slowed; pairs
    as `pairs`, a harness.runs.ab.Pairs, per suite of `spec`) that must exit 1, and one A/A ab
    run (both clean) that must not (`aa=False`: none; false alarms are then None). An A/A run
    left undecided (exit 6) is counted apart, not as an alarm. Both sides run this checkout's
    interpreter; results go to a scratch root per run."""
    import sys

    from harness.runs import ab
    from harness.verdict.gate import run_gate

    caught = false_alarms = undecided = 0
    pair_counts: list[int] = []
    per_bench: dict[str, dict] = {}
    rows, seconds = [], []
    python = sys.executable
    for i in range(n):
        row = {"trial": i}
        runs = [("slowed", {"head": slowed_env}, "caught")] + (
            [("A/A", {}, "false_alarms")] if aa else []
        )
        for label, envs, key in runs:
            root = work / f"ab{i}-{'slowed' if key == 'caught' else 'aa'}"
            out = ab.run(
                project,
                root,
                {"base": python, "head": python},
                spec,
                pairs=pairs,
                envs=envs,
                bench_dir=bench_dir,
                log=lambda msg: None,
            )
            seconds.append(out["seconds"])
            pair_counts.append(max(out["pairs"].values()))
            outcome = run_gate(
                str(out["records"]["base"].path),
                str(out["records"]["head"].path),
                root=root,
                threshold=threshold,
                ab_threshold=pairs.threshold,
                history=False,
            )
            if key == "caught":
                caught += outcome.code == 1
            else:
                false_alarms += outcome.code == 1
                undecided += outcome.code == 6
            row[f"{label} exit"] = outcome.code
            row[f"{label} pairs"] = out["pairs"]
            row[f"{label} seconds"] = round(out["seconds"])
            cells = _tally(per_bench, outcome.rows, key, if_all_judged(outcome, threshold))
            row.update({f"{label} {name}": cell for name, cell in cells.items()})
        rows.append(row)
        log(json.dumps(row))
    return {
        "route": "ab",
        "trials": n,
        "pairs": pairs.describe(),
        "pairs_run": pair_counts,
        "aa_undecided": undecided if aa else None,
        "caught": caught,
        "false_alarms": false_alarms if aa else None,
        "per_benchmark": per_bench,
        "ab_seconds_median": sorted(seconds)[len(seconds) // 2],
        "rows": rows,
    }
