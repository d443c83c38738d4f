"""Mixed precision: fp32 vs autocast training steps for AlexNet and the word-language-model LSTM
(bf16 on CPU; fp16 with GradScaler and bf16 on CUDA).

AutocastOverFp32 is the paired row the gate judges (both steps timed in the same rounds);
TrainingStep keeps the raw step time and its reference-normalised companion.
"""

from harness.measure import timing
from harness.measure.threads import fix_threads
from harness.measure.workloads import amp as wl
from harness.measure.workloads import device


def setup(*params):
    """asv runs a module-level setup before every benchmark's own: the run's fixed thread count."""
    fix_threads()


class TrainingStep:
    params = (list(wl.MODELS), list(wl.PRECISIONS))
    param_names = ["model", "precision"]
    timeout = 300

    def setup(self, model, precision):
        self.dev = device()
        self.step = wl.build(model, precision, self.dev)

    def profile_targets(self, *params):
        """What full runs profile per operator (harness.measure.profiles)."""
        return {"step": self.step}

    def track_step_time(self, model, precision):
        return timing.asv_samples(timing.measure(self.step, self.dev))

    track_step_time.unit = "seconds"

    def track_step_time_over_reference(self, model, precision):
        return timing.asv_samples(timing.measure_over_reference(self.step, self.dev))

    track_step_time_over_reference.unit = "relative"


class AutocastOverFp32:
    """Paired (timing.measure_paired): the autocast step's time over the fp32 step's, same model,
    same rounds."""

    params = (list(wl.MODELS), ["bf16", "fp16"])
    param_names = ["model", "precision"]
    timeout = 300

    def setup(self, model, precision):
        self.dev = device()
        self.amp = wl.build(model, precision, self.dev)
        self.fp32 = wl.build(model, "fp32", self.dev)

    def profile_targets(self, *params):
        return {"autocast": self.amp, "fp32": self.fp32}

    def track_autocast_over_fp32(self, model, precision):
        return timing.asv_samples(timing.measure_paired(self.amp, self.fp32, self.dev))

    track_autocast_over_fp32.unit = "ratio"
