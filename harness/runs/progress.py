"""One line per benchmark while asv runs, instead of asv's tables (which go to the run's log).

asv prints `[ 37.50%] ··· suite.Class.track_x    <value | ok | n/a | failed>` when a benchmark
is done; a parameterised one is followed by a table of its cases and by `···· For parameters:`
blocks holding skip reasons and tracebacks. Progress reads those lines and prints

    [3/8] amp.TrainingStep.track_step_time   ok: 3 values, 3 n/a   12 s, ~40 s left

where the estimate of what is left comes from asv's percentage and the time so far.
"""

from __future__ import annotations

import re
import sys
import time

_DONE = re.compile(r"^\[\s*(?P<pct>\d+(?:\.\d+)?)%\] ··· (?P<name>[\w.]+)\s+(?P<result>\S.*)$")
_TOTAL = re.compile(r"Running (?P<n>\d+) total benchmarks")
_FLOAT = re.compile(r"\d+\.\d{5,}")  # asv prints every digit of a value
_REASON = re.compile(r"asv: skipped: NotApplicable\((?P<q>['\"])(?P<why>.*)(?P=q)\)")


class Progress:
    """Feed it asv's output line by line; it prints a line per finished benchmark to `out`."""

    def __init__(self, out=None, width: int = 100):
        self.out = out or sys.stdout
        self.width = width
        self.started = time.monotonic()
        self.total: int | None = None
        self.done = 0
        self.failed: list[str] = []
        self._open: dict | None = None  # the benchmark whose table and notes are being read

    def feed(self, line: str) -> None:
        m = _TOTAL.search(line)
        if m:
            self.total = int(m["n"])
            return
        m = _DONE.match(line)
        if m and "." in m["name"] and not m["result"].startswith("="):
            self._finish()
            self._open = {
                "name": m["name"],
                "result": m["result"].strip(),
                "pct": float(m["pct"]),
                "na": 0,
                "failed": 0,
                "values": 0,
                "why": None,
            }
            return
        if self._open is None:
            return
        cells = line.split()
        if line.lstrip().startswith(("=", "--", "[")) or not cells:
            return
        b = self._open
        if "For parameters" in line or "asv:" in line:
            why = _REASON.search(line)
            if why and b["why"] is None:
                b["why"] = why["why"]
            # the cases skipped as n/a (the table also shows n/a for cases --bench left out)
            b["na"] += "asv: skipped" in line
            return
        b["failed"] += cells.count("failed")
        b["values"] += sum("±" in c for c in cells)

    def close(self) -> None:
        self._finish()

    def _finish(self) -> None:
        b, self._open = self._open, None
        if b is None:
            return
        self.done += 1
        result = b["result"]
        if result == "ok" and (b["na"] or b["failed"] or b["values"]):
            parts = [f"{b['values']} values"] if b["values"] else []
            parts += [f"{b['na']} n/a"] if b["na"] else []
            parts += [f"{b['failed']} FAILED"] if b["failed"] else []
            result = "ok: " + ", ".join(parts)
        if result.startswith("ok") and not (b["values"] or b["failed"]) and b["na"]:
            result = f"n/a ({b['na']} cases)" + (f": {b['why']}" if b["why"] else "")
        if b["failed"] or result == "failed":
            self.failed.append(b["name"])
        if result == "n/a" and b["why"]:
            result = f"n/a: {b['why']}"
        elapsed = time.monotonic() - self.started
        left = elapsed * (100 - b["pct"]) / b["pct"] if b["pct"] > 0 else None
        count = f"[{self.done}/{self.total}]" if self.total else f"[{self.done}]"
        clock = f"{elapsed:.0f} s" + (f", ~{left:.0f} s left" if left and b["pct"] < 100 else "")
        result = _FLOAT.sub(lambda m: f"{float(m[0]):.4g}", result)
        if len(result) > 60:
            result = result[:57] + "..."
        text = f"{count} {b['name']}  {result}"
        print(f"{text:<{max(self.width - len(clock) - 2, 0)}}  {clock}", file=self.out, flush=True)
