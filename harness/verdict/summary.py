"""What a result set says at a glance: failed cases, the key ratios and DataLoader workers scaling.
Shared by `harness bench` (printed after a run) and `harness report` (plotted)."""

from __future__ import annotations

import statistics

from harness.core.table import render
from harness.verdict.results import Entry, ResultSet

# (label, benchmark name): every case of the benchmark is summarised
KEY_RATIOS = [
    ("compiled/eager, pointwise chain", "fusion.PointwiseChain.track_compiled_over_eager"),
    ("compiled/eager, norm + activation", "fusion.NormActivationBlock.track_compiled_over_eager"),
    ("compiled/eager, training step", "fusion.SmallModelTrainingStep.track_compiled_over_eager"),
    ("pinned/pageable copy", "transfer.PinnedOverPageable.track_pinned_over_pageable"),
    ("uint8+convert/float32 copy", "transfer.Uint8ThenConvertOverFloat32.track_uint8_over_float32"),
    ("AMP/fp32 training step", "amp.AutocastOverFp32.track_autocast_over_fp32"),
    ("DDP step/single process", "distributed.DistributedStepOverSingleProcess.track_step_time_over_single_process"),
    ("DDP no_sync/sync every micro-batch", "distributed.NoSyncAccumulation.track_no_sync_over_sync_every_micro_batch"),
    ("DataParallel/DDP step", "distributed.DataParallelOverDistributed.track_data_parallel_over_distributed"),
]
WORKERS_BENCH = "dataloader.LoadSyntheticImages.track_samples_per_second"
DDP_SCALING_BENCH = "distributed.DistributedStepOverSingleProcess.track_step_time_over_single_process"
ALL_REDUCE_BENCH = "distributed.AllReduceOfGradientSizedTensor.track_bandwidth"


def failures(rs: ResultSet) -> list[str]:
    """Benchmark cases that raised (asv stores None), named with their parameters."""
    return [name for name, e in sorted(rs.entries.items()) if e.failed]


def cases(rs: ResultSet, benchmark: str) -> list[tuple[tuple[str, ...], Entry]]:
    """(parameter values, entry) for every case of `benchmark`; asv names a case
    `bench(p1, p2, ...)` with the parameter values as it stores them."""
    out = []
    for name, e in sorted(rs.entries.items()):
        if name == benchmark:
            out.append(((), e))
        elif name.startswith(benchmark + "(") and name.endswith(")"):
            out.append((tuple(name[len(benchmark) + 1:-1].split(", ")), e))
    return out


def workers_scaling(rs: ResultSet) -> list[tuple[str, float]]:
    """samples/s with N workers over samples/s with 0 workers, the other settings equal (a
    persistent pool needs workers, so its baseline is the non-persistent 0-worker case)."""
    by = {params: e.value for params, e in cases(rs, WORKERS_BENCH)
          if len(params) == 4 and not e.failed and not e.skipped}
    rows = []
    for (workers, pin, batch, persistent), value in sorted(by.items()):
        base = by.get(("0", pin, batch, "False"))
        if workers != "0" and base:
            rows.append((f"workers {workers}/0 samples/s (pin={pin}, batch={batch}, persistent={persistent})",
                         value / base))
    return rows


def distributed_rows(rs: ResultSet) -> list[tuple[str, float]]:
    """Per world size: DDP scaling efficiency (single-process step time over DDP step time,
    the inverse of the paired ratio, median over rounds) and all-reduce bandwidth in GB/s."""
    rows = []
    for (world,), e in cases(rs, DDP_SCALING_BENCH):
        ratios = [s for s in (e.samples or [e.value]) if s and not e.failed and not e.skipped]
        if ratios:
            rows.append((f"DDP scaling efficiency, world size {world}", statistics.median(1 / r for r in ratios)))
    for (world,), e in cases(rs, ALL_REDUCE_BENCH):
        if not e.failed and not e.skipped:
            rows.append((f"all-reduce GB/s, gradient-sized tensor, world size {world}", e.value / 1e9))
    return rows


def _span(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.3g}"
    return f"{min(values):.3g} .. {max(values):.3g}"


def key_ratio_rows(rs: ResultSet) -> list[tuple[str, str]]:
    rows = []
    for label, name in KEY_RATIOS:
        found = [e for _, e in cases(rs, name)]
        if not found:
            continue
        vals = [e.value for e in found if not e.failed and not e.skipped]
        detail = "" if len(found) == 1 else f"  ({len(vals)} of {len(found)} cases)"
        rows.append((label, _span(vals) + detail))
    rows += [(label, f"{v:.3g}") for label, v in workers_scaling(rs) + distributed_rows(rs)]
    return rows


def summary_table(rs: ResultSet) -> str:
    rows = key_ratio_rows(rs)
    if not rows:
        return "key ratios: none of the summarised benchmarks ran in these suites"
    return ("key ratios (lower is better for time ratios; workers scaling, scaling efficiency and "
            "GB/s: higher is better)\n"
            + render(["key ratio", "value"], rows).rstrip("\n"))
