"""How long a run takes on this machine, and how long what is left of it takes.

Per benchmark asv selected, its seconds here are, the first found:
- an instruction benchmark (`*.track_instructions`: one valgrind process counts every row of it
  in its setup_cache, harness.measure.instructions): importing torch under valgrind, then its
  selected rows' counting children, `PARALLEL` at a time (RowSeconds), each row's seconds from
  the newest run of this machine that counted it, whatever else that run held (an ab side, a
  bisect step, a run of one suite);
- the newest runs of this machine in this mode that measured it (asv's duration column), up to
  HISTORY_RUNS runs back, so that a run of other suites does not hide an older one that measured
  it. ab's and bisect's records are left out: their processes run rows in interleaved blocks, so
  what asv's files say of their durations is not a benchmark's;
- the durations files (harness.runs.shard.project_durations: committed, the same on every runner);
plus, once per setup_cache, the seconds asv recorded for it in those runs (asv times a
setup_cache apart from the benchmark after it: an instruction suite's whole counting lies there,
and its benchmark's own duration is under a second). None where nothing is recorded: shown as
unknown, never guessed. A record that cannot be read is passed over: an estimate never fails a run.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from harness.core import records
from harness.core.exits import BadInput
from harness.measure import instructions

HISTORY_RUNS = 40  # runs of the machine read back at most, newest first
MOST_DONE = 0.9  # of a layout being counted, the part an estimate takes as done at most
INSTRUCTION_BENCHMARK = ".track_instructions"  # asv names ending so count rows under valgrind


def is_instruction_benchmark(name: str) -> bool:
    return name.split("(", 1)[0].endswith(INSTRUCTION_BENCHMARK)


def _seconds(value) -> float | None:
    """A recorded duration, or None for anything else (records come from elsewhere too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


@dataclasses.dataclass
class RowSeconds:
    """What a machine's earlier runs recorded of its instruction rows: per row the seconds of one
    counting child (one memory layout), the rows they did not count (opted out: no cost), the
    seconds of importing torch under valgrind, and how many children count at once here."""

    per_layout: dict[str, float] = dataclasses.field(default_factory=dict)
    layouts: dict[str, int] = dataclasses.field(default_factory=dict)  # as recorded
    skipped: set[str] = dataclasses.field(default_factory=set)
    import_s: float | None = None
    parallel: int = instructions.PARALLEL

    def unknown(self, rows) -> list[str]:
        return [r for r in rows if r not in self.per_layout and r not in self.skipped]

    def of(self, rows) -> float | None:
        """One valgrind process counting `rows` (as many layouts as recorded): importing torch,
        then the children `parallel` at a time, at least the longest row's; None where a row
        or the import has no recorded seconds."""
        rows = [r for r in rows if r not in self.skipped]
        if not rows:
            return 0.0
        if self.import_s is None or self.unknown(rows):
            return None
        return self.import_s + self._children([self.per_layout[r] * self.layouts[r] for r in rows])

    def _children(self, each: list[float]) -> float:
        return max(max(each), sum(each) / max(self.parallel, 1)) if each else 0.0

    def left(self, state: dict, now: float) -> float | None:
        """What is left at `now` (epoch seconds) of the counting a progress file
        (instructions.progress_snapshot) describes; None where a row left has no recorded
        seconds. The rows being counted have run since the counting last moved on (`since`):
        that much of one layout each is taken off, never more than MOST_DONE of it."""
        moved = max(now - (state.get("since") or now), 0.0)
        running = set(state.get("counting") or []) if state.get("phase") == "counting" else set()
        todo = []
        for r in state.get("rows") or []:
            left = r["layouts"] - r["done"]
            if left <= 0:
                continue
            if r["row"] not in self.per_layout:
                return None
            one = self.per_layout[r["row"]]
            off = min(moved, MOST_DONE * one) if r.get("key") in running else 0.0
            todo.append(one * left - off)
        rest = self._children(todo)
        if state.get("phase") != "counting":  # still importing torch under valgrind
            if self.import_s is None:
                return None
            rest += max(self.import_s - (now - state.get("started", now)), 0.0)
        return rest


def row_seconds(root: Path, machine: str, mode: str, runs=None) -> RowSeconds:
    """RowSeconds from the machine's run records (`runs`: records.list_runs's, when read
    already), newest first, those of `mode` before the others (a full run counts more layouts,
    and counts rows a fast run leaves out)."""
    from harness.runs.shard import mode_of_record

    found = RowSeconds()
    runs = list(reversed(_runs(root, machine) if runs is None else runs))
    ordered = [r for r in runs if mode_of_record(r.meta) == mode]
    ordered += [r for r in runs if mode_of_record(r.meta) != mode]
    for rec in ordered[:HISTORY_RUNS]:
        try:
            files = records.instruction_files(rec.path)
        except BadInput:
            continue
        same = mode_of_record(rec.meta) == mode
        for _, data in files:
            took = data.get("seconds") if isinstance(data.get("seconds"), dict) else {}
            imported = _seconds(took.get("import_under_valgrind"))
            if found.import_s is None and imported is not None:
                found.import_s = imported
            for row, summary in (data.get("rows") or {}).items():
                each = summary.get("seconds") if isinstance(summary, dict) else None
                each = [_seconds(s) for s in each] if isinstance(each, list) else []
                if row in found.per_layout or not each or None in each:
                    continue
                found.per_layout[row] = sum(each) / len(each)
                found.layouts[row] = len(each)
            if same:  # not counted in a run of this mode: not counted in this one either
                not_counted = data.get("not_counted")
                found.skipped |= set(not_counted) if isinstance(not_counted, dict) else set()
    found.skipped -= set(found.per_layout)
    return found


def _runs(root: Path, machine: str) -> list[records.RunRecord]:
    try:
        return records.list_runs(root, machine)
    except BadInput:
        return []


def recorded_durations(
    root: Path, machine: str, mode: str, names: set[str], setups: set[str], runs=None
) -> tuple[dict[str, float], dict[str, float]]:
    """({benchmark: seconds}, {setup_cache key: seconds}) from the newest runs of `machine` in
    `mode` that measured them (not ab's or bisect's), up to HISTORY_RUNS back, stopping once
    every name and key is found. `runs`: records.list_runs's, when read already."""
    from harness.runs.shard import mode_of_record

    found: dict[str, float] = {}
    cached: dict[str, float] = {}
    runs = [
        r
        for r in reversed(_runs(root, machine) if runs is None else runs)
        if "ab" not in r.meta and mode_of_record(r.meta) == mode
    ]
    for rec in runs[:HISTORY_RUNS]:
        if names <= found.keys() and setups <= cached.keys():
            break
        files = rec.result_files()
        if not files:
            continue
        durations = asv_durations(files[-1])
        for name, s in durations.items():
            key = name[len("<setup_cache ") : -1] if name.startswith("<setup_cache ") else None
            if key is not None:
                cached.setdefault(key, s)
            elif not name.startswith("<"):
                found.setdefault(name, s)
    return found, cached


def asv_durations(result_file: Path) -> dict[str, float]:
    """asv's duration column of one result file: seconds per benchmark, and per setup_cache
    (`<setup_cache KEY>`); {} for a file asv cannot read."""
    from asv.results import Results

    try:
        durations = Results.load(str(result_file)).duration
    except Exception:  # noqa: BLE001 (an estimate passes over a damaged file; the gate names it)
        return {}
    if not isinstance(durations, dict):
        return {}
    out = {}
    for name, s in durations.items():
        s = _seconds(s)
        if isinstance(name, str) and s is not None:
            out[name] = round(s, 2)
    return out


@dataclasses.dataclass
class Estimate:
    """A run's estimate: per selected benchmark its seconds here (None: unknown), the
    instruction rows it counts and what the machine recorded of them (for the progress of the
    counting itself), and where the figures came from."""

    benchmarks: dict[str, float | None]
    rows: list[str] = dataclasses.field(default_factory=list)
    history: RowSeconds | None = None
    from_here: int = 0  # benchmarks estimated from this machine's runs
    unknown_rows: list[str] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> float | None:
        if any(s is None for s in self.benchmarks.values()):
            return None
        return sum(self.benchmarks.values())

    def unknown(self) -> list[str]:
        return sorted(n for n, s in self.benchmarks.items() if s is None)

    def describe(self) -> str:
        """`~620 s`, or `unknown (...)` naming what has no recorded duration."""
        total = self.total
        if total is not None:
            return f"~{total:.0f} s"
        known = sum(s or 0.0 for s in self.benchmarks.values())
        missing = self.unknown()
        what = f"{len(missing)} of {len(self.benchmarks)} benchmarks"
        if self.unknown_rows:
            shown = ", ".join(self.unknown_rows[:3]) + (
                " ..." if len(self.unknown_rows) > 3 else ""
            )
            what += f"; instruction rows never counted on this machine: {shown}"
        return f"unknown (no recorded duration for {what}); ~{known:.0f} s for the others"


def estimate(
    selected: list[dict],
    cases: dict[str, list[str]],
    files: dict[str, float],
    mode: str,
    here: tuple[Path, str] | None = None,
) -> Estimate:
    """The estimate of a run of the benchmarks `selected` (asv's dicts: name, setup_cache_key)
    with their selected `cases` (name -> case names: an instruction benchmark's are its rows),
    from the durations files' `files` and, where `here` is (results root, machine), that
    machine's records of `mode` (see the module docstring)."""
    names = sorted(b["name"] for b in selected)
    keys = {b["name"]: b.get("setup_cache_key") for b in selected}
    # counting in a setup_cache (asv's duration leaves it out); the canary's own counter runs
    # in its benchmark, whose duration holds it
    counted = [n for n in names if is_instruction_benchmark(n) and keys[n]]
    timed = [n for n in names if n not in counted]
    found, cached = {}, {}
    runs = _runs(*here) if here is not None else []  # read once: a refused record said once
    if here is not None:
        found, cached = recorded_durations(
            *here, mode, set(names), {k for k in keys.values() if k}, runs
        )
    out: dict[str, float | None] = {}
    for name in timed:
        out[name] = found.get(name, files.get(name))
    seen: set[str] = set()
    for name in timed:  # a setup_cache once, with the first benchmark that uses it
        key = keys[name]
        if key and key not in seen and key in cached and out[name] is not None:
            out[name] += cached[key]
        seen.add(key)
    history, rows, unknown_rows = None, [], []
    for name in counted:
        history = history or (row_seconds(*here, mode, runs) if here else RowSeconds())
        mine = cases.get(name) or [name]
        rows += mine
        counting = history.of(mine)
        unknown_rows += history.unknown(mine) if counting is None else []
        own = found.get(name, files.get(name, 0.0))
        out[name] = None if counting is None else counting + own
    return Estimate(
        {n: out[n] for n in names},
        rows,
        history,
        sum(n in found for n in timed) + sum(out[n] is not None for n in names if n not in timed),
        [r.split("(", 1)[-1].rstrip(")").strip("'\"") for r in unknown_rows],
    )
