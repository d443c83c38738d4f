"""One optimizer update, three implementations: `foreach=False` (a Python loop launching a few
small kernels per parameter), `foreach=True` (multi-tensor kernels over lists of parameters) and
`fused=True` (one kernel per parameter group; on CPU too since torch 2.4).

The model is a stack of Linear layers with many parameter tensors, where the per-parameter launch
cost that foreach and fused remove shows: on CPU, fast 64 layers = 128 tensors of 64x64 and 64;
on CUDA 128 layers of 1024x1024 (256 tensors, 134 M parameters, as many as a real model has),
so that the fused step is bound by memory bandwidth and the for-loop by its ~2000 launches.
Gradients are set once, seeded, and kept: the timed call is `opt.step()` alone.

foreach and fused against the for-loop are pairs (fusion.OptimizerStepOverForLoop): each build
offers its step (harness.measure.workloads.pairs); before each check the for-loop side's
parameters and optimizer state are copied into the other's, and every parameter and state tensor
after one step is compared by the tolerance rule (docs/answers.md#what-each-pair-compares).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from harness.core import sizes as core_sizes
from harness.core.env import seed_everything
from harness.measure import answers
from harness.measure.workloads import NotApplicable, full_mode, pairs

OPTIMIZERS = ("SGD", "Adam", "AdamW")
IMPLS = ("for_loop", "foreach", "fused")
_FLAGS = {"for_loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
_HYPER = {"SGD": {"lr": 0.01, "momentum": 0.9}, "Adam": {"lr": 1e-3}, "AdamW": {"lr": 1e-3}}


def sizes(device: torch.device | str, full: bool | None = None) -> dict:
    """Layers and width on `device` (harness.core.sizes.optimizer); `full`: the sizes of that
    mode, default this process's mode."""
    return core_sizes.optimizer(full_mode() if full is None else full, device)


def many_parameter_model(device: torch.device) -> nn.Module:
    s = sizes(device)
    seed_everything()
    return nn.Sequential(*[nn.Linear(s["width"], s["width"]) for _ in range(s["layers"])]).to(
        device
    )


def build(
    optimizer: str, impl: str, device: torch.device
) -> tuple[Callable[[], object], nn.Module]:
    """(one `opt.step()`, the model it updates), with seeded gradients in place."""
    if optimizer not in OPTIMIZERS or impl not in IMPLS:
        raise ValueError(
            f"unknown optimizer case {optimizer!r}/{impl!r}; choose from "
            f"{', '.join(OPTIMIZERS)} x {', '.join(IMPLS)}"
        )
    model = many_parameter_model(device)
    gen = torch.Generator().manual_seed(7)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen).to(device)
    opt = getattr(torch.optim, optimizer)(model.parameters(), **_HYPER[optimizer], **_FLAGS[impl])
    try:
        opt.step()  # creates the state (first step differs from the rest); also checks support
    except RuntimeError as e:
        if impl == "fused":
            raise NotApplicable(
                f"fused {optimizer} does not run on {device.type} here: {str(e).splitlines()[0]}"
            ) from e
        raise
    step = pairs.offer(opt.step, "optimizers", (optimizer, str(device)), impl, _Side(model, opt))
    return step, model


_ROW = "fusion.OptimizerStepOverForLoop.track_step_over_for_loop"


@dataclasses.dataclass
class _Side:
    model: nn.Module
    opt: torch.optim.Optimizer


def _results(side: _Side) -> answers.Results:
    """Every parameter and every tensor of the optimizer's state, by parameter name."""
    out = answers.Results()
    for name, p in side.model.named_parameters():
        out[f"param {name}"] = p
        for k, v in sorted(side.opt.state.get(p, {}).items()):
            if isinstance(v, torch.Tensor):
                out[f"state {name} {k}"] = v
    return out


def _pair(new: _Side, ref: _Side, key) -> answers.Pair:
    optimizer = key[0]
    start = pairs.Start(ref.model, ref.opt)

    def prepare():
        pairs.same_start(new.model, ref.model, new.opt, ref.opt)
        start.take()

    def fp64():
        model = start.model_fp64()
        for p, q in zip(model.parameters(), ref.model.parameters()):
            p.grad = q.grad.double()
        opt = getattr(torch.optim, optimizer)(
            model.parameters(), **_HYPER[optimizer], **_FLAGS["for_loop"]
        )
        opt.load_state_dict(start.opt_state)  # the state as float64 (the parameters' dtype)
        opt.step()
        return _results(_Side(model, opt))

    return answers.Pair(
        pairs.what(_ROW),
        new_result=lambda _: _results(new),
        reference_result=lambda _: _results(ref),
        fp64=fp64,
        prepare=prepare,
    )


pairs.family("optimizers", {("foreach", "for_loop"): _pair, ("fused", "for_loop"): _pair})
