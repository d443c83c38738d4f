"""Failures are never hidden: a failed benchmark's rows name its error (from the run record's asv
log), the gate's summary leads with the failed benchmarks and still names every regression
among the rows both sides have, `harness ab` says what ran, and bench's rerun hint is a command
that runs the case where it is printed (harness.core.asvlog, harness.verdict.compare/gate,
harness.runs.ab.what_ran, harness.runs.bench.rerun_command)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_gate_support import draw, write_set

from harness.core import asvlog, records
from harness.verdict import compare
from harness.verdict.gate import run_gate

# asv 0.6's output with --show-stderr: a plain benchmark that failed, a parameterised one with a
# case that raised (a chained exception under its frames) beside a case that ran and one skipped,
# a case that timed out, a setup_cache that failed and the benchmark it took with it
LOG = """\
· Running 5 total benchmarks (1 commits * 1 environments * 5 benchmarks)
[ 0.00%] ·· Benchmarking existing-py_root_.cache_harness_asv-python
[20.00%] ··· transfer.PinnedOverPageable.track_pinned_over_pageable          failed
[20.00%] ···· Traceback (most recent call last):
                File "/x/transfer.py", line 9, in track_pinned_over_pageable
                  raise RuntimeError("boom")
              RuntimeError: boom
              asv: benchmark failed (exit status 1)
[40.00%] ··· models.Inference.track_inference_time                           ok
[40.00%] ··· ========= ======= ======
             --          channels_last
             --------- ---------------
               model     False   True
             ========= ======= ======
                mlp      1.2ms   n/a
               convy     failed  failed
             ========= ======= ======

[40.00%] ···· For parameters: 'mlp', True
              asv: skipped: NotApplicable('channels_last applies to 4-d image inputs')

              For parameters: 'convy', False
              Traceback (most recent call last):
                File "/p/models.py", line 4, in forward
                  return self.conv(x) @ self.w
              KeyError: 'w'

              During handling of the above exception, another exception occurred:

              Traceback (most recent call last):
                File "/p/models.py", line 6, in forward
                  raise RuntimeError("convy: shapes do not match")
              RuntimeError: convy: shapes do not match
              (a second line of its message)

              For parameters: 'convy', True
              asv: benchmark timed out (timeout 300s)
[60.00%] ··· Setting up fusion:230                                            failed
[60.00%] ···· Traceback (most recent call last):
                File "/x/fusion.py", line 240, in setup_cache
              MemoryError
[80.00%] ··· fusion.PointwiseChain.track_compiled_over_eager                 failed
[80.00%] ···· asv: setup_cache failed

              Traceback (most recent call last):
                File "/x/fusion.py", line 240, in setup_cache
              MemoryError
