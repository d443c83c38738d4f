"""Memory bandwidth of fused vs unfused pointwise and normalisation kernels.

The seed's claim: `x.cos().cos()` eager reads x, writes t, reads t and writes y (4 x numel x
itemsize bytes of global memory traffic); one fused kernel reads x and writes y (2 x), "so fusion
will speed it up by 2x". That holds only where the kernels are memory-bound. Here each workload
is run at a size well beyond the last-level cache, and measured as:

- bytes moved per call: eager, the sum over the aten kernels it dispatches of the tensors each
  reads and writes (counted by a dispatch mode, `eager_bytes`); fused, the region's inputs
  (parameters included) read once and outputs written once (`fused_bytes`), which is the traffic
  of the single kernel inductor generates for each of these workloads (intermediates stay in
  registers; a LayerNorm row is re-read from L1, not from memory);
- achieved GB/s: bytes moved / time per call;
- fraction of copy bandwidth: achieved GB/s over the GB/s of a plain device copy
  (`dst.copy_(src)`, reads and writes numel x itemsize each) timed in the same rounds, the
  practical limit on this device at this thread count (timing.measure_rounds).

A kernel far below the copy's bandwidth is compute-bound (on a CPU, `cos` is: a vectorised
cosine costs more than streaming its bytes), and removing memory traffic cannot speed it up by
the saved fraction; a multiply-add chain beside it is memory-bound and shows what fusion saves.

On CPU, freed outputs of this size go back to the OS (glibc returns large blocks with munmap),
and every call then page-faults a fresh 128 MiB, which costs far more than the kernels' traffic
(figures: docs/measurements.md#the-measuring-rules). Freed memory is kept in the process while
measuring (harness.measure.allocator), as PyTorch's caching allocator does on a GPU.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch
import torch._dynamo
from torch import nn

from harness.core import sizes as core_sizes
from harness.core.answerfacts import Answer
from harness.core.env import seed_everything
from harness.measure import allocator, answers, rowfacts, timing, traffic
from harness.measure.workloads import full_mode, pairs

WORKLOADS = ("pointwise_chain", "multiply_add", "norm_activation")
# torch.compile backend for the fused side; tests swap in "eager" to avoid compiling
BACKEND = "inductor"
NORM_DIM = 1024
GB = 1e9


def numel(device: torch.device | str) -> int:
    """Elements per tensor on `device` in this mode (harness.core.sizes.bandwidth_elements)."""
    return core_sizes.bandwidth_elements(full_mode(), device)


def _pointwise_chain(x):
    return x.cos().cos()


def _multiply_add(x):
    return x.mul(2.0).add(1.0)


@dataclasses.dataclass
class Chain:
    name: str
    target: Callable  # function or module that torch.compile wraps
    args: tuple

    def eager(self) -> Callable[[], object]:
        return lambda: self.target(*self.args)

    def fused(self, backend: str | None = None) -> Callable[[], object]:
        compiled = torch.compile(self.target, backend=backend or BACKEND)
        return lambda: compiled(*self.args)

    def fp64(self) -> object:
        """The eager call on float64 copies (the answer check's float64 run)."""
        target = self.target
        if isinstance(target, nn.Module):
            target = copy.deepcopy(target).double()
        return target(*(a.double() for a in self.args))


def build(name: str, device: torch.device, n: int | None = None) -> Chain:
    if name not in WORKLOADS:
        raise ValueError(f"unknown bandwidth workload {name!r}; choose from {', '.join(WORKLOADS)}")
    n = n or numel(device)
    gen = seed_everything()
    if name == "norm_activation":
        dim = min(NORM_DIM, n)
        block = nn.Sequential(nn.LayerNorm(dim), nn.GELU()).to(device).eval().requires_grad_(False)
        return Chain(name, block, (torch.randn(n // dim, dim, generator=gen).to(device),))
    fn = _pointwise_chain if name == "pointwise_chain" else _multiply_add
    return Chain(name, fn, (torch.randn(n, generator=gen).to(device),))


def eager_bytes(fn: Callable[[], object]) -> int:
    """Global memory traffic of one eager call: the sum over its aten kernels (traffic.count)."""
    return traffic.count(fn).bytes


def fused_bytes(chain: Chain) -> int:
    """Traffic of one kernel for the whole region: inputs and parameters read once, outputs
    written once (shapes from an eager call)."""
    params = (
        list(chain.target.parameters()) + list(chain.target.buffers())
        if isinstance(chain.target, nn.Module)
        else []
    )
    with torch.no_grad():
        outputs = chain.eager()()
    return sum(
        map(traffic.nbytes, [*traffic.tensors(chain.args), *params, *traffic.tensors(outputs)])
    )


def copy_reference(like: torch.Tensor) -> tuple[Callable[[], object], int]:
    """A plain device copy of the workload's input size, and the bytes it moves (read + write)."""
    src, dst = like.clone(), torch.empty_like(like)
    return (lambda: dst.copy_(src)), 2 * traffic.nbytes(src)


def measure(name: str, device: torch.device, n: int | None = None) -> dict:
    """Every figure of one workload from one timing loop: eager, fused and the copy timed in
    the same rounds. Returns bytes per call, per-round GB/s and fractions of the copy's GB/s,
    and the per-round fused/eager time ratio."""
    with allocator.freed_memory_retained():
        chain = build(name, device, n)
        eager, fused = chain.eager(), chain.fused()
        with torch.no_grad():  # the answer check first: its calls absorb the compile
            answer = check_answer(chain, fused, eager, device)
        copy_call, copy_bytes = copy_reference(chain.args[0])
        moved = {"eager": eager_bytes(eager), "fused": fused_bytes(chain)}
        with torch.no_grad():
            t_eager, t_fused, t_copy = timing.measure_rounds([eager, fused, copy_call], device)
        del chain, eager, fused, copy_call
    times = {"eager": t_eager, "fused": t_fused}
    copy_gbps = [copy_bytes / t / GB for t in t_copy]
    out = {
        "answer": answer,
        "numel": n or numel(device),
        "copy_bytes": copy_bytes,
        "copy_gbps": copy_gbps,
        "fused_over_eager": [f / e for f, e in zip(t_fused, t_eager)],
    }
    for mode, ts in times.items():
        gbps = [moved[mode] / t / GB for t in ts]
        out[mode] = {
            "bytes": moved[mode],
            "gbps": gbps,
            "fraction": [g / c for g, c in zip(gbps, copy_gbps)],
        }
    return out


ROW = "fusion.MemoryBandwidth.track_fused_over_eager"


def row_name(name: str) -> str:
    """The paired row of workload `name` as asv's results spell it."""
    return f"{ROW}({name!r})"


def check_answer(chain: Chain, fused, eager, device) -> dict:
    """The fused side against eager (harness.measure.answers, tolerance rule) where the timing
    loop runs: the answer's facts, recorded by the row's teardown (`record_answer`)."""
    pair = answers.Pair(pairs.what(ROW), fp64=chain.fp64, compiled=True, inputs=chain.args)
    answer, error = answers.check(pair, fused, eager, device, row=row_name(chain.name))
    if error is not None:
        raise error
    return answer.to_facts()


def record_answer(figures: dict, workload: str) -> None:
    """In a row's teardown: the answer checked in setup_cache, recorded for the paired row only."""
    row = rowfacts.current_row()
    facts = (figures.get(workload) or {}).get("answer") if isinstance(figures, dict) else None
    if row == row_name(workload) and facts is not None:
        answers.record(Answer.from_facts(facts, f"the answer checked for {row}"), row)


def measure_all(device: torch.device, n: int | None = None) -> dict:
    """`measure` for every workload, one after the other (each holds 4-5 tensors of
    numel(device))."""
    out = {}
    for name in WORKLOADS:
        out[name] = measure(name, device, n)
        torch._dynamo.reset()
    return out
