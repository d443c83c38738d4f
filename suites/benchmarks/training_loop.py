"""Training-loop habits: no_grad / inference_mode for inference, zero_grad(set_to_none=True),
and summing the logged loss on the device instead of calling `.item()` every step.

Every row is paired (timing.measure_paired: both sides in alternating order in the same rounds,
one ratio per round, unit "ratio", lower is better) and reads "the advice over the habit it
replaces"; `harness advise` turns them into verdicts.
"""

from harness.measure import timing
from harness.measure.threads import fix_threads
from harness.measure.workloads import device
from harness.measure.workloads import training_loop as wl


def setup(*params):
    """asv runs a module-level setup before every benchmark's own: the run's fixed thread count."""
    fix_threads()


class EvalForward:
    """Paired (timing.measure_paired): an eval forward under no_grad / inference_mode over the same
    forward with autograd recording (grad enabled), and inference_mode over no_grad."""

    params = (wl.models(),)
    param_names = ["model"]
    timeout = 300

    def setup(self, model):
        self.dev = device()
        self.fwd = {mode: wl.eval_forward(model, mode, self.dev) for mode in wl.EVAL_MODES}

    def _paired(self, advice, habit):
        return timing.asv_samples(
            timing.measure_paired(self.fwd[advice], self.fwd[habit], self.dev)
        )

    def track_no_grad_over_grad_enabled(self, model):
        return self._paired("no_grad", "grad_enabled")

    track_no_grad_over_grad_enabled.unit = "ratio"

    def track_inference_mode_over_grad_enabled(self, model):
        return self._paired("inference_mode", "grad_enabled")

    track_inference_mode_over_grad_enabled.unit = "ratio"

    def track_inference_mode_over_no_grad(self, model):
        return self._paired("inference_mode", "no_grad")

    track_inference_mode_over_no_grad.unit = "ratio"


class ZeroGrad:
    """Paired (timing.measure_paired): a training step with zero_grad(set_to_none=True) over one
    with set_to_none=False (gradients zero-filled, then accumulated into)."""

    params = (wl.models(),)
    param_names = ["model"]
    timeout = 300

    def setup(self, model):
        self.dev = device()
        self.to_none = wl.training_step(model, True, self.dev)
        self.zero_fill = wl.training_step(model, False, self.dev)

    def track_set_to_none_over_zero_fill(self, model):
        return timing.asv_samples(timing.measure_paired(self.to_none, self.zero_fill, self.dev))

    track_set_to_none_over_zero_fill.unit = "ratio"


class LossLogging:
    """Paired (timing.measure_paired): a loop of training steps summing the loss on the device (one
    `.item()` per call) over the same loop calling `loss.item()` after every step."""

    params = (wl.models(),)
    param_names = ["model"]
    timeout = 300

    def setup(self, model):
        self.dev = device()
        self.accumulated = wl.logged_loop(model, False, self.dev)
        self.item_each_step = wl.logged_loop(model, True, self.dev)

    def track_accumulated_over_item_each_step(self, model):
        return timing.asv_samples(
            timing.measure_paired(self.accumulated, self.item_each_step, self.dev)
        )

    track_accumulated_over_item_each_step.unit = "ratio"
