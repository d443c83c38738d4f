"""Fusion: eager vs torch.compile (inductor) for four workloads.

- pointwise_chain: `x.cos().cos()` (two kernels eager, one fused kernel compiled);
- norm_activation: LayerNorm followed by GELU, inference;
- training_step: forward + loss + backward + SGD step of the zoo's MLP, with the model compiled
  (the optimizer stays eager, as in the usual `model = torch.compile(model)` advice);
- cross_entropy_loss: `nn.CrossEntropyLoss()` forward and backward on a batch of logits, the
  module compiled as the seed suggests (`torch.compile(nn.CrossEntropyLoss())`): eager runs
  log_softmax and nll_loss (and their backward kernels) one after the other.

Bandwidth (bytes moved, GB/s) of the memory-bound ones at sizes beyond the cache: bandwidth.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from harness.core import sizes as core_sizes
from harness.core.env import seed_everything
from harness.measure.workloads import full_mode, model_config, to_device

WORKLOADS = ("pointwise_chain", "norm_activation", "training_step", "cross_entropy_loss")


@dataclasses.dataclass
class FusionCase:
    name: str
    device: torch.device
    # fn(module_or_function) -> argument-free callable running one call of the workload
    make_call: Callable[[Callable], Callable[[], object]]
    target: Callable  # what torch.compile wraps (function or module)
    example_args: tuple  # for timing.graph_breaks(target, *example_args)
    # tests swap in "eager" (dynamo without inductor) to exercise the path without a slow compile
    backend: str = "inductor"

    def eager(self) -> Callable[[], object]:
        return self.make_call(self.target)

    def compiled(self) -> Callable[[], object]:
        """A fresh compiled callable; it compiles on its first call (a warm-up call)."""
        return self.make_call(torch.compile(self.target, backend=self.backend))


def _pointwise(x):
    return x.cos().cos()


def build(name: str, device: torch.device) -> FusionCase:
    if name not in WORKLOADS:
        raise ValueError(f"unknown fusion workload {name!r}; choose from {', '.join(WORKLOADS)}")
    gen = seed_everything()
    full = full_mode()
    if name == "pointwise_chain":
        x = torch.randn(core_sizes.pointwise_elements(full, device), generator=gen).to(device)

        def make_call(fn):
            return lambda: fn(x)

        return FusionCase(name, device, make_call, _pointwise, (x,))
    if name == "norm_activation":
        rows, dim = core_sizes.norm_activation(full, device)
        block = nn.Sequential(nn.LayerNorm(dim), nn.GELU()).to(device).eval()
        x = torch.randn(rows, dim, generator=gen).to(device)

        def make_call(mod):
            def call():
                with torch.no_grad():
                    return mod(x)

            return call

        return FusionCase(name, device, make_call, block, (x,))
    if name == "cross_entropy_loss":
        rows, classes = core_sizes.cross_entropy(full, device)
        logits = torch.randn(rows, classes, generator=gen).to(device).requires_grad_()
        targets = torch.randint(0, classes, (rows,), generator=gen).to(device)

        def make_call(loss_fn):
            def call():
                logits.grad = None
                loss = loss_fn(logits, targets)
                loss.backward()
                return loss

            return call

        return FusionCase(name, device, make_call, nn.CrossEntropyLoss(), (logits, targets))
    # training_step
    from harness.core.zoo import get_model

    spec, cfg = get_model("mlp"), model_config("mlp", device)
    model = spec.build(cfg).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = to_device(spec.inputs(cfg), device)
    targets = spec.targets(cfg).to(device)

    def make_call(mod):
        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(mod(*inputs), targets)
            loss.backward()
            opt.step()
            return loss

        return step

    return FusionCase(name, device, make_call, model, inputs)
