"""One line per benchmark while asv runs, instead of asv's tables (which go to the run's log).

asv prints `[ 37.50%] ··· suite.Class.track_x    <value | ok | n/a | failed>` when a benchmark
is done; a parameterised one is followed by a table of its cases and by `···· For parameters:`
blocks holding skip reasons and tracebacks. Progress reads those lines and prints

    [3/8] amp.TrainingStep.track_step_time   ok: 3 values, 3 n/a   12 s, ~40 s left

where the estimate of what is left comes from the recorded durations of the benchmarks still to
run (`planned`: seconds per benchmark from the durations files, None where none is recorded),
scaled by how this run's finished benchmarks compared with theirs; benchmarks with no recorded
duration are counted apart and said (`+ 2 of unknown duration`), never guessed. Without a plan,
from asv's percentage and the time so far.

It also keeps where the seconds went (`timing()`): asv's start (from the Progress's creation to
asv's `Benchmarking` line: machine record, discovery), each benchmark's wall time (from the
previous benchmark's end, or that line, to its own result line), each `setup_cache` apart (asv
prints `Setting up KEY ... ok` when one ends; without it its time would count in the next
benchmark's) and asv's end after the last one. A caller may be told of each benchmark as it
ends (`on_done`), so a run killed halfway has still logged where its seconds went. What asv's
lines say (a name, a skip reason a benchmark wrote) is shown escaped (harness.core.escape).
"""

from __future__ import annotations

import re
import sys
import time

from harness.core import escape

_DONE = re.compile(r"^\[\s*(?P<pct>\d+(?:\.\d+)?)%\] ··· (?P<name>[\w.]+)\s+(?P<result>\S.*)$")
_TOTAL = re.compile(r"Running (?P<n>\d+) total benchmarks")
_FLOAT = re.compile(r"\d+\.\d{5,}")  # asv prints every digit of a value
_SETUP = re.compile(r"^\[\s*\d+(?:\.\d+)?%\] ·+ Setting up (?P<key>\S+)\s+(?:ok|failed)\s*$")
_BENCHMARKING = re.compile(r"^\[\s*\d+(?:\.\d+)?%\] ·+ Benchmarking ")
_REASON = re.compile(r"asv: skipped: NotApplicable\((?P<q>['\"])(?P<why>.*)(?P=q)\)")
# a parameterised benchmark's table: its top rule (on the result's own line) gives the columns;
# its data rows come after the dashed rule (and, where asv pivots the last parameter into
# columns, after the rule below the second header row)
_TABLE_TOP = re.compile(r"^\[\s*\d+(?:\.\d+)?%\] ·+ =")
_RULE = re.compile(r"=+")
_CELL = re.compile(r"\S+")


