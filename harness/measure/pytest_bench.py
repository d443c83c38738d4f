"""pytest-benchmark as a second runner over the same timing path as asv.

pytest-benchmark times with its own loop (`benchmark(fn)` calibrates loops per round,
`benchmark.pedantic` times single calls with its own timer). Neither knows our rules (at least
one warm-up call that absorbs compilation, CUDA events on the stream instead of a synchronise
after every call, a timed call that compiled is an error, the run's fixed thread count), so the
cases here time through harness.measure.timing and hand pytest-benchmark the samples it took:
pytest-benchmark then shows, saves (`--benchmark-autosave`, `--benchmark-save-data`) and compares
(`--benchmark-compare`) exactly what asv would have stored. The deterministic counters (aten ops,
and GPU kernels on CUDA) go into `extra_info`, where `harness gate` reads them as exact rows.

`update_machine_info` adds the run's machine name and environment fingerprint to the saved
JSON's `machine_info` under MACHINE_INFO_KEY (suites/conftest.py calls it from pytest-benchmark's
`pytest_benchmark_update_machine_info` hook); the gate's loader reads it back
(harness.verdict.pytest_benchmark).

Nothing here imports torch at module import: the pytest hooks load it only when used.
"""

from __future__ import annotations

from collections.abc import Callable

# machine_info[MACHINE_INFO_KEY] = {"machine": <asv-style machine name>, "fingerprint": {...}}
from harness.core.records import PYTEST_BENCHMARK_KEY as MACHINE_INFO_KEY  # noqa: E402

# pytest-benchmark options that ask for timings; without one the cases skip (see `wanted`)
TIMING_OPTIONS = (
    "benchmark_only",
    "benchmark_enable",
    "benchmark_save",
    "benchmark_autosave",
    "benchmark_json",
    "benchmark_compare",
)


def wanted(config) -> bool:
    """Whether this pytest run asked for timings. A plain `pytest` (the project's test run) does
    not: timing all cases would take minutes, and tests/test_workloads.py already runs every
    benchmark body once. Under pytest-xdist pytest-benchmark disables itself; so do the cases."""
    opts = config.option
    asked = any(getattr(opts, name, None) for name in TIMING_OPTIONS)
    session = getattr(config, "_benchmarksession", None)
    return bool(asked) and not getattr(session, "disabled", True)


def update_machine_info(machine_info: dict) -> None:
    """Record the run's machine name and environment fingerprint (threads fixed first, so the
    fingerprint states the count the cases ran with)."""
    from harness.core.env import fingerprint, machine_name
    from harness.measure.threads import fix_threads

    fix_threads()
    machine_info[MACHINE_INFO_KEY] = {"machine": machine_name(), "fingerprint": fingerprint()}


def counters(fn: Callable[[], object], device) -> dict[str, int]:
    """The exact counters of one call: aten ops always, GPU kernels on CUDA.

    Seeded before each count: a call whose work depends on random draws (the DataLoader epoch's
    shuffling and random crops) otherwise counted 2938 ops in one run and 3006 in the next."""
    import torch

    from harness.core.env import seed_everything
    from harness.measure import timing

    seed_everything()
    out = {"ops": timing.ops_per_call(fn, device)}
    if torch.device(device).type == "cuda":
        seed_everything()
        out["kernels"] = timing.kernels_per_call(fn, device)
    return out


def record(benchmark, fn: Callable[[], object], device, **measure_kwargs) -> list[float]:
    """Time `fn` through timing.measure and store the samples and counters in `benchmark`
    (pytest-benchmark's fixture). Returns the samples."""
    from harness.measure import timing
    from harness.measure.threads import fix_threads

    fix_threads()
    samples = timing.measure(fn, device, **measure_kwargs)
    benchmark.extra_info.update(counters(fn, device))
    _hand_over(benchmark, samples)
    return samples


def _hand_over(benchmark, samples: list[float]) -> None:
    # pytest-benchmark has no public call for "these are the samples"; its own timing loops end
    # in `stats = self._make_stats(iterations)` + `stats.update(duration)` per round, so we do
    # the same (iterations=1: one call per sample, as timing.measure takes them). The other way,
    # `pedantic` with a timer that replays our samples, would run the workload again for nothing
    # and fake a clock. `_mode` marks the fixture used, as its own modes do: a second use raises
    # and no "fixture was not used" warning is printed.
    if benchmark._mode:
        raise RuntimeError(f"benchmark fixture already used ({benchmark._mode})")
    benchmark._mode = "harness.measure.timing"
    stats = benchmark._make_stats(1)
    for s in samples:
        stats.update(s)
