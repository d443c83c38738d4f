"""Fusion: fused vs unfused kernels. What torch.compile (inductor) is worth against eager, per
workload, and the fused kernels PyTorch ships beside it.

Per torch.compile workload (pointwise chain, norm + activation, MLP training step; the compiled
cross-entropy loss has the paired ratio and op counts only):
- track_compiled_over_eager: compiled time over eager time, both timed in the same rounds in
  alternating order (timing.measure_paired); samples, unit "ratio": judged by the gate;
- track_eager_time / track_compiled_time: raw seconds per call, kept for the record and
  judged only where the machine's calibrated noise band is below the threshold;
- track_*_time_over_reference: the same times over the reference workload timed in the same
  rounds (harness.measure.reference), unit "relative": judged by the gate;
- track_compile_time: warm compile seconds (inductor cache filled earlier in the run);
- exact counters: aten ops per call (eager, compiled), dynamo graph breaks; GPU kernels per call
  on CUDA (KernelLaunchesPerCall).
A timed call during which anything compiled fails the benchmark with the recompile reason.

Beyond torch.compile (each comparison paired, both sides in the same rounds):
- MemoryBandwidth: bytes moved per call, GB/s and fraction of a plain copy's GB/s, eager vs
  fused, at sizes beyond the last-level cache (is the seed's "2x from 4 -> 2 memory passes" true?);
- OptimizerStep*: SGD/Adam/AdamW with foreach=False, foreach=True, fused=True;
- Attention*: scaled_dot_product_attention per backend vs a hand-written softmax(QK^T)V;
- GradientCheckpointing: peak memory saved vs step time added.
"""

import torch
import torch._dynamo  # noqa: F401  (imported once by asv's forkserver, not per benchmark)
import torch._inductor.compile_fx  # noqa: F401

from harness.core import settings
from harness.measure import allocator, timing, traffic
from harness.measure.threads import fix_threads
from harness.measure.workloads import (
    NotApplicable,
    attention,
    bandwidth,
    checkpointing,
    device,
    full_mode,
    grid,
    optimizers,
    require_cuda,
)
from harness.measure.workloads import fusion as wl


def setup(*params):
    """asv runs a module-level setup before every benchmark's own: the run's fixed thread count
    (before any compile: inductor's C++ kernels specialise on it)."""
    fix_threads()


class _PairedWithCounts:
    """The paired compiled/eager ratio and the exact op counts of one fusion workload."""

    workload = None
    timeout = 600  # the first compile on a fresh machine is ~30 s per graph on two CPU cores

    def setup(self):
        self.case = wl.build(self.workload, device())

    def teardown(self):
        torch._dynamo.reset()

    def profile_targets(self):
        """What full runs profile per operator (harness.measure.profiles)."""
        return {
            "eager": (self.case.eager(), self.case.device),
            "compiled": (self.case.compiled(), self.case.device),
        }

    def track_compiled_over_eager(self):
        return timing.asv_samples(
            timing.measure_paired(self.case.compiled(), self.case.eager(), self.case.device)
        )

    track_compiled_over_eager.unit = "ratio"

    def track_ops_per_call_eager(self):
        return timing.ops_per_call(self.case.eager(), self.case.device)

    track_ops_per_call_eager.unit = "ops"

    def track_ops_per_call_compiled(self):
        return timing.ops_per_call(self.case.compiled(), self.case.device)

    track_ops_per_call_compiled.unit = "ops"


