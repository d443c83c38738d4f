"""Whole-suite A/A gates with and without the history's noise (docs/measurements.md, "Noise
learned from the history"): every ordered pair of the runs under EXP gated against each other,
with the runs under HIST as the machine's history (hard links beside the pair in a scratch root,
so nothing under HIST or EXP is written), once learning the noise and once with
--no-history-noise. Prints one line per gate, then per kind of row: rows judged, the median
threshold of the judged ones, and the false verdicts (any REGRESSION or improved is false: the
runs are of one commit).

    .venv/bin/python tests/measure_history_noise.py HIST_ROOT EXP_ROOT [--bench REGEX] [--json F]

Leave-one-out within one history: HIST_ROOT and EXP_ROOT the same folder; each pair is then
gated against the other runs of it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness.core import records
from harness.verdict import compare, metrics
from harness.verdict.gate import run_gate


def kind(unit: str | None) -> str:
    try:
        return metrics.kind_of(unit).label
    except KeyError:
        return "?"


def gate_pair(hist: Path, base, head, scratch: Path, bench, history: bool) -> dict:
    root = scratch / f"{base.run_id}_{head.run_id}"
    for r in {r.run_id: r for r in [*records.list_runs(hist), base, head]}.values():
        dest = records.runs_dir(root) / r.machine / r.run_id
        dest.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-al", str(r.path), str(dest)], check=True)
    m = records.runs_dir(root) / base.machine
    t0 = time.perf_counter()
    out = run_gate(
        str(m / base.run_id), str(m / head.run_id), root=root, only=bench, history=history
    )
    seconds = time.perf_counter() - t0
    shutil.rmtree(root)
    kinds: dict[str, dict] = {}
    for r in out.rows:
        d = kinds.setdefault(kind(r.unit), {"judged": 0, "not_judged": 0, "thresholds": []})
        if r.verdict in compare.JUDGED:
            d["judged"] += 1
            if r.threshold is not None:
                d["thresholds"].append(r.threshold)
        elif r.verdict == compare.NOT_JUDGED:
            d["not_judged"] += 1
    false = [
        (r.name, r.verdict, r.ratio)
        for r in out.rows
        if r.verdict in (compare.REGRESSION, compare.IMPROVED)
    ]
    return {
        "base": base.run_id,
        "head": head.run_id,
        "history": history,
        "exit": out.code,
        "seconds": round(seconds, 2),
        "summary": out.summary(),
        "false": false,
        "kinds": kinds,
    }


def report(gates: list[dict]) -> None:
    for history in (True, False):
        gs = [g for g in gates if g["history"] is history]
        if not gs:
            continue
        kinds: dict[str, list] = {}
        for g in gs:
            for k, d in g["kinds"].items():
                a = kinds.setdefault(k, [0, 0, []])
                a[0], a[1] = a[0] + d["judged"], a[1] + d["not_judged"]
                a[2] += d["thresholds"]
        judged = sum(a[0] for a in kinds.values())
        compared = judged + sum(a[1] for a in kinds.values())
        false = sum(len(g["false"]) for g in gs)
        print(
            f"\nhistory noise {'on' if history else 'off'}: {len(gs)} gates, "
            f"{false} false verdicts in {sum(bool(g['false']) for g in gs)} of them; "
            f"judged {judged / len(gs):.1f} of "
            f"{compared / len(gs):.1f} rows a gate ({judged / max(compared, 1):.0%})"
        )
        for k, (j, n, th) in sorted(kinds.items()):
            median = f"{statistics.median(th):.1%}" if th else "-"
            print(
                f"  {k:22s} judged {j / len(gs):5.1f} of {(j + n) / len(gs):5.1f}, "
                f"median threshold {median}"
            )
        names: dict[str, int] = {}
        for g in gs:
            for name, *_ in g["false"]:
                names[name] = names.get(name, 0) + 1
        for name, count in sorted(names.items(), key=lambda x: -x[1]):
            print(f"  false verdict in {count} gate(s): {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hist", type=Path, help="results root whose runs are the history")
    parser.add_argument("exp", type=Path, help="results root whose runs are gated pairwise")
    parser.add_argument("--bench", action="append", help="only rows matching (repeatable)")
    parser.add_argument("--json", type=Path, help="also write every gate's figures here")
    args = parser.parse_args()
    runs = records.list_runs(args.exp)
    gates = []
    # beside EXP: hard links need the same file system
    with tempfile.TemporaryDirectory(dir=args.exp.resolve().parent, prefix=".aa-gates-") as scratch:
        for base, head in itertools.permutations(runs, 2):
            for history in (True, False):
                g = gate_pair(args.hist, base, head, Path(scratch), args.bench, history)
                gates.append(g)
                print(
                    f"{base.run_id} {head.run_id} history={history} {g['seconds']} s  "
                    f"{g['summary']}",
                    flush=True,
                )
    report(gates)
    if args.json:
        args.json.write_text(json.dumps(gates, indent=1))


if __name__ == "__main__":
    main()
