"""Host-to-device copies: pageable vs pinned host memory, non_blocking, uint8 vs float32.

A batch of images is sent to the GPU either as float32, or as uint8 (4x fewer bytes) and
converted to float on the device. Host memory is pageable, already pinned, or pinned on every
call before the copy (`pin_then_copy`: what `t.pin_memory().to(dev, non_blocking=True)` costs;
PyTorch's pin-memory tutorial warns it can be up to 2x slower than a plain pageable copy).
CUDA only: on CPU every case is NotApplicable.

The three comparisons are pairs (harness.measure.workloads.pairs): pinned vs pageable and
non_blocking vs blocking copy the same bytes, compared bit for bit; uint8-then-convert vs float32
by the tolerance rule, since CUDA divides by a scalar as a multiply by its reciprocal
(docs/answers.md#what-each-pair-compares).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.core import sizes as core_sizes
from harness.core.env import seed_everything
from harness.measure import answers, workloads
from harness.measure.answers import EXACT
from harness.measure.workloads import full_mode, pairs, require_cuda

MEMORY = ("pageable", "pinned", "pin_then_copy")
PAYLOADS = ("float32", "uint8")
COPIES_PER_CALL = core_sizes.TRANSFER_COPIES_PER_CALL


def batch_shape(
    device: torch.device | str | None = None, full: bool | None = None
) -> tuple[int, ...]:
    """The image batch copied per call to `device` (None: this run's device); `full` None: the
    run's mode (HARNESS_FULL)."""
    return core_sizes.transfer_batch(
        full_mode() if full is None else full, workloads.device() if device is None else device
    )


def build(
    memory: str, non_blocking: bool, payload: str, device: torch.device
) -> Callable[[], object]:
    """One host->device copy of an image batch (plus the on-device conversion for uint8)."""
    require_cuda(device, "a host-to-device copy")
    if memory not in MEMORY:
        raise ValueError(f"unknown host memory {memory!r}; choose from {MEMORY}")
    if payload not in PAYLOADS:
        raise ValueError(f"unknown payload {payload!r}; choose from {PAYLOADS}")
    gen = seed_everything()
    host = source = torch.randint(0, 256, batch_shape(device), dtype=torch.uint8, generator=gen)
    if payload == "float32":
        host = host.float().div_(255)
    if memory == "pinned":
        host = host.pin_memory()

    pin_each_call = memory == "pin_then_copy"

    def from_host():
        return host.pin_memory() if pin_each_call else host

    if payload == "float32":

        def copy():
            return from_host().to(device, non_blocking=non_blocking)
    else:

        def copy():
            return from_host().to(device, non_blocking=non_blocking).float().div_(255)

    dev = str(device)
    copy = pairs.offer(copy, "transfer.memory", (non_blocking, payload, dev), memory, source)
    return pairs.offer(copy, "transfer.payload", (memory, non_blocking, dev), payload, source)


def copy_then_compute(
    memory: str, non_blocking: bool, device: torch.device, batches: int = COPIES_PER_CALL
) -> Callable[[], object]:
    """`batches` float32 batches, each copied to the device and then used there (a short chain
    of ops), as in a training loop. What `non_blocking=True` buys is overlap: from pinned memory
    the copy returns at once, so the host queues the ops that follow while the copy runs; a
    blocking copy makes the host wait, and the device idles while the next work is launched.
    Timed with CUDA events on the stream, those idle gaps are inside the sample."""
    copies = [build(memory, non_blocking, "float32", device) for _ in range(batches)]

    def run():
        out = None
        for copy in copies:
            x = copy()
            y = x.mul(2.0).add_(1.0).relu_().sum()
            out = y if out is None else out + y
        return out

    return pairs.offer(run, "transfer.non_blocking", (memory, str(device)), non_blocking)


def _exact(row: str):
    def make(new, ref, key) -> answers.Pair:
        return answers.Pair(pairs.what(row), rule=EXACT)

    return make


def _uint8_pair(new, ref, key) -> answers.Pair:
    device = key[2]

    def fp64():
        return new.to(device).double().div(255)

    return answers.Pair(
        pairs.what("transfer.Uint8ThenConvertOverFloat32.track_uint8_over_float32"), fp64=fp64
    )


pairs.family(
    "transfer.memory",
    {("pinned", "pageable"): _exact("transfer.PinnedOverPageable.track_pinned_over_pageable")},
)
pairs.family("transfer.payload", {("uint8", "float32"): _uint8_pair})
pairs.family(
    "transfer.non_blocking",
    {(True, False): _exact("transfer.NonBlockingOverBlocking.track_non_blocking_over_blocking")},
)