class _EagerVsCompiled(_PairedWithCounts):
    """Every row: raw and reference-normalised times, compile time and graph breaks too."""

    def track_eager_time(self):
        return timing.asv_samples(timing.measure(self.case.eager(), self.case.device))

    track_eager_time.unit = "seconds"

    def track_compiled_time(self):
        # measure()'s warm-up call compiles; compilation is never inside a sample
        return timing.asv_samples(timing.measure(self.case.compiled(), self.case.device))

    track_compiled_time.unit = "seconds"

    def track_eager_time_over_reference(self):
        return timing.asv_samples(
            timing.measure_over_reference(self.case.eager(), self.case.device)
        )

    track_eager_time_over_reference.unit = "relative"

    def track_compiled_time_over_reference(self):
        return timing.asv_samples(
            timing.measure_over_reference(self.case.compiled(), self.case.device)
        )

    track_compiled_time_over_reference.unit = "relative"

    def track_compile_time(self):
        """Warm compile time: inductor's cache filled by a priming compile earlier in this run
        (see timing.compile_seconds; cold compiles are ColdCompilation, full mode only)."""
        repeats = 3 if full_mode() else 1
        return timing.asv_samples(
            [timing.compile_seconds(self.case.compiled, self.case.device) for _ in range(repeats)]
        )

    track_compile_time.unit = "seconds"

    def track_graph_breaks(self):
        return timing.graph_breaks(self.case.target, *self.case.example_args)

    track_graph_breaks.unit = "graph breaks"


class PointwiseChain(_EagerVsCompiled):
    """x.cos().cos(): two kernels eager, one fused kernel compiled."""

    workload = "pointwise_chain"


class NormActivationBlock(_EagerVsCompiled):
    """LayerNorm followed by GELU, inference."""

    workload = "norm_activation"


class SmallModelTrainingStep(_EagerVsCompiled):
    """Forward, loss, backward and SGD step of the zoo's MLP, with the model compiled."""

    workload = "training_step"


class _FreedMemoryRetained:
    """Freed memory stays in the process while the benchmark runs (harness.measure.allocator): a
    paired ratio must not depend on which side's temporaries glibc happened to unmap."""

    def setup(self, *params):
        self._restore = allocator.retain_freed_memory()
        if hasattr(super(), "setup"):  # before a workload class in the bases (cooperative)
            super().setup(*params)

    def teardown(self, *params):
        if hasattr(super(), "teardown"):
            super().teardown(*params)
        self._restore()


class CompiledCrossEntropyLoss(_FreedMemoryRetained, _PairedWithCounts):
    """torch.compile(nn.CrossEntropyLoss()) vs eager: forward and backward on a batch of logits."""

    workload = "cross_entropy_loss"


class KernelLaunchesPerCall:
    """GPU kernels launched by one call, eager vs compiled (profiler CUDA activity)."""

    params = (list(wl.WORKLOADS), ["eager", "compiled"])
    param_names = ["workload", "mode"]
    timeout = 600

    def setup(self, workload, mode):
        dev = device()
        if dev.type != "cuda":
            raise NotApplicable(
                f"GPU kernel counts need CUDA; this machine runs on {dev.type} "
                "(see track_ops_per_call_* for the CPU-side count)"
            )
        self.case = wl.build(workload, dev)

    def teardown(self, workload, mode):
        torch._dynamo.reset()

    def track_kernels_per_call(self, workload, mode):
        fn = self.case.eager() if mode == "eager" else self.case.compiled()
        return timing.kernels_per_call(fn, self.case.device)

    track_kernels_per_call.unit = "kernels"


class ColdCompilation:
    """Compile time from a fresh, empty inductor cache directory: what a fresh machine pays.
    Full mode only: ~30 s per graph on two CPU cores, and a quick run's single cold compile
    says more about the disk and the neighbours than about the code."""

    params = grid([], list(wl.WORKLOADS)) or [None]
    param_names = ["workload"]
    timeout = 1200

    def setup(self, workload):
        if not full_mode():
            raise NotApplicable(
                "cold compiles take ~30 s per graph on two CPU cores; "
                f"measured only with {settings.FULL.name}=1 (harness bench --full)"
            )
        self.case = wl.build(workload, device())

    def track_cold_compile_time(self, workload):
        return timing.asv_samples(
            [timing.compile_seconds(self.case.compiled, self.case.device, cold=True)]
        )

    track_cold_compile_time.unit = "seconds"


# --------------------------------------------------------------------------------------------
# Bandwidth: how close eager and fused kernels get to a plain copy (workloads/bandwidth.py)


