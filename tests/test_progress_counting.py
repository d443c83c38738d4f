"""Long work you can watch: the instruction counter's progress file, the heartbeat that keeps
`harness bench`, `ab` and `bisect` talking while valgrind counts, and an estimate that counts
the instruction rows from their recorded seconds (harness.measure.instructions progress,
harness.runs.progress, harness.runs.estimate). No valgrind here: a fake counting process writes
what the real one writes, and run records are made by hand."""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import pytest
from asv.results import Results
from asv.runner import BenchmarkResult

from harness.core import records
from harness.measure import instructions
from harness.runs import estimate
from harness.runs.progress import Counting, Heartbeat, Progress, counting

INSTR = "instructions.InstructionsPerCall.track_instructions"


def row(key: str) -> str:
    return f"{INSTR}({key!r})"


# ---- a run record made by hand: asv's durations and the counter's record ----


def write_run(
    root: Path,
    run_id: str,
    durations: dict[str, float],
    *,
    mode: str = "quick",
    machine: str = "m",
    setup: dict[str, float] | None = None,
    rows: dict[str, list[float]] | None = None,
    not_counted: dict[str, str] | None = None,
    import_s: float | None = 60.0,
    ab: bool = False,
) -> Path:
    """A run record of `machine` whose asv result says each benchmark of `durations` took that
    many seconds (each with a value of 1.0), each setup_cache of `setup` too, and whose
    instruction record says each row of `rows` took those seconds per layout."""
    commit = run_id.split("-")[1].ljust(40, "0")
    meta = {
        "commit": commit,
        "quick": mode == "quick",
        "mode": "full" if mode == "full" else "fast",
    }
    if ab:
        meta["ab"] = {"spec": "HEAD", "pairs": {}}
    with records.writing(root, machine, run_id, meta) as d:
        asv_dir = d / "asv"
        (asv_dir / machine).mkdir(parents=True)
        (asv_dir / machine / "machine.json").write_text(
            json.dumps({"machine": machine, "version": 1})
        )
        listed = {"version": 2}
        res = Results({"machine": machine, "python": "3.11"}, {}, commit, 1, "3.11", "env", {})
        for name, seconds in durations.items():
            listed[name] = {"name": name, "unit": "kernels", "type": "track", "version": "1",
                            "params": [], "param_names": []}  # fmt: skip
            result = BenchmarkResult([1.0], [None], [None], 0, "", None)
            res.add_result(listed[name], result, duration=seconds, record_samples=True)
        for key, seconds in (setup or {}).items():
            res.set_setup_cache_duration(key, seconds)
        res.save(str(asv_dir))
        (asv_dir / "benchmarks.json").write_text(json.dumps(listed))
        if rows is not None or not_counted:
            data = {
                "schema": 1,
                "rows": {r: {"per_call": 1.0, "seconds": s} for r, s in (rows or {}).items()},
                "failed": {},
                "not_counted": not_counted or {},
                "seconds": {"import_under_valgrind": import_s, "total": 1.0},
            }
            (d / "instructions").mkdir()
            (d / "instructions" / "instructions.InstructionsPerCall.json").write_text(
                json.dumps(data)
            )
    return root / "runs" / machine / run_id


def run_id(i: int) -> str:
    return f"20261201T{i:02d}0000Z-{i:08x}"


# ---- the estimate ----


def test_durations_come_from_any_earlier_run_of_the_machine_not_only_the_newest(tmp_path):
    root = tmp_path / "results"
    # an old bench run measured both; a newer one only fusion; the newest is an ab side that
    # ran the instruction rows alone (its durations are not a benchmark's: left out); a full run
    write_run(root, run_id(1), {"fusion.A.track_x": 4.0, "models.B.track_y": 9.0},
              setup={"fusion:10": 30.0})  # fmt: skip
    write_run(root, run_id(2), {"fusion.A.track_x": 5.0})
    write_run(root, run_id(3), {INSTR: 0.4, "fusion.A.track_x": 99.0}, ab=True)
    write_run(root, run_id(4), {"fusion.A.track_x": 77.0}, mode="full")
    names = {"fusion.A.track_x", "models.B.track_y"}
    found, cached = estimate.recorded_durations(root, "m", "quick", names, {"fusion:10"})
    assert found == {"fusion.A.track_x": 5.0, "models.B.track_y": 9.0}
    assert cached == {"fusion:10": 30.0}
    assert estimate.recorded_durations(root, "other", "quick", names, set()) == ({}, {})


