"""Every asv benchmark body, run once in-process with its smallest parameters (no asv).

A broken workload or suite fails here in seconds instead of in a nightly asv run. Timing loops
take one warm-up and one sample; only the pointwise chain is compiled with inductor (one tiny
compile), the other fusion workloads go through dynamo with the "eager" backend.
"""

import importlib
import inspect
import itertools
import math
import sys
from pathlib import Path

import pytest
import torch

from harness.measure import timing
from harness.measure.workloads import AREAS, NotApplicable
from harness.verdict import metrics

SUITES = Path(__file__).resolve().parents[1] / "suites"
PREFIXES = ("track_", "time_", "peakmem_", "mem_", "timeraw_")


def suite_module(area):
    """suites/benchmarks/<area>.py, imported as asv imports it."""
    if str(SUITES) not in sys.path:
        sys.path.insert(0, str(SUITES))
    return importlib.import_module(f"benchmarks.{area}")


def _benchmarks():
    for area in AREAS:
        module = suite_module(area)
        for cname, cls in vars(module).items():
            if (
                cname.startswith("_")
                or not inspect.isclass(cls)
                or cls.__module__ != module.__name__
            ):
                continue
            for mname, _ in inspect.getmembers(cls, inspect.isfunction):
                if mname.startswith(PREFIXES):
                    yield pytest.param(cls, mname, id=f"{area}.{cname}.{mname}")


def _combos(cls):
    params = getattr(cls, "params", None)
    if params is None:
        return [()]
    if not isinstance(params, tuple):  # asv: a single list means one parameter
        params = (params,)
    return list(itertools.product(*params))


@pytest.fixture(autouse=True)
def _one_sample(monkeypatch):
    monkeypatch.setattr(timing, "FAST", {"warmup": 1, "samples": 1, "budget_s": 0.0})
    monkeypatch.delenv("HARNESS_FULL", raising=False)
    monkeypatch.setenv(  # the smallest sizes, through the user's override (harness.core.sizes)
        "HARNESS_SIZES",
        "dataloader.length=8,dataloader.image=64,dataloader.epochs=1,bandwidth_elements=2^12,"
        "optimizer.layers=3,optimizer.width=4,"
        "attention.batch=1,attention.heads=2,attention.seq=8,attention.head_dim=4",
    )
    from harness.measure.workloads import bandwidth, checkpointing

    monkeypatch.setattr(bandwidth, "BACKEND", "eager")  # dynamo without inductor: no compile
    monkeypatch.setattr(
        checkpointing,
        "config",
        lambda device: {
            "batch": 2,
            "seq_len": 32,
            "d_model": 8,
            "nhead": 2,
            "dim_ff": 16,
            "nlayers": 2,
            "num_classes": 3,
        },
    )
    yield
    import torch._dynamo

    torch._dynamo.reset()


def _check_value(value, unit):
    metrics.kind_of(unit)  # the gate's contract: a known unit
    if isinstance(value, dict):
        assert value["number"] == 1 and value["samples"], value
        values = value["samples"]
    else:
        values = [value]
    for v in values:
        assert isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, (unit, value)
    if unit in ("ops", "kernels", "graph breaks", "bytes moved"):
        assert isinstance(value, int)
    if unit == "efficiency":
        assert all(0 < v <= 1 for v in values)


@pytest.mark.slow  # every benchmark body, run once: seconds each
@pytest.mark.parametrize("cls, method", list(_benchmarks()))
def test_benchmark_body_runs(cls, method):
    unit = getattr(getattr(cls, method), "unit", None)
    reasons, seen = [], set()
    # asv hands setup_cache's value to setup and the benchmark as their first argument
    cache = (cls().setup_cache(),) if hasattr(cls, "setup_cache") else ()
    for combo in _combos(cls):
        if combo and combo[0] in seen and cls.__module__.endswith("models"):
            continue  # models: each zoo model once, with its first applicable settings
        model, combo = combo[:1], cache + combo
        bench = cls()
        try:
            if hasattr(bench, "setup"):
                bench.setup(*combo)
        except NotApplicable as e:
            assert str(e), f"{cls.__name__}{combo}: NotApplicable without a reason"
            reasons.append(str(e))
            if hasattr(bench, "teardown"):
                bench.teardown(*combo)  # asv tears down after a skipped setup too
            continue
        try:
            case = getattr(bench, "case", None)
            if case is not None and case.name != "pointwise_chain":
                case.backend = "eager"
            _check_value(getattr(bench, method)(*combo), unit)
        finally:
            if hasattr(bench, "teardown"):
                bench.teardown(*combo)
        if not cls.__module__.endswith("models"):
            return  # the smallest applicable combination is enough here
        seen.update(model)
    if reasons and len(reasons) == len(_combos(cls)):
        pytest.skip(reasons[0])


def test_measure_keeps_a_warm_up_call():
    calls = []
    samples = timing.measure(lambda: calls.append(1), "cpu", warmup=1, samples=4, budget_s=10)
    assert len(samples) == 4 and len(calls) == 5
    with pytest.raises(ValueError, match="warm-up"):
        timing.measure(lambda: None, "cpu", warmup=0)


def test_pointwise_chain_counts_two_ops_eager():
    from harness.measure.workloads import fusion

    case = fusion.build("pointwise_chain", torch.device("cpu"))
    assert timing.ops_per_call(case.eager(), "cpu") == 2
    assert timing.graph_breaks(case.target, *case.example_args) == 0


def test_graph_breaks_are_counted():
    def broken(x):
        x = x.cos()
        print("graph break")
        return x.sin()

    assert timing.graph_breaks(broken, torch.ones(3)) == 1


def test_peak_memory_sees_a_large_allocation():
    n = 64 * 2**20
    assert timing.peak_memory_bytes(lambda: torch.ones(n // 4).add_(1), "cpu") >= n * 0.9


def test_not_applicable_is_a_skip_for_asv():
    # asv skips a case whose setup raises NotImplementedError; the reason must reach the user
    from harness.measure.workloads import transfer

    if torch.cuda.is_available():
        pytest.skip("CUDA present: transfer cases apply")
    with pytest.raises(NotImplementedError, match="needs CUDA"):
        transfer.build("pinned", True, "uint8", torch.device("cpu"))


def test_unknown_workload_names_the_choices():
    from harness.measure.workloads import fusion

    with pytest.raises(ValueError, match="pointwise_chain"):
        fusion.build("nope", torch.device("cpu"))
