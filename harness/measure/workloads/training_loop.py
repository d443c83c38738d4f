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
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.core import sizes as core_sizes
from harness.measure.workloads import full_mode, model_config, to_device

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
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def loss(self) -> torch.Tensor:
        return self.spec.loss(self.model(*self.inputs), self.targets)


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

    return forward


def training_step(model_name: str, set_to_none: bool, device: torch.device) -> Callable[[], object]:
    """zero_grad(set_to_none=...), forward, loss, backward, SGD step."""
    p = _Prepared(model_name, device, train=True)

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
    steps = steps_per_call(device)

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
