"""The measuring checks of the GPU proof kit (`harness gpu-check`, harness.runs.gpucheck).

Each check runs the harness's own workloads (harness.measure.workloads) through its own timing
(harness.measure.timing) on a device and returns a JSON-able dict: `status` ("pass", "fail" or
"recorded" for figures without a pass mark), `figures`, and `detail` in words. On a CPU the same
code runs wherever the claim has a CPU side (so the tests exercise it); what needs CUDA raises
NotApplicable with the reason. torch is imported inside the functions: the kit's dry run and its
orchestration must work on a machine where torch is slow to import or absent.
"""

from __future__ import annotations

import statistics
import time

# CUDA events and wall-clock-with-synchronise must agree this closely on a long known kernel.
EVENTS_VS_WALL_TOLERANCE = 0.10
# A sample may be at most this fraction of the first (compiling) call: compilation takes
# seconds, a compiled pointwise call microseconds, so any sample holding a compile fails.
COMPILE_SHARE_LIMIT = 0.10
# `x.cos().cos()`: two kernels eager, one fused kernel compiled, exactly.
POINTWISE_KERNELS = {"eager": 2, "compiled": 1}
SAMPLING = {"warmup": 3, "samples": 20, "budget_s": 1.0}
# timing.measure_paired (the gate's paired rows): one known kernel over itself must read 1, two
# over one must read 2, each within this; the window may overrun by this fraction of itself
# (the final synchronise, reading the events), and must give this share of its blocks.
PAIRED_TOLERANCE = 0.05
PAIRED_OVERRUN = 0.5
PAIRED_BLOCK_SHARE = 0.75
# a CPU rehearsal runs the same code, but both clocks are then the host's: nothing to judge
NO_MARK_ON_CPU = "no pass mark on CPU (CUDA events not exercised)"


def _result(status: str, figures: dict, detail: str) -> dict:
    return {"status": status, "figures": figures, "detail": detail}


def relative_difference(a: list[float], b: list[float]) -> float:
    """|median(a) / median(b) - 1|: how far two timings of the same calls disagree."""
    return abs(statistics.median(a) / statistics.median(b) - 1.0)


def wall_clock_samples(fn, device, *, warmup: int, samples: int) -> list[float]:
    """The plain way to time a GPU call: synchronise, start the clock, call, synchronise, stop."""
    from harness.core.env import synchronize

    for _ in range(warmup):
        fn()
    out = []
    for _ in range(samples):
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        out.append(time.perf_counter() - t0)
    return out


def known_kernel(device, n: int):
    """An n x n float32 matrix product into a preallocated output: one long kernel whose work
    (2 n^3 flops) is known, so launch overhead is a negligible part of its time."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device)
    b = torch.randn(n, n, generator=gen).to(device)
    c = torch.empty(n, n, device=device)
    return (lambda: torch.mm(a, b, out=c)), 2.0 * n**3


def check_timing(device, n: int | None = None) -> dict:
    """CUDA-event samples (timing.measure) vs wall clock with synchronise, same kernel."""
    from harness.measure import timing

    cuda = device.type == "cuda"
    n = n or (8192 if cuda else 256)
    fn, flops = known_kernel(device, n)
    events = timing.measure(
        fn, device, warmup=SAMPLING["warmup"], samples=SAMPLING["samples"], budget_s=2.0
    )
    wall = wall_clock_samples(fn, device, warmup=1, samples=len(events))
    diff = relative_difference(events, wall)
    ok = diff <= EVENTS_VS_WALL_TOLERANCE
    # On a CPU both clocks are perf_counter: nothing about CUDA events is proven, so no pass mark.
    status = ("pass" if ok else "fail") if cuda else "recorded"
    figures = {
        "kernel": f"mm {n}x{n} float32",
        "samples": len(events),
        "timer": "cuda events" if cuda else "perf_counter (CPU: CUDA events not exercised)",
        "timer_median_s": statistics.median(events),
        "wall_median_s": statistics.median(wall),
        "relative_difference": round(diff, 4),
        "tolerance": EVENTS_VS_WALL_TOLERANCE,
        "tflops": round(flops / statistics.median(events) / 1e12, 2),
    }
    detail = f"timer and wall clock differ by {diff:.1%} (limit {EVENTS_VS_WALL_TOLERANCE:.0%})"
    return _result(status, figures, detail if cuda else f"{NO_MARK_ON_CPU}: {detail}")


def expected_samples(window_s: float, block_s: float) -> int:
    """measure_paired's sample count for a window: its quieter blocks (timing.quiet_blocks)."""
    from harness.measure import timing

    return timing.quiet_count(int(window_s / block_s))


