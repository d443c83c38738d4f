"""Attention: `F.scaled_dot_product_attention` with one backend forced at a time
(`torch.nn.attention.sdpa_kernel`), against a hand-written softmax(Q K^T / sqrt(d)) V.

Backends: "math" (the composite reference, unfused), "flash" (FlashAttention on CUDA; on CPU
the same SDPBackend.FLASH_ATTENTION selects ATen's fused CPU flash kernel), "efficient"
(memory-efficient attention, CUDA), "cudnn" (cuDNN attention, CUDA). A backend this device or
these inputs cannot use is n/a with torch's own reason. Inputs: fp32 on CPU, fp16 on CUDA (the
fused CUDA kernels need half precision).

Each backend against the hand-written attention is a pair (fusion.AttentionOverHandWritten): each
build offers its call (harness.measure.workloads.pairs), the outputs are compared by the
tolerance rule, and the float64 run is the hand-written attention in float64 (flash and
efficient attention have no float64 kernel on CUDA).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F

from harness.core import sizes as core_sizes
from harness.core.env import seed_everything
from harness.measure import answers
from harness.measure.workloads import NotApplicable, full_mode, pairs

IMPLS = ("hand_written", "math", "flash", "efficient", "cudnn")
BACKENDS = IMPLS[1:]
_CUDA_ONLY = {
    "efficient": "the memory-efficient attention kernel",
    "cudnn": "the cuDNN attention kernel",
}


def sizes(device: torch.device | str, full: bool | None = None) -> dict:
    """(batch, heads, sequence, head dim) on `device` (harness.core.sizes.attention).
    `full`: the sizes of that mode; default this process's mode."""
    return core_sizes.attention(full_mode() if full is None else full, device)


def hand_written(q, k, v, causal: bool):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        n = q.size(-2)
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(dim=-1) @ v


def _backend(name: str):
    from torch.nn.attention import SDPBackend

    return {
        "math": SDPBackend.MATH,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
    }[name]


def inputs(device: torch.device, s: dict | None = None) -> tuple:
    s = s or sizes(device)
    gen = seed_everything()
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    shape = (s["batch"], s["heads"], s["seq"], s["head_dim"])
    return tuple(torch.randn(shape, generator=gen).to(device, dtype) for _ in range(3))


def build(
    impl: str, causal: bool, device: torch.device, s: dict | None = None
) -> Callable[[], object]:
    """One attention call (no grad) with `impl`; NotApplicable where the backend cannot run."""
    if impl not in IMPLS:
        raise ValueError(
            f"unknown attention implementation {impl!r}; choose from {', '.join(IMPLS)}"
        )
    if impl in _CUDA_ONLY and device.type != "cuda":
        raise NotApplicable(
            f"SDPA backend {impl!r} is {_CUDA_ONLY[impl]}, CUDA only; this machine "
            f"runs on {device.type} (on CPU the fused kernel is 'flash')"
        )
    q, k, v = inputs(device, s)
    key = (causal, str(device), tuple(q.shape))
    if impl == "hand_written":

        def call():
            with torch.no_grad():
                return hand_written(q, k, v, causal)

        return pairs.offer(call, "attention", key, impl, (q, k, v))
    from torch.nn.attention import sdpa_kernel

    backend = _backend(impl)

    def call():
        with torch.no_grad(), sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    with warnings.catch_warnings(record=True) as caught:  # torch warns why a backend is refused
        warnings.simplefilter("always")
        try:
            call()
        except RuntimeError as e:
            why = (
                "; ".join(str(w.message).splitlines()[0] for w in caught) or str(e).splitlines()[0]
            )
            raise NotApplicable(
                f"SDPA backend {impl!r} cannot run these inputs on {device.type}: {why}"
            ) from e
    return pairs.offer(call, "attention", key, impl, (q, k, v))


_ROW = "fusion.AttentionOverHandWritten.track_sdpa_over_hand_written"


def _pair(new, ref, key) -> answers.Pair:
    causal = key[0]
    q, k, v = ref

    def fp64():
        with torch.no_grad():
            return hand_written(q.double(), k.double(), v.double(), causal)

    return answers.Pair(pairs.what(_ROW), fp64=fp64, inputs=(q, k, v))


pairs.family("attention", {(backend, "hand_written"): _pair for backend in BACKENDS})
