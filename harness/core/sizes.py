"""How big each benchmark workload is, per mode: the one table that the workloads build from
(harness.measure.workloads) and that the verdict reads to say what a figure was measured on
(harness.verdict.advice). `full` is the mode: full sizes for nightly runs, else the fast CI sizes.
Zoo models carry their own small and full configurations (harness.core.zoo)."""

from __future__ import annotations


def pointwise_elements(full: bool) -> int:
    """Floats in the fusion suite's `x.cos().cos()` input."""
    return 1 << (22 if full else 20)


def norm_activation(full: bool) -> tuple[int, int]:
    """(rows, features) of the LayerNorm + GELU block's input."""
    return (8192, 1024) if full else (256, 256)


def cross_entropy(full: bool) -> tuple[int, int]:
    """(rows, classes) of the compiled cross-entropy loss's logits."""
    return (4096, 32000) if full else (256, 1000)


def optimizer(full: bool) -> dict:
    """The many-small-parameters model an optimizer step updates."""
    return {"layers": 256, "width": 256} if full else {"layers": 64, "width": 64}


def attention(full: bool) -> dict:
    """(batch, heads, sequence, head dim): fast keeps one call around 10 ms on a CPU core."""
    return (
        {"batch": 8, "heads": 16, "seq": 2048, "head_dim": 64}
        if full
        else {"batch": 2, "heads": 4, "seq": 256, "head_dim": 64}
    )


def transfer_batch(full: bool) -> tuple[int, ...]:
    """The image batch a host-to-device copy moves."""
    return (64, 3, 224, 224) if full else (8, 3, 64, 64)


TRANSFER_COPIES_PER_CALL = 4  # copy_then_compute: batches copied and used in one timed call


def dataloader(full: bool) -> dict:
    """Dataset length, image side and timed epochs of the DataLoader benchmarks."""
    return (
        {"length": 1024, "image": 224, "epochs": 3}
        if full
        else {"length": 64, "image": 64, "epochs": 2}
    )


def loop_steps(full: bool) -> int:
    """Training steps in one timed call of the loss-logging loop."""
    return 16 if full else 4
