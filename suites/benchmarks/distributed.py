"""Distributed data-parallel training (torch.distributed, launched through torchrun): what DDP
costs against one process, how fast the gradients' all-reduce is, and what DDP's knobs are worth.

World size 2 with gloo on CPU (fast mode; full mode adds the machine's core count), one process
per GPU with NCCL on CUDA. A torchrun launch costs seconds (torchrun and every worker import
torch), so one launch per world size measures every row: all classes share one `setup_cache`
(asv keys it by the function's source line), which runs the workers through
harness.measure.torchrun (a free port per launch, its own timeout that kills torchrun with all
its workers and fails the rows, never leaving a worker behind). The rows only read the result.

Rows (paired rows: both sides in alternating order in the same rounds inside the workers, one
ratio per round, unit "ratio", lower is better; see harness.measure.workloads.distributed):
- DistributedStepOverSingleProcess: a DDP training step of all ranks (each its own batch) over
  the same step in a single process; its inverse is the scaling efficiency. Raw step times
  beside it (seconds, judged only with a calibrated noise band);
- AllReduceOfGradientSizedTensor: all-reduce bandwidth (bytes/s, higher is better) of a float32
  tensor as large as the model's gradients;
- BucketCapOverDefault: DDP step with bucket_cap_mb=N over the default 25 MB;
- GradientAsBucketView: gradient_as_bucket_view=True over False;
- NoSyncAccumulation: K micro-batches accumulated under no_sync() over syncing every one;
- DataParallelOverDistributed: nn.DataParallel over DDP, 2+ GPUs only (n/a with the reason).
Workers use the run's thread count divided by the world size (1 in quick and fast runs).
"""

from harness.measure.threads import fix_threads
from harness.measure.workloads import NotApplicable
from harness.measure.workloads import distributed as wl

WORLD_SIZES = wl.world_sizes()
MAIN_WORLD_SIZE = max(WORLD_SIZES)  # the knob rows run at the largest world size
# asv's timeout for the shared setup_cache: above the launcher's own, which fires first and
# kills the workers (asv's kills only the benchmark process)
CACHE_TIMEOUT_S = wl.launch_timeout_s() * len(WORLD_SIZES) + 120


def setup(*params):
    """asv runs a module-level setup before every benchmark's own: the run's fixed thread count."""
    fix_threads()


def _launch_all():
    """One torchrun launch per world size; the knob sections only at MAIN_WORLD_SIZE."""
    out = {}
    for world in WORLD_SIZES:
        plan = wl.plan_for(world)
        if world != MAIN_WORLD_SIZE:
            plan.sections = [s for s in plan.sections if s in ("scaling", "all_reduce")]
        out[str(world)] = wl.measure(world, plan)
    return out


class _OneLaunch:
    """Every class inherits this one setup_cache, so asv runs it once for the whole suite."""

    timeout = CACHE_TIMEOUT_S

    def setup_cache(self):
        return _launch_all()

    setup_cache.timeout = CACHE_TIMEOUT_S

    @staticmethod
    def section(cache, name, world=MAIN_WORLD_SIZE):
        return cache[str(world)][name]

    def teardown(self, cache, *params):
        # the answer the workers checked for this row (a pair), into the run record; teardown
        # is not part of asv's version of a benchmark
        wl.record_answer(cache)


def _samples(values):
    if not values:
        raise RuntimeError("the distributed workers returned no samples for this row")
    return {"samples": [float(v) for v in values], "number": 1}


class DistributedStepOverSingleProcess(_OneLaunch):
    """Per round: DDP training step of every rank over one process's step of the same model and
    per-process batch (weak scaling: 1.0 is perfect; scaling efficiency = 1 / ratio)."""

    params = WORLD_SIZES
    param_names = ["world_size"]

    def setup(self, cache, world_size):
        self.scaling = self.section(cache, "scaling", world_size)

    def track_step_time_over_single_process(self, cache, world_size):
        return _samples(self.scaling["ratios"])

    track_step_time_over_single_process.unit = "ratio"

    def track_distributed_step_time(self, cache, world_size):
        return _samples(self.scaling["ddp_step_s"])

    track_distributed_step_time.unit = "seconds"

    def track_single_process_step_time(self, cache, world_size):
        return _samples(self.scaling["single_step_s"])

    track_single_process_step_time.unit = "seconds"


class AllReduceOfGradientSizedTensor(_OneLaunch):
    """dist.all_reduce of a float32 tensor as large as the model's gradients: tensor bytes per
    second of all-reduce time (algorithm bandwidth), one sample per call."""

    params = WORLD_SIZES
    param_names = ["world_size"]

    def setup(self, cache, world_size):
        self.result = self.section(cache, "all_reduce", world_size)

    def track_bandwidth(self, cache, world_size):
        return _samples(self.result["bytes_per_s"])

    track_bandwidth.unit = "bytes/s"


class BucketCapOverDefault(_OneLaunch):
    """Per round: DDP step with gradient buckets of bucket_cap_mb over the default 25 MB
    (smaller buckets start all-reducing earlier in backward, but pay more calls)."""

    params = wl.bucket_caps_mb()
    param_names = ["bucket_cap_mb"]

    def setup(self, cache, bucket_cap_mb):
        self.ratios = self.section(cache, "bucket_cap")[str(bucket_cap_mb)]

    def track_step_time_over_default_bucket_cap(self, cache, bucket_cap_mb):
        return _samples(self.ratios)

    track_step_time_over_default_bucket_cap.unit = "ratio"


class GradientAsBucketView(_OneLaunch):
    """Per round: DDP step with gradient_as_bucket_view=True (gradients are views into the
    all-reduce buckets: no copy in or out) over False (the default)."""

    def setup(self, cache):
        self.ratios = self.section(cache, "bucket_view")

    def track_step_time_with_over_without_bucket_view(self, cache):
        return _samples(self.ratios)

    track_step_time_with_over_without_bucket_view.unit = "ratio"


class NoSyncAccumulation(_OneLaunch):
    """Per round: gradient accumulation over K micro-batches with no_sync() on all but the last
    (one all-reduce) over syncing every micro-batch (K all-reduces); one optimizer step each."""

    params = wl.micro_batch_counts()
    param_names = ["micro_batches"]

    def setup(self, cache, micro_batches):
        self.ratios = self.section(cache, "no_sync")[str(micro_batches)]

    def track_no_sync_over_sync_every_micro_batch(self, cache, micro_batches):
        return _samples(self.ratios)

    track_no_sync_over_sync_every_micro_batch.unit = "ratio"


class DataParallelOverDistributed(_OneLaunch):
    """Per round: nn.DataParallel (one process driving every GPU, global batch) over DDP (one
    process per GPU); needs 2 or more CUDA GPUs."""

    def setup(self, cache):
        reason = wl.data_parallel_unavailable(wl.device_type(), MAIN_WORLD_SIZE)
        if reason:
            raise NotApplicable(reason)
        result = self.section(cache, "data_parallel")
        if "not_applicable" in result:
            raise NotApplicable(result["not_applicable"])
        self.ratios = result["ratios"]

    def track_data_parallel_over_distributed(self, cache):
        return _samples(self.ratios)

    track_data_parallel_over_distributed.unit = "ratio"
