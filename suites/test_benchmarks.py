"""The benchmark bodies under pytest-benchmark, a second runner beside asv:

    pytest suites/test_benchmarks.py --benchmark-only                    # time, show, save nothing
    pytest suites/test_benchmarks.py --benchmark-only --benchmark-autosave
        # saves .benchmarks/<machine-id>/0001_*.json
    pytest suites/test_benchmarks.py --benchmark-only --benchmark-compare    # against the last save
    harness gate .benchmarks/<machine-id>/0001_*.json .benchmarks/<machine-id>/0002_*.json

The workloads are the ones the asv suites run (harness.measure.workloads), not a copy, and they are
timed by the same loop (harness.measure.timing via harness.measure.pytest_bench: warm-up calls,
CUDA events on a GPU, the run's fixed thread count); pytest-benchmark stores those samples, the
exact counters (`ops`, and `kernels` on CUDA) in `extra_info` and the environment fingerprint in
`machine_info` (suites/conftest.py). Cases that cannot run here skip with the reason.

A plain `pytest` run (the project's tests) skips these: timing every case takes minutes, and
tests/test_workloads.py already runs every body once. Any timing option (--benchmark-only,
--benchmark-enable, --benchmark-autosave, --benchmark-save, --benchmark-json,
--benchmark-compare) runs them. HARNESS_FULL=1 selects full sizes, as for asv.
"""

import pytest

from harness.core.user_models import suite_models
from harness.measure import pytest_bench
from harness.measure.workloads import (
    NotApplicable,
    amp,
    dataloader,
    device,
    fusion,
    models,
    transfer,
)


@pytest.fixture
def bench(request, benchmark):
    # `benchmark` is declared, not requested on the fly: pytest-benchmark's --benchmark-only
    # keeps exactly the tests whose declared fixtures include it.
    if not pytest_bench.wanted(request.config):
        benchmark.skipped = True  # pytest-benchmark's own flag: no "fixture not used" warning
        pytest.skip(
            "timing runs only with --benchmark-only, --benchmark-enable or a "
            "--benchmark-save/autosave/json/compare option (tests/test_workloads.py "
            "runs every body once)"
        )
    dev = device()

    def run(build, *args):
        try:
            fn = build(*args)
        except NotApplicable as e:
            benchmark.skipped = True
            pytest.skip(str(e))
        return pytest_bench.record(benchmark, fn, dev)

    run.device = dev
    yield run
    import torch._dynamo

    torch._dynamo.reset()
    torch.backends.cudnn.benchmark = False


def test_canary(bench):
    """The gate's canary chain (suites/benchmarks/canary.py): HARNESS_CANARY_EXTRA=1 adds one op,
    which the exact `ops` counter in extra_info catches."""
    from .benchmarks import canary

    if bench.device.type != "cpu":
        pytest.skip("the canary chain is a CPU benchmark (one thread), as in asv")
    x, more = canary._setup(), canary.injected()
    bench(lambda: lambda: canary.chain(x, more))


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("workload", fusion.WORKLOADS)
def test_fusion(bench, workload, mode):
    case = fusion.build(workload, bench.device)
    bench(case.eager if mode == "eager" else case.compiled)


@pytest.mark.parametrize("payload", transfer.PAYLOADS)
@pytest.mark.parametrize("non_blocking", [False, True])
@pytest.mark.parametrize("memory", transfer.MEMORY)
def test_transfer(bench, memory, non_blocking, payload):
    bench(transfer.build, memory, non_blocking, payload, bench.device)


@pytest.mark.parametrize("precision", amp.PRECISIONS)
@pytest.mark.parametrize("model", amp.MODELS)
def test_amp_training_step(bench, model, precision):
    bench(amp.build, model, precision, bench.device)


@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("cudnn_benchmark", [False, True])
@pytest.mark.parametrize("model", suite_models())
def test_models(bench, model, cudnn_benchmark, channels_last, mode):
    bench(models.build, model, mode, cudnn_benchmark, channels_last, bench.device)


@pytest.mark.parametrize("persistent_workers", [False, True])
@pytest.mark.parametrize("pin_memory", [False, True])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_epoch(bench, num_workers, pin_memory, persistent_workers):
    """One epoch (load + AlexNet steps) per round; batch 16."""

    def build():
        loader = dataloader.build_loader(
            num_workers, pin_memory, 16, persistent_workers, bench.device
        )
        step = dataloader.build_step(bench.device)
        return lambda: dataloader.epoch(loader, step, bench.device)

    bench(build)
