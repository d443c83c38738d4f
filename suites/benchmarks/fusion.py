"""Fusion: what torch.compile (inductor) is worth against eager, per workload.

Per workload: eager and compiled time per call, the compiled/eager ratio (lower is better),
compile time measured on its own, top-level aten ops dispatched per call, dynamo graph breaks,
and (CUDA only) GPU kernels launched per call.
"""

import torch
import torch._dynamo  # noqa: F401  (imported once by asv's forkserver, not per benchmark)
import torch._inductor.compile_fx  # noqa: F401

from harness.measure import timing
from harness.measure.workloads import NotApplicable, device, full_mode, grid
from harness.measure.workloads import fusion as wl


class _EagerVsCompiled:
    workload = None
    timeout = 600  # the first compile on a fresh machine is ~30 s per graph on two CPU cores

    def setup(self):
        self.case = wl.build(self.workload, device())

    def teardown(self):
        torch._dynamo.reset()

    def track_eager_time(self):
        return timing.asv_samples(timing.measure(self.case.eager(), self.case.device))
    track_eager_time.unit = "seconds"

    def track_compiled_time(self):
        # measure()'s warm-up call compiles; compilation is never inside a sample
        return timing.asv_samples(timing.measure(self.case.compiled(), self.case.device))
    track_compiled_time.unit = "seconds"

    def track_compiled_over_eager(self):
        eager = timing.measure(self.case.eager(), self.case.device)
        compiled = timing.measure(self.case.compiled(), self.case.device)
        return timing.ratio(compiled, eager)
    track_compiled_over_eager.unit = "ratio"

    def track_compile_time(self):
        """Compile time with inductor's on-disk caches as they are (see ColdCompilation)."""
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
    """Compile time with inductor's caches disabled: what a fresh machine pays. Full mode only."""
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
