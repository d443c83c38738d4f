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
# timing.measure_paired on CUDA (GPU time per side): one known kernel over itself must read 1,
# two over one must read 2, each within this
PAIRED_TOLERANCE = 0.05
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


# ---- gpu-measure: the GPU-time claims at the CUDA quick sizes ----

# x.cos().cos() compiled over eager at a device-bound size: one fused pass of memory instead of
# two (the seed's 2x), with room for the fused kernel's own cost
COMPILED_OVER_EAGER_MAX = 0.6
# AMP over fp32 on AlexNet training: below 1 (tensor cores), at the CUDA size
AMP_OVER_FP32_MAX = 1.0
# two measurements of a device-bound row (busy >= one half) agree this closely
REPEAT_TOLERANCE = 0.01
DEVICE_BOUND = 0.5


def _gpu_row(name: str, fns, device) -> dict:
    """One row through the GPU timing path twice (the repeat is the repeatability claim), with
    its facts (busy per side) from the first measurement."""
    from harness.measure import timing

    # a pair stops on its ratio's noise, as measure_paired's rows do
    series = timing.gpu_ratios if len(fns) == 2 else None
    first = timing.gpu_sampling(fns, device, series=series)
    facts = timing.gpu_facts(fns, device, first)
    second = timing.gpu_sampling(fns, device, series=series)
    values = series or (lambda sides: sides[0].gpu_s)
    a, b = values(first.sides), values(second.sides)
    side = (facts.get("sides") or [facts])[0]
    busy = [s.get("busy") for s in (facts.get("sides") or [facts])]
    return {
        "name": name,
        "value": statistics.median(a),
        "repeat": statistics.median(b),
        "gpu_s": side.get("gpu_s"),
        "host_s": side.get("host_s"),
        "busy": None if None in busy else facts["busy"],
        "noise": facts.get("noise"),
        "sm_clock_mhz": facts.get("sm_clock_mhz"),
        "throttled_dropped": facts.get("dropped_throttled", 0),
        "kept_at_power_cap": facts.get("kept_at_power_cap", 0),
        "launch_bound": any(x is not None and x < DEVICE_BOUND for x in busy),
        "clock_note": facts.get("clock_note", ""),
    }


def judge_gpu_measure(rows: list[dict]) -> list[dict]:
    """The claims over gpu-measure's rows (apart, so that they are tested without a GPU): each
    {"claim", "value", "mark", "pass"}."""
    by = {r["name"]: r for r in rows}
    claims = []

    def claim(text, value, mark, ok):
        claims.append({"claim": text, "value": value, "mark": mark, "pass": bool(ok)})

    ce = by.get("compiled/eager pointwise chain")
    if ce:
        v = ce["value"]
        claim(
            "x.cos().cos() compiled/eager",
            round(v, 3),
            f"<= {COMPILED_OVER_EAGER_MAX}",
            v <= COMPILED_OVER_EAGER_MAX,
        )
    for r in rows:
        if r["name"].startswith("AMP/fp32 alexnet"):
            claim(
                r["name"],
                round(r["value"], 3),
                f"< {AMP_OVER_FP32_MAX:g}",
                r["value"] < AMP_OVER_FP32_MAX,
            )
    for row, text, want in (
        ("matmul over itself", "a kernel over itself (paired GPU time)", 1),
        ("two matmuls over one", "two kernels over one (paired GPU time)", 2),
    ):
        if row in by:
            v = by[row]["value"]
            claim(text, round(v, 4), f"{want} +- 5%", abs(v / want - 1) <= PAIRED_TOLERANCE)
    bound = [r for r in rows if r["busy"] is not None and r["busy"] >= DEVICE_BOUND]
    worst = max(bound, key=lambda r: abs(r["value"] / r["repeat"] - 1), default=None)
    if worst:
        spread = abs(worst["value"] / worst["repeat"] - 1)
        claim(
            f"two measurements of each device-bound row ({len(bound)}; widest: {worst['name']})",
            round(spread, 4),
            f"<= {REPEAT_TOLERANCE:.0%}",
            spread <= REPEAT_TOLERANCE,
        )
    missing = [r["name"] for r in rows if r["busy"] is None]
    claim(
        "busy NN% on every CUDA row",
        f"{len(rows) - len(missing)}/{len(rows)}",
        "all",
        not missing and rows,
    )
    return claims


def check_gpu_measure(device) -> dict:
    """The GPU-time claims at the CUDA quick sizes, through the one GPU timing path
    (harness.measure.timing.gpu_sampling): compiled/eager and AMP/fp32 ratios, a kernel over
    itself and two over one, each device-bound row measured twice, busy on every row; also
    CUDA events against the wall clock on a long matmul."""
    import torch._dynamo

    from harness.measure.workloads import amp, fusion, require_cuda

    require_cuda(device, "GPU time")
    rows = []
    mm, _ = known_kernel(device, 4096)

    def two():
        mm()
        mm()

    rows.append(_gpu_row("matmul over itself", [mm, mm], device))
    rows.append(_gpu_row("two matmuls over one", [two, mm], device))
    chain = fusion.build("pointwise_chain", device)
    rows.append(_gpu_row("eager pointwise chain", [chain.eager()], device))
    rows.append(
        _gpu_row("compiled/eager pointwise chain", [chain.compiled(), chain.eager()], device)
    )
    torch._dynamo.reset()
    fp32 = amp.build("alexnet", "fp32", device)
    rows.append(_gpu_row("alexnet fp32 training step", [fp32], device))
    for precision in ("bf16", "fp16"):
        step = amp.build("alexnet", precision, device)
        rows.append(_gpu_row(f"AMP/fp32 alexnet {precision}", [step, fp32], device))
    claims = judge_gpu_measure(rows)
    timing_check = check_timing(device)
    claims.append(
        {
            "claim": "CUDA events vs wall clock + synchronise, 8192^3 matmul",
            "value": timing_check["figures"]["relative_difference"],
            "mark": f"<= {EVENTS_VS_WALL_TOLERANCE:.0%}",
            "pass": timing_check["status"] == "pass",
        }
    )
    failed = [c["claim"] for c in claims if not c["pass"]]
    return _result(
        "fail" if failed else "pass",
        {"rows": rows, "claims": claims, "timing": timing_check["figures"]},
        f"{len(claims) - len(failed)}/{len(claims)} claims hold"
        + (f"; failed: {'; '.join(failed)}" if failed else ""),
    )


CHECKS = {
    "gpu-measure": check_gpu_measure,
    "warmup": check_warmup,
    "kernels": check_kernels,
    "transfer": check_transfer,
    "amp": check_amp,
    "conv": check_conv,
    "dataloader": check_dataloader,
}
