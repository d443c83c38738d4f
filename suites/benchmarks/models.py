"""Zoo models: inference and training-step time with cudnn.benchmark and channels_last on/off
where they apply, and peak tensor memory (CUDA allocator peak on GPU, torch's CPU allocator
records on CPU).

The comparisons are paired rows the gate judges (both sides timed in the same rounds):
CompiledOverEager (torch.compile per model), CompiledTrainingStepOverEager (its training step,
full runs), ChannelsLastOverContiguous and CudnnBenchmarkOnOverOff; before the timing each pair
is checked for the same answer (harness.measure.answers). Inference and TrainingStep keep the
raw times and their reference-normalised companions.

The models are the zoo's, or in a project of its own only the project's
(harness.core.user_models.suite_models)."""

from harness.core import settings
from harness.core.user_models import suite_models
from harness.core.zoo import COMPILE_FULL, get_model
from harness.measure import timing
from harness.measure.threads import fix_threads
from harness.measure.workloads import NotApplicable, device, grid
from harness.measure.workloads import models as wl

_MODELS = suite_models()
_GRID = (_MODELS, [False, True], [False, True])
_NAMES = ["model", "cudnn_benchmark", "channels_last"]
_MODES = ["inference", "training"]


def setup(*params):
    """asv runs a module-level setup before every benchmark's own: the run's fixed thread count."""
    fix_threads()


class _ModelTiming:
    params = _GRID
    param_names = _NAMES
    timeout = 300
    mode = None

    def setup(self, model, cudnn_benchmark, channels_last):
        self.dev = device()
        self.fn = wl.build(model, self.mode, cudnn_benchmark, channels_last, self.dev)

    def teardown(self, *params):
        wl.set_cudnn_benchmark(False)

    def profile_targets(self, *params):
        """What full runs profile per operator (harness.measure.profiles)."""
        return {self.mode: self.fn}


class Inference(_ModelTiming):
    mode = "inference"

    def track_inference_time(self, *params):
        return timing.asv_samples(timing.measure(self.fn, self.dev))

    track_inference_time.unit = "seconds"

    def track_inference_time_over_reference(self, *params):
        return timing.asv_samples(timing.measure_over_reference(self.fn, self.dev))

    track_inference_time_over_reference.unit = "relative"


class TrainingStep(_ModelTiming):
    mode = "training"

    def track_step_time(self, *params):
        return timing.asv_samples(timing.measure(self.fn, self.dev))

    track_step_time.unit = "seconds"

    def track_step_time_over_reference(self, *params):
        return timing.asv_samples(timing.measure_over_reference(self.fn, self.dev))

    track_step_time_over_reference.unit = "relative"


def _image_models():
    return [name for name in _MODELS if get_model(name).image_model]


class ChannelsLastOverContiguous:
    """Paired (timing.measure_paired): the channels_last call's time over the contiguous one's
    (image models)."""

    params = (_image_models(), _MODES)
    param_names = ["model", "mode"]
    timeout = 300

    def setup(self, model, mode):
        self.dev = device()
        self.channels_last = wl.build(model, mode, False, True, self.dev)
        self.contiguous = wl.build(model, mode, False, False, self.dev)

    def profile_targets(self, *params):
        return {"channels_last": self.channels_last, "contiguous": self.contiguous}

    def track_channels_last_over_contiguous(self, model, mode):
        return timing.asv_samples(
            timing.measure_paired(self.channels_last, self.contiguous, self.dev)
        )

    track_channels_last_over_contiguous.unit = "ratio"


def _compiled_models(full: bool) -> list[str]:
    """The models the torch.compile rows cover. Full runs: every model. Quick runs: in a project
    of its own every model it registers but those registered with compile="full" (each compiled
    once, outside the samples: the answer check's call); here the word LM only: AlexNet's
    compiled and eager calls respond differently to a shared host's memory state, so its ratio
    moves between processes far more than the word LM's (figures:
    docs/measurements.md#the-gates-proof-on-real-workloads), and each other zoo model's cold
    compile (30-90 s on two shared cores) would lengthen every whole-suite quick run. A model
    registered with compile="why" keeps its row, n/a with the reason."""
    if full:
        return list(_MODELS)
    if settings.OWN_MODELS.get():
        return [m for m in _MODELS if get_model(m).compile != COMPILE_FULL]
    return [m for m in ["word_lm"] if m in _MODELS]


