"""What a result set says at a glance: failed cases, the key ratios, DataLoader workers scaling
and the fusion suite's memory-bandwidth view. Shared by `harness bench` (printed after a run)
and `harness report` (plotted). Its tables escape what the result set says (harness.core.table).
Where the run has answer rows (harness.verdict.answers), its ratio tables get an answer column."""

from __future__ import annotations

import dataclasses
import statistics

from harness.core import escape
from harness.core.table import render
from harness.core.units import format_value
from harness.verdict import answers, gpurows
from harness.verdict.compare import central
from harness.verdict.results import Entry, ResultSet

# (label, benchmark name): every case of the benchmark is summarised
KEY_RATIOS = [
    ("compiled/eager, pointwise chain", "fusion.PointwiseChain.track_compiled_over_eager"),
    ("compiled/eager, norm + activation", "fusion.NormActivationBlock.track_compiled_over_eager"),
    ("compiled/eager, training step", "fusion.SmallModelTrainingStep.track_compiled_over_eager"),
    (
        "compiled/eager, cross-entropy loss",
        "fusion.CompiledCrossEntropyLoss.track_compiled_over_eager",
    ),
    ("fused/eager beyond the cache (bandwidth)", "fusion.MemoryBandwidth.track_fused_over_eager"),
    (
        "foreach or fused / for-loop optimizer step",
        "fusion.OptimizerStepOverForLoop.track_step_over_for_loop",
    ),
    (
        "SDPA backend / hand-written attention",
        "fusion.AttentionOverHandWritten.track_sdpa_over_hand_written",
    ),
    (
        "checkpointed/plain training step",
        "fusion.GradientCheckpointing.track_checkpointed_over_plain",
    ),
    ("pinned/pageable copy", "transfer.PinnedOverPageable.track_pinned_over_pageable"),
    ("uint8+convert/float32 copy", "transfer.Uint8ThenConvertOverFloat32.track_uint8_over_float32"),
    ("AMP/fp32 training step", "amp.AutocastOverFp32.track_autocast_over_fp32"),
    (
        "DDP step/single process",
        "distributed.DistributedStepOverSingleProcess.track_step_time_over_single_process",
    ),
    (
        "DDP no_sync/sync every micro-batch",
        "distributed.NoSyncAccumulation.track_no_sync_over_sync_every_micro_batch",
    ),
    (
        "DataParallel/DDP step",
        "distributed.DataParallelOverDistributed.track_data_parallel_over_distributed",
    ),
]
WORKERS_BENCH = "dataloader.LoadSyntheticImages.track_samples_per_second"
DDP_SCALING_BENCH = (
    "distributed.DistributedStepOverSingleProcess.track_step_time_over_single_process"
)
ALL_REDUCE_BENCH = "distributed.AllReduceOfGradientSizedTensor.track_bandwidth"
BANDWIDTH = "fusion.MemoryBandwidth."
# Below this fraction of a plain copy's bandwidth, a kernel is limited by its arithmetic, not by
# memory: halving its memory traffic (fusion) cannot halve its time. A judgement, stated where used.
COMPUTE_BOUND_BELOW = 0.5


def failures(rs: ResultSet) -> list[str]:
    """Benchmark cases that raised (asv stores None), named with their parameters. Answer rows
    whose check failed to run are not among them: answers have a block of their own
    (harness.verdict.answers.problems), and a run's exit code stays the benchmarks'."""
    return [name for name, e in sorted(rs.entries.items()) if e.failed and name not in rs.answers]


def cases(rs: ResultSet, benchmark: str) -> list[tuple[tuple[str, ...], Entry]]:
    """(parameter values, entry) for every case of `benchmark`; asv names a case
    `bench(p1, p2, ...)` with the parameter values as it stores them."""
    out = []
    for name, e in sorted(rs.entries.items()):
        if name == benchmark:
            out.append(((), e))
        elif name.startswith(benchmark + "(") and name.endswith(")"):
            out.append((tuple(name[len(benchmark) + 1 : -1].split(", ")), e))
    return out


def workers_scaling(rs: ResultSet) -> list[tuple[str, float]]:
    """samples/s with N workers over samples/s with 0 workers, the other settings equal (a
    persistent pool needs workers, so its baseline is the non-persistent 0-worker case)."""
    by = {
        params: e.value
        for params, e in cases(rs, WORKERS_BENCH)
        if len(params) == 4 and not e.failed and not e.skipped
    }
    rows = []
    for (workers, pin, batch, persistent), value in sorted(by.items()):
        base = by.get(("0", pin, batch, "False"))
        if workers != "0" and base:
            rows.append(
                (
                    f"workers {workers}/0 samples/s "
                    f"(pin={pin}, batch={batch}, persistent={persistent})",
                    value / base,
                )
            )
    return rows


