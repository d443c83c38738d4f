"""Host-to-device copies: pageable vs pinned host memory, non_blocking, uint8 vs float32.

A batch of images is sent to the GPU either as float32, or as uint8 (4x fewer bytes) and
converted to float on the device. Host memory is pageable, already pinned, or pinned on every
call before the copy (`pin_then_copy`: what `t.pin_memory().to(dev, non_blocking=True)` costs;
PyTorch's pin-memory tutorial warns it can be up to 2x slower than a plain pageable copy).
CUDA only: on CPU every case is NotApplicable.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.core import sizes as core_sizes
from harness.core.env import seed_everything
from harness.measure import workloads
from harness.measure.workloads import full_mode, require_cuda

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
    host = torch.randint(0, 256, batch_shape(device), dtype=torch.uint8, generator=gen)
    if payload == "float32":
        host = host.float().div_(255)
    if memory == "pinned":
        host = host.pin_memory()

    pin_each_call = memory == "pin_then_copy"

    def source():
        return host.pin_memory() if pin_each_call else host

    if payload == "float32":

        def copy():
            return source().to(device, non_blocking=non_blocking)
    else:

        def copy():
            return source().to(device, non_blocking=non_blocking).float().div_(255)

    return copy


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

    return run