class MemoryBandwidth:
    """Bytes moved per call, achieved GB/s and the fraction of a plain device copy's GB/s, eager
    vs fused (torch.compile), at sizes beyond the last-level cache. One timing loop per workload
    times eager, fused and the copy in the same rounds (setup_cache: asv would otherwise re-run
    the loop in a fresh process for every row); every row below reads from it."""

    params = list(bandwidth.WORKLOADS)
    param_names = ["workload"]
    timeout = 900

    def setup_cache(self):
        return bandwidth.measure_all(device())

    setup_cache.timeout = 900

    def setup(self, figures, workload):
        self.f = figures[workload]

    def teardown(self, figures, workload):
        # the answer setup_cache checked for track_fused_over_eager, into the run record (teardown
        # is not part of asv's version of a benchmark)
        bandwidth.record_answer(figures, workload)

    def track_bytes_per_call_eager(self, figures, workload):
        return self.f["eager"]["bytes"]

    track_bytes_per_call_eager.unit = "bytes moved"

    def track_bytes_per_call_fused(self, figures, workload):
        return self.f["fused"]["bytes"]

    track_bytes_per_call_fused.unit = "bytes moved"

    def track_gbps_eager(self, figures, workload):
        return timing.asv_samples(self.f["eager"]["gbps"])

    track_gbps_eager.unit = "GB/s"

    def track_gbps_fused(self, figures, workload):
        return timing.asv_samples(self.f["fused"]["gbps"])

    track_gbps_fused.unit = "GB/s"

    def track_gbps_copy(self, figures, workload):
        return timing.asv_samples(self.f["copy_gbps"])

    track_gbps_copy.unit = "GB/s"

    def track_fraction_of_copy_bandwidth_eager(self, figures, workload):
        return timing.asv_samples(self.f["eager"]["fraction"])

    track_fraction_of_copy_bandwidth_eager.unit = "fraction of copy bandwidth"

    def track_fraction_of_copy_bandwidth_fused(self, figures, workload):
        return timing.asv_samples(self.f["fused"]["fraction"])

    track_fraction_of_copy_bandwidth_fused.unit = "fraction of copy bandwidth"

    def track_fused_over_eager(self, figures, workload):
        return timing.asv_samples(self.f["fused_over_eager"])

    track_fused_over_eager.unit = "ratio"


# --------------------------------------------------------------------------------------------
# Optimizers: a loop of small kernels vs multi-tensor (foreach) vs fused (workloads/optimizers.py)


class OptimizerStep:
    """Aten ops dispatched by one optimizer step over a model of many small parameters."""

    params = (list(optimizers.OPTIMIZERS), list(optimizers.IMPLS))
    param_names = ["optimizer", "impl"]

    def setup(self, optimizer, impl):
        self.dev = device()
        self.step, _ = optimizers.build(optimizer, impl, self.dev)

    def track_ops_per_step(self, optimizer, impl):
        return timing.ops_per_call(self.step, self.dev)

    track_ops_per_step.unit = "ops"


class OptimizerStepOverForLoop(_FreedMemoryRetained):
    """Paired (timing.measure_paired): one foreach or fused step's time over one foreach=False
    step's, same model."""

    params = (list(optimizers.OPTIMIZERS), ["foreach", "fused"])
    param_names = ["optimizer", "impl"]

    def setup(self, optimizer, impl):
        super().setup()
        self.dev = device()
        self.step, _ = optimizers.build(optimizer, impl, self.dev)
        self.loop, _ = optimizers.build(optimizer, "for_loop", self.dev)

    def track_step_over_for_loop(self, optimizer, impl):
        return timing.asv_samples(timing.measure_paired(self.step, self.loop, self.dev))

    track_step_over_for_loop.unit = "ratio"


