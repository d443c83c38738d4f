"""One line per benchmark while asv runs, instead of asv's tables (which go to the run's log).

asv prints `[ 37.50%] ··· suite.Class.track_x    <value | ok | n/a | failed>` when a benchmark
is done; a parameterised one is followed by a table of its cases and by `···· For parameters:`
blocks holding skip reasons and tracebacks. Progress reads those lines and prints

    [3/8] amp.TrainingStep.track_step_time   ok: 3 values, 3 n/a   12 s, ~40 s left

where the estimate of what is left comes from the recorded durations of the benchmarks still to
run (`planned`: seconds per benchmark from the durations files, None where none is recorded),
scaled by how this run's finished benchmarks compared with theirs; benchmarks with no recorded
duration are counted apart and make the time left unknown (`time left unknown (~40 s + 2 of
unknown duration)`), never guessed. Without a plan,
from asv's percentage and the time so far.

It also keeps where the seconds went (`timing()`): asv's start (from the Progress's creation to
asv's `Benchmarking` line: machine record, discovery), each benchmark's wall time (from the
previous benchmark's end, or that line, to its own result line), each `setup_cache` apart (asv
prints `Setting up KEY ... ok` when one ends; without it its time would count in the next
benchmark's) and asv's end after the last one. A caller may be told of each benchmark as it
ends (`on_done`), so a run killed halfway has still logged where its seconds went. What asv's
lines say (a name, a skip reason a benchmark wrote) is shown escaped (harness.core.escape).

asv says nothing while a benchmark runs, and the instruction rows run for many minutes inside one
benchmark's setup_cache (one valgrind process counts them all). So while the `with
progress.heartbeat():` block runs, a thread says where the run stands whenever nothing was said
for EVERY_S seconds: the benchmark running, or, while the counter's progress file
(harness.measure.instructions.PROGRESS_FILE) is fresh, the instruction row being counted, the
rows done of the rows planned and the time left, from the rows' recorded seconds
(harness.runs.estimate.RowSeconds). The same Heartbeat keeps `harness ab` and `harness bisect`
talking. At the start the run's estimate is said (harness.runs.estimate: "unknown" where nothing
is recorded), and at the end how long the run took against it and the longest silence between
the lines said.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import threading
import time
from pathlib import Path

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
EVERY_S = 25.0  # the longest a run stays silent (CI runners end jobs silent for 10 minutes)
FRESH_S = 60.0  # a counter's progress file not rewritten for this long is not a live counting
PACE = (0.25, 4.0)  # how far this run's pace may scale the recorded durations, at most
INSTRUCTIONS = ".track_instructions"  # harness.runs.estimate.INSTRUCTION_BENCHMARK


class Heartbeat:
    """Says `status()` through `say` whenever nothing was said for `every` seconds, from a thread
    of its own while the `with` block runs (`tick()` is one look, for tests); `said()` marks a
    line said otherwise. What status() raises is never worth failing a run over: nothing said."""

    def __init__(self, say, status, *, every: float | None = None, clock=time.monotonic, poll=1.0):
        every = EVERY_S if every is None else every
        self.say, self.status, self.every, self.clock = say, status, every, clock
        self.poll = min(poll, every / 2)
        self.last = clock()
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def said(self) -> None:
        self.last = self.clock()

    def tick(self) -> None:
        with self.lock:
            if self.clock() - self.last < self.every:
                return
            try:
                line = self.status()
            except Exception:  # noqa: BLE001
                line = None
            if line:
                self.say(line)
            self.last = self.clock()

    def __enter__(self) -> Heartbeat:
        self.last = self.clock()
        self._thread = threading.Thread(target=self._loop, name="harness-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            self.tick()


@dataclasses.dataclass
class Counting:
    """What a live counter's progress file says: a line of text, and the seconds left of the
    counting (None: a row left has no recorded seconds)."""

    text: str
    left: float | None


def counting(path: Path | None, since: float, history=None, wall=time.time) -> Counting | None:
    """The counting in progress that `path` (the run's counter progress file) describes, if
    one started after `since` (wall-clock seconds) and the file is fresh; `history`: the
    machine's harness.runs.estimate.RowSeconds, for the time left."""
    if path is None:
        return None
    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        started, updated = float(state["started"]), float(state["updated"])
        rows = [r for r in state["rows"] if int(r["layouts"]) > 0]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or being replaced
    now = wall()
    if started < since or now - updated > FRESH_S or state.get("phase") in ("done", "failed"):
        return None
    done = sum(r["done"] >= r["layouts"] for r in rows)
    failed = sum(bool(r.get("failed")) for r in rows)
    now_counting = [escape.terminal(k, escape.MAX_CELL) for k in state.get("counting") or []]
    if state.get("phase") != "counting":
        what = escape.terminal(state.get("phase") or "starting")
    elif now_counting:
        more = len(now_counting) - 1
        what = f"counting {now_counting[0]}" + (f" (+{more} at once)" if more else "")
    else:
        what = "counting"
    text = f"instructions: {what}; {done} of {len(rows)} rows done" + (
        f", {failed} failed" if failed else ""
    )
    left = history.left(state, now) if history is not None else None
    return Counting(text, left)


class Progress:
    """Feed it asv's output line by line; it prints a line per finished benchmark to `out`
    (nothing with echo=False). `on_done(name, seconds, asv's result)` is called at each one's
    result line; `clock` (monotonic seconds) and `wall` (epoch seconds) are injectable for
    tests. `planned()`: the run's estimate (harness.runs.estimate.Estimate, or a dict of
    benchmark -> seconds or None), asked once asv has discovered the run's benchmarks;
    `counter`: the run's counter progress file (harness.measure.instructions.progress_path)."""

    def __init__(
        self,
        out=None,
        width: int = 100,
        *,
        echo: bool = True,
        on_done=None,
        clock=time.monotonic,
        planned=None,
        counter: Path | None = None,
        wall=time.time,
    ):
        self.out = out or sys.stdout
        self.width = width
        self.echo = echo
        self.on_done = on_done
        self.clock = clock
        self.wall = wall
        self.started = clock()
        self.wall_started = wall()
        self.counter = counter
        self.total: int | None = None
        self.done = 0
        self.failed: list[str] = []
        self.start_s: float | None = None  # until asv's Benchmarking line
        self.walls: dict[str, float] = {}  # benchmark -> seconds, in the order they ran
        self.setup_walls: dict[str, float] = {}  # setup_cache key (module:line) -> seconds
        # benchmark -> its seconds with the setup_cache run just before it (what an estimate
        # of it holds)
        self.spent: dict[str, float] = {}
        self._setup_before = 0.0
        self.end_s: float | None = None  # after the last benchmark, until close()
        self._mark: float | None = None  # when the benchmark now running started
        self._open: dict | None = None  # the benchmark whose table and notes are being read
        # () -> the estimate of the run's selection, asked once asv has discovered it (its
        # "Running N total benchmarks" line)
        self._planner = planned
        self.planned: dict[str, float | None] | None = None
        self.estimate = None  # harness.runs.estimate.Estimate, where the planner gave one
        self.estimated_s: float | None = None  # the whole estimate said at the start
        self._lock = threading.RLock()  # feed() and the heartbeat's thread
        self._beat: Heartbeat | None = None
        self._last_line = self.started
        self.longest_gap = 0.0  # seconds, the longest silence between the lines said

    def heartbeat(self, every: float | None = None) -> Heartbeat:
        """A Heartbeat saying where the run stands (status()) whenever nothing was said for
        `every` seconds; use it as `with progress.heartbeat():` around asv's run."""
        self._beat = Heartbeat(self._say, self.status, every=every, clock=self.clock)
        self._beat.lock = self._lock
        return self._beat

    def _say(self, line: str) -> None:
        if not self.echo:
            return
        with self._lock:
            now = self.clock()
            self.longest_gap = max(self.longest_gap, now - self._last_line)
            self._last_line = now
            if self._beat is not None:
                self._beat.said()
            print(line, file=self.out, flush=True)

    def feed(self, line: str) -> None:
        with self._lock:
            self._feed(line)

    def _feed(self, line: str) -> None:
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
            self._setup_before += now - start
            self._mark = now
            return
        m = _DONE.match(line)
        if m and "." in m["name"] and not m["result"].startswith("="):
            now = self.clock()
            self._finish(now)
            if self._mark is None:  # no Benchmarking line seen: the start holds the first one
                self._mark = self.started
            self.walls[m["name"]] = now - self._mark
            self.spent[m["name"]] = self.walls[m["name"]] + self._setup_before
            self._setup_before = 0.0
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
                "spent": dict(self.spent),
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
            got = self._planner()
            self.estimate = got if hasattr(got, "benchmarks") else None
            self.planned = dict(got.benchmarks if self.estimate else (got or {}))
        except Exception:  # an estimate is never worth failing a run over
            self.planned, self.estimate = None, None
        if not self.planned:
            return
        unknown = sorted(n for n, s in self.planned.items() if s is None)
        known = sum(s or 0.0 for s in self.planned.values())
        n = len(self.planned)
        if not unknown:
            self.estimated_s = known
            where = ""
            if self.estimate is not None:
                where = (
                    f" ({self.estimate.from_here} from this machine's runs, the others from the "
                    "durations files)"
                )
            self._say(f"harness bench: estimated ~{known:.0f} s for {n} benchmarks{where}")
            return
        shown = ", ".join(escape.terminal(x, escape.MAX_CELL) for x in unknown[:3])
        shown += " ..." if len(unknown) > 3 else ""
        rows = list(getattr(self.estimate, "unknown_rows", None) or [])
        if rows:
            never = ", ".join(escape.terminal(r, escape.MAX_CELL) for r in rows[:3])
            shown += f"; instruction rows never counted on this machine: {never}" + (
                " ..." if len(rows) > 3 else ""
            )
        self._say(
            f"harness bench: estimated time unknown: no recorded duration for {len(unknown)} of "
            f"{n} benchmarks ({shown}); ~{known:.0f} s for the others. The time left shown "
            "counts them apart, as of unknown duration (the next run of this machine estimates "
            "them from this one; `harness durations RUN` records them for every runner)"
        )

    def _pace(self, spent: dict[str, float]) -> float:
        """This run's seconds over the recorded ones, for the benchmarks done that have them
        (1 before any), within PACE."""
        known_done = [n for n in spent if self.planned.get(n)]
        recorded = sum(self.planned[n] for n in known_done)
        pace = sum(spent[n] for n in known_done) / recorded if recorded > 0 else 1.0
        return min(max(pace, PACE[0]), PACE[1])

    def left(self, pct: float, elapsed: float, walls: dict[str, float] | None = None) -> str:
        """What is left once the benchmarks in `walls` (name -> seconds, their setup_cache
        included) are done, as the clock column says it ("" at the end)."""
        if not self.planned:
            left = elapsed * (100 - pct) / pct if pct > 0 else None
            return f", ~{left:.0f} s left" if left and pct < 100 else ""
        walls = self.spent if walls is None else walls
        remaining = [n for n in self.planned if n not in walls]
        if not remaining:
            return ""
        pace = self._pace(walls)
        known = sum(self.planned[n] or 0.0 for n in remaining) * pace
        unknown = sum(self.planned[n] is None for n in remaining)
        if unknown == len(remaining):
            return f", {unknown} left of unknown duration"
        return _left(known, unknown)

    def status(self) -> str | None:
        """Where the run stands now, for the heartbeat: the benchmark running (or, while the
        counter's progress file is fresh, the instruction counting), and the time left."""
        with self._lock:
            now = self.clock()
            if self._open is not None and now - self._open["at"] >= 1.0:
                self._finish(now)  # its table came long ago: its line first
            elapsed = now - self.started
            count = f"[{self.done}/{self.total}]" if self.total else f"[{self.done}]"
            history = getattr(self.estimate, "history", None)
            live = counting(self.counter, self.wall_started, history, self.wall)
            since = now - (self._mark if self._mark is not None else self.started)
            if live is not None:
                text = live.text
            elif self.total is None:
                text = "asv is discovering the benchmarks"
            elif self.start_s is None:
                text = "asv is starting the benchmarks"
            else:
                running = f"{self.done + 1} of {self.total}" if self.total else f"{self.done + 1}"
                after = "since the last result" if self.done else "in"
                text = f"benchmark {running} running, {since:.0f} s {after}"
            clock = f"{elapsed:.0f} s" + self._left_now(live)
            return f"{count} {text:<{max(self.width - len(clock) - len(count) - 3, 0)}}  {clock}"

    def _left_now(self, live: Counting | None) -> str:
        """The time left while a benchmark runs: the benchmarks not done (their recorded
        seconds at this run's pace), the instruction benchmark's from the live counting."""
        if not self.planned:
            return ""
        remaining = [n for n in self.planned if n not in self.walls]
        if live is not None:
            remaining = [n for n in remaining if not n.endswith(INSTRUCTIONS)]
        pace = self._pace(self.spent)
        known = sum(self.planned[n] or 0.0 for n in remaining) * pace
        unknown = sum(self.planned[n] is None for n in remaining)
        if live is not None:
            if live.left is None:
                unknown += 1
            else:
                known += live.left
        if not unknown and not remaining and live is None:
            return ""
        if unknown and known < 1:
            return f", time left unknown ({unknown} of unknown duration)"
        return _left(known, unknown)

    def close(self) -> None:
        with self._lock:
            now = self.clock()
            self._finish(now)
            if self._mark is not None and self.walls:
                self.end_s = now - self._mark
            if not self.walls:
                return
            took = now - self.started
            if self.estimated_s is not None:
                against = f"estimated ~{self.estimated_s:.0f} s at the start"
            else:
                against = "estimated: unknown at the start" if self.planned else "no estimate"
            self._say(
                f"harness bench: the benchmarks took {took:.0f} s ({against}); the longest "
                f"silence between these lines: {max(self.longest_gap, now - self._last_line):.0f} s"
            )

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
        clock = f"{elapsed:.0f} s" + self.left(b["pct"], elapsed, b["spent"])
        # asv's line says what the benchmark said (a skip reason): shown, never obeyed
        result = escape.terminal(_short_floats(result))
        if len(result) > 60:
            result = result[:57] + "..."
        text = f"{count} {escape.terminal(b['name'], escape.MAX_CELL)}  {result}"
        self._say(f"{text:<{max(self.width - len(clock) - 2, 0)}}  {clock}")


def _short_floats(text: str) -> str:
    return _FLOAT.sub(lambda m: f"{float(m[0]):.4g}", text)


def _left(known: float, unknown: int) -> str:
    """The clock column's time left: with a benchmark of unknown duration still ahead the time
    left is unknown, whatever the others add up to (never "~2 s left" ahead of minutes)."""
    if unknown:
        return f", time left unknown (~{known:.0f} s + {unknown} of unknown duration)"
    return f", ~{known:.0f} s left"
