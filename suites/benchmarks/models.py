"""Zoo models: inference and training-step time with cudnn.benchmark and channels_last on/off
where they apply, and peak memory (CUDA allocator peak on GPU, peak RSS on CPU)."""

from harness.measure import timing
from harness.measure.workloads import device
from harness.measure.workloads import models as wl
from harness.core.zoo import model_names

_GRID = (model_names(), [False, True], [False, True])
_NAMES = ["model", "cudnn_benchmark", "channels_last"]


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


class Inference(_ModelTiming):
    mode = "inference"

    def track_inference_time(self, *params):
        return timing.asv_samples(timing.measure(self.fn, self.dev))
    track_inference_time.unit = "seconds"


class TrainingStep(_ModelTiming):
    mode = "training"

    def track_step_time(self, *params):
        return timing.asv_samples(timing.measure(self.fn, self.dev))
    track_step_time.unit = "seconds"


class PeakMemory:
    """Peak memory while building the model and running one inference and one training step."""
    params = (model_names(), [False, True])
    param_names = ["model", "channels_last"]
    timeout = 300

    def setup(self, model, channels_last):
        self.dev = device()
        self.run = wl.build_and_train_once(model, channels_last, self.dev)

    def track_peak_memory(self, model, channels_last):
        return timing.peak_memory_bytes(self.run, self.dev)
    track_peak_memory.unit = "bytes"
