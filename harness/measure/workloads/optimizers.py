"""One optimizer update, three implementations: `foreach=False` (a Python loop launching a few
small kernels per parameter), `foreach=True` (multi-tensor kernels over lists of parameters) and
`fused=True` (one kernel per parameter group; on CPU too since torch 2.4).

The model is a stack of Linear layers with many parameter tensors, where the per-parameter launch
cost that foreach and fused remove shows: on CPU, fast 64 layers = 128 tensors of 64x64 and 64;
on CUDA 128 layers of 1024x1024 (256 tensors, 134 M parameters, as many as a real model has),
so that the fused step is bound by memory bandwidth and the for-loop by its ~2000 launches.
Gradients are set once, seeded, and kept: the timed call is `opt.step()` alone.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from harness.core import sizes as core_sizes
from harness.core.env import seed_everything
from harness.measure.workloads import NotApplicable, full_mode

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
    return opt.step, model
