"""Training-loop habits that performance guides recommend, each as two callables (the advice and
the habit it replaces) for one zoo model, to be timed side by side by timing.measure_paired:

- eval forward under `torch.no_grad()` or `torch.inference_mode()` vs a plain eval forward that
  records the autograd graph (`grad_enabled`);
- `optimizer.zero_grad(set_to_none=True)` (the default since torch 2.0) vs `set_to_none=False`,
  which fills every gradient with zeros before backward accumulates into it;
- a loop of training steps that sums the loss on the device and reads it once (`.item()` at the
  end) vs one that calls `loss.item()` after every step: on CUDA each `.item()` waits for the
  GPU, so the host cannot queue the next step while the current one runs; on CPU there is no
  queue and the cost left is the call itself.

The two sides of a training comparison each get their own copy of the model and optimizer
(the same seeded weights), so that neither side's steps change the other's state.

Each comparison is a pair whose two sides two builder calls make: each side is offered
(harness.measure.workloads.pairs) and the two are checked before the timing: bit for bit on a
CPU (the same kernels run on both sides), the logged loss sum by the tolerance rule
(docs/answers.md#what-each-pair-compares).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from harness.core import sizes as core_sizes
from harness.measure import answers
from harness.measure.workloads import full_mode, model_config, pairs, to_device

EVAL_MODES = ("grad_enabled", "no_grad", "inference_mode")


def models() -> list[str]:
    """The zoo models timed in every mode: the MLP (overhead-bound at its small CPU size;
    device-bound at its CUDA one) and a conv net (AlexNet)."""
    return ["mlp", "alexnet"]


def steps_per_call(device: torch.device | str, full: bool | None = None) -> int:
    """Training steps in one timed call of the loss-logging loop on `device`; `full` None: the
    run's mode."""
    return core_sizes.loop_steps(full_mode() if full is None else full, device)


def sizes(model_name: str, device: torch.device | str, full: bool | None = None) -> str:
    """What one timed call works on, for reports: the zoo config and its name."""
    from harness.core.zoo import get_model

    full = full_mode() if full is None else full
    cfg = get_model(model_name).benchmark_config(full, device)
    params = ", ".join(f"{k}={v}" for k, v in cfg.items())
    return f"{model_name} {core_sizes.model_size(full, device)} ({params})"


class _Prepared:
    """One seeded copy of the model with its inputs, targets and SGD optimizer."""

    def __init__(self, model_name: str, device: torch.device, train: bool):
        from harness.core.zoo import get_model

        self.spec, cfg = get_model(model_name), model_config(model_name, device)
        self.model = self.spec.build(cfg).to(device)
        self.model.train(train)
        self.inputs = to_device(self.spec.inputs(cfg), device)
        self.targets = self.spec.targets(cfg).to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=LR)
        self.device = torch.device(device)

    def loss(self) -> torch.Tensor:
        return self.spec.loss(self.model(*self.inputs), self.targets)

    def in_fp64(self, model64: torch.nn.Module) -> _Prepared:
        """This side on a float64 model (a copy of its starting state) and float64 inputs."""
        p = copy.copy(self)
        p.model, p.inputs = model64, pairs.in_fp64(self.inputs)
        p.opt = torch.optim.SGD(model64.parameters(), lr=LR)
        return p


LR = 0.01


def eval_forward(model_name: str, mode: str, device: torch.device) -> Callable[[], object]:
    """One eval-mode forward pass with autograd recording (`grad_enabled`), under
    `torch.no_grad()`, or under `torch.inference_mode()`."""
    if mode not in EVAL_MODES:
        raise ValueError(f"unknown eval mode {mode!r}; choose from {EVAL_MODES}")
    p = _Prepared(model_name, device, train=False)
    context = {
        "grad_enabled": torch.enable_grad,
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
    }[mode]

    def forward():
        with context():
            return p.model(*p.inputs)

    return pairs.offer(forward, "training_loop.eval", (model_name, str(device)), mode, p)


def training_step(model_name: str, set_to_none: bool, device: torch.device) -> Callable[[], object]:
    """zero_grad(set_to_none=...), forward, loss, backward, SGD step."""
    p = _Prepared(model_name, device, train=True)
    key = (model_name, str(device))
    return pairs.offer(
        _zero_grad_step(p, set_to_none), "training_loop.zero_grad", key, set_to_none, p
    )


def _zero_grad_step(p: _Prepared, set_to_none: bool) -> Callable[[], torch.Tensor]:
    def step():
        p.opt.zero_grad(set_to_none=set_to_none)
        loss = p.loss()
        loss.backward()
        p.opt.step()
        return loss

    return step