class Progress:
    """Feed it asv's output line by line; it prints a line per finished benchmark to `out`
    (nothing with echo=False). `on_done(name, seconds, asv's result)` is called at each one's
    result line; `clock` (monotonic seconds) is injectable for tests."""

    def __init__(
        self,
        out=None,
        width: int = 100,
        *,
        echo: bool = True,
        on_done=None,
        clock=time.monotonic,
        planned=None,
    ):
        self.out = out or sys.stdout
        self.width = width
        self.echo = echo
        self.on_done = on_done
        self.clock = clock
        self.started = clock()
        self.total: int | None = None
        self.done = 0
        self.failed: list[str] = []
        self.start_s: float | None = None  # until asv's Benchmarking line
        self.walls: dict[str, float] = {}  # benchmark -> seconds, in the order they ran
        self.setup_walls: dict[str, float] = {}  # setup_cache key (module:line) -> seconds
        self.end_s: float | None = None  # after the last benchmark, until close()
        self._mark: float | None = None  # when the benchmark now running started
        self._open: dict | None = None  # the benchmark whose table and notes are being read
        # () -> {benchmark: recorded seconds or None} of the run's selection, asked once asv
        # has discovered it (its "Running N total benchmarks" line)
        self._planner = planned
        self.planned: dict[str, float | None] | None = None

    def feed(self, line: str) -> None:
        m = _TOTAL.search(line)
        if m:
            self.total = int(m["n"])
            self._plan()
            return
        if self.start_s is None and _BENCHMARKING.match(line):
            self._mark = self.clock()
            self.start_s = self._mark - self.started
            return
        m = _SETUP.match(line)
        if m:
            now = self.clock()
            self._finish(now)
            start = self.started if self._mark is None else self._mark
            self.setup_walls[m["key"]] = now - start
            self._mark = now
            return
        m = _DONE.match(line)
        if m and "." in m["name"] and not m["result"].startswith("="):
            now = self.clock()
            self._finish(now)
            if self._mark is None:  # no Benchmarking line seen: the start holds the first one
                self._mark = self.started
            self.walls[m["name"]] = now - self._mark
            self._mark = now
            if self.on_done is not None:  # now, not when its table has been read
                result = _short_floats(m["result"].strip())
                self.on_done(m["name"], self.walls[m["name"]], result)
            self._open = {
                "name": m["name"],
                "result": m["result"].strip(),
                "pct": float(m["pct"]),
                # its line is printed once its table is read: times as of its own result line
                "at": now,
                "walls": dict(self.walls),
                "na": 0,
                "failed": 0,
                "values": 0,
                "why": None,
                "columns": None,  # (start, end) of each column of its table
                "rules": 0,  # '=' rules seen
                "pivoted": False,  # a header row spanning the last parameter's columns
                "labels": None,  # how many columns hold parameter values (not results)
            }
            return
        if self._open is None:
            return
        b = self._open
        if _TABLE_TOP.match(line):
            b["columns"] = [m.span() for m in _RULE.finditer(line)]
            b["rules"] = 1
            return
        cells = line.split()
        if not cells or line.lstrip().startswith("["):
            return
        if cells[0].startswith("="):
            b["rules"] += 1
            return
        if set("".join(cells)) == {"-"}:  # below the first header row: one group per label
            b["labels"] = len(cells) - 1
            return
        if cells[0] == "--":
            b["pivoted"] = True
            return
        if "For parameters" in line or "asv:" in line:
            why = _REASON.search(line)
            if why and b["why"] is None:
                b["why"] = why["why"]
            # the cases skipped as n/a (the table also shows n/a for cases --bench left out)
            b["na"] += "asv: skipped" in line
            return
        self._count_cells(b, line)

    @staticmethod
    def _count_cells(b: dict, line: str) -> None:
        """A result cell of a table's data row: a value (with ± or not: a count, bytes,
        instructions), failed, or n/a. Outside a table asv's layout is not known: cells with
        ± are values."""
        data_row = b["rules"] == (2 if b["pivoted"] else 1)
        if b["columns"] and b["labels"] and data_row and b["labels"] < len(b["columns"]):
            edge = b["columns"][b["labels"] - 1][1]  # where the parameter columns end
            results = [m[0] for m in _CELL.finditer(line) if m.start() >= edge]
        elif b["labels"] is None:
            results = [c for c in line.split() if "±" in c or c == "failed"]
        else:
            return  # a header row
        b["failed"] += results.count("failed")
        b["values"] += sum(c not in ("failed", "n/a") for c in results)

    def _plan(self) -> None:
        if self._planner is None or self.planned is not None:
            return
        try:
            self.planned = dict(self._planner() or {})
        except Exception:  # an estimate is never worth failing a run over
            self.planned = None
        unknown = sorted(n for n, s in (self.planned or {}).items() if s is None)
        if unknown and self.echo:
            shown = ", ".join(escape.terminal(n, escape.MAX_CELL) for n in unknown[:3])
            shown += " ..." if len(unknown) > 3 else ""
            print(
                f"harness bench: no recorded duration for {len(unknown)} of {len(self.planned)} "
                f"benchmarks ({shown}): the time left shown counts them apart, as of unknown "
                "duration (the next run of this machine estimates them from this one; "
                "`harness durations RUN` records them for every runner)",
                file=self.out,
                flush=True,
            )

    def left(self, pct: float, elapsed: float, walls: dict[str, float] | None = None) -> str:
        """What is left once the benchmarks in `walls` (name -> seconds) are done, as the clock
        column says it ("" at the end)."""
        if not self.planned:
            left = elapsed * (100 - pct) / pct if pct > 0 else None
            return f", ~{left:.0f} s left" if left and pct < 100 else ""
        walls = self.walls if walls is None else walls
        remaining = [n for n in self.planned if n not in walls]
        if not remaining:
            return ""
        known_done = [n for n in walls if self.planned.get(n)]
        recorded = sum(self.planned[n] for n in known_done)
        pace = sum(walls[n] for n in known_done) / recorded if recorded > 0 else 1.0
        known = sum(self.planned[n] or 0.0 for n in remaining) * pace
        unknown = sum(self.planned[n] is None for n in remaining)
        if unknown == len(remaining):
            return f", {unknown} left of unknown duration"
        return f", ~{known:.0f} s left" + (f" + {unknown} of unknown duration" if unknown else "")

    def close(self) -> None:
        now = self.clock()
        self._finish(now)
        if self._mark is not None and self.walls:
            self.end_s = now - self._mark

    def timing(self, digits: int = 1) -> dict:
        """Where the seconds went: {"asv_start_s", "benchmark_wall_s": {name: s},
        "setup_cache_s": {key: s}, "asv_end_s"} (None where not seen)."""

        def r(v):
            return None if v is None else round(v, digits)

        return {
            "asv_start_s": r(self.start_s),
            "benchmark_wall_s": {n: r(s) for n, s in self.walls.items()},
            "setup_cache_s": {k: r(s) for k, s in self.setup_walls.items()},
            "asv_end_s": r(self.end_s),
        }

    def _finish(self, now: float) -> None:
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
        elapsed = b["at"] - self.started
        count = f"[{self.done}/{self.total}]" if self.total else f"[{self.done}]"
        clock = f"{elapsed:.0f} s" + self.left(b["pct"], elapsed, b["walls"])
        # asv's line says what the benchmark said (a skip reason): shown, never obeyed
        result = escape.terminal(_short_floats(result))
        if len(result) > 60:
            result = result[:57] + "..."
        text = f"{count} {escape.terminal(b['name'], escape.MAX_CELL)}  {result}"
        if self.echo:
            line = f"{text:<{max(self.width - len(clock) - 2, 0)}}  {clock}"
            print(line, file=self.out, flush=True)


def _short_floats(text: str) -> str:
    return _FLOAT.sub(lambda m: f"{float(m[0]):.4g}", text)