[100.00%] ··· amp.AutocastOverFp32.track_autocast_over_fp32                  1.02±0.01
"""


def test_each_failed_case_gets_its_errors_first_line_from_asvs_log():
    assert asvlog.failures(LOG) == {
        "transfer.PinnedOverPageable.track_pinned_over_pageable": "RuntimeError: boom",
        "models.Inference.track_inference_time('convy', False)": (
            "RuntimeError: convy: shapes do not match"
        ),
        "models.Inference.track_inference_time('convy', True)": (
            "asv: benchmark timed out (timeout 300s)"
        ),
        "fusion.PointwiseChain.track_compiled_over_eager": "MemoryError",
    }


def test_a_log_that_is_a_link_or_missing_gives_nothing_and_a_long_error_is_cut(tmp_path):
    elsewhere = tmp_path / "elsewhere.log"
    elsewhere.write_text(LOG)
    run = tmp_path / "run"
    run.mkdir()
    assert asvlog.read_failures(run) == {}  # no log
    (run / "asv.log").symlink_to(elsewhere)
    assert asvlog.read_failures(run) == {}  # a link is not followed
    long = LOG.replace("RuntimeError: boom", "RuntimeError: " + "x" * 5000)
    errors = asvlog.failures(long)
    assert len(errors["transfer.PinnedOverPageable.track_pinned_over_pageable"]) == asvlog.MAX_ERROR


def _record(root: Path, i: int, benches: dict, log: str = "", units=None) -> Path:
    """A run record of machine m holding `benches` (write_set's forms) and asv's log `log`."""
    commit = f"{i:040x}"
    run_id = f"20261201T{i:02d}0000Z-{commit[:8]}"
    with records.writing(root, "m", run_id, {"commit": commit, "quick": True}) as d:
        write_set(d / "asv", commit, benches, machine="m", units=units)
        if log:
            (d / records.ASV_LOG).write_text(log)
    return root / "runs" / "m" / run_id


FAILED_NAME = "models.Inference.track_inference_time('convy', False)"


def test_a_row_a_failed_benchmark_left_on_one_side_names_the_error_not_missing(tmp_path):
    root = tmp_path / "results"
    timing = draw(20, seed=1)
    clean = _record(root, 1, {"a.B.track_ratio": timing}, units={"a.B.track_ratio": "ratio"})
    # the head run added a model whose forward raises: its rows failed there
    failing = _record(
        root,
        2,
        {"a.B.track_ratio": timing, FAILED_NAME: None},
        LOG,
        units={"a.B.track_ratio": "ratio"},
    )
    out = run_gate(str(clean), str(failing), root=root, history=False)
    rows = {r.name: r for r in out.rows}
    row = rows[FAILED_NAME]
    assert row.verdict == compare.FAILED, row
    assert row.note.startswith(
        "benchmark failed on head: RuntimeError: convy: shapes do not match; not in base ("
    ), row.note
    assert out.code == 2
    summary = out.summary()
    assert summary.startswith(
        f"gate: exit 2 (benchmark failed or missing); 1 FAILED ({FAILED_NAME}: RuntimeError: "
        "convy: shapes do not match); no REGRESSION among the rows both sides have; 1 judged"
    ), summary
    # the other way round too, and a failed row on both sides names the error
    back = {r.name: r for r in run_gate(str(failing), str(clean), root=root, history=False).rows}
    assert back[FAILED_NAME].note.startswith("benchmark failed on base: RuntimeError: convy")
    both = _record(root, 3, {FAILED_NAME: None}, LOG)
    rows = {r.name: r for r in run_gate(str(failing), str(both), root=root, history=False).rows}
    assert rows[FAILED_NAME].note == (
        "benchmark failed on both sides: RuntimeError: convy: shapes do not match"
    )


def test_the_summary_shows_the_regression_beside_the_failure_exit_2_wins(tmp_path):
    root = tmp_path / "results"
    units = {"a.B.track_ratio": "ratio", "c.D.track_kernels": "kernels"}
    base = _record(
        root, 1, {"a.B.track_ratio": draw(20, seed=1), "c.D.track_kernels": 10}, units=units
    )
    head = _record(
        root,
        2,
        {"a.B.track_ratio": draw(20, seed=1), "c.D.track_kernels": 12, FAILED_NAME: None},
        LOG,
        units=units,
    )
    out = run_gate(str(base), str(head), root=root, history=False)
    assert out.code == 2  # a failed benchmark beats a regression (3 > 2 > 1 > 6 > 0)
    summary = out.summary()
    assert summary.startswith(
        "gate: exit 2 (benchmark failed or missing); 1 FAILED ("
        f"{FAILED_NAME}: RuntimeError: convy: shapes do not match); and 1 REGRESSION among the "
        "rows both sides have (exit 1 on its own): c.D.track_kernels (+20.0%); 2 judged"
    ), summary
    # in Markdown too, bold and escaped
    md = out.render("markdown")
    assert "1 REGRESSION among the rows both sides have" in md
    assert "c.D.track\\_kernels" in md or "c.D.track_kernels" in md


def test_an_error_line_from_a_record_is_escaped_in_the_summary(tmp_path):
    root = tmp_path / "results"
    log = LOG.replace("RuntimeError: convy", "RuntimeError: \x1b[2J\x1b]0;pwned\x07convy")
    base = _record(root, 1, {"a.B.track_kernels": 1}, units={"a.B.track_kernels": "kernels"})
    head = _record(root, 2, {"a.B.track_kernels": 1, FAILED_NAME: None}, log)
    out = run_gate(str(base), str(head), root=root, history=False)
    text = out.render("text")
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J" in out.summary()


# ---- ab's closing line ----


def test_ab_says_what_ran_for_instruction_rows_not_zero_pairs():
    from harness.runs import ab

    rows = [
        compare.Row("instructions.I.track_instructions('a')", "instructions", 1, 1, 1, "ok"),
        compare.Row(
            "instructions.I.track_instructions('b')", "instructions", 1, 2, 2, "REGRESSION"
        ),
        compare.Row("models.M.track_ratio", "ratio", 1, 1, 1, "ok"),
    ]
    out = {"pairs": {"instructions": 0, "models": 7}, "counted": ["instructions"]}
    said = ab.what_ran(out, rows, ab.Pairs())
    assert said == (
        "instructions: one counted run a side (valgrind: a count does not move between "
        "processes), 2 instruction rows: 1 REGRESSION, 1 ok; no pairs (no other rows); "
        "models: 7 pairs (pairs until decided (at most 20))"
    ), said
    assert "pairs run: instructions 0" not in said


# ---- bench's rerun hint ----


def test_the_rerun_hint_is_a_harness_bench_line_for_that_case_shell_quoted():
    from harness.runs.bench import rerun_command
    from harness.verdict.compare import selects

    name = "models.Inference.track_inference_time('convy', False)"
    line = rerun_command(name, ("--quick", "--results-dir", "my results"))
    words = shlex.split(line)
    assert words[:5] == ["harness", "bench", "--quick", "--results-dir", "my results"]
    assert words[words.index("--suite") + 1] == "models"
    regex = words[words.index("--bench") + 1]
    assert selects(regex, name) and not selects(regex, name.replace("False", "True"))
    assert words[-3:] == ["--label", "rerun", "-v"]
    # a name from a record cannot end the shell word: a newline is written as $'...'
    odd = rerun_command("m.A.track_x('a\nb; rm -rf ~')")
    assert "\n" not in odd and " --bench $'^m" in odd


def test_bench_names_each_failed_cases_error_and_prints_its_rerun_line(tmp_path, capsys):
    from harness.runs import bench

    root = tmp_path / "results"
    path = _record(root, 1, {"amp.A.track_k": 3, FAILED_NAME: None}, LOG)
    ran = bench.BenchRun(records.load_record(path), 0, 1.0, ["amp", "models"])
    assert bench.report(ran, root, rerun=("--quick",)) == 2
    out = capsys.readouterr().out
    assert f"FAILED {FAILED_NAME}: RuntimeError: convy: shapes do not match" in out
    line = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith("harness bench "))
    assert line == bench.rerun_command(FAILED_NAME, ("--quick",))
    assert "asv run --python=same" not in out


BROKEN = """

class Broken(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.head = nn.Linear(4, num_classes)

    def forward(self, x):
        raise RuntimeError("broken forward")


register_model(
    "broken",
    build=lambda cfg: Broken(cfg["num_classes"]),
    inputs=lambda cfg, gen: (torch.randn(cfg["batch"], 4, generator=gen),),
    small={"batch": 2, "num_classes": 10},
    full={"batch": 2, "num_classes": 10},
    instructions="a model that raises: its rows are the test's",
)
"""


@pytest.mark.slow  # harness init, git, and two real asv runs of a models suite
def test_the_rerun_hint_runs_the_failed_case_in_an_init_project(tmp_path):
    project = tmp_path / "p"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("HARNESS_RESULTS_DIR", None)
    harness = [sys.executable, "-m", "harness.cli"]

    def run(args):
        return subprocess.run(
            args, cwd=project, env=env, capture_output=True, text=True, timeout=1200
        )

    project.mkdir()
    assert run([*harness, "init", str(project)]).returncode == 0
    models = project / "models.py"
    models.write_text(models.read_text() + BROKEN)
    for args in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "p"],
    ):
        assert run(args).returncode == 0, args
    bench = run([*harness, "bench", "--quick", "--suite", "models", "--bench", "Inference"])
    assert bench.returncode == 2, bench.stdout[-3000:] + bench.stderr[-3000:]
    assert "FAILED models.Inference" in bench.stdout and "broken forward" in bench.stdout
    hint = next(
        ln.strip() for ln in bench.stdout.splitlines() if ln.strip().startswith("harness bench ")
    )
    words = shlex.split(hint)
    assert "'broken'" in words[words.index("--bench") + 1]
    rerun = run([*harness, *words[1:]])  # `harness` itself: this checkout's, as a module
    said = rerun.stdout + rerun.stderr
    assert "No information stored about machine" not in said
    assert "ModuleNotFoundError" not in said
    assert rerun.returncode == 2, said[-3000:]
    assert "broken forward" in said  # -v: asv's output, the traceback in it