def test_a_setup_cache_counts_once_with_the_first_benchmark_that_uses_it(tmp_path):
    root = tmp_path / "results"
    write_run(root, run_id(1), {"fusion.A.track_x": 4.0, "fusion.A.track_z": 1.0},
              setup={"fusion:10": 30.0})  # fmt: skip
    selected = [
        {"name": "fusion.A.track_x", "setup_cache_key": "fusion:10"},
        {"name": "fusion.A.track_z", "setup_cache_key": "fusion:10"},
        {"name": "amp.C.track_w"},
    ]
    est = estimate.estimate(selected, {}, {"amp.C.track_w": 2.0}, "quick", (root, "m"))
    assert est.benchmarks == {
        "amp.C.track_w": 2.0,  # from the durations files
        "fusion.A.track_x": 34.0,  # 4 + the setup_cache's 30
        "fusion.A.track_z": 1.0,
    }
    assert est.total == 37.0 and est.describe() == "~37 s" and est.from_here == 2


def test_instruction_rows_count_from_their_recorded_seconds_per_row_and_machine(tmp_path):
    root = tmp_path / "results"
    # an older run counted a and b; the newest (an ab side, instruction rows only) counted a
    # again and c; d is opted out in this mode
    write_run(root, run_id(1), {"models.B.track_y": 9.0}, import_s=50.0,
              rows={row("a"): [100.0], row("b"): [300.0, 300.0]})  # fmt: skip
    write_run(root, run_id(2), {INSTR: 0.4}, ab=True, import_s=70.0,
              rows={row("a"): [120.0], row("c"): [40.0]},
              not_counted={row("d"): "opted out"})  # fmt: skip
    history = estimate.row_seconds(root, "m", "quick")
    assert history.per_layout == {row("a"): 120.0, row("b"): 300.0, row("c"): 40.0}
    assert history.layouts[row("b")] == 2 and history.skipped == {row("d")}
    assert history.import_s == 70.0  # the newest
    history.parallel = 4
    # importing, then the children 4 at a time: (120 + 600 + 40) / 4 = 190, at least the longest
    assert history.of([row("a"), row("b"), row("c"), row("d")]) == 70.0 + 600.0
    assert history.of([row("a"), row("c")]) == 70.0 + 120.0
    assert history.of([row("a"), row("new")]) is None
    assert history.unknown([row("a"), row("new"), row("d")]) == [row("new")]

    selected = [{"name": INSTR, "setup_cache_key": "instructions:33"}, {"name": "models.B.track_y"}]
    cases = {INSTR: [row("a"), row("c")], "models.B.track_y": ["models.B.track_y"]}
    est = estimate.estimate(selected, cases, {INSTR: 0.47}, "quick", (root, "m"))
    # the instruction benchmark's own 0.4 s (asv's duration column, the ab side's left out:
    # the durations file's 0.47) on top of its counting: never "~1 s" for a long step
    assert est.benchmarks[INSTR] == pytest.approx(70.0 + 120.0 + 0.47)
    assert est.benchmarks["models.B.track_y"] == 9.0
    assert est.rows == [row("a"), row("c")]

    # a row never counted on this machine: unknown, said with the row's name
    cases[INSTR] = [row("a"), row("tiny_cnn_compile")]
    est = estimate.estimate(selected, cases, {}, "quick", (root, "m"))
    assert est.benchmarks[INSTR] is None and est.total is None
    assert est.unknown_rows == ["tiny_cnn_compile"]
    said = est.describe()
    assert said.startswith("unknown (no recorded duration for 1 of 2 benchmarks")
    assert "tiny_cnn_compile" in said and "~9 s for the others" in said
    # nowhere recorded at all (a first run): unknown, not a guess
    est = estimate.estimate(selected, cases, {INSTR: 0.47}, "quick", None)
    assert est.benchmarks[INSTR] is None


