"""`harness bench`'s one line per benchmark, read from asv's output (harness.runs.progress), and
the main job's short selection (harness.runs.bench.SHORT)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from harness.runs import bench
from harness.runs.progress import Progress

# asv 0.6's output for three benchmarks: a plain value, a parameterised one with a skipped case
# (and a case --bench left out, which its table also shows as n/a), a failure
ASV = """\
· Discovering benchmarks
· Running 3 total benchmarks (1 commits * 1 environments * 3 benchmarks)
[ 0.00%] ·· Benchmarking existing-py_root_.cache_harness_asv-python
[33.33%] ··· fusion.PointwiseChain.track_compiled_over_eager      0.6314497942231275±0.0068
[66.67%] ··· amp.AutocastOverFp32.track_autocast_over_fp32                   ok
[66.67%] ··· ========= ======================== ======
             --                   precision
             --------- -------------------------------
               model             bf16            fp16
             ========= ======================== ======
              alexnet   9.615066304582617±0.91   n/a
              word_lm            n/a             n/a
             ========= ======================== ======

[66.67%] ···· For parameters: 'alexnet', 'fp16'
              asv: skipped: NotApplicable('fp16 autocast is measured on CUDA only')

[100.00%] ··· transfer.PinnedOverPageable.track_pinned_over_pageable          failed
[100.00%] ···· Traceback (most recent call last):
                 RuntimeError: boom
"""


def test_one_line_per_benchmark_with_its_result_and_what_is_left():
    out = io.StringIO()
    p = Progress(out)
    for line in ASV.splitlines():
        p.feed(line)
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4, lines
    assert lines[3].startswith("harness bench: the benchmarks took ")  # the closing note
    assert "no estimate" in lines[3] and "the longest silence between these lines" in lines[3]
    assert lines[0].startswith(
        "[1/3] fusion.PointwiseChain.track_compiled_over_eager  0.6314±0.0068"
    )
    assert "s left" in lines[0] and "s left" not in lines[2]  # nothing is left after 100%
    assert "[2/3] amp.AutocastOverFp32.track_autocast_over_fp32  ok: 1 values, 1 n/a" in lines[1]
    assert "[3/3] transfer.PinnedOverPageable" in lines[2] and "failed" in lines[2]
    assert p.failed == ["transfer.PinnedOverPageable.track_pinned_over_pageable"]


# asv 0.6's tables of values without ± (bytes, instructions), as a project's run printed them
TABLES = """\
[10.00%] ··· instructions.InstructionsPerCall.track_instructions                           ok
[10.00%] ··· ========================= ===========
                      workload
             ------------------------- -----------
                 tiny_cnn_inference      846043.1
               tiny_cnn_training_step   2676419.7
                  tiny_cnn.forward        failed
             ========================= ===========

[60.00%] ··· models.PeakMemory.track_peak_memory                                          ok
[60.00%] ··· =========== ======= ======
             --          channels_last
             ----------- --------------
                model     False   True
             =========== ======= ======
               tiny_cnn    289k   289k
              tiny_text   97.2k   n/a
             =========== ======= ======

[60.00%] ···· For parameters: 'tiny_text', True
              asv: skipped: NotApplicable('channels_last applies to 4-d image inputs')
