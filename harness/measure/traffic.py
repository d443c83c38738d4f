"""Kernels and memory traffic of one call, counted at the dispatcher (TorchDispatchMode).

Each aten kernel that reaches a backend (after composite operators decompose: the math SDPA
backend shows its bmm/softmax, the fused ones one kernel) is counted, with the bytes it must
read (its tensor arguments, `out=` buffers excepted) and write (its tensor results; an in-place
op's result is the argument it overwrote). Views and allocations of uninitialised memory move
no data. This is each kernel's minimum traffic, what it streams from and to memory when its
operands do not fit in cache: eager `x.cos().cos()` reads x, writes t, reads t, writes y,
4 x numel x itemsize bytes. Exact and repeatable (shapes, not timings).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# Ops whose result is not written (uninitialised memory) or that only change metadata.
_NO_DATA = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "detach",
    "lift_fresh",
    "alias",
    "_unsafe_view",
    "_reshape_alias",
}


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def tensors(tree) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


@dataclasses.dataclass
class Traffic:
    kernels: int = 0
    bytes: int = 0


class _Counter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.traffic = Traffic()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.is_view or func._schema.name.split("::")[-1] in _NO_DATA:
            return out
        schema = func._schema.arguments
        outs = {a.name for a in schema if a.is_out}
        reads = [
            t
            for i, a in enumerate(args)
            if not (i < len(schema) and schema[i].name in outs)
            for t in tensors(a)
        ]
        reads += [t for k, v in kwargs.items() if k not in outs for t in tensors(v)]
        self.traffic.bytes += sum(map(nbytes, reads)) + sum(map(nbytes, tensors(out)))
        self.traffic.kernels += 1
        return out


def count(fn: Callable[[], object]) -> Traffic:
    """Kernels dispatched and bytes they move in one call of `fn()` (no autograd recording)."""
    with torch.no_grad(), _Counter() as counter:
        fn()
    return counter.traffic