def test_a_damaged_record_is_passed_over_by_the_estimate(tmp_path):
    root = tmp_path / "results"
    good = write_run(root, run_id(1), {"a.B.track": 3.0}, rows={row("a"): [10.0]})
    bad = write_run(root, run_id(2), {"a.B.track": 1.0}, rows={row("a"): [5.0]})
    (bad / "instructions" / "instructions.InstructionsPerCall.json").write_text("[" * 100000)
    for f in (bad / "asv" / "m").glob("*.json"):
        if f.name != "machine.json":
            f.write_text("{not json")
    # wrong types in a record that loads: those rows are passed over, the rest is used
    odd = write_run(root, run_id(3), {"a.B.track": 2.0}, import_s=True,
                    rows={row("a"): [True], row("b"): ["lots"], row("c"): [-1.0],
                          row("d"): [float("inf")], row("e"): 7})  # fmt: skip
    assert good.is_dir() and odd.is_dir()
    history = estimate.row_seconds(root, "m", "quick")
    assert history.per_layout == {row("a"): 10.0} and history.import_s == 60.0
    found, _ = estimate.recorded_durations(root, "m", "quick", {"a.B.track"}, set())
    assert found == {"a.B.track": 2.0}


def test_the_time_left_of_a_counting_from_its_progress_file():
    h = estimate.RowSeconds({row("a"): 100.0, row("b"): 50.0}, {row("a"): 2, row("b"): 2},
                            import_s=60.0, parallel=2)  # fmt: skip
    state = {
        "phase": "counting",
        "rows": [
            {"row": row("a"), "layouts": 2, "done": 1},
            {"row": row("b"), "layouts": 2, "done": 0},
        ],
    }
    # a: one layout of 100 s left, b: two of 50 s: 200 s, two at a time
    assert h.left(state, 500.0) == 100.0
    # a and b being counted for 30 s since the last child ended: 30 s off one layout of each
    moving = dict(state, since=470.0, counting=["a", "b"])
    for r, k in zip(moving["rows"], "ab"):
        r["key"] = k
    assert h.left(moving, 500.0) == (70.0 + 70.0) / 2
    # never more than 90% of a layout taken as done, however long it runs
    assert h.left(moving, 5000.0) == 55.0  # b's 50 + 5 s, at least the longest row left
    # still importing torch under valgrind: what is left of the import comes first
    importing = dict(state, phase="importing torch under valgrind", started=480.0)
    assert h.left(importing, 500.0) == 140.0
    state["rows"].append({"row": row("new"), "layouts": 1, "done": 0})
    assert h.left(state, 0.0) is None  # a row left with no recorded seconds: unknown


# ---- the counter's progress file, from a fake counting process ----

FAKE_COUNTER = """
import json, pathlib, sys, time
out = pathlib.Path(sys.argv[1])
time.sleep(0.15)                     # importing torch under valgrind
(out / "cg.1").write_text("desc: Trigger: Client Request: harness-overhead\\ntotals: 10\\n")
for tag, error in [("0000-00", None), ("0001-00", "RuntimeError: boom"), ("0001-01", None)]:
    time.sleep(0.15)                 # a counting child
    status = {"error": error} if error else {"seconds": 0.15}
    (out / "status" / f"{tag}.json").write_text(json.dumps(status))
time.sleep(0.15)
"""


def _planned_out(tmp_path: Path) -> Path:
    """The counting process's OUT folder with its tasks planned (instructions._plan): row a in
    one layout, row b in two."""
    out = tmp_path / "work" / instructions.OUT
    (out / "status").mkdir(parents=True)
    (out / instructions.TASKS).mkdir()
    jobs = [
        {
            "tag": f"{i:04d}",
            "row": row(k),
            "source": "s.py",
            "key": k,
            "imports": [],
            "layouts": n,
            "cost": i,
        }  # fmt: skip
        for i, (k, n) in enumerate([("a", 1), ("b", 2)])
    ]
    instructions._plan(out, jobs, {})
    return out