def judge_paired(
    same: list[float], double: list[float], seconds: float, window_s: float, block_s: float
) -> tuple[bool, str]:
    """The pass mark of check_paired, apart so that it is tested without a GPU."""
    if not same or not double:
        return False, "no paired samples"
    m_same, m_double = statistics.median(same), statistics.median(double)
    problems = []
    if abs(m_same - 1.0) > PAIRED_TOLERANCE:
        problems.append(f"a kernel over itself read {m_same:.3f}, not 1")
    if abs(m_double / 2.0 - 1.0) > PAIRED_TOLERANCE:
        problems.append(f"two kernels over one read {m_double:.3f}, not 2")
    if len(same) < PAIRED_BLOCK_SHARE * expected_samples(window_s, block_s):
        problems.append(f"{len(same)} samples from a {window_s:g} s window of {block_s:g} s blocks")
    if seconds > (1.0 + PAIRED_OVERRUN) * window_s:
        problems.append(f"a {window_s:g} s window took {seconds:.1f} s")
    return not problems, "; ".join(problems) or (
        f"1 kernel / itself {m_same:.3f}, 2 kernels / 1 {m_double:.3f}, "
        f"{len(same)} samples in {seconds:.1f} s"
    )


def check_paired(device, n: int | None = None) -> dict:
    """timing.measure_paired's default mode on the device, as the gate's paired rows use it: a
    wall-clock window of alternating rounds, one sample per quarter second (fastest over
    fastest), on CUDA one event pair per call and round starts taken on the host, one
    synchronise at the end. A matmul over itself must read 1 and two over one 2 (judge_paired).
    On a CPU the same code runs through the CPU loop: figures recorded without a pass mark."""
    from harness.measure import timing

    cuda = device.type == "cuda"
    # 2048^2: ~0.3 ms on a current GPU, compute-bound (launch overhead negligible), short enough
    # that the ~1000 launches CUDA queues ahead of the host stay well inside one block
    n = n or (2048 if cuda else 128)
    fn, _ = known_kernel(device, n)

    def twice():
        fn()
        fn()

    window = timing.loop_settings()["paired_window_s"]
    t0 = time.perf_counter()
    same = timing.measure_paired(fn, fn, device)
    seconds = time.perf_counter() - t0
    double = timing.measure_paired(twice, fn, device)
    ok, detail = judge_paired(same, double, seconds, window, timing.BLOCK_S)
    status = ("pass" if ok else "fail") if cuda else "recorded"
    figures = {
        "kernel": f"mm {n}x{n} float32",
        "window_s": window,
        "block_s": timing.BLOCK_S,
        "samples": len(same),
        "seconds": round(seconds, 2),
        "same_over_same_median": round(statistics.median(same), 4),
        "double_over_single_median": round(statistics.median(double), 4),
        "timer": "cuda events" if cuda else "CPU loop (CUDA events not exercised)",
    }
    return _result(status, figures, detail if cuda else f"{NO_MARK_ON_CPU}: {detail}")


def compile_kept_out(
    first_call_s: float, samples: list[float], compiles_during_samples: int
) -> bool:
    return compiles_during_samples == 0 and max(samples) < COMPILE_SHARE_LIMIT * first_call_s