def logged_loop(model_name: str, item_each_step: bool, device: torch.device) -> Callable[[], float]:
    """steps_per_call(device) training steps whose losses are summed for logging: with `.item()`
    after each step, or on the device and read once at the end. Returns the summed loss."""
    p = _Prepared(model_name, device, train=True)
    key = (model_name, str(device))
    loop = _logged_loop(p, item_each_step, steps_per_call(device))
    return pairs.offer(loop, "training_loop.loss_logging", key, item_each_step, p)


def _logged_loop(p: _Prepared, item_each_step: bool, steps: int) -> Callable[[], float]:
    device = p.device

    def step() -> torch.Tensor:
        p.opt.zero_grad(set_to_none=True)
        loss = p.loss()
        loss.backward()
        p.opt.step()
        return loss

    if item_each_step:

        def loop() -> float:
            total = 0.0
            for _ in range(steps):
                total += step().item()  # a host-device sync per step on CUDA
            return total
    else:

        def loop() -> float:
            total = torch.zeros((), device=device)
            for _ in range(steps):
                total += step().detach()
            return total.item()  # one sync per call

    return loop


# ---- the pairs (harness.measure.workloads.pairs) ---------------------------------------------

_EVAL_ROWS = {
    ("no_grad", "grad_enabled"): "training_loop.EvalForward.track_no_grad_over_grad_enabled",
    ("inference_mode", "grad_enabled"): (
        "training_loop.EvalForward.track_inference_mode_over_grad_enabled"
    ),
    ("inference_mode", "no_grad"): "training_loop.EvalForward.track_inference_mode_over_no_grad",
}
_ZERO_GRAD_ROW = "training_loop.ZeroGrad.track_set_to_none_over_zero_fill"
_LOSS_LOGGING_ROW = "training_loop.LossLogging.track_accumulated_over_item_each_step"


def _eval_pair(row: str):
    def make(new: _Prepared, ref: _Prepared, key) -> answers.Pair:
        def fp64():
            model64 = copy.deepcopy(ref.model).double()
            with torch.no_grad():
                return model64(*pairs.in_fp64(ref.inputs))

        return answers.Pair(
            pairs.what(row),
            rule=pairs.exact_on_cpu(ref.device),
            fp64=fp64,
            prepare=lambda: pairs.same_start(new.model, ref.model),
            model=ref.model,
            inputs=ref.inputs,
        )

    return make


def _zero_grad_pair(new: _Prepared, ref: _Prepared, key) -> answers.Pair:
    def fp64_step(model64):
        return _zero_grad_step(ref.in_fp64(model64), False)()

    return pairs.training_pair(
        _ZERO_GRAD_ROW,
        new.model,
        ref.model,
        rule=pairs.exact_on_cpu(ref.device),
        fp64_step=fp64_step,
    )


def _loss_logging_pair(new: _Prepared, ref: _Prepared, key) -> answers.Pair:
    """The logged sum by the tolerance rule; the gradients and parameters after the loop bit
    for bit on a CPU."""
    start = pairs.Start(ref.model)
    steps = steps_per_call(ref.device)

    def prepare():
        pairs.same_start(new.model, ref.model)
        start.take()

    def result(p: _Prepared):
        def of(total: float) -> answers.Results:
            out = answers.Results(logged=torch.tensor(total, dtype=torch.float32))
            full = answers.training_result(p.model, None)
            out.update((k, v) for k, v in full.items() if k != "loss")
            return out

        return of

    def fp64():
        p64 = ref.in_fp64(start.model_fp64())
        logged = 0.0
        for _ in range(steps):
            p64.opt.zero_grad(set_to_none=True)
            loss = p64.loss()
            loss.backward()
            p64.opt.step()
            logged += float(loss.detach())
        out = answers.Results(logged=torch.tensor(logged, dtype=torch.float64))
        full = answers.training_result(p64.model, None)
        out.update((k, v) for k, v in full.items() if k != "loss")
        return out

    exact = ("grad ", "param ") if pairs.exact_on_cpu(ref.device) == answers.EXACT else ()
    return answers.Pair(
        pairs.what(_LOSS_LOGGING_ROW),
        new_result=result(new),
        reference_result=result(ref),
        fp64=fp64,
        prepare=prepare,
        exact=exact,
    )


pairs.family("training_loop.eval", {k: _eval_pair(row) for k, row in _EVAL_ROWS.items()})
pairs.family("training_loop.zero_grad", {(True, False): _zero_grad_pair})
pairs.family("training_loop.loss_logging", {(False, True): _loss_logging_pair})