def test_the_counter_says_where_it_is_while_a_fake_valgrind_counts(tmp_path, monkeypatch):
    from harness.core.processes import run_tied

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("HARNESS_SCRATCH_DIR", str(scratch))
    monkeypatch.setattr(instructions, "PARALLEL", 1)
    out = _planned_out(tmp_path)
    dest = scratch / instructions.PROGRESS_FILE
    seen: list[dict] = []
    history = estimate.RowSeconds({row("a"): 30.0, row("b"): 20.0}, {row("a"): 1, row("b"): 2},
                                  import_s=40.0, parallel=1)  # fmt: skip
    progress = Progress(io.StringIO(), counter=dest, planned=lambda: {INSTR: 100.0})
    lines: list[str] = []

    def watch_it():  # while the fake counts: what the file says, as it changes
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if dest.is_file():
                state = json.loads(dest.read_text())
                if (
                    not seen
                    or state["rows"] != seen[-1]["rows"]
                    or state["phase"] != seen[-1]["phase"]
                ):
                    seen.append(state)
                    live = counting(dest, progress.wall_started, history)
                    lines.append(live.text if live else "")
                if sum(r["done"] for r in state["rows"]) >= 2:
                    return
            time.sleep(0.02)

    monkeypatch.setattr(instructions, "PROGRESS_EVERY_S", 0.05)
    with instructions._watching(out) as watch:
        proc = run_tied([sys.executable, "-c", FAKE_COUNTER, str(out)], meanwhile=watch_it)
        assert proc.returncode == 0, proc.stderr
        watch.phase = "reading the dumps"
    final = json.loads(dest.read_text())

    first = seen[0]
    assert first["phase"] == "importing torch under valgrind"
    assert [(r["key"], r["layouts"], r["done"]) for r in first["rows"]] == [
        ("b", 2, 0),
        ("a", 1, 0),
    ]
    assert lines[0] == "instructions: importing torch under valgrind; 0 of 2 rows done"
    assert any(s["phase"] == "counting" for s in seen)
    # the rows costliest first, as the counting process takes them; b's first layout failed
    assert any(t.startswith("instructions: counting ") for t in lines), lines
    assert "1 of 2 rows done" in lines[-1] or "0 of 2 rows done, 1 failed" in lines[-1], lines
    assert final["phase"] == "done"
    assert [(r["key"], r["done"], r.get("failed", False)) for r in final["rows"]] == [
        ("b", 2, True),
        ("a", 1, False),
    ]
    # a finished counting is not shown as live
    assert counting(dest, progress.wall_started, history) is None


def test_a_progress_file_of_an_earlier_counting_or_gone_stale_is_not_shown(tmp_path):
    dest = tmp_path / instructions.PROGRESS_FILE
    state = {"started": 100.0, "updated": 150.0, "phase": "counting", "counting": ["a"],
             "rows": [{"row": row("a"), "key": "a", "layouts": 1, "done": 0}]}  # fmt: skip
    dest.write_text(json.dumps(state))
    assert counting(dest, 90.0, wall=lambda: 160.0).text == (
        "instructions: counting a; 0 of 1 rows done"
    )
    assert counting(dest, 120.0, wall=lambda: 160.0) is None  # began before this run
    assert counting(dest, 90.0, wall=lambda: 150.0 + 61) is None  # not rewritten for a minute
    dest.write_text("{half a fi")
    assert counting(dest, 90.0, wall=lambda: 160.0) is None
    assert counting(None, 0.0) is None
    # what a project names its rows is shown escaped
    state["counting"] = ["evil\x1b[2Jrow"]
    dest.write_text(json.dumps(state))
    assert "\\x1b[2J" in counting(dest, 90.0, wall=lambda: 160.0).text


# ---- the heartbeat ----


def test_the_heartbeat_speaks_only_after_a_silence_and_a_line_said_resets_it():
    now = [0.0]
    said: list[str] = []
    beat = Heartbeat(said.append, lambda: f"at {now[0]:.0f}", every=25.0, clock=lambda: now[0])
    for t in (10.0, 24.9):
        now[0] = t
        beat.tick()
    assert said == []
    now[0] = 25.0
    beat.tick()
    assert said == ["at 25"]
    now[0] = 40.0
    beat.said()  # another line was said
    now[0] = 60.0
    beat.tick()
    assert said == ["at 25"]
    now[0] = 65.0
    beat.tick()
    assert said == ["at 25", "at 65"]
    # a status that raises says nothing and fails nothing
    beat.status = lambda: 1 / 0
    now[0] = 100.0
    beat.tick()
    assert said == ["at 25", "at 65"]


