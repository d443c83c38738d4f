"""Operator-level summaries stored beside a run's results: what the first bad night ran.

After asv has run the suites, `harness bench` runs this module once more over the same suites, in
a fresh process with the run's environment (threads, fast/full, inductor cache), and writes into
the run record while it is still being written (harness.core.records.writing: before the rename):

- `op-counts.json`, every run: for each exact counter row (unit "ops" or "kernels") the
  operators (or GPU kernels) behind its count, by name, so that a step of +1 ops can be named
  (`aten::sqrt +1`). The counter method itself is called again under
  `timing.recording_counts()`, so the breakdown is what `ops_per_call` counted, not a second
  opinion. Cheap: one warm-up and one profiled call per row.
      {"schema": 1, "rows": {ROW: {"unit": "ops", "total": 11, "counts": {"aten::sqrt": 2, ...}}
                                  | {"error": TEXT}}}
- `profiles.json`, full runs and `harness bench --profile`: per workload, torch.profiler over a
  few calls (CPU activity; CUDA too on a GPU), the TOP operators by self time, per call:
      {"schema": 1, "threads": N, "device": "cpu", "budget_s": 2.0,
       "workloads": {"canary.Canary": {"chain": SUMMARY, "reference": SUMMARY},
                     "models.Inference('alexnet', False, False)": {"call": SUMMARY}, ...},
       "skipped": {WORKLOAD: REASON}}
      SUMMARY = {"calls": profiled calls, "threads": N, "device": "cpu",
                 "self_cpu_us": total per call, "self_cuda_us": total per call,
                 "ops": [{"name", "calls", "self_cpu_us", "self_cuda_us"} per call, by self time]}

What a workload is: a benchmark class with one parameter combination; its row names are
`suite.Class.method(params)` and `workload_of(row)` maps a row to it. A class says what to profile
with a method `profile_targets(self, *params) -> {label: argument-free callable}` called after its
`setup` (asv ignores the name: it is not a benchmark prefix, and it leaves the benchmark's asv
version alone); a callable runs on the instance's `dev` (else the CPU), or give `(callable,
device)`. Classes without it are not profiled
(DataLoader epochs: the work runs in loader worker processes the profiler does not see).

Names and parameter strings come from the run's own asv/benchmarks.json, so rows here are named
exactly as in the results. Bounded: each target gets one warm-up call and profiled calls for about
BUDGET_S seconds (at most MAX_CALLS).

    python -m harness.measure.profiles --benchmark-dir suites/benchmarks --asv-dir RUN/asv \\
        --out RUN --suite canary [--profile]
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import sys
import time
from pathlib import Path

# the record format's half of this module (file names, the row -> workload rule, the readers)
# lives with the rest of the run record's format
from harness.core.records import OP_COUNTS, PROFILES, read_op_counts, read_profiles, workload_of  # noqa: E402,F401

SCHEMA = 1
COUNTER_UNITS = ("ops", "kernels")
TOP = 30
BUDGET_S = 2.0
MAX_CALLS = 50


# ---- profiling one callable ----


def summarize(averages, calls: int, device: str, threads: int, top: int = TOP) -> dict:
    """A compact summary of `prof.key_averages()` over `calls` calls: per call, top by self time
    (device time first on CUDA, where it is the time that matters)."""

    def dev_us(e):
        return float(getattr(e, "self_device_time_total", 0) or 0)

    ops = [
        {
            "name": e.key,
            "calls": round(e.count / calls, 3),
            "self_cpu_us": round(e.self_cpu_time_total / calls, 3),
            "self_cuda_us": round(dev_us(e) / calls, 3),
        }
        for e in averages
    ]
    key = (
        (lambda o: (o["self_cuda_us"], o["self_cpu_us"]))
        if device == "cuda"
        else (lambda o: (o["self_cpu_us"], o["self_cuda_us"]))
    )
    ops.sort(key=key, reverse=True)
    return {
        "calls": calls,
        "threads": threads,
        "device": device,
        "self_cpu_us": round(sum(o["self_cpu_us"] for o in ops), 3),
        "self_cuda_us": round(sum(o["self_cuda_us"] for o in ops), 3),
        "ops": ops[:top],
    }


def profile_callable(fn, device, budget_s: float = BUDGET_S, max_calls: int = MAX_CALLS) -> dict:
    """One warm-up call (compiles, lazy init), then as many profiled calls as fit in about
    `budget_s` (judged from the warm-up's time, at least 1, at most `max_calls`)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from harness.core.env import synchronize
    from harness.measure.activity import quiet_stderr

    device = torch.device(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    first = max(time.perf_counter() - t0, 1e-6)
    calls = int(max(1, min(max_calls, budget_s / first)))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with quiet_stderr(), profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        synchronize(device)
    return summarize(prof.key_averages(), calls, device.type, torch.get_num_threads())


# ---- the pass over a run's suites ----


def _real_params(cls) -> list[list]:
    """asv's normalisation: a flat `params` list is one parameter."""
    params = list(getattr(cls, "params", []) or [])
    if params and not isinstance(params[0], (list, tuple)):
        params = [params]
    return [list(p) for p in params]


def _classes(benchmarks: dict, suites: list[str]) -> dict[str, dict]:
    """`suite.Class` -> {"params": [[repr, ...], ...], "methods": {method: unit}} from asv's
    benchmarks.json."""
    out: dict[str, dict] = {}
    for name, info in sorted(benchmarks.items()):
        if not isinstance(info, dict) or name.count(".") != 2 or name.split(".")[0] not in suites:
            continue
        cls_name, method = name.rsplit(".", 1)
        entry = out.setdefault(cls_name, {"params": info.get("params") or [], "methods": {}})
        entry["methods"][method] = info.get("unit")
    return out


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


def collect(
    bench_dir: Path,
    benchmarks: dict,
    suites: list[str],
    *,
    profile: bool,
    budget_s: float = BUDGET_S,
    log=None,
) -> tuple[dict, dict | None]:
    """(op counts, profiles or None) for the suites' benchmarks listed in `benchmarks`."""
    import torch

    log = log or sys.stderr

    from harness.core.env import pick_device

    sys.path.insert(0, str(Path(bench_dir).resolve().parent))
    package = Path(bench_dir).name
    rows: dict[str, dict] = {}
    workloads: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for cls_name, entry in _classes(benchmarks, suites).items():
        suite, name = cls_name.split(".")
        module = importlib.import_module(f"{package}.{suite}")
        cls = getattr(module, name, None)
        counters = {m: unit for m, unit in entry["methods"].items() if unit in COUNTER_UNITS}
        wants_profile = profile and callable(getattr(cls, "profile_targets", None))
        if cls is None or not (counters or wants_profile):
            continue
        real = _real_params(cls)
        if [len(p) for p in real] != [len(p) for p in entry["params"]]:
            print(f"profiles: {cls_name}: parameters differ from asv's list; skipped", file=log)
            continue
        for values, texts in zip(itertools.product(*real), itertools.product(*entry["params"])):
            suffix = f"({', '.join(texts)})" if texts else ""
            inst = cls()
            try:
                why = _setup(module, inst, values)
                if why:
                    skipped[cls_name + suffix] = why
                    continue
                for method, unit in counters.items():
                    rows[f"{cls_name}.{method}{suffix}"] = _count(inst, method, unit, values)
                if wants_profile:
                    workloads[cls_name + suffix] = _profile_targets(inst, values, budget_s)
            finally:
                _teardown(inst, values)
    profiles = None
    if profile:
        profiles = {
            "schema": SCHEMA,
            "threads": torch.get_num_threads(),
            "device": pick_device().type,
            "budget_s": budget_s,
            "top": TOP,
            "workloads": workloads,
            "skipped": skipped,
        }
    return {"schema": SCHEMA, "rows": rows}, profiles


def _setup(module, inst, values) -> str | None:
    """asv's order: the module's setup, then the class's. Returns why the case is skipped."""
    try:
        if callable(getattr(module, "setup", None)):
            module.setup(*values)
        if callable(getattr(inst, "setup", None)):
            inst.setup(*values)
    except NotImplementedError as exc:  # n/a here (workloads.NotApplicable)
        return str(exc)
    except Exception as exc:  # a failing setup fails asv's row too; not ours to judge
        return f"setup failed: {_describe(exc)}"
    return None


def _count(inst, method: str, unit: str, values) -> dict:
    """The counter method called again, its breakdown recorded by harness.measure.timing."""
    from harness.measure import timing

    try:
        with timing.recording_counts() as got:
            total = getattr(inst, method)(*values)
    except Exception as exc:
        return {"error": _describe(exc)}
    unit, counts = got[-1] if got else (unit, {})
    return {"unit": unit, "total": total, "counts": dict(sorted(counts.items()))}


def _profile_targets(inst, values, budget_s: float) -> dict:
    try:
        targets = inst.profile_targets(*values)
    except Exception as exc:
        return {"error": f"profile_targets failed: {_describe(exc)}"}
    out = {}
    for label, target in targets.items():
        fn, dev = target if isinstance(target, tuple) else (target, getattr(inst, "dev", "cpu"))
        try:
            out[label] = profile_callable(fn, dev, budget_s)
        except Exception as exc:
            out[label] = {"error": _describe(exc)}
    return out


def _teardown(inst, values) -> None:
    if callable(getattr(inst, "teardown", None)):
        try:
            inst.teardown(*values)
        except Exception:  # teardown after a skipped setup may find nothing to tear down
            pass


def wanted(benchmarks: dict, suites: list[str], profile: bool) -> bool:
    """Whether the pass has anything to do: a counter row in the suites, or profiling asked."""
    return profile or any(
        isinstance(i, dict) and i.get("unit") in COUNTER_UNITS and n.split(".")[0] in suites
        for n, i in benchmarks.items()
    )


def ran_benchmarks(asv_dir: Path, benchmarks: dict) -> dict:
    """Only the benchmarks asv ran in this run: benchmarks.json lists every discovered one, but a
    shard (`harness bench --shard`) or `--bench` runs part of them."""
    ran: set[str] = set()
    for f in asv_dir.glob("*/*.json"):
        if f.name != "machine.json":
            try:
                ran.update(json.loads(f.read_text(encoding="utf-8")).get("results") or {})
            except (OSError, ValueError, AttributeError):
                pass  # not a result file: the pass covers every listed benchmark
    return {n: i for n, i in benchmarks.items() if n in ran} if ran else benchmarks


def main(argv: list[str] | None = None) -> int:
    from harness.core.files import write_json_atomic

    p = argparse.ArgumentParser(
        prog="python -m harness.measure.profiles", description=__doc__.split("\n")[0]
    )
    p.add_argument("--benchmark-dir", required=True, type=Path)
    p.add_argument(
        "--asv-dir", required=True, type=Path, help="the run's asv folder (benchmarks.json)"
    )
    p.add_argument("--out", required=True, type=Path, help="the run record being written")
    p.add_argument("--suite", action="append", required=True)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--budget-s", type=float, default=BUDGET_S)
    args = p.parse_args(argv)
    benchmarks = ran_benchmarks(
        args.asv_dir, json.loads((args.asv_dir / "benchmarks.json").read_text(encoding="utf-8"))
    )
    counts, profiles = collect(
        args.benchmark_dir, benchmarks, args.suite, profile=args.profile, budget_s=args.budget_s
    )
    write_json_atomic(args.out / OP_COUNTS, counts)
    if profiles is not None:
        write_json_atomic(args.out / PROFILES, profiles)
    print(
        f"profiles: {len(counts['rows'])} counter row(s) broken down by operator"
        + (f", {len(profiles['workloads'])} workload(s) profiled" if profiles else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
