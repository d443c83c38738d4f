"""Every paired row's answer check on this machine, for every parameter combination of the run's
grid: the figures docs/answers.md#what-each-pair-compares shows.

    .venv/bin/python tests/measure_answers.py                      # the quick grid, all rows
    HARNESS_FULL=1 .venv/bin/python tests/measure_answers.py --rows 'training_loop|amp'
    .venv/bin/python tests/measure_answers.py --rows fusion --backend eager   # no C++ compile

Each row is set up in this process as asv sets it up (the suite's own setup, its name as asv
spells it), and its track_ method is run up to measure_paired's answer check, which then runs
for real (harness.measure.answers.check, inductor unless --backend). Where the pair has a float64
run, it is also forced once to prove it runs and matches the results by name ("fp64 ok"; the
check itself computes it only where allclose fails). MemoryBandwidth's check runs as its
setup_cache runs it (bandwidth.check_answer), the distributed rows' inside a torchrun launch
(world size 2). Printed per row: status, value (error over tolerance: <= 1 is the same answer),
the output that decided it, max |diff|, the rule, and the seconds the check took.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class _Stop(Exception):
    pass


def _combos(cls) -> list[tuple]:
    params = getattr(cls, "params", None)
    if params is None:
        return [()]
    if not isinstance(params, tuple):
        params = (params,)
    return list(itertools.product(*params))


def _line(name, answer, seconds, extra="") -> str:
    value = "-" if answer.value is None else f"{answer.value:.3g}"
    diff = "-" if answer.max_abs is None else f"{answer.max_abs:.2g}"
    return (
        f"{name}\t{answer.status}\t{value}\t{answer.output or '-'}\t{diff}\t{answer.rule}\t"
        f"{seconds:.1f}s{extra}\t{answer.reason[:90] if answer.status != 'same' else ''}"
    )


def _fp64_ok(pair, new, ref, device) -> str:
    from harness.measure import answers

    if pair.fp64 is None or pair.rule != "tolerance":
        return ""
    if pair.prepare:
        pair.prepare()
    ran = answers._run_sides(pair, pair.new_call or new, ref, device)
    forced = answers.compare(pair, ran.new, ran.reference, answers._fp64_results(pair, device))
    if forced.status == "same":
        return " fp64 ok"
    return f" fp64 {forced.status}: {forced.reason[:60]}"


def measure_row(row: str, cls, backend: str | None, device) -> list[str]:
    from harness.measure import answers, rowfacts
    from harness.measure.workloads import NotApplicable

    lines = []
    method = row.rsplit(".", 1)[1]
    for combo in _combos(cls):
        name = row + (f"({', '.join(rowfacts._repr(p) for p in combo)})" if combo else "")
        rowfacts.current_row = lambda name=name: name
        seen: dict = {}

        def stop(fn, base, device="cpu", pair=None, row=None, seen=seen, name=name):
            pair = pair or answers.declared(fn, base)
            if pair is None and name in answers._FOR_ROW:
                pair, fn, base = answers._FOR_ROW[name]
            seen.update(pair=pair, new=fn, ref=base)
            raise _Stop

        answers.before_timing = stop
        bench = cls()
        try:
            bench.setup(*combo)
        except NotApplicable as e:
            lines.append(f"{name}\tn/a (row)\t\t\t\t\t\t{str(e)[:90]}")
            if hasattr(bench, "teardown"):
                bench.teardown(*combo)
            continue
        case = getattr(bench, "case", None)
        if case is not None and backend:
            case.backend = backend
        try:
            getattr(bench, method)(*combo)
        except _Stop:
            pass
        answers.before_timing = _REAL
        t0 = time.perf_counter()
        answer, error = answers.check(seen.get("pair"), seen["new"], seen["ref"], device, row=name)
        took = time.perf_counter() - t0
        extra = _fp64_ok(seen["pair"], seen["new"], seen["ref"], device) if seen.get("pair") else ""
        lines.append(_line(name, answer, took, extra))
        if hasattr(bench, "teardown"):
            bench.teardown(*combo)
        import torch._dynamo

        torch._dynamo.reset()
    return lines


def measure_bandwidth(backend: str | None, device) -> list[str]:
    from harness.core.answerfacts import Answer
    from harness.measure.workloads import bandwidth

    if backend:
        bandwidth.BACKEND = backend
    lines = []
    for name in bandwidth.WORKLOADS:
        chain = bandwidth.build(name, device)
        t0 = time.perf_counter()
        facts = bandwidth.check_answer(chain, chain.fused(), chain.eager(), device)
        lines.append(
            _line(
                bandwidth.row_name(name), Answer.from_facts(facts, name), time.perf_counter() - t0
            )
        )
        del chain
    return lines


def measure_distributed() -> list[str]:
    from harness.core.answerfacts import Answer
    from harness.measure.workloads import distributed as wl

    t0 = time.perf_counter()
    result = wl.measure(2)
    took = time.perf_counter() - t0
    return [
        _line(row, Answer.from_facts(facts, row), took, " (whole launch)")
        for row, facts in sorted(result["answers"].items())
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="", help="a regex: the rows to check (default: all)")
    parser.add_argument("--backend", help="torch.compile backend for fusion (default: inductor)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "suites"))
    sys.path.insert(0, str(ROOT / "tests"))
    from test_answers_suites import imported_rows

    from harness.measure import answers
    from harness.measure.threads import fix_threads
    from harness.measure.workloads import device

    global _REAL
    _REAL = answers.before_timing
    fix_threads()
    dev = device()
    print("row\tstatus\tvalue\toutput\tmax|diff|\trule\tseconds\treason", flush=True)
    for row, cls in sorted(imported_rows().items()):
        if args.rows and not re.search(args.rows, row):
            continue
        if row.startswith("distributed.") or row == "fusion.MemoryBandwidth.track_fused_over_eager":
            continue
        for line in measure_row(row, cls, args.backend, dev):
            print(line, flush=True)
    if not args.rows or re.search(args.rows, "fusion.MemoryBandwidth.track_fused_over_eager"):
        for line in measure_bandwidth(args.backend, dev):
            print(line, flush=True)
    if not args.rows or re.search(args.rows, "distributed."):
        for line in measure_distributed():
            print(line, flush=True)
    return 0


_REAL = None

if __name__ == "__main__":
    sys.exit(main())