def test_the_heartbeat_thread_runs_while_its_block_runs_and_stops_after():
    said: list[str] = []
    with Heartbeat(said.append, lambda: "still here", every=0.05, poll=0.01):
        time.sleep(0.3)
    n = len(said)
    assert n >= 2 and set(said) == {"still here"}
    time.sleep(0.1)
    assert len(said) == n


# ---- bench's lines while the instruction rows are counted ----

BEFORE = [
    "· Discovering benchmarks",
    "· Running 3 total benchmarks (1 commits * 1 environments * 3 benchmarks)",
    "[ 0.00%] ·· Benchmarking existing-py_root_.cache_harness_asv-python",
    "[33.33%] ··· fusion.PointwiseChain.track_compiled_over_eager      0.63±0.01",
]
AFTER = [
    "[66.67%] ··· Setting up instructions:33" + " " * 30 + "ok",
    f"[66.67%] ··· {INSTR}                 ok",
    "[100.00%] ··· models.B.track_y      1.2",
]


def _counting_run(tmp_path, planned, rows_done_at, *, history=None, seconds=600, every=25.0):
    """A bench run on a fake clock: fusion takes 10 s, then the instruction rows are counted
    for `seconds` (the progress file says row k done at rows_done_at[k]), then models takes
    5 s. The heartbeat is ticked every second of fake time. Returns the printed lines, each with
    its fake time."""
    now = [1000.0]
    dest = tmp_path / instructions.PROGRESS_FILE
    out = io.StringIO()
    printed: list[tuple[float, str]] = []

    class Timed(io.StringIO):
        def write(self, text):
            printed.extend((now[0], line) for line in text.splitlines() if line)
            return len(text)

    out = Timed()
    est = estimate.Estimate(planned, [row("a"), row("b")], history)
    p = Progress(out, clock=lambda: now[0], wall=lambda: now[0], planned=lambda: est, counter=dest)
    beat = p.heartbeat(every)
    for line in BEFORE[:2]:
        p.feed(line)
    now[0] += 20  # asv's start
    p.feed(BEFORE[2])
    for _ in range(10):
        now[0] += 1
        beat.tick()
    p.feed(BEFORE[3])
    start = now[0]
    for t in range(seconds):
        now[0] += 1
        done = sum(t >= d for d in rows_done_at)
        state = {"started": start, "updated": now[0], "since": start + ([0] + [d for d in
                 rows_done_at if d <= t])[-1], "phase": "counting" if t > 60 else
                 "importing torch under valgrind", "counting": [["a", "b"][min(done, 1)]],
                 "rows": [{"row": row(k), "key": k, "layouts": 1, "done": int(done > i)}
                          for i, k in enumerate("ab")]}  # fmt: skip
        if t % 5 == 0:  # as often as the counter's own watcher writes it
            dest.write_text(json.dumps(state))
        beat.tick()
    dest.write_text(json.dumps(dict(state, phase="done")))
    for line in AFTER[:2]:
        p.feed(line)
    now[0] += 5
    p.feed(AFTER[2])
    p.close()
    return printed


def test_no_silence_longer_than_the_heartbeat_while_valgrind_counts_and_the_lines_name_the_row(
    tmp_path,
):
    planned = {
        "fusion.PointwiseChain.track_compiled_over_eager": 10.0,
        INSTR: 600.0,
        "models.B.track_y": 5.0,
    }
    history = estimate.RowSeconds({row("a"): 300.0, row("b"): 240.0}, {row("a"): 1, row("b"): 1},
                                  import_s=60.0, parallel=1)  # fmt: skip
    printed = _counting_run(tmp_path, planned, [360, 600], history=history)
    times = [t for t, _ in printed]
    gaps = [b - a for a, b in zip([1000.0] + times, times)]
    assert max(gaps) <= 26, (max(gaps), printed)
    text = [line for _, line in printed]
    counting_lines = [x for x in text if "instructions: counting" in x]
    assert counting_lines and "0 of 2 rows done" in counting_lines[0]
    assert any("counting b; 1 of 2 rows done" in x for x in counting_lines), counting_lines
    assert any("importing torch under valgrind" in x for x in text)
    # the fusion line, printed before the counting, already counts the instructions ahead
    fusion = next(x for x in text if "track_compiled_over_eager" in x)
    assert fusion.endswith("~605 s left"), fusion
    # while counting, the time left is the rows' (at the recorded seconds) plus models' 5 s
    first = counting_lines[0]
    assert "s left" in first and "~1 s left" not in first
    left = [int(x.rsplit("~", 1)[1].split()[0]) for x in counting_lines if "~" in x]
    assert left == sorted(left, reverse=True) and left[-1] < left[0]
    assert text[-1].startswith("harness bench: the benchmarks took 635 s (estimated ~615 s")
    assert text[-1].endswith("the longest silence between these lines: 25 s"), text[-1]


