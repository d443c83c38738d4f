"""The answer check's proof (docs/answers.md#the-proof): real quick runs of three paired rows of
different kinds, with the test-only switch HARNESS_TEST_ANSWER_NOISE adding seeded per-element
noise of F x each rule's tolerance to the new side's results; each run's answer rows read back
from its record. At F = 2 every seed must be caught (WRONG), at F = 0.1 none.

    .venv/bin/python tests/measure_answer_catch.py ROOT [--seeds 10] [--factors 2,0.1]
        [--row REGEX ...] [--harness .venv/bin/harness]

ROOT is a results root of the script's own (one run per seed and factor goes there).
Prints one line per run and a table of caught counts per row and factor.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from harness.core import answerfacts, records

# a compiled model, an AMP step, a fused optimizer: three rules' different tolerances
ROWS = (
    r"models.CompiledOverEager.track_compiled_over_eager('word_lm')",
    r"amp.AutocastOverFp32.track_autocast_over_fp32('word_lm', 'bf16')",
    r"fusion.OptimizerStepOverForLoop.track_step_over_for_loop('Adam', 'fused')",
)


def run_once(harness: str, root: Path, rows, factor: float, seed: int) -> dict[str, dict]:
    suites = sorted({r.split(".")[0] for r in rows})
    cmd = [harness, "bench", "--quick", "--results-dir", str(root), "--label", f"f{factor}s{seed}"]
    for s in suites:
        cmd += ["--suite", s]
    for r in rows:
        cmd += ["--bench", "^" + re.escape(r) + "$"]
    noise = ";".join(re.escape(r) + f"={factor}" for r in rows)
    env = {
        "HARNESS_TEST_ANSWER_NOISE": noise,
        "HARNESS_TEST_ANSWER_SEED": str(seed),
    }
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode not in (0, 1, 2):
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    run = max(records.list_runs(root), key=lambda r: r.run_id)
    facts = records.read_row_facts(run.path)
    out = {}
    for r in rows:
        got = facts.get(answerfacts.answer_row(r), {}).get(answerfacts.FACTS_KEY)
        out[r] = got or {"status": "missing"}
    print(
        f"F={factor} seed={seed} {seconds:.0f}s "
        + " ".join(
            f"{r.split('.')[1]}={out[r]['status']}({out[r].get('value', '-')})" for r in rows
        ),
        flush=True,
    )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--factors", default="2,0.1")
    ap.add_argument("--row", action="append", help="a row's full name (default: the three)")
    ap.add_argument("--harness", default=str(Path(sys.executable).with_name("harness")))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rows = tuple(args.row or ROWS)
    table: dict = {}
    for factor in (float(f) for f in args.factors.split(",")):
        for seed in range(args.seeds):
            for r, got in run_once(args.harness, args.root, rows, factor, seed).items():
                cell = table.setdefault(r, {}).setdefault(str(factor), [])
                cell.append(got)
    print("\nrow | " + " | ".join(f"F={f}: WRONG / runs" for f in args.factors.split(",")))
    for r, per in table.items():
        cells = [
            f"{sum(a['status'] == 'WRONG' for a in per[str(float(f))])} / {len(per[str(float(f))])}"
            for f in args.factors.split(",")
        ]
        print(f"{r} | " + " | ".join(cells))
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
