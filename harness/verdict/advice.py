"""What the common PyTorch performance advice is worth on this machine, read from a run's paired
ratio rows: one line per tip and case, with the measured effect, a confidence interval and a
verdict (helps / hurts / no measurable effect / n/a here, with the reason). Nothing is rerun.

Every tip is one entry of TIPS: the paired benchmark row(s) that measure it, which side is the
advice, and how the ratio reads. Each row is a time ratio "advice over the habit it replaces"
(timing.measure_paired: both sides timed in the same rounds, so machine speed cancels), so for
every tip a ratio below 1 means the advice saves time.

The statistics, per case: the median of the paired samples and a distribution-free confidence
interval for that median from order statistics (the interval [x_(j), x_(n-j+1)] of the sorted
ratios covers the median with probability 1 - 2 * BinomCDF(j - 1; n, 1/2); the largest j reaching
CONFIDENCE is used, and with too few samples for that, [min, max] with its own, lower coverage,
which the line states). Verdicts:
- helps: the interval lies below 1 and the median saves more than the tolerance;
- hurts: the interval lies above 1 and the median costs more than the tolerance;
- no measurable effect: otherwise (the interval includes 1, or the effect is within the
  tolerance, default 5%: the gate's threshold; on a shared machine smaller effects are noise);
- n/a here: the case cannot run on this device (the reason), was skipped or failed in this run,
  or is not in this run (which `harness bench --suite` adds it);
- launch-bound at this size: on CUDA, a side of the row kept the GPU busy less than half of a
  call (its busy fraction, from the run record): what helps or hurts there is launch overhead,
  not the advice; the effect is still shown, the verdict says so instead of helps or hurts;
- not recommended: the row's answer check found the advice's side computing another result
  (WRONG), or could not check it (fail_to_run; harness.verdict.answers): a speed-up that changes
  the answer is none, so such a tip is never "helps"; the line says what differed.
Every line on a run with device facts also shows them (`busy NN%`, or `ATen share NN%` on a CPU).
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Callable

from harness.core import answerfacts, escape, sizes
from harness.core.exits import BadInput
from harness.verdict import gpurows
from harness.verdict.results import ResultSet, fingerprint_of, param_names
from harness.verdict.summary import cases

CONFIDENCE = 0.95
TOLERANCE = 0.05

HELPS, HURTS, NO_EFFECT, NA = "helps", "hurts", "no measurable effect", "n/a here"
# a CUDA row whose GPU was busy less than half of a call (harness.verdict.gpurows) times launches
# and Python, not the work the advice is about: its effect says nothing about the advice
LAUNCH_BOUND = gpurows.LAUNCH_BOUND_VERDICT  # the verdict's text; gpurows.LAUNCH_BOUND is 0.5
# the advice side computes another result than the habit's (its answer row WRONG), or its answer
# could not be checked (fail_to_run): whatever the time, the tip is not recommended
NOT_RECOMMENDED = "not recommended: wrong answer"
NOT_CHECKED = "not recommended: answer not checked"


# ---- what each case was measured on (sizes from the workloads' own definitions) ----
# Each takes the case's parameters and the run's sizing (mode, device class, recorded overrides).


def _zoo(model: str, on: sizes.Sizing) -> str:
    from harness.core.zoo import get_model

    cfg = get_model(model).benchmark_config(on.full, on.device, on.overrides)
    return f"{model} {on.model_size()} ({', '.join(f'{k}={v}' for k, v in cfg.items())})"


def _zoo_sizes(params: dict, on: sizes.Sizing) -> str:
    return _zoo(params["model"], on)


def _count(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else f"{n:,}"


def _fusion_sizes(params: dict, on: sizes.Sizing) -> str:
    rows, dim = on.of(sizes.norm_activation)
    logits, classes = on.of(sizes.cross_entropy)
    return {
        "PointwiseChain": f"x.cos().cos() on {_count(on.of(sizes.pointwise_elements))} float32",
        "NormActivationBlock": f"LayerNorm+GELU on {rows}x{dim} float32",
        "SmallModelTrainingStep": "training step of " + _zoo("mlp", on),
        "CompiledCrossEntropyLoss": (
            f"nn.CrossEntropyLoss forward+backward on {logits}x{classes} logits"
        ),
    }.get(params["benchmark"], "sizes as in harness/core/sizes.py")


def _optimizer_sizes(params: dict, on: sizes.Sizing) -> str:
    s = on.of(sizes.optimizer)
    return (
        f"one {params.get('optimizer', '').strip(chr(39))} step over {2 * s['layers']} parameter "
        f"tensors ({s['layers']} Linear {s['width']}x{s['width']})"
    )


def _attention_sizes(params: dict, on: sizes.Sizing) -> str:
    s = on.of(sizes.attention)
    dtype = "float16" if on.device == sizes.CUDA else "float32"  # as workloads.attention
    return (
        f"{dtype} batch {s['batch']}, {s['heads']} heads, {s['seq']} tokens, head dim "
        f"{s['head_dim']}" + (", causal" if params.get("causal") == "True" else "")
    )


def _batch(on: sizes.Sizing) -> str:
    return "image batch " + "x".join(map(str, on.of(sizes.transfer_batch)))


def _copy_sizes(params: dict, on: sizes.Sizing) -> str:
    return _batch(on) + (
        " (uint8 or float32)" if "payload" not in params else f" ({params['payload']})"
    )


def _non_blocking_sizes(params: dict, on: sizes.Sizing) -> str:
    return (
        f"{sizes.TRANSFER_COPIES_PER_CALL} copies of a float32 {_batch(on)}, "
        "each used on the device after its copy"
    )


def _loader_sizes(params: dict, on: sizes.Sizing) -> str:
    s = on.of(sizes.dataloader)
    return (
        f"{params['num_workers']} workers, batch {params['batch_size']}, {s['length']} JPEG images "
        f"of {s['image']} px per epoch, feeding " + _zoo("alexnet", on)
    )


def _loop_sizes(params: dict, on: sizes.Sizing) -> str:
    return f"{on.of(sizes.loop_steps)} training steps per call, " + _zoo(params["model"], on)


# ---- the tip table: the one place that says which row measures which advice ----


@dataclasses.dataclass(frozen=True)
class Tip:
    name: str
    advice: str  # what the advice tells you to do
    benchmark: str  # regular expression, matched in full against benchmark names
    reading: str  # the ratio, advice side first (time ratio: < 1 means the advice helps)
    sizes: Callable[[dict, sizes.Sizing], str]
    where: tuple[tuple[str, str], ...] = ()  # only the cases with these parameter values
    needs_cuda: str = ""  # why the tip means nothing without CUDA ("" if it applies on CPU)

    @property
    def suite(self) -> str:
        return self.benchmark.split(".", 1)[0].replace("\\", "")


TIPS = (
    Tip(
        "torch.compile",
        "compile the model or function with torch.compile (inductor)",
        r"fusion\.\w+\.track_compiled_over_eager",
        "compiled / eager time",
        _fusion_sizes,
    ),
    Tip(
        "pinned memory",
        "copy to the GPU from pinned (page-locked) host memory",
        r"transfer\.PinnedOverPageable\.track_pinned_over_pageable",
        "pinned / pageable copy time",
        _copy_sizes,
        needs_cuda="pinned memory only speeds up copies to a GPU",
    ),
    Tip(
        "non_blocking",
        "copy with .to(device, non_blocking=True)",
        r"transfer\.NonBlockingOverBlocking\.track_non_blocking_over_blocking",
        "non_blocking / blocking copy-and-use time",
        _non_blocking_sizes,
        needs_cuda="non_blocking only matters for copies to a GPU",
    ),
    Tip(
        "uint8 transfer",
        "send images as uint8 and convert to float on the GPU",
        r"transfer\.Uint8ThenConvertOverFloat32\.track_uint8_over_float32",
        "uint8 copy + convert / float32 copy time",
        _copy_sizes,
        needs_cuda="the host-to-device copy it shrinks exists only with a GPU",
    ),
    Tip(
        "DataLoader workers",
        "load data in worker processes (num_workers > 0)",
        r"dataloader\.WorkersOverNoWorkers\.track_workers_over_no_workers",
        "epoch time with N workers / with none",
        _loader_sizes,
        (("persistent_workers", "False"),),
    ),
    Tip(
        "persistent workers",
        "keep DataLoader workers alive across epochs (persistent_workers=True)",
        r"dataloader\.PersistentOverFreshWorkers\.track_persistent_over_fresh_workers",
        "epoch time, persistent / fresh workers",
        _loader_sizes,
    ),
    Tip(
        "AMP bf16",
        "train under torch.autocast with bfloat16",
        r"amp\.AutocastOverFp32\.track_autocast_over_fp32",
        "bf16 autocast / fp32 step time",
        _zoo_sizes,
        (("precision", "bf16"),),
    ),
    Tip(
        "AMP fp16",
        "train under torch.autocast with float16 and a GradScaler",
        r"amp\.AutocastOverFp32\.track_autocast_over_fp32",
        "fp16 autocast / fp32 step time",
        _zoo_sizes,
        (("precision", "fp16"),),
        needs_cuda="fp16 autocast with GradScaler is a GPU recipe",
    ),
    Tip(
        "channels_last",
        "use torch.channels_last memory format for conv nets",
        r"models\.ChannelsLastOverContiguous\.track_channels_last_over_contiguous",
        "channels_last / contiguous time",
        _zoo_sizes,
    ),
    Tip(
        "cudnn.benchmark",
        "set torch.backends.cudnn.benchmark = True for fixed input shapes",
        r"models\.CudnnBenchmarkOnOverOff\.track_cudnn_benchmark_on_over_off",
        "benchmark on / off time",
        _zoo_sizes,
        needs_cuda="cudnn.benchmark tunes cuDNN, a CUDA library",
    ),
    Tip(
        "no_grad",
        "run inference under torch.no_grad()",
        r"training_loop\.EvalForward\.track_no_grad_over_grad_enabled",
        "no_grad / grad-enabled eval forward time",
        _zoo_sizes,
    ),
    Tip(
        "inference_mode",
        "run inference under torch.inference_mode()",
        r"training_loop\.EvalForward\.track_inference_mode_over_grad_enabled",
        "inference_mode / grad-enabled eval forward time",
        _zoo_sizes,
    ),
    Tip(
        "inference_mode over no_grad",
        "prefer torch.inference_mode() to torch.no_grad()",
        r"training_loop\.EvalForward\.track_inference_mode_over_no_grad",
        "inference_mode / no_grad eval forward time",
        _zoo_sizes,
    ),
    Tip(
        "zero_grad(set_to_none=True)",
        "reset gradients with zero_grad(set_to_none=True)",
        r"training_loop\.ZeroGrad\.track_set_to_none_over_zero_fill",
        "set_to_none=True / False training-step time",
        _zoo_sizes,
    ),
    Tip(
        "foreach / fused optimizer",
        "use the foreach=True or fused=True optimizer implementation",
        r"fusion\.OptimizerStepOverForLoop\.track_step_over_for_loop",
        "foreach or fused step / for-loop step time",
        _optimizer_sizes,
    ),
    Tip(
        "fused attention (SDPA)",
        "call F.scaled_dot_product_attention instead of softmax(QK^T)V",
        r"fusion\.AttentionOverHandWritten\.track_sdpa_over_hand_written",
        "SDPA (one backend forced) / hand-written attention time",
        _attention_sizes,
    ),
    Tip(
        "no .item() per step",
        "sum the logged loss on the device; call .item() once, not every step",
        r"training_loop\.LossLogging\.track_accumulated_over_item_each_step",
        "on-device sum / .item() each step, loop time",
        _loop_sizes,
    ),
)


# ---- statistics ----


def median_ci(
    samples: list[float], confidence: float = CONFIDENCE
) -> tuple[float, float | None, float | None, float]:
    """(median, low, high, coverage): an order-statistic confidence interval for the median.
    low/high are None with one sample; coverage is what the interval reaches (it can be below
    `confidence` when there are too few samples, e.g. 0.9375 for [min, max] of 5)."""
    from scipy.stats import binom

    x = sorted(samples)
    n = len(x)
    if n == 0:
        raise ValueError("no samples")
    med = statistics.median(x)
    if n == 1:
        return med, None, None, 0.0
    best = 1  # [x_(1), x_(n)]: [min, max]
    for j in range(n // 2, 0, -1):  # the narrowest interval that still covers `confidence`
        if 1 - 2 * binom.cdf(j - 1, n, 0.5) >= confidence:
            best = j
            break
    coverage = float(1 - 2 * binom.cdf(best - 1, n, 0.5))
    return med, x[best - 1], x[n - best], coverage


def judge(
    median: float, low: float | None, high: float | None, tolerance: float = TOLERANCE
) -> str:
    """helps / hurts / no measurable effect for a time ratio (advice over habit)."""
    if low is None or high is None:
        return NA
    if high < 1 and median < 1 - tolerance:
        return HELPS
    if low > 1 and median > 1 + tolerance:
        return HURTS
    return NO_EFFECT


def effect_text(median: float) -> str:
    if median <= 0 or math.isnan(median):
        return "no figure"
    if abs(median - 1) < 0.005:
        return "same time"
    return f"{1 / median:.2f}x faster" if median < 1 else f"{median:.2f}x slower"


# ---- reading a run ----


@dataclasses.dataclass
class Line:
    tip: str
    case: str
    verdict: str
    benchmark: str = ""
    params: dict = dataclasses.field(default_factory=dict)
    n: int = 0
    median: float | None = None
    low: float | None = None
    high: float | None = None
    coverage: float | None = None
    effect: str = ""
    threads: int | None = None
    sizes: str = ""
    reason: str = ""
    device: str = ""  # busy NN% / ATen share NN% (harness.verdict.gpurows.label)
    answer: str = ""  # the row's answer check: same, WRONG, fail_to_run, n/a ("" where none)

    def figure(self) -> str:
        if self.median is None:
            return ""
        if self.low is None:
            return f"{self.median:.3g} (1 round)"
        return (
            f"{self.median:.3g} [{self.low:.3g}, {self.high:.3g}] {self.coverage:.0%}, n={self.n}"
        )


@dataclasses.dataclass
class Advice:
    run: dict
    tolerance: float
    confidence: float
    lines: list[Line]
    tips: tuple = ()  # the Tip entries the lines answer, in order


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def _benchmarks(rs: ResultSet, pattern: str) -> list[str]:
    names = {name.split("(", 1)[0] for name in rs.entries}
    return sorted(n for n in names if re.fullmatch(pattern, n))


def run_info(rs: ResultSet) -> dict:
    from harness.verdict.bands import device_of

    fp = fingerprint_of(rs) or {}
    return {
        "path": str(rs.path),
        "run_id": fp.get("run_id"),
        "machine": rs.machine,
        "commit": rs.commit,
        "device": device_of(rs),
        "threads": fp.get("torch_threads"),
        "mode": fp.get("mode"),
        "quick": fp.get("quick"),
        "torch": fp.get("torch"),
        "cpu": fp.get("cpu"),
        "gpu": fp.get("gpu"),
        "sizes": fp.get("sizes"),  # HARNESS_SIZES of the run (canonical text), None without
        "dirty": bool(rs.dirty),  # measured a working tree that differed from its commit
    }


def run_sizing(info: dict) -> sizes.Sizing:
    """The sizes the run used: its mode, device class and recorded overrides."""
    try:
        overrides = sizes.parse(info.get("sizes") or "")
    except BadInput:  # recorded by another harness version: describe the table's sizes
        overrides = {}
    return sizes.Sizing(info["mode"] == "full", info["device"], overrides)


def advise(
    rs: ResultSet,
    tolerance: float = TOLERANCE,
    confidence: float = CONFIDENCE,
    tips: tuple[Tip, ...] = TIPS,
) -> Advice:
    info = run_info(rs)
    on = run_sizing(info)
    names = param_names(rs)
    lines: list[Line] = []
    for tip in tips:
        lines += _tip_lines(rs, tip, info, on, names, tolerance, confidence)
    return Advice(info, tolerance, confidence, lines, tuple(tips))


def _tip_lines(
    rs, tip: Tip, info: dict, on: sizes.Sizing, names, tolerance, confidence
) -> list[Line]:
    threads = info["threads"]
    if tip.needs_cuda and info["device"] != "cuda":
        why = f"needs CUDA: {tip.needs_cuda}; this run ran on {info['device']}"
        return [Line(tip.name, "", NA, reason=why)]
    found = []
    for bench in _benchmarks(rs, tip.benchmark):
        for values, entry in cases(rs, bench):
            params = dict(zip(names.get(bench, []), map(_unquote, values)))
            if all(params.get(k) == v for k, v in tip.where):
                found.append((bench, params, entry))
    if not found:
        ran_suite = any(name.startswith(tip.suite + ".") for name in rs.entries)
        why = (
            f"not in this run: its {tip.suite} suite ran without this benchmark "
            "(older suite code); "
            if ran_suite
            else "not in this run: "
        )
        return [Line(tip.name, "", NA, reason=why + f"run `harness bench --suite {tip.suite}`")]
    several = (
        len({bench for bench, _, _ in found}) > 1
    )  # e.g. torch.compile: one class per workload
    out, skipped = [], []
    for bench, params, entry in found:
        shown = [f"{k}={v}" for k, v in params.items() if k not in dict(tip.where)]
        label = ", ".join(([bench.split(".")[1]] if several else []) + shown)
        if entry.skipped:
            skipped.append(label or bench)
        else:
            line = _case_line(tip, bench, params, entry, label, threads, on, tolerance, confidence)
            line = _with_facts(line, rs.facts.get(entry.name))
            out.append(_with_answer(line, rs.answers.get(answerfacts.answer_row(entry.name))))
    if skipped and not out:
        return [
            Line(
                tip.name,
                "",
                NA,
                reason=f"every case was skipped (n/a) in this run "
                f"({'; '.join(skipped)}); the bench log gives asv's reason",
            )
        ]
    if skipped:
        out[-1].reason = "; ".join(
            filter(None, [out[-1].reason, f"also n/a here: {'; '.join(skipped)}"])
        )
    return out


def _case_line(
    tip: Tip,
    bench: str,
    params: dict,
    entry,
    label: str,
    threads,
    on: sizes.Sizing,
    tolerance: float,
    confidence: float,
) -> Line:
    try:
        measured = tip.sizes({**params, "benchmark": bench.split(".")[1]}, on)
    except (KeyError, ValueError, BadInput) as exc:  # renamed since: say so, keep the verdict
        measured = f"sizes unknown ({type(exc).__name__}: {exc})"
    line = Line(tip.name, label, NA, bench, params, threads=threads, sizes=measured)
    if entry.failed:
        line.reason = "the benchmark failed in this run (its error is in the bench log)"
    elif not entry.samples:
        line.reason = "the row holds no paired samples (run it with this harness's suites)"
    else:
        line.n = len(entry.samples)
        line.median, line.low, line.high, line.coverage = median_ci(entry.samples, confidence)
        line.verdict = judge(line.median, line.low, line.high, tolerance)
        line.effect = effect_text(line.median)
        if line.low is None:
            line.reason = "one round: no confidence interval"
    return line


def _with_facts(line: Line, facts: dict | None) -> Line:
    """The row's busy fraction or ATen share on the line; a launch-bound CUDA row's helps or
    hurts becomes LAUNCH_BOUND."""
    shown = gpurows.label(facts)
    if shown:
        line.device = shown
    if line.verdict in (HELPS, HURTS) and gpurows.launch_bound(facts):
        line.reason = "; ".join(
            filter(
                None, [line.reason, f"would read {line.verdict}, but the GPU idles most of a call"]
            )
        )
        line.verdict = LAUNCH_BOUND
    return line


def _with_answer(line: Line, answer) -> Line:
    """A case whose answer check found the advice's side computing another result (or could not
    check it) is never recommended, whatever its effect; the line says what differed."""
    from harness.verdict import answers

    if answer is None:
        return line
    line.answer = answer.status
    if answer.status not in (answerfacts.WRONG, answerfacts.FAIL_TO_RUN):
        return line
    was = f"would read {line.verdict}; " if line.verdict in (HELPS, HURTS, NO_EFFECT) else ""
    if answer.status == answerfacts.WRONG:
        why = f"WRONG answer: {answers.figures(answer)}, tolerance {answers.tolerance(answer)}"
        line.verdict = NOT_RECOMMENDED
    else:
        why = f"its answer check failed to run: {answer.reason or 'no reason recorded'}"
        line.verdict = NOT_CHECKED
    line.reason = "; ".join(filter(None, [line.reason, was + why]))
    return line


# ---- output ----


def measured_on(line: Line) -> str:
    if line.verdict == NA and line.median is None:
        return ""
    return f"{_threads(line.threads)}; {line.sizes}" + (f"; {line.device}" if line.device else "")


def _threads(n: int | None) -> str:
    return "? threads (no fingerprint)" if n is None else f"{n} thread{'s' * (n != 1)}"


def rows(advice: Advice) -> list[tuple[str, ...]]:
    """(tip, case, effect, ratio [CI], verdict, measured on / reason) per line."""
    out = []
    for line in advice.lines:
        detail = measured_on(line)
        if line.reason:
            detail = f"{detail}; {line.reason}" if detail else line.reason
        out.append((line.tip, line.case, line.effect, line.figure(), line.verdict, detail))
    return out


HEADERS = ("tip", "case", "effect", "ratio (median [CI], n)", "verdict", "measured on / reason")


def header(advice: Advice) -> str:
    """What the advice was measured on, in a few lines: the run's values (read from its record)
    shown one line each, cut (harness.core.escape); the line breaks are the harness's own."""
    r = {
        k: escape.terminal(v, escape.MAX_CELL) if isinstance(v, str) else v
        for k, v in advice.run.items()
    }
    mode = f"{r['mode'] or '?'}{' quick' if r['quick'] else ''}"
    return (
        f"What the advice is worth on {r['machine']} ({r['device']}, {r['cpu'] or '?'}"
        f"{', ' + r['gpu'] if r['gpu'] else ''}; torch {r['torch'] or '?'}; "
        f"{_threads(r['threads'])}; "
        f"{mode} run {r['run_id'] or r['path']}"
        f"{' of a dirty tree (uncommitted changes)' if r.get('dirty') else ''}"
        f"{'; sizes overridden: ' + r['sizes'] if r.get('sizes') else ''}).\n"
        f"Each ratio is advice / the habit it replaces, time ratios of paired rounds: "
        f"< 1 saves time. Verdict: the {advice.confidence:.0%} order-statistic interval of the "
        f"median excludes 1 and the median moves more than {advice.tolerance:.0%}; otherwise "
        f"no measurable effect."
        + (
            ""
            if r["mode"] == "full"
            else "\nA fast run: the CUDA sizes and short grids; `harness bench --full` (or "
            "`harness nightly`) measures the full grids with every core."
            if r["device"] == sizes.CUDA
            else "\nA fast run: small sizes; `harness bench --full` (or `harness nightly`) "
            "measures the full sizes with every core."
        )
    )


def to_json(advice: Advice) -> dict:
    return {
        "run": advice.run,
        "tolerance": advice.tolerance,
        "confidence": advice.confidence,
        "tips": [
            {
                "tip": tip.name,
                "advice": tip.advice,
                "benchmark": tip.benchmark,
                "reading": tip.reading,
                "lines": [
                    dataclasses.asdict(line) | {"measured_on": measured_on(line)}
                    for line in advice.lines
                    if line.tip == tip.name
                ],
            }
            for tip in advice.tips
        ],
    }