def test_a_row_never_counted_makes_the_time_left_unknown_never_a_small_number(tmp_path):
    planned = {
        "fusion.PointwiseChain.track_compiled_over_eager": 10.0,
        INSTR: None,  # a row was never counted on this machine
        "models.B.track_y": 5.0,
    }
    history = estimate.RowSeconds({row("a"): 300.0}, {row("a"): 1}, import_s=60.0, parallel=1)
    printed = _counting_run(tmp_path, planned, [360, 600], history=history, seconds=120)
    text = [line for _, line in printed]
    fusion = next(x for x in text if "track_compiled_over_eager" in x)
    assert fusion.endswith("time left unknown (~5 s + 1 of unknown duration)"), fusion
    counting_lines = [x for x in text if "instructions: counting" in x]
    assert counting_lines and all(x.endswith("+ 1 of unknown duration)") for x in counting_lines)


def test_before_the_counting_the_heartbeat_says_which_benchmark_runs(tmp_path):
    now = [0.0]
    out = io.StringIO()
    p = Progress(out, clock=lambda: now[0], counter=tmp_path / "none.json",
                 planned=lambda: {"a.A.track_x": 10.0, "b.B.track_y": 20.0})  # fmt: skip
    beat = p.heartbeat(25.0)
    now[0] = 30.0
    beat.tick()
    p.feed("· Running 2 total benchmarks (1 commits * 1 environments * 2 benchmarks)")
    p.feed("[ 0.00%] ·· Benchmarking existing-py_root_.cache_harness_asv-python")
    now[0] = 40.0  # a took its recorded 10 s
    p.feed("[50.00%] ··· a.A.track_x      1")
    now[0] = 70.0
    beat.tick()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[0] asv is discovering the benchmarks") and lines[0].endswith(
        "30 s"
    )
    # the table-less benchmark's line comes first (it waited for a table), then the heartbeat
    assert lines[2].startswith("[1/2] a.A.track_x")
    assert lines[3].startswith("[1/2] benchmark 2 of 2 running, 30 s since the last result")
    assert lines[3].endswith("70 s, ~20 s left"), lines[3]


def test_counting_is_a_value_with_its_text_and_time_left():
    assert Counting("x", None).left is None


# ---- ab's lines, --list's estimate, the gap meter ----


def test_ab_says_which_row_a_sides_counting_is_at_and_the_time_left(tmp_path):
    from types import SimpleNamespace

    from harness.runs import ab

    dest = tmp_path / instructions.PROGRESS_FILE
    history = estimate.RowSeconds({row("a"): 100.0}, {row("a"): 1}, import_s=10.0, parallel=1)
    job = SimpleNamespace(counter=dest, history=history)
    status = ab._counting_status(job, "instructions", "base", (1, 2))
    assert status().startswith(
        "ab: instructions instruction rows, one counted run a side; base side (1 of 2): "
        "asv is starting it; "
    )
    now = time.time()
    rows = [{"row": row("a"), "key": "a", "layouts": 1, "done": 0}]
    state = {"started": now, "updated": now, "since": now, "phase": "counting",
             "counting": ["a"], "rows": rows}  # fmt: skip
    dest.write_text(json.dumps(state))
    said = status()
    assert "instructions: counting a; 0 of 1 rows done; " in said
    assert said.endswith("s, ~100 s left of this side"), said
    job.history = estimate.RowSeconds()
    assert status().endswith("time left unknown (a row left was never counted on this machine)")


