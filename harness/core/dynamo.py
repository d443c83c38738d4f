"""Dynamo's own counters: the one place graphs and graph breaks are counted, so that the dynamo
goldens (harness.golden.capture) and the benchmarks' `track_graph_breaks` never disagree.
`torch._dynamo.explain` is not used: it reports -1 breaks for a frame dynamo skips whole."""

from __future__ import annotations

from collections.abc import Callable


def compile_and_count(
    fn, args: tuple, on_graph: Callable | None = None
) -> tuple[int, dict[str, int]]:
    """Run `torch.compile(fn)` once on `args` with a recording backend.

    `on_graph(gm, example_inputs)` is called for each captured FX graph. Returns the number of
    graphs and the graph-break reasons (first line of each -> how often).
    """
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    graphs = 0

    def record(gm, example_inputs):
        nonlocal graphs
        graphs += 1
        if on_graph is not None:
            on_graph(gm, example_inputs)
        return gm.forward

    torch._dynamo.reset()
    counters.clear()
    try:
        torch.compile(fn, backend=record)(*args)
        breaks: dict[str, int] = {}
        for group in ("graph_break", "unimplemented"):
            for reason, count in counters[group].items():
                first = str(reason).strip().splitlines()[0] if str(reason).strip() else "unknown"
                breaks[first] = breaks.get(first, 0) + count
    finally:
        torch._dynamo.reset()
    return graphs, breaks
