"""Fusion: what torch.compile (inductor) is worth against eager, per workload.

Per workload:
- track_compiled_over_eager: per round, compiled time over eager time, both timed in the same
  rounds in alternating order (timing.measure_paired); samples, unit "ratio": judged by the gate;
- track_eager_time / track_compiled_time: raw seconds per call, kept for the record and
  judged only where the machine's calibrated noise band is below the threshold;
- track_*_time_over_reference: the same times over the reference workload timed in the same
  rounds (harness.measure.reference), unit "relative": judged by the gate;
- track_compile_time: warm compile seconds (inductor cache filled earlier in the run);
- exact counters: aten ops per call (eager, compiled), dynamo graph breaks; GPU kernels per call
  on CUDA (KernelLaunchesPerCall).
A timed call during which anything compiled fails the benchmark with the recompile reason.
"""

import torch
import torch._dynamo  # noqa: F401  (imported once by asv's forkserver, not per benchmark)
import torch._inductor.compile_fx  # noqa: F401

from harness.measure import timing
from harness.measure.threads import fix_threads
from harness.measure.workloads import NotApplicable, device, full_mode, grid
from harness.measure.workloads import fusion as wl


def setup(*params):
    """asv runs a module-level setup before every benchmark's own: the run's fixed thread count
    (before any compile: inductor's C++ kernels specialise on it)."""
    fix_threads()


class _EagerVsCompiled:
    workload = None
    timeout = 600  # the first compile on a fresh machine is ~30 s per graph on two CPU cores

    def setup(self):
        self.case = wl.build(self.workload, device())

    def teardown(self):
        torch._dynamo.reset()

    def profile_targets(self):
        """What full runs profile per operator (harness.measure.profiles)."""
        return {"eager": (self.case.eager(), self.case.device),
                "compiled": (self.case.compiled(), self.case.device)}

    def track_eager_time(self):
        return timing.asv_samples(timing.measure(self.case.eager(), self.case.device))
    track_eager_time.unit = "seconds"

    def track_compiled_time(self):
        # measure()'s warm-up call compiles; compilation is never inside a sample
        return timing.asv_samples(timing.measure(self.case.compiled(), self.case.device))
    track_compiled_time.unit = "seconds"

    def track_eager_time_over_reference(self):
        return timing.asv_samples(timing.measure_over_reference(self.case.eager(), self.case.device))
    track_eager_time_over_reference.unit = "relative"

    def track_compiled_time_over_reference(self):
        return timing.asv_samples(timing.measure_over_reference(self.case.compiled(), self.case.device))
    track_compiled_time_over_reference.unit = "relative"

    def track_compiled_over_eager(self):
        return timing.asv_samples(timing.measure_paired(self.case.compiled(), self.case.eager(),
                                                        self.case.device))
    track_compiled_over_eager.unit = "ratio"

    def track_compile_time(self):
        """Warm compile time: inductor's cache filled by a priming compile earlier in this run
        (see timing.compile_seconds; cold compiles are ColdCompilation, full mode only)."""
        repeats = 3 if full_mode() else 1
        return timing.asv_samples([timing.compile_seconds(self.case.compiled, self.case.device)
                                   for _ in range(repeats)])
    track_compile_time.unit = "seconds"

    def track_ops_per_call_eager(self):
        return timing.ops_per_call(self.case.eager(), self.case.device)
    track_ops_per_call_eager.unit = "ops"

    def track_ops_per_call_compiled(self):
        return timing.ops_per_call(self.case.compiled(), self.case.device)
    track_ops_per_call_compiled.unit = "ops"

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


class KernelLaunchesPerCall:
    """GPU kernels launched by one call, eager vs compiled (profiler CUDA activity)."""
    params = (list(wl.WORKLOADS), ["eager", "compiled"])
    param_names = ["workload", "mode"]
    timeout = 600

    def setup(self, workload, mode):
        dev = device()
        if dev.type != "cuda":
            raise NotApplicable(f"GPU kernel counts need CUDA; this machine runs on {dev.type} "
                                "(see track_ops_per_call_* for the CPU-side count)")
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
            raise NotApplicable("cold compiles take ~30 s per graph on two CPU cores; "
                                "measured only with HARNESS_FULL=1 (harness bench --full)")
        self.case = wl.build(workload, device())

    def track_cold_compile_time(self, workload):
        return timing.asv_samples([timing.compile_seconds(self.case.compiled, self.case.device, cold=True)])
    track_cold_compile_time.unit = "seconds"