def test_list_prints_the_estimate_on_this_machine_beside_the_splits_prediction(tmp_path, capsys):
    from harness.commands.bench import _print_list
    from harness.runs import shard

    root = tmp_path / "results"
    write_run(root, run_id(1), {"models.B.track_y": 9.0}, rows={row("a"): [100.0]}, import_s=40.0)
    benchmarks = [
        {"name": INSTR, "setup_cache_key": "instructions:33", "params": [["'a'"]]},
        {"name": "models.B.track_y", "params": []},
    ]
    selection = {INSTR: [row("a")], "models.B.track_y": ["models.B.track_y"]}
    plan = shard.Plan(benchmarks, selection, {INSTR: 0.5, "models.B.track_y": 1.0},
                      [sorted(selection)], None, tmp_path / "durations.json", "quick", 2, 1.0,
                      {INSTR: 0.5, "models.B.track_y": 1.0})  # fmt: skip
    out_json = tmp_path / "plan.json"
    assert _print_list(plan, out_json, (root, "m")) == 0
    captured = capsys.readouterr()
    assert captured.out.split() == [INSTR, "models.B.track_y"]
    # importing 40 s, the one row's 100 s, the benchmark's own 0.5 s (the durations file), 9 s
    expected = 40.0 + 100.0 + 0.5 + 9.0
    assert f"estimated on m: ~{expected:.0f} s" in captured.err, captured.err
    assert json.loads(out_json.read_text())["estimate_here_s"] == pytest.approx(expected)
    # another machine: nothing recorded there for the row
    assert _print_list(plan, None, (root, "other")) == 0
    assert "estimated on other: unknown (no recorded duration for 1 of 2" in capsys.readouterr().err


def test_the_gap_meter_stamps_each_line_and_finds_the_longest_silence(tmp_path, capsys):
    import measure_output_gaps as meter

    log = tmp_path / "run.log"
    script = "import time; print('a', flush=True); time.sleep(0.4); print('b', flush=True)"
    code = meter.main(["--log", str(log), "--max-gap", "0.2", "--", sys.executable, "-c", script])
    assert code == 1  # the command passed, but stayed silent longer than --max-gap
    err = capsys.readouterr().err
    assert "lines: 2;" in err and "estimate at the start: none printed" in err
    wall, lines = meter.read_stamped(log)
    assert [t for _, t in lines] == ["a", "b"]
    longest = meter.gaps(lines, wall)[0]
    assert 0.35 <= longest[0] < 2.0 and longest[2] == "b"
    # a "~1 s left" with minutes still to go is counted against the run
    stamped = [
        (10.0, "[3/9] x  ok   10 s, ~1 s left"),
        (200.0, "[9/9] y  ok   200 s"),
        (201.0, "harness bench: the benchmarks took 201 s (estimated ~150 s ...)"),
    ]
    assert meter.left_too_low(stamped, 250.0) == [(10.0, 191.0, stamped[0][1])]


def test_ab_says_which_row_a_pair_is_at_while_it_runs(monkeypatch):
    from types import SimpleNamespace

    from harness.runs import ab, progress

    monkeypatch.setattr(progress, "EVERY_S", 0.05)

    def fake_pair(job, suite, i):
        job.on_row(3, 12, "models.Inference.track_time('mlp')")
        time.sleep(0.3)
        return {}

    monkeypatch.setattr(ab, "_pair", fake_pair)
    said: list[str] = []
    job = SimpleNamespace(pairs=ab.Pairs(fixed=1), log=said.append, started=time.perf_counter(),
                          budget_s=None, on_row=None)  # fmt: skip
    ab._alternate(job, ab.SuiteRuns(), "models")
    beats = [x for x in said if x.startswith("ab: models pair 1/1: ")]
    assert beats and beats[0].startswith(
        "ab: models pair 1/1: row 3 of 12 (models.Inference.track_time('mlp')); "
    ), said
    assert said[-1] == "ab: models: stopped at 1 pairs"


