"""Mixed precision: fp32 vs autocast training steps (bf16 on CPU; fp16 + GradScaler and bf16
on CUDA) for the zoo's AlexNet and word-language-model LSTM."""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.measure.workloads import NotApplicable, model_config, to_device

MODELS = ("alexnet", "word_lm")
PRECISIONS = ("fp32", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check(precision: str, device: torch.device) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {PRECISIONS}")
    if precision == "fp16" and device.type != "cuda":
        raise NotApplicable(
            "fp16 autocast with GradScaler is measured on CUDA only; "
            f"on {device.type} the AMP case is bf16"
        )


def build(model_name: str, precision: str, device: torch.device) -> Callable[[], object]:
    """One training step (zero_grad, forward under autocast, loss, backward, SGD step)."""
    from harness.core.zoo import get_model

    check(precision, device)
    spec, cfg = get_model(model_name), model_config(model_name, device)
    model = spec.build(cfg).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = to_device(spec.inputs(cfg), device)
    targets = spec.targets(cfg).to(device)
    dtype = _DTYPES.get(precision)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = spec.loss(model(*inputs), targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    if dtype is not None and device.type == "cpu":
        try:  # some CPUs lack oneDNN bf16 kernels (LSTM): a property of the machine, not a bug
            step()
        except RuntimeError as e:
            if "primitive" not in str(e):
                raise
            raise NotApplicable(
                f"{model_name} has no {precision} training step on this CPU "
                f"(oneDNN: {str(e).splitlines()[0]})"
            ) from e
    return step