def distributed_rows(rs: ResultSet) -> list[tuple[str, float]]:
    """Per world size: DDP scaling efficiency (single-process step time over DDP step time,
    the inverse of the paired ratio, median over rounds) and all-reduce bandwidth in GB/s."""
    rows = []
    for (world,), e in cases(rs, DDP_SCALING_BENCH):
        ratios = [s for s in (e.samples or [e.value]) if s and not e.failed and not e.skipped]
        if ratios:
            rows.append(
                (
                    f"DDP scaling efficiency, world size {world}",
                    statistics.median(1 / r for r in ratios),
                )
            )
    for (world,), e in cases(rs, ALL_REDUCE_BENCH):
        if not e.failed and not e.skipped:
            rows.append(
                (f"all-reduce GB/s, gradient-sized tensor, world size {world}", e.value / 1e9)
            )
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


def paired_rows(rs: ResultSet) -> list[tuple[str, str]]:
    """Every case whose unit is a paired ratio ("ratio"), as (name, value)."""
    return [
        (name, f"{e.value:.3g}")
        for name, e in sorted(rs.entries.items())
        if e.unit == "ratio" and not e.failed and not e.skipped
    ]


ANSWER_HEADER = "answer (error/tol)"


def with_answers(header: list[str], rows: list[tuple], cells: list[str]) -> tuple[list, list]:
    """The table with an answer column (harness.verdict.answers.cell) where any row has an
    answer; as it was where none has."""
    if not any(cells):
        return header, rows
    return header + [ANSWER_HEADER], [(*r, c) for r, c in zip(rows, cells)]


@dataclasses.dataclass
class Bandwidth:
    """One workload of fusion.MemoryBandwidth: medians of its rows."""

    workload: str
    bytes_eager: float
    bytes_fused: float
    gbps_eager: float
    gbps_fused: float
    gbps_copy: float
    fraction_eager: float
    fraction_fused: float
    fused_over_eager: float

    @property
    def compute_bound(self) -> bool:
        return self.fraction_eager < COMPUTE_BOUND_BELOW

    @property
    def bound(self) -> str:
        return (
            f"compute-bound (eager at {self.fraction_eager:.0%} of copy bandwidth)"
            if self.compute_bound
            else f"memory-bound (eager at {self.fraction_eager:.0%} of copy bandwidth)"
        )


def value_of(e: Entry | None) -> float | None:
    """The figure of a case that ran: the gate's central value (median of its samples), or None
    for a missing, failed or skipped case."""
    if e is None or e.failed or e.skipped:
        return None
    return central(e)


def bandwidth_view(rs: ResultSet) -> list[Bandwidth]:
    """Per workload of fusion.MemoryBandwidth with every row present, its medians."""
    fields = {
        "bytes_eager": "track_bytes_per_call_eager",
        "bytes_fused": "track_bytes_per_call_fused",
        "gbps_eager": "track_gbps_eager",
        "gbps_fused": "track_gbps_fused",
        "gbps_copy": "track_gbps_copy",
        "fraction_eager": "track_fraction_of_copy_bandwidth_eager",
        "fraction_fused": "track_fraction_of_copy_bandwidth_fused",
        "fused_over_eager": "track_fused_over_eager",
    }
    by: dict[str, dict[str, float | None]] = {}
    for field, method in fields.items():
        for params, e in cases(rs, BANDWIDTH + method):
            if len(params) == 1:
                by.setdefault(params[0].strip("'\""), {})[field] = value_of(e)
    return [
        Bandwidth(w, **vals)
        for w, vals in by.items()
        if len(vals) == len(fields) and None not in vals.values()
    ]


def bandwidth_rows(rs: ResultSet) -> list[tuple]:
    return [
        (
            b.workload,
            f"{b.bytes_eager / 2**20:.0f} -> {b.bytes_fused / 2**20:.0f} MiB",
            f"{1 / b.fused_over_eager:.2f}x",
            f"{b.gbps_eager:.3g} / {b.gbps_fused:.3g} / {b.gbps_copy:.3g}",
            f"{b.fraction_eager:.2f} / {b.fraction_fused:.2f}",
            b.bound.split(" (")[0],
        )
        for b in bandwidth_view(rs)
    ]


BANDWIDTH_HEADERS = [
    "workload",
    "bytes/call eager -> fused",
    "eager/fused time",
    "GB/s eager / fused / copy",
    "fraction of copy eager / fused",
    "eager is",
]


def device_label(rs: ResultSet, benchmark: str) -> str:
    """`busy NN%` / `ATen share NN%` of a benchmark (harness.verdict.gpurows): per side for one
    case, the range over several."""
    facts = [rs.facts.get(e.name) for _, e in cases(rs, benchmark)]
    return gpurows.label(facts[0]) if len(facts) == 1 else gpurows.span_label(facts)