def check_warmup(device, backend: str = "inductor") -> dict:
    """timing.measure's warm-up absorbs torch.compile: the first call compiles, no sample does."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from harness.core.env import synchronize
    from harness.measure import timing
    from harness.measure.workloads import fusion

    def graphs() -> int:
        return int(counters["stats"]["unique_graphs"])

    torch._dynamo.reset()
    counters.clear()
    case = fusion.build("pointwise_chain", device)
    case.backend = backend
    compiled = case.compiled()
    state: dict = {"calls": 0}

    def call():
        state["calls"] += 1
        if state["calls"] > 1:
            return compiled()
        t0 = time.perf_counter()  # the warm-up call: timed by hand to show what it absorbed
        compiled()
        synchronize(device)
        state["first_s"] = time.perf_counter() - t0
        state["graphs"] = graphs()
        return None

    samples = timing.measure(call, device, warmup=1, samples=20, budget_s=1.0)
    during = graphs() - state["graphs"]
    torch._dynamo.reset()
    ok = state["graphs"] >= 1 and compile_kept_out(state["first_s"], samples, during)
    figures = {
        "backend": backend,
        "first_call_s": round(state["first_s"], 4),
        "max_sample_s": max(samples),
        "median_sample_s": statistics.median(samples),
        "graphs_compiled_in_warmup": state["graphs"],
        "graphs_compiled_during_samples": during,
        "samples": len(samples),
    }
    return _result(
        "pass" if ok else "fail",
        figures,
        f"warm-up call {state['first_s']:.3g} s (compiles {state['graphs']} graph(s)); "
        f"slowest sample {max(samples):.3g} s; {during} compile(s) during samples",
    )


def judge_kernels(counts: dict[str, dict[str, int]]) -> tuple[bool, str]:
    """pointwise_chain must launch exactly 2 kernels eager and 1 compiled; others are recorded."""
    got = counts.get("pointwise_chain", {})
    ok = all(got.get(mode) == want for mode, want in POINTWISE_KERNELS.items())
    return ok, (
        f"x.cos().cos(): {got.get('eager')} kernels eager, {got.get('compiled')} compiled "
        f"(want {POINTWISE_KERNELS['eager']} and {POINTWISE_KERNELS['compiled']})"
    )


def check_kernels(device) -> dict:
    """GPU kernels per call, eager and compiled, for every fusion workload (profiler)."""
    import torch._dynamo

    from harness.measure import timing
    from harness.measure.workloads import fusion, require_cuda

    require_cuda(device, "counting GPU kernels")
    counts: dict[str, dict[str, int]] = {}
    for name in fusion.WORKLOADS:
        case = fusion.build(name, device)
        counts[name] = {
            "eager": timing.kernels_per_call(case.eager(), device),
            "compiled": timing.kernels_per_call(case.compiled(), device),
        }
        torch._dynamo.reset()
    ok, detail = judge_kernels(counts)
    return _result("pass" if ok else "fail", {"kernels_per_call": counts}, detail)


def _median_time(fn, device) -> float:
    from harness.measure import timing

    return statistics.median(timing.measure(fn, device, **SAMPLING))


def check_transfer(device) -> dict:
    """Host-to-device copies: pageable, already pinned, pinned on every call; non_blocking;
    uint8-then-convert vs float32 (harness.measure.workloads.transfer)."""
    from harness.measure.workloads import require_cuda, transfer

    require_cuda(device, "a host-to-device copy")
    times = {}
    for memory in transfer.MEMORY:
        for nb in (False, True):
            for payload in transfer.PAYLOADS:
                fn = transfer.build(memory, nb, payload, device)
                times[f"{memory}/non_blocking={nb}/{payload}"] = _median_time(fn, device)

    def r(a, b):
        return round(times[a] / times[b], 4)

    ratios = {
        "pinned_over_pageable": r(
            "pinned/non_blocking=True/float32", "pageable/non_blocking=False/float32"
        ),
        "pin_then_copy_over_pageable": r(
            "pin_then_copy/non_blocking=True/float32", "pageable/non_blocking=False/float32"
        ),
        "non_blocking_over_blocking_pinned": r(
            "pinned/non_blocking=True/float32", "pinned/non_blocking=False/float32"
        ),
        "uint8_over_float32_pinned": r(
            "pinned/non_blocking=True/uint8", "pinned/non_blocking=True/float32"
        ),
    }
    return _result(
        "recorded",
        {"batch": list(transfer.batch_shape()), "median_s": times, "ratios": ratios},
        "copy times per host memory, non_blocking and payload; ratios are time ratios",
    )


def check_amp(device) -> dict:
    """fp32 vs autocast training steps (fp16 + GradScaler, bf16) for AlexNet and the LSTM."""
    from harness.measure.workloads import NotApplicable, amp, size

    times, ratios, skipped = {}, {}, {}
    for model in amp.MODELS:
        per = {}
        for precision in amp.PRECISIONS:
            try:
                per[precision] = _median_time(amp.build(model, precision, device), device)
            except NotApplicable as exc:
                skipped[f"{model}/{precision}"] = str(exc)
        times[model] = per
        ratios.update(
            {
                f"{model}/{p}_over_fp32": round(per[p] / per["fp32"], 4)
                for p in ("bf16", "fp16")
                if p in per and "fp32" in per
            }
        )
    return _result(
        "recorded",
        {"size": size(), "median_s": times, "ratios": ratios, "not_applicable": skipped},
        "AMP step time over fp32 step time (lower is better)",
    )


CONV_MODELS = ("alexnet", "resnet18")


def check_conv(device) -> dict:
    """cudnn.benchmark and channels_last on/off for the conv models, inference and training."""
    from harness.measure.workloads import NotApplicable, models, size

    times, skipped = {}, {}
    try:
        for model in CONV_MODELS:
            for mode in ("inference", "training"):
                for bench in (False, True):
                    for cl in (False, True):
                        key = f"{model}/{mode}/cudnn_benchmark={bench}/channels_last={cl}"
                        try:
                            times[key] = _median_time(
                                models.build(model, mode, bench, cl, device), device
                            )
                        except NotApplicable as exc:
                            skipped[key] = str(exc)
    finally:
        models.set_cudnn_benchmark(False)
    ratios = {}
    for key, t in times.items():
        if key.endswith("channels_last=True"):
            base = times.get(key.replace("channels_last=True", "channels_last=False"))
            if base:
                ratios[
                    key.replace("/channels_last=True", "") + ": channels_last_over_contiguous"
                ] = round(t / base, 4)
        if "cudnn_benchmark=True" in key and key.endswith("channels_last=False"):
            base = times.get(key.replace("cudnn_benchmark=True", "cudnn_benchmark=False"))
            if base:
                ratios[key.replace("/cudnn_benchmark=True", "") + ": benchmark_over_default"] = (
                    round(t / base, 4)
                )
    return _result(
        "recorded",
        {"size": size(), "median_s": times, "ratios": ratios, "not_applicable": skipped},
        "time ratios: channels_last over contiguous, cudnn.benchmark on over off",
    )


def check_dataloader(device, num_workers: int = 2) -> dict:
    """DataLoader pin_memory off vs on (pinned batches, non_blocking copies), AlexNet steps."""
    from harness.measure.workloads import NotApplicable, dataloader

    figures, skipped = {}, {}
    step = dataloader.build_step(device)
    for pin in (False, True):
        try:
            loader = dataloader.build_loader(num_workers, pin, 16, False, device)
        except NotApplicable as exc:
            skipped[f"pin_memory={pin}"] = str(exc)
            continue
        stats = dataloader.run_epochs(loader, step, device)
        figures[f"pin_memory={pin}"] = {
            "samples_per_s": statistics.median(stats.samples_per_s),
            "efficiency": statistics.median(stats.efficiency),
        }
        del loader
    ratio = None
    if len(figures) == 2:
        ratio = round(
            figures["pin_memory=True"]["samples_per_s"]
            / figures["pin_memory=False"]["samples_per_s"],
            4,
        )
    return _result(
        "recorded",
        {
            "num_workers": num_workers,
            "batch_size": 16,
            "runs": figures,
            "pinned_over_pageable_samples_per_s": ratio,
            "not_applicable": skipped,
        },
        "samples/s with pin_memory on over off (higher is better)",
    )


CHECKS = {
    "timing": check_timing,
    "paired": check_paired,
    "warmup": check_warmup,
    "kernels": check_kernels,
    "transfer": check_transfer,
    "amp": check_amp,
    "conv": check_conv,
    "dataloader": check_dataloader,
}
