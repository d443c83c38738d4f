"""Mixed precision: fp32 vs autocast training steps (bf16 on CPU; fp16 + GradScaler and bf16
on CUDA) for the zoo's AlexNet and word-language-model LSTM.

The autocast and fp32 steps of one model are a pair (amp.AutocastOverFp32): each `build` offers
its step (harness.measure.workloads.pairs), and the two are checked by the cosine rule
(docs/answers.md#what-each-pair-compares)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from harness.core import tolerances
from harness.measure import answers
from harness.measure.workloads import NotApplicable, model_config, pairs, to_device

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
    side = _Side(precision, model, inputs, scaler)
    return pairs.offer(step, "amp", (model_name, str(device)), precision, side)


_ROW = "amp.AutocastOverFp32.track_autocast_over_fp32"


@dataclasses.dataclass
class _Side:
    precision: str
    model: torch.nn.Module
    inputs: tuple = ()
    scaler: object = None
    scale: float | None = None  # the GradScaler's scale when the check started


def _pair(new: _Side, ref: _Side, key) -> answers.Pair:
    """The cosine rule: the loss within LOW_PRECISION_LOSS of fp32's; every gradient and
    parameter within allclose at that relative band, with the absolute band that share of the
    fp32 step's largest gradient (what is rounding at the model's gradient scale: a bias before a
    BatchNorm, whose true gradient is zero, has no direction), or else its cosine at least
    LOW_PRECISION_GRAD_COSINE."""
    low = str(_DTYPES[new.precision]).removeprefix("torch.")
    band = tolerances.LOW_PRECISION_LOSS[low]
    pair = pairs.training_pair(
        _ROW,
        new.model,
        ref.model,
        rule=answers.COSINE,
        min_cosine=tolerances.LOW_PRECISION_GRAD_COSINE,
        max_loss_rel=band,
        source=tolerances.LOW_PRECISION_GRAD_SOURCE,
        not_applicable=pairs.tiny_batch_norm(ref.model, ref.inputs),
    )
    synced = pair.prepare
    skipped: list[bool] = []  # fp16: GradScaler skipped the new side's step

    def prepare():
        synced()
        skipped.clear()
        if new.scaler is not None:
            new.scale = float(new.scaler.get_scale())

    def result(model, loss):
        out = answers.training_result(model, loss)
        if skipped:
            return answers.Results((k, v) for k, v in out.items() if not k.startswith("grad "))
        return out

    def new_result(loss):
        # fp16 with GradScaler: a step the scaler skipped (its scaled gradients overflowed: its
        # design) leaves inf gradients and unchanged weights; that check compares the loss and
        # the parameters, on both sides
        if new.scaler is not None and float(new.scaler.get_scale()) < (new.scale or 0.0):
            skipped.append(True)
        return result(new.model, loss)

    def reference_result(loss):
        out = result(ref.model, loss)
        grads = [v for k, v in out.items() if k.startswith("grad ") and v.numel()]
        scale = max((float(g.detach().abs().max()) for g in grads), default=0.0)
        pair.tolerance = tolerances.Tolerance(
            band, band * scale, tolerances.LOW_PRECISION_GRAD_SOURCE
        )
        return out

    pair.prepare = prepare
    pair.new_result = new_result
    pair.reference_result = reference_result
    return pair


pairs.family("amp", {("bf16", "fp32"): _pair, ("fp16", "fp32"): _pair})
