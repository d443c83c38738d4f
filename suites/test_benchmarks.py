"""The benchmark bodies under pytest-benchmark, for a quick in-process local comparison:

    pytest suites/test_benchmarks.py --benchmark-only                 # time and save nothing
    pytest suites/test_benchmarks.py --benchmark-only --benchmark-autosave
    pytest suites/test_benchmarks.py --benchmark-only --benchmark-compare   # against the last save

The workloads are the ones the asv suites run (harness.measure.workloads), not a copy. Each case keeps
one warm-up call (it absorbs torch.compile compilation) and times single calls; on CUDA every
call ends with a device synchronise. A plain `pytest` run skips these (their bodies are
already run once by tests/test_workloads.py); pass --benchmark-only or --benchmark-enable.
HARNESS_FULL=1 selects full sizes, as for asv.
"""

import pytest

from harness.core.env import synchronize
from harness.measure.workloads import NotApplicable, device, full_mode
from harness.measure.workloads import amp, dataloader, fusion, models, transfer
from harness.core.zoo import model_names

ROUNDS = 30 if full_mode() else 5


@pytest.fixture
def bench(request):
    opts = request.config.option
    if not (getattr(opts, "benchmark_only", False) or getattr(opts, "benchmark_enable", False)):
        pytest.skip("timing runs only with --benchmark-only or --benchmark-enable "
                    "(tests/test_workloads.py runs every body once)")
    # Requested only now: pytest-benchmark warns about a fixture that a skipped test never used.
    benchmark = request.getfixturevalue("benchmark")
    dev = device()

    def run(build, *args):
        try:
            fn = build(*args)
        except NotApplicable as e:
            pytest.skip(str(e))

        def call():
            fn()
            synchronize(dev)
        return benchmark.pedantic(call, warmup_rounds=1, rounds=ROUNDS, iterations=1)
    run.device = dev
    yield run
    import torch._dynamo

    torch._dynamo.reset()
    torch.backends.cudnn.benchmark = False


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
@pytest.mark.parametrize("model", model_names())
def test_models(bench, model, cudnn_benchmark, channels_last, mode):
    bench(models.build, model, mode, cudnn_benchmark, channels_last, bench.device)


@pytest.mark.parametrize("persistent_workers", [False, True])
@pytest.mark.parametrize("pin_memory", [False, True])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_epoch(bench, num_workers, pin_memory, persistent_workers):
    """One epoch (load + AlexNet steps) per round; batch 16."""
    def build():
        loader = dataloader.build_loader(num_workers, pin_memory, 16, persistent_workers, bench.device)
        step = dataloader.build_step(bench.device)
        return lambda: dataloader.epoch(loader, step, bench.device)
    bench(build)