"""


def test_values_without_a_spread_are_values_and_parameter_labels_are_not():
    out = io.StringIO()
    p = Progress(out)
    for line in TABLES.splitlines():
        p.feed(line)
    p.close()
    lines = out.getvalue().splitlines()
    assert "track_instructions  ok: 2 values, 1 FAILED" in lines[0]
    assert "track_peak_memory  ok: 3 values, 1 n/a" in lines[1]


def test_a_benchmark_with_every_case_skipped_says_why():
    out = io.StringIO()
    p = Progress(out)
    for line in [
        "[50.00%] ··· transfer.HostToDeviceCopy.track_copy_time      ok",
        "[50.00%] ··· ====== ====",
        "              pinned   n/a",
        "[50.00%] ···· For parameters: 'pinned'",
        "              asv: skipped: NotApplicable('needs CUDA: pinned memory')",
    ]:
        p.feed(line)
    p.close()
    assert "n/a (1 cases): needs CUDA: pinned memory" in out.getvalue()


@pytest.mark.slow  # asv discovery of seven suites
def test_the_short_selection_touches_every_area_and_each_regex_selects_a_benchmark():
    areas = [area for area, _ in bench.SHORT]
    for area in (
        "fusion",
        "transfer",
        "amp",
        "dataloader",
        "models",
        "training_loop",
        "distributed",
    ):
        assert area in areas, area
    # --list --short discovers the short suites and prints what would run, one name per line
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "bench", "--quick", "--list", "--short"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = proc.stdout.split()
    import re

    # --list names benchmarks without parameters; one is listed only when a regex (parameters
    # included) selected one of its cases
    for _, regex in bench.SHORT:
        assert any(re.search(regex.split(r"\(")[0], n) for n in names), (regex, names)
    assert len(names) == len(bench.SHORT), names


@pytest.mark.parametrize("extra", [["--bench", "x"], ["--shard", "1/2"]])
def test_short_picks_its_own_rows(extra, capsys, tmp_path):
    from harness.cli import main

    assert main(["bench", "--short", *extra, "--results-dir", str(tmp_path)]) == 3
    assert "--short picks its own rows" in capsys.readouterr().err


def test_where_the_seconds_went_asv_start_each_benchmark_and_the_end():
    # a clock read once per timed event: creation, Benchmarking line, each result line, close
    ticks = iter([100.0, 112.0, 132.5, 140.0, 141.0, 149.0])
    done = []
    p = Progress(echo=False, clock=lambda: next(ticks), on_done=lambda *a: done.append(a))
    for line in ASV.splitlines():
        p.feed(line)
    p.close()
    assert p.timing() == {
        "asv_start_s": 12.0,
        "benchmark_wall_s": {
            "fusion.PointwiseChain.track_compiled_over_eager": 20.5,
            "amp.AutocastOverFp32.track_autocast_over_fp32": 7.5,
            "transfer.PinnedOverPageable.track_pinned_over_pageable": 1.0,
        },
        "setup_cache_s": {},
        "asv_end_s": 8.0,
    }
    # told at each result line, before the table that follows it is read
    assert done == [
        ("fusion.PointwiseChain.track_compiled_over_eager", 20.5, "0.6314±0.0068"),
        ("amp.AutocastOverFp32.track_autocast_over_fp32", 7.5, "ok"),
        ("transfer.PinnedOverPageable.track_pinned_over_pageable", 1.0, "failed"),
    ]


def test_without_a_benchmarking_line_the_first_benchmark_holds_the_start():
    ticks = iter([0.0, 5.0, 6.0])
    p = Progress(echo=False, clock=lambda: next(ticks))
    p.feed("[100.00%] ··· canary.Canary.track_ops      10")
    p.close()
    assert p.timing() == {
        "asv_start_s": None,
        "benchmark_wall_s": {"canary.Canary.track_ops": 5.0},
        "setup_cache_s": {},
        "asv_end_s": 1.0,
    }


def test_a_setup_cache_counts_apart_from_the_benchmark_after_it():
    # creation, Benchmarking, fusion's result, the setup_cache's end, distributed's result, close
    ticks = iter([0.0, 10.0, 14.0, 54.0, 57.0, 58.0])
    done = []
    p = Progress(echo=False, clock=lambda: next(ticks), on_done=lambda *a: done.append(a[:2]))
    lines = [
        "[ 0.00%] ·· Benchmarking existing-py_root_.cache_harness_asv-python",
        "[50.00%] ··· fusion.PointwiseChain.track_compiled_over_eager      0.63±0.01",
        "[100.00%] ··· Setting up distributed:57" + " " * 40 + "ok",
        "[100.00%] ··· distributed.Step.track_step_time      1.2",
    ]
    for line in lines:
        p.feed(line)
    p.close()
    got = p.timing()
    assert got["setup_cache_s"] == {"distributed:57": 40.0}
    assert got["benchmark_wall_s"] == {
        "fusion.PointwiseChain.track_compiled_over_eager": 4.0,
        "distributed.Step.track_step_time": 3.0,
    }
    assert done == [
        ("fusion.PointwiseChain.track_compiled_over_eager", 4.0),
        ("distributed.Step.track_step_time", 3.0),
    ]


def _fed(planned: dict, walls: list[float]) -> list[str]:
    """Progress over ASV with recorded durations `planned`, each benchmark taking `walls[i]`
    seconds on a fake clock."""
    now = [0.0]
    out = io.StringIO()
    p = Progress(out, clock=lambda: now[0], planned=lambda: planned)
    done = iter(walls)
    for line in ASV.splitlines():
        if line.startswith("[") and "··· " in line and " ···· " not in line and "====" not in line:
            now[0] += next(done)
        p.feed(line)
    p.close()
    return out.getvalue().splitlines()


def test_what_is_left_comes_from_recorded_durations_at_this_runs_pace():
    names = [
        "fusion.PointwiseChain.track_compiled_over_eager",
        "amp.AutocastOverFp32.track_autocast_over_fp32",
        "transfer.PinnedOverPageable.track_pinned_over_pageable",
    ]
    # recorded 10, 20, 30 s; this run takes 2x: after the first, 2 x 50 s are left
    lines = _fed(dict(zip(names, [10.0, 20.0, 30.0])), [20.0, 40.0, 60.0])
    assert lines[0] == "harness bench: estimated ~60 s for 3 benchmarks", lines  # at the start
    assert lines[1].endswith("20 s, ~100 s left"), lines
    assert lines[2].endswith("60 s, ~60 s left"), lines
    assert lines[3].endswith("120 s"), lines  # nothing left, nothing said
    # the closing note: what it took against the estimate, and the longest silence
    assert lines[4] == (
        "harness bench: the benchmarks took 120 s (estimated ~60 s at the start); the longest "
        "silence between these lines: 60 s"
    ), lines
    # a project's first run: nothing recorded for its own benchmarks; said once, never guessed
    lines = _fed({names[0]: 10.0, names[1]: None, names[2]: None}, [10.0, 20.0, 30.0])
    assert lines[0].startswith(
        "harness bench: estimated time unknown: no recorded duration for 2 of 3 benchmarks"
    )
    assert "~10 s for the others" in lines[0]
    assert "the next run of this machine estimates them from this one" in lines[0]
    assert lines[1].endswith("10 s, 2 left of unknown duration"), lines
    assert "estimated: unknown at the start" in lines[-1]
    lines = _fed({names[0]: None, names[1]: 20.0, names[2]: None}, [10.0, 20.0, 30.0])
    assert lines[1].endswith("10 s, time left unknown (~20 s + 1 of unknown duration)"), lines
