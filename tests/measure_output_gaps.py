"""How long a command stays silent: each line of its output (stdout and stderr together) stamped
with the seconds since it started, then the longest gaps between lines (the start and the exit
count as lines), and the estimate a `harness bench` run printed at its start against its wall
time (docs/benchmarks.md, "Never silent for long").

    .venv/bin/python tests/measure_output_gaps.py -- harness bench --quick
    .venv/bin/python tests/measure_output_gaps.py --log run.log -- \
        ../shared/tools/with-load 2 harness bench --quick
    .venv/bin/python tests/measure_output_gaps.py --stamped run.log      # a log written before

The command's lines are shown as they come, each after its stamp; `--log FILE` keeps them stamped
(`SECONDS<TAB>LINE`), which `--stamped FILE` reads again. The exit status is the command's (the
figures go to stderr at the end), so it can wrap a CI step. `--max-gap S` makes a gap longer than
S seconds exit 1 when the command itself passed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

_ESTIMATE = re.compile(r"harness bench: estimated ~(?P<s>\d+) s for (?P<n>\d+) benchmarks")
_UNKNOWN = "harness bench: estimated time unknown"
_CLOSING = re.compile(r"the longest silence between these lines: (?P<s>\d+) s")
_LEFT = re.compile(r"~(?P<s>\d+) s left")
_END = "harness bench: the benchmarks took "  # the benchmarks' end: what "left" counts down to


def run(cmd: list[str], log: Path | None) -> tuple[int, float, list[tuple[float, str]]]:
    """Run `cmd`, its output stamped line by line: (exit status, wall seconds, [(t, line)])."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    lines: list[tuple[float, str]] = []
    t0 = time.monotonic()
    sink = open(log, "w", encoding="utf-8") if log else None  # noqa: SIM115 (closed below)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        for raw in iter(proc.stdout.readline, b""):
            t = time.monotonic() - t0
            for text in raw.decode("utf-8", errors="replace").rstrip("\n").split("\r"):
                lines.append((t, text))
                print(f"[{t:8.1f} s] {text}", flush=True)
                if sink:
                    sink.write(f"{t:.3f}\t{text}\n")
                    sink.flush()
        code = proc.wait()
    finally:
        if sink:
            sink.close()
    return code, time.monotonic() - t0, lines


def read_stamped(path: Path) -> tuple[float, list[tuple[float, str]]]:
    """A log this script wrote: (its last stamp, [(t, line)])."""
    lines = []
    for row in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stamp, _, text = row.partition("\t")
        try:
            lines.append((float(stamp), text))
        except ValueError:
            continue
    return (lines[-1][0] if lines else 0.0), lines


def gaps(lines: list[tuple[float, str]], wall: float) -> list[tuple[float, float, str]]:
    """(gap seconds, when it ended, the line that ended it) for every gap, the longest first;
    the start and the end of the command count as lines."""
    stamps = [(0.0, "(start)"), *lines, (wall, "(exit)")]
    out = [(b[0] - a[0], b[0], b[1]) for a, b in zip(stamps, stamps[1:])]
    return sorted(out, key=lambda g: -g[0])


def report(lines: list[tuple[float, str]], wall: float, top: int = 5) -> dict:
    found = gaps(lines, wall)
    longest = found[0][0] if found else wall
    print(
        f"\nlines: {len(lines)}; wall time: {wall:.1f} s; longest gap between lines: "
        f"{longest:.1f} s",
        file=sys.stderr,
    )
    for gap, at, text in found[:top]:
        print(f"  {gap:7.1f} s, ending at {at:8.1f} s with: {text[:120]}", file=sys.stderr)
    estimate = None
    for _, text in lines:
        m = _ESTIMATE.search(text)
        if m:
            estimate = float(m["s"])
            break
        if _UNKNOWN in text:
            estimate = "unknown"
            break
    if isinstance(estimate, float) and estimate > 0:
        ratio = wall / estimate
        verdict = "within 2x" if 0.5 <= ratio <= 2 else "NOT within 2x"
        print(
            f"estimate at the start: ~{estimate:.0f} s; wall time / estimate = {ratio:.2f} "
            f"({verdict}; the wall time counts asv's start and the operator pass too)",
            file=sys.stderr,
        )
    elif estimate == "unknown":
        print("estimate at the start: unknown", file=sys.stderr)
    else:
        print("estimate at the start: none printed", file=sys.stderr)
    said = [float(m["s"]) for _, t in lines for m in [_CLOSING.search(t)] if m]
    if said:
        print(f"the run's own closing note: longest silence {said[-1]:.0f} s", file=sys.stderr)
    low = left_too_low(lines, wall)
    print(
        f"lines saying ~5 s left or less while more than 60 s remained: {len(low)}"
        + (f" (the first at {low[0][0]:.0f} s, {low[0][1]:.0f} s before the end: {low[0][2][:100]})"
           if low else ""),
        file=sys.stderr,
    )  # fmt: skip
    return {
        "longest_gap_s": longest,
        "wall_s": wall,
        "estimate": estimate,
        "lines": len(lines),
        "left_too_low": len(low),
    }


def left_too_low(lines: list[tuple[float, str]], wall: float) -> list[tuple[float, float, str]]:
    """(when, seconds that really remained, line) of each line saying `~N s left` with N <= 5
    while more than a minute remained until the benchmarks ended (bench's closing note, else the
    command's exit)."""
    end = next((t for t, text in lines if text.startswith(_END)), wall)
    out = []
    for t, text in lines:
        m = _LEFT.search(text)
        if m and float(m["s"]) <= 5 and end - t > 60:
            out.append((t, end - t, text))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, help="keep the stamped lines in this file")
    parser.add_argument("--stamped", type=Path, help="read a stamped log instead of running")
    parser.add_argument("--max-gap", type=float, help="exit 1 when a gap is longer (seconds)")
    parser.add_argument("--top", type=int, default=5, help="longest gaps listed (default 5)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if args.stamped:
        wall, lines = read_stamped(args.stamped)
        code = 0
    elif cmd:
        code, wall, lines = run(cmd, args.log)
        print(f"\nexit status: {code}", file=sys.stderr)
    else:
        parser.error("give a command after --, or --stamped FILE")
    figures = report(lines, wall, args.top)
    if code == 0 and args.max_gap is not None and figures["longest_gap_s"] > args.max_gap:
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