class CompiledOverEager:
    """Paired (timing.measure_paired): torch.compile(model)'s inference call over the eager
    model's, same weights and inputs, same rounds: what inductor is worth per model (the
    PyTorch 2.0 dashboard's speedup is 1 / this ratio), and whether the compiled model computes
    what eager does (the answer row). Which models: _compiled_models."""

    params = (grid(_compiled_models(False), _compiled_models(True)),)
    param_names = ["model"]
    timeout = 600

    def setup(self, model):
        self.dev = device()
        self.compiled, self.eager = wl.build_compiled_pair(model, self.dev)

    def teardown(self, model):
        import torch._dynamo

        torch._dynamo.reset()

    def profile_targets(self, model):
        return {"compiled": self.compiled, "eager": self.eager}

    def track_compiled_over_eager(self, model):
        # measure_paired's warm-up call compiles; compilation is never inside a sample
        return timing.asv_samples(timing.measure_paired(self.compiled, self.eager, self.dev))

    track_compiled_over_eager.unit = "ratio"


class CompiledTrainingStepOverEager:
    """Paired (timing.measure_paired): the training step (forward, loss, backward, SGD step) with
    torch.compile(model) over the eager one's, each side a copy of one starting state, in full
    runs; the answer row compares the loss, every gradient and every parameter after the check's
    step (dropout: harness.measure.workloads.models.build_compiled_training_pair)."""

    params = (grid([], _compiled_models(True)),)
    param_names = ["model"]
    timeout = 1200

    def setup(self, model):
        self.dev = device()
        self.compiled, self.eager = wl.build_compiled_training_pair(model, self.dev)

    def teardown(self, model):
        import torch._dynamo

        torch._dynamo.reset()

    def profile_targets(self, model):
        return {"compiled": self.compiled, "eager": self.eager}

    def track_compiled_training_step_over_eager(self, model):
        # the check's call compiles (the timed compile's first call is a warm-up): never sampled
        return timing.asv_samples(timing.measure_paired(self.compiled, self.eager, self.dev))

    track_compiled_training_step_over_eager.unit = "ratio"


class CudnnBenchmarkOnOverOff:
    """Paired (timing.measure_paired): the call's time with cudnn.benchmark on over off (image
    models, CUDA)."""

    params = (_image_models(), _MODES)
    param_names = ["model", "mode"]
    timeout = 300

    def setup(self, model, mode):
        self.dev = device()
        if self.dev.type != "cuda":
            raise NotApplicable(
                f"cudnn.benchmark only affects CUDA; this machine runs on {self.dev.type}"
            )
        self.on = wl.with_cudnn_benchmark(wl.build(model, mode, True, False, self.dev), True)
        self.off = wl.with_cudnn_benchmark(wl.build(model, mode, False, False, self.dev), False)

    def teardown(self, *params):
        wl.set_cudnn_benchmark(False)

    def profile_targets(self, *params):
        return {"cudnn_benchmark_on": self.on, "cudnn_benchmark_off": self.off}

    def track_cudnn_benchmark_on_over_off(self, model, mode):
        return timing.asv_samples(timing.measure_paired(self.on, self.off, self.dev))

    track_cudnn_benchmark_on_over_off.unit = "ratio"


class PeakMemory:
    """Peak memory while building the model and running one inference and one training step."""

    params = (_MODELS, [False, True])
    param_names = ["model", "channels_last"]
    timeout = 300

    def setup(self, model, channels_last):
        self.dev = device()
        self.run = wl.build_and_train_once(model, channels_last, self.dev)

    def track_peak_memory(self, model, channels_last):
        # Tensor memory, exact and repeatable (timing.peak_tensor_bytes). The process RSS moves
        # with glibc's reuse of freed pages: ResNet-18's peak RSS moved 5.7% between two identical
        # quick runs under load, beyond the gate's 2% memory tolerance (an A/A false alarm).
        return timing.peak_tensor_bytes(self.run, self.dev)

    track_peak_memory.unit = "bytes"


# asv cannot run a benchmark with an empty parameter list, so such a class is left out of this
# module: a full-runs-only class in quick runs, and in a project of its own a class of image
# models where it registers none (or compile rows where every model is compile="full"). In a
# checkout any other empty list is a bug, which asv then reports.
_FULL_ONLY = ("CompiledTrainingStepOverEager",)
for _name, _value in list(globals().items()):
    if not _name.startswith("_") and isinstance(_value, type) and hasattr(_value, "params"):
        if not all(_value.params) and (settings.OWN_MODELS.get() or _name in _FULL_ONLY):
            del globals()[_name]
