"""Gradient checkpointing (`torch.utils.checkpoint`, non-reentrant) on the zoo's transformer:
each encoder layer keeps only its input in the forward pass and recomputes its activations in
the backward pass. The trade: peak memory saved against step time added.

Sizes: the zoo's configuration for the device and mode (harness.core.sizes.model_size), with the
small one's sequence and batch raised (batch 8, 128 tokens) so that activations, which
checkpointing drops, outweigh the weights, which it cannot.

The checkpointed and plain steps are a pair (fusion.GradientCheckpointing): each build offers
its step (harness.measure.workloads.pairs); the loss, gradients and parameters are compared bit
for bit on a CPU (measured identical: the recomputation runs the same kernels on the same
inputs, dropout's masks restored), by the tolerance rule on CUDA (docs/answers.md).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from harness.core.env import seed_everything
from harness.measure import answers
from harness.measure.workloads import model_config, pairs, size, to_device

MODEL = "transformer"
MODES = ("plain", "checkpointed")
_FAST_OVERRIDES = {"batch": 8, "seq_len": 128}


def config(device: torch.device | str) -> dict:
    cfg = model_config(MODEL, device)
    return {**cfg, **_FAST_OVERRIDES} if size(device) == "small" else cfg


def layers_of(model: nn.Module) -> nn.ModuleList:
    """The repeated blocks to checkpoint: the model's first ModuleList (the encoder layers)."""
    for m in model.modules():
        if isinstance(m, nn.ModuleList) and len(m):
            return m
    raise ValueError(f"{type(model).__name__} has no ModuleList of layers to checkpoint")


def checkpoint_layers(model: nn.Module) -> nn.Module:
    """Make every layer's forward run under checkpoint. The layer objects stay (the encoder reads
    their attributes); only their forward is wrapped. RNG state is preserved, so dropout draws
    the same mask when recomputed and gradients equal the plain model's."""
    for layer in layers_of(model):
        layer.forward = functools.partial(checkpoint, layer.forward, use_reentrant=False)
    return model


def build(
    mode: str, device: torch.device, cfg: dict | None = None
) -> tuple[Callable[[], torch.Tensor], nn.Module]:
    """(one training step: zero_grad, forward, loss, backward; the model). No optimizer: it
    is the same for both modes and would only dilute the difference."""
    from harness.core.zoo import get_model

    if mode not in MODES:
        raise ValueError(f"unknown checkpointing mode {mode!r}; choose from {', '.join(MODES)}")
    spec = get_model(MODEL)
    cfg = cfg or config(device)
    seed_everything()
    model = spec.build_fn(cfg).to(device).train()
    if mode == "checkpointed":
        checkpoint_layers(model)
    gen = torch.Generator().manual_seed(1)
    inputs = to_device(tuple(spec.inputs_fn(cfg, gen)), device)
    targets = torch.randint(0, cfg["num_classes"], (cfg["batch"],), generator=gen).to(device)

    def step(model=model, inputs=inputs):
        model.zero_grad(set_to_none=True)
        loss = spec.loss(model(*inputs), targets)
        loss.backward()
        return loss

    key = (str(device), tuple(sorted(cfg.items())))
    return pairs.offer(step, "checkpointing", key, mode, _Side(model, inputs, step)), model


_ROW = "fusion.GradientCheckpointing.track_checkpointed_over_plain"


@dataclasses.dataclass
class _Side:
    model: nn.Module
    inputs: tuple
    step: Callable  # step(model, inputs): the same step on another model and inputs


def _pair(new: _Side, ref: _Side, key) -> answers.Pair:
    return pairs.training_pair(
        _ROW,
        new.model,
        ref.model,
        rule=pairs.exact_on_cpu(key[0]),
        fp64_step=lambda model64: ref.step(model64, pairs.in_fp64(ref.inputs)),
    )


pairs.family("checkpointing", {("checkpointed", "plain"): _pair})