# at most this many timing rows with device facts in the summary (the report lists every one)
MAX_DEVICE_ROWS = 25


def device_rows(rs: ResultSet) -> list[tuple[str, str, str]]:
    """(row, its value, busy / ATen share) of every row that keeps device facts."""
    out = []
    for name in sorted(rs.facts):
        e = rs.entries.get(name)
        label = gpurows.label(rs.facts[name])
        if e is not None and label:
            out.append((name, format_value(value_of(e), e.unit), label))
    return out


def _device_table(rs: ResultSet, gap: str) -> str:
    """The rows with device facts (busy / ATen share), after `gap`; "" when none has any."""
    timed = device_rows(rs)
    if not timed:
        return ""
    more = len(timed) - MAX_DEVICE_ROWS
    return (
        gap + "timing rows: busy = the GPU's share of a call "
        f"(below {gpurows.LAUNCH_BOUND:.0%}: launch-bound); ATen "
        "share = time in ATen kernels and compiled graphs over a call's wall time (CPU)\n"
        + render(["row", "value", "device"], timed[:MAX_DEVICE_ROWS]).rstrip("\n")
        + (f"\n... and {more} more (harness report lists every row)" if more > 0 else "")
    )


def summary_table(rs: ResultSet) -> str:
    """What `harness bench` prints of a run: its key ratios (or its paired ratios), the device
    facts, memory bandwidths and instruction counts, each where the run has them."""
    out = _ratio_tables(rs)
    counts = instruction_rows(rs)
    if counts:
        out = "" if out == NONE_SUMMARISED else out
        head = "instructions per call (callgrind: judged on any runner, docs/instructions.md)"
        whys = {note for _, value, note in counts if value == "n/a"}
        if len(whys) == 1 and all(value == "n/a" for _, value, _ in counts):
            # one reason for every row (no valgrind here): said once, with its command
            table = f"{len(counts)} rows n/a: {escape.terminal(whys.pop(), escape.MAX_PROSE)}"
        else:
            table = render(["row", "instructions", "note"], counts).rstrip("\n")
        out += ("\n\n" if out else "") + head + "\n" + table
    return out


NONE_SUMMARISED = "key ratios: none of the summarised benchmarks ran in these suites"


def instruction_rows(rs: ResultSet) -> list[tuple[str, str, str]]:
    """(row key, instructions per call, note) for every instruction row of the run: counted,
    not counted (the reason) or failed (the reason)."""
    out = []
    for name, e in sorted(rs.entries.items()):
        if e.unit != "instructions":
            continue
        key = name.split("(", 1)[1].rstrip(")").strip("'") if "(" in name else name
        why = rs.not_counted.get(name, "")
        if e.failed:
            out.append((key, "failed", why or "see asv's output"))
        elif e.skipped:
            out.append((key, "n/a", why or "n/a here, or not selected"))
        else:
            what = (rs.instructions.get(name) or {}).get("what", "")
            out.append((key, f"{e.value:,.0f}", what))
    return out


def _ratio_tables(rs: ResultSet) -> str:
    rows = key_ratio_rows(rs)
    bw = bandwidth_rows(rs)
    if not rows and not bw:
        paired = paired_rows(rs)
        if not paired:
            return NONE_SUMMARISED
        # suites of a project's own, or the models suite alone: their paired ratios
        header, paired = with_answers(
            ["benchmark", "value"], paired, [answers.cell(rs, name) for name, _ in paired]
        )
        return (
            "paired ratios (both sides timed in the same rounds; lower is faster)\n"
            + render(header, paired).rstrip("\n")
            + _device_table(rs, "\n\n")
        )
    labels = {label: device_label(rs, name) for label, name in KEY_RATIOS}
    shown = [(label, value, labels.get(label, "")) for label, value in rows]
    with_facts = any(cell for _, _, cell in shown)
    named = dict(KEY_RATIOS)
    said = [
        answers.cells(rs, [e.name for _, e in cases(rs, named[label])]) if label in named else ""
        for label, _ in rows
    ]
    header, table = with_answers(
        ["key ratio", "value"] + (["busy / ATen share"] if with_facts else []),
        shown if with_facts else rows,
        said,
    )
    out = (
        (
            "key ratios (lower is better for time ratios; workers scaling, scaling efficiency and "
            "GB/s: higher is better)\n" + render(header, table).rstrip("\n")
        )
        if rows
        else ""
    )
    out += _device_table(rs, "\n\n" if out else "")
    if bw:
        out += (
            ("\n\n" if out else "") + "memory bandwidth beyond the cache (fusion.MemoryBandwidth; "
            f"compute-bound: eager below {COMPUTE_BOUND_BELOW:.0%} of a plain copy's GB/s)\n"
            + render(BANDWIDTH_HEADERS, bw).rstrip("\n")
        )
    return out