class OptimizerKernelLaunches:
    """GPU kernels launched by one optimizer step (profiler CUDA activity)."""

    params = (list(optimizers.OPTIMIZERS), list(optimizers.IMPLS))
    param_names = ["optimizer", "impl"]

    def setup(self, optimizer, impl):
        self.dev = device()
        require_cuda(self.dev, "counting GPU kernels (see OptimizerStep.track_ops_per_step on CPU)")
        self.step, _ = optimizers.build(optimizer, impl, self.dev)

    def track_kernels_per_step(self, optimizer, impl):
        return timing.kernels_per_call(self.step, self.dev)

    track_kernels_per_step.unit = "kernels"


# --------------------------------------------------------------------------------------------
# Attention: SDPA backends vs a hand-written softmax(QK^T)V (workloads/attention.py)


class AttentionOverHandWritten(_FreedMemoryRetained):
    """Paired (timing.measure_paired): SDPA's time with one backend forced over the hand-written
    attention's."""

    params = (list(attention.BACKENDS), [False, True])
    param_names = ["backend", "causal"]

    def setup(self, backend, causal):
        super().setup()
        self.dev = device()
        self.sdpa = attention.build(backend, causal, self.dev)
        self.hand = attention.build("hand_written", causal, self.dev)

    def track_sdpa_over_hand_written(self, backend, causal):
        return timing.asv_samples(timing.measure_paired(self.sdpa, self.hand, self.dev))

    track_sdpa_over_hand_written.unit = "ratio"


class Attention:
    """Peak tensor memory of one attention call and the aten kernels it dispatches (after
    composite ops decompose: the math backend's bmm/softmax, a fused backend's one kernel)."""

    params = (list(attention.IMPLS), [False, True])
    param_names = ["impl", "causal"]

    def setup(self, impl, causal):
        self.dev = device()
        self.call = attention.build(impl, causal, self.dev)

    def track_peak_memory(self, impl, causal):
        return timing.peak_tensor_bytes(self.call, self.dev)

    track_peak_memory.unit = "bytes"

    def track_kernels_dispatched(self, impl, causal):
        return traffic.count(self.call).kernels

    track_kernels_dispatched.unit = "ops"


class AttentionKernelLaunches:
    """GPU kernels launched by one attention call (profiler CUDA activity)."""

    params = (list(attention.IMPLS), [False, True])
    param_names = ["impl", "causal"]

    def setup(self, impl, causal):
        self.dev = device()
        require_cuda(
            self.dev, "counting GPU kernels (see Attention.track_kernels_dispatched on CPU)"
        )
        self.call = attention.build(impl, causal, self.dev)

    def track_kernels_per_call(self, impl, causal):
        return timing.kernels_per_call(self.call, self.dev)

    track_kernels_per_call.unit = "kernels"


# --------------------------------------------------------------------------------------------
# Gradient checkpointing: memory saved vs time added (workloads/checkpointing.py)


class GradientCheckpointing(_FreedMemoryRetained):
    """The zoo transformer's training step with every encoder layer checkpointed vs plain: the
    trade-off pair is track_peak_memory_saved and track_checkpointed_over_plain (time)."""

    timeout = 300

    def setup(self):
        super().setup()
        self.dev = device()
        self.plain, _ = checkpointing.build("plain", self.dev)
        self.checkpointed, _ = checkpointing.build("checkpointed", self.dev)

    def track_peak_memory_plain(self):
        return timing.peak_tensor_bytes(self.plain, self.dev)

    track_peak_memory_plain.unit = "bytes"

    def track_peak_memory_checkpointed(self):
        return timing.peak_tensor_bytes(self.checkpointed, self.dev)

    track_peak_memory_checkpointed.unit = "bytes"

    def track_peak_memory_saved(self):
        return timing.peak_tensor_bytes(self.plain, self.dev) - timing.peak_tensor_bytes(
            self.checkpointed, self.dev
        )

    track_peak_memory_saved.unit = "bytes saved"

    def track_checkpointed_over_plain(self):
        return timing.asv_samples(timing.measure_paired(self.checkpointed, self.plain, self.dev))

    track_checkpointed_over_plain.unit = "ratio"