@pytest.mark.parametrize("verbose", [False, True])
def test_bench_shows_the_counting_between_asvs_lines_end_to_end_with_a_fake_asv(
    tmp_path, monkeypatch, capsys, verbose
):
    """harness bench's own wiring: the estimate at the start, the counter's file found in the
    run's scratch folder while asv is silent, the closing note; asv and the operator pass
    faked."""
    from test_gate_support import write_set

    from harness.core import env as core_env
    from harness.core import provenance
    from harness.runs import asv, bench, progress
    from harness.runs.spec import RunSpec

    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    monkeypatch.setattr(bench, "operator_pass", lambda *a, **k: "not run (test)")
    monkeypatch.setattr(core_env, "fingerprint", lambda: {})
    root = tmp_path / "results"
    # an earlier run of this machine counted the row: 30 s importing, 100 s counting
    write_run(root, run_id(1), {"canary.Canary.track_ops": 2.0}, rows={row("a"): [100.0]},
              import_s=30.0)  # fmt: skip

    def fake_asv(r: asv.AsvRun) -> asv.AsvResult:
        listed = {
            "version": 2,
            INSTR: {"name": INSTR, "setup_cache_key": "instructions:33", "params": [["'a'"]],
                    "param_names": ["workload"], "unit": "instructions", "type": "track",
                    "version": "1"},
            "canary.Canary.track_ops": {"name": "canary.Canary.track_ops", "params": [],
                                        "param_names": [], "unit": "ops", "type": "track",
                                        "version": "1"},
        }  # fmt: skip
        r.results.mkdir(parents=True, exist_ok=True)
        (r.results / "benchmarks.json").write_text(json.dumps(listed))
        r.on_line("· Running 2 total benchmarks (1 commits * 1 environments * 2 benchmarks)")
        r.on_line("[ 0.00%] ·· Benchmarking existing-py_root_.cache_harness_asv-python")
        counter = Path(r.env["HARNESS_SCRATCH_DIR"]) / instructions.PROGRESS_FILE
        now = time.time()
        rows = [{"row": row("a"), "key": "a", "layouts": 1, "done": 0}]
        state = {"started": now, "updated": now, "since": now, "phase": "counting",
                 "counting": ["a"], "rows": rows}  # fmt: skip
        counter.write_text(json.dumps(state))
        time.sleep(0.4)  # asv silent: valgrind counts
        r.on_line("[50.00%] ··· Setting up instructions:33" + " " * 20 + "ok")
        r.on_line(f"[50.00%] ··· {INSTR}             ok")
        r.on_line("[100.00%] ··· canary.Canary.track_ops       10")
        write_set(r.results, "c0ffee" * 6 + "c0ff", {"canary.Canary.track_ops": 10}, machine="m")
        return asv.AsvResult(0, "", "", 0.5, sorted((r.results / "m").glob("c*.json")))

    monkeypatch.setattr(asv, "run", fake_asv)
    spec = RunSpec(mode="quick", suites=("canary", "instructions"), machine="m")
    ran = bench.run(
        Path(__file__).resolve().parents[1],
        root,
        spec,
        sha="c0ffee" * 6 + "c0ff",
        tree=provenance.CLEAN,
        out=sys.stdout,
        verbose=verbose,
    )
    lines = capsys.readouterr().out.splitlines()
    print("\n".join(lines))  # shown with -s
    assert ran.record is not None
    if verbose:  # asv's own lines, and between them the counter's
        assert f"[50.00%] ··· {INSTR}             ok" in lines
        beat = next(x for x in lines if x.startswith("harness bench: instructions: counting a"))
        assert beat.startswith("harness bench: instructions: counting a; 0 of 1 rows done; ")
        return
    estimate_line = next(x for x in lines if x.startswith("harness bench: estimated"))
    # 30 s importing + 100 s counting (+ the durations file's own seconds) + canary's 2 s
    assert estimate_line.startswith("harness bench: estimated ~13"), estimate_line
    beats = [x for x in lines if "instructions: counting a; 0 of 1 rows done" in x]
    assert beats and "s left" in beats[0], lines
    # the closing note (a heartbeat of the faked operator pass may follow it on a busy machine)
    closing = [x for x in lines if x.startswith("harness bench: the benchmarks took")]
    assert closing and closing[0].startswith(
        "harness bench: the benchmarks took 0 s (estimated ~13"
    )
    assert all(
        x.startswith("harness bench: the operator pass")
        for x in lines[lines.index(closing[0]) + 1 :]
    ), lines
