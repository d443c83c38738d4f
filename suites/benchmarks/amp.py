"""Mixed precision: fp32 vs autocast training steps for AlexNet and the word-language-model LSTM
(bf16 on CPU; fp16 with GradScaler and bf16 on CUDA)."""

from harness.measure import timing
from harness.measure.workloads import amp as wl
from harness.measure.workloads import device


class TrainingStep:
    params = (list(wl.MODELS), list(wl.PRECISIONS))
    param_names = ["model", "precision"]
    timeout = 300

    def setup(self, model, precision):
        self.dev = device()
        self.step = wl.build(model, precision, self.dev)

    def track_step_time(self, model, precision):
        return timing.asv_samples(timing.measure(self.step, self.dev))
    track_step_time.unit = "seconds"


class AutocastOverFp32:
    """Autocast step time over fp32 step time, same model, same process."""
    params = (list(wl.MODELS), ["bf16", "fp16"])
    param_names = ["model", "precision"]
    timeout = 300

    def setup(self, model, precision):
        self.dev = device()
        self.amp = wl.build(model, precision, self.dev)
        self.fp32 = wl.build(model, "fp32", self.dev)

    def track_autocast_over_fp32(self, model, precision):
        return timing.ratio(timing.measure(self.amp, self.dev), timing.measure(self.fp32, self.dev))
    track_autocast_over_fp32.unit = "ratio"
