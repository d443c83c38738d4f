"""`harness answers --rerun ROW`: one paired row's answer check again, alone, in-process
(harness.runs.answercheck, answers.only_the_check), and the command every view of a WRONG or
fail_to_run answer names for it (harness.verdict.rerun.answer_rerun_command). The default tier
runs on made-up cases and records; one slow test runs the real command on a fusion row."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_answer_verdicts import ANS, OTHER, ROW, failed, rows_of, same, write_answers, wrong
from test_gate_support import draw, write_set

from harness.cli import main
from harness.core import answerfacts, exits, records
from harness.core.answerfacts import FAIL_TO_RUN, NOT_APPLICABLE, SAME, WRONG, Answer
from harness.core.exits import BadInput
from harness.runs import answercheck
from harness.runs.answercheck import Case, Reran, Rerun
from harness.verdict import answers, results
from harness.verdict.rerun import CHECKED_WHERE_TIMED, answer_rerun_command

REPO = Path(__file__).resolve().parents[1]
HOSTILE = "models.CompiledOverEager.track_compiled_over_eager('x\n\x1b[31m$(touch pwned); `id`')"


# ---- selecting rows --------------------------------------------------------------------------


def case(bench: str, values=(), *, paired=True, elsewhere=False, index=0) -> Case:
    shown = ", ".join(repr(v) for v in values)
    name = f"{bench}({shown})" if values else bench
    return Case(bench, index if values else None, name, tuple(values), paired, elsewhere)


CHAIN = "fusion.PointwiseChain.track_compiled_over_eager"
EAGER = "fusion.PointwiseChain.track_eager_time"
OVER_REF = "fusion.PointwiseChain.track_eager_time_over_reference"
COMPILED = "models.CompiledOverEager.track_compiled_over_eager"
OPT = "fusion.OptimizerStepOverForLoop.track_step_over_for_loop"
BANDWIDTH = "fusion.MemoryBandwidth.track_fused_over_eager"
CASES = [
    case(CHAIN),
    case(EAGER, paired=False),
    case(OVER_REF, paired=False),
    case(COMPILED, ("word_lm",), index=0),
    case(COMPILED, ("mlp",), index=1),
    case(OPT, ("SGD", "foreach"), index=0),
    case(OPT, ("Adam", "fused"), index=1),
    case(BANDWIDTH, ("pointwise_chain",), elsewhere=True),
]


def names(chosen: list[Case]) -> list[str]:
    return [c.name for c in chosen]


def test_a_full_name_selects_its_row_alone():
    assert names(answercheck.select((CHAIN,), CASES, "quick")) == [CHAIN]
    row = f"{COMPILED}('word_lm')"
    assert names(answercheck.select((row,), CASES, "quick")) == [row]
    # a regex would also have matched the answer rows of other cases; a full name does not
    assert names(answercheck.select((f"{OPT}('Adam', 'fused')",), CASES, "quick")) == [
        f"{OPT}('Adam', 'fused')"
    ]


def test_an_answer_row_and_other_spellings_of_the_parameters_select_the_timed_row():
    row = f"{COMPILED}('word_lm')"
    for spelled in (
        answerfacts.answer_row(row),  # the answer row, as the gate and `harness answers` name it
        f'{COMPILED}("word_lm")',  # parameters are Python literals: either quote
        f"{COMPILED}( 'word_lm' )",
    ):
        assert names(answercheck.select((spelled,), CASES, "quick")) == [row], spelled


def test_a_regex_selects_every_paired_row_it_finds_once_in_order():
    chosen = answercheck.select((r"^fusion\.Po", r"PointwiseChain", r"answer_step"), CASES, "quick")
    # the one-side rows of fusion are left out; a row selected twice is listed once
    assert names(chosen) == [CHAIN, f"{OPT}('SGD', 'foreach')", f"{OPT}('Adam', 'fused')"]


@pytest.mark.parametrize(
    "pattern, said",
    [
        # no such class: the paired benchmarks are listed
        ("fusion.NoSuch.track_x", ["no benchmark fusion.NoSuch.track_x", CHAIN, "--full"]),
        # the class exists, not the method: its paired rows are listed
        ("fusion.PointwiseChain.track_nope", ["fusion.PointwiseChain has no benchmark", CHAIN]),
        # a row that times one side
        (EAGER, [f"{EAGER} is not a paired row: it times one side", CHAIN]),
        (OVER_REF, ["not a paired row: it divides one side by this machine's reference"]),
        # a case the mode does not run
        (f"{COMPILED}('resnet18')", ["no such case of", f"{COMPILED}('word_lm')", "--full"]),
        # a regex that finds rows, none of them paired
        (r"eager_time$", ["matches no paired row, only rows that time one side", EAGER]),
        # a regex that finds nothing; one that is no regex
        ("zzz", ["'zzz' matches no row of a quick run", CHAIN]),
        (f"{COMPILED}(", ["neither a row's full name nor a regular expression"]),
    ],
)
def test_bad_selections_are_bad_input_saying_what_could_match(pattern, said):
    with pytest.raises(BadInput) as caught:
        answercheck.select((pattern,), CASES, "quick")
    for words in said:
        assert words in str(caught.value), (words, str(caught.value))


def test_a_row_checked_where_it_is_timed_is_bad_input_named_alone_and_listed_by_a_regex():
    row = f"{BANDWIDTH}('pointwise_chain')"
    with pytest.raises(BadInput) as caught:
        answercheck.select((answerfacts.answer_row(row),), CASES, "full")
    said = str(caught.value)
    assert said.startswith(f"{row} cannot be rerun alone: its check runs where it is timed")
    words = shlex.split(said.split("measurement: ")[1])
    assert words[:3] == ["harness", "bench", "--full"] and re.search(words[-4], row)
    # a regex over the class keeps it: the rerun lists it as not rerun here (Reran.code)
    assert names(answercheck.select((r"^fusion\.MemoryBandwidth\.",), CASES, "quick")) == [row]


def test_full_runs_are_not_offered_as_the_fix_in_a_full_run():
    with pytest.raises(BadInput) as caught:
        answercheck.select(("zzz",), CASES, "full")
    assert "--full" not in str(caught.value)


def test_a_long_list_of_candidates_is_cut():
    many = [case(f"fusion.C{i}.track_a_over_b") for i in range(answercheck.SHOWN + 5)]
    with pytest.raises(BadInput) as caught:
        answercheck.select(("zzz",), many, "quick")
    assert "+5 more" in str(caught.value) and "fusion.C13." not in str(caught.value)


def test_parameters_are_read_as_literals_never_evaluated():
    assert answercheck._literal("'a', 1, True, None, 2.5") == ("a", 1, True, None, 2.5)
    assert answercheck._literal("'mlp'") == ("mlp",)
    assert answercheck._literal("") == ()
    for code in ("__import__('os').system('id')", "x", "'a' +", "1, 2)", "(" * 200 + ")" * 200):
        assert answercheck._literal(code) is None, code


def test_the_suites_a_selection_needs_are_read_from_its_first_word():
    known = ["fusion", "models", "amp"]
    assert answercheck.suites_named((CHAIN, r"^models\.", "amp.X"), known) == [
        "fusion",
        "models",
        "amp",
    ]
    assert answercheck.suites_named((CHAIN, CHAIN), known) == ["fusion"]
    # a pattern over every suite, or one naming no known suite: every suite is imported
    for pattern in (r"compiled_over", r".*", r"^nosuch\.X", r"(fusion|models)\."):
        assert answercheck.suites_named((CHAIN, pattern), known) is None, pattern


# ---- the exit code ---------------------------------------------------------------------------


def reran(*statuses: str | None) -> Reran:
    cases = [
        Rerun(f"s.C.track_{i}_over_x", None if s is None else Answer(s, "w"), note="")
        for i, s in enumerate(statuses)
    ]
    return Reran(cases, "quick", 1, "cpu")


@pytest.mark.parametrize(
    "statuses, code",
    [
        ((SAME,), exits.PASS),
        ((SAME, NOT_APPLICABLE), exits.PASS),
        ((SAME, None), exits.PASS),  # a row checked where it is timed is listed, not judged
        ((SAME, WRONG), exits.REGRESSION),
        ((WRONG, FAIL_TO_RUN, SAME), exits.FAILED),  # fail_to_run wins over WRONG
        ((NOT_APPLICABLE,), exits.UNDECIDED),
        ((NOT_APPLICABLE, None), exits.UNDECIDED),
        ((None,), exits.BAD_INPUT),  # nothing could be rerun here
        ((), exits.BAD_INPUT),
    ],
)
def test_the_exit_code_combines_the_rows(statuses, code):
    assert reran(*statuses).code == code


# ---- what is shown ---------------------------------------------------------------------------


def test_the_rerun_s_output_escapes_what_a_row_says():
    a = dataclasses.replace(wrong(), reason="\x1b[2J\x1b[31mred\nnext line", what="a\tb")
    out = Reran([Rerun(HOSTILE, a, error="Trace\n\x1b[0m")], "quick", 1, "cpu").render()
    assert "\x1b" not in out and "\t" not in out
    lines = out.splitlines()
    assert lines[0].startswith("models.CompiledOverEager") and "\\n" in lines[0]
    assert lines[-1].startswith("answers --rerun: exit 1 (regression); 1 WRONG")
    data = Reran([Rerun(ROW, a)], "quick", 1, "cpu").as_json()
    row = data["rows"][0]
    assert row["answer_row"] == ANS and row["status"] == WRONG and row["value"] == 5200.0
    assert json.loads(json.dumps(data)) == data


def test_the_command_reruns_the_timed_row_s_check_in_the_run_s_mode():
    assert shlex.split(answer_rerun_command(ANS)) == [
        "harness",
        "answers",
        "--rerun",
        ROW,
        "--quick",
    ]
    flags = ("--full", "--threads", "2", "--machine", "m", "--project", "my project")
    assert shlex.split(answer_rerun_command(ROW, flags)) == [
        "harness",
        "answers",
        "--rerun",
        ROW,
        "--full",
        "--threads",
        "2",
        "--project",
        "my project",
    ]
    # a flag at the end without its value is no flag of the run (never an IndexError)
    assert "--threads" not in answer_rerun_command(ROW, ("--quick", "--threads"))


def test_a_row_checked_where_it_is_timed_gets_the_timed_rerun():
    row = "fusion.MemoryBandwidth.track_fused_over_eager('pointwise_chain')"
    words = shlex.split(answer_rerun_command(answerfacts.answer_row(row), ("--quick",)))
    assert words[:3] == ["harness", "bench", "--quick"]
    assert re.search(words[words.index("--bench") + 1], row)


def test_a_hostile_row_name_is_escaped_for_the_shell():
    cmd = answer_rerun_command(answerfacts.answer_row(HOSTILE), ("--quick",))
    assert "\n" not in cmd and "\x1b" not in cmd and "$'" in cmd
    # without control characters it is one quoted word that the shell gives back as it was
    plain = HOSTILE.replace("\n", " ").replace("\x1b", "")
    assert shlex.split(answer_rerun_command(plain))[3] == plain


def test_the_gate_s_note_names_the_answers_rerun(tmp_path):
    from test_answer_verdicts import gate_of

    code, _, data = gate_of(tmp_path, {ROW: same()}, {ROW: wrong(), OTHER: failed()})
    assert code == exits.FAILED
    rows = rows_of(data)
    for name in (ANS, answerfacts.answer_row(OTHER)):
        note = rows[name]["note"]
        timed = answerfacts.timed_row(name)
        assert f"harness answers --rerun {shlex.quote(timed)} --quick" in note, note


def record_of(root: Path, meta: dict, found: dict[str, Answer]) -> Path:
    commit = "c" * 40
    run_id = f"20261201T010000Z-{commit[:8]}"
    with records.writing(root, "m", run_id, {"commit": commit, **meta}) as d:
        write_set(d / "asv", commit, {ROW: draw(20, seed=1)}, machine="m", units={ROW: "ratio"})
        write_answers(d, found)
    return root / "runs" / "m" / run_id


@pytest.mark.parametrize(
    "meta, want",
    [
        ({"quick": True, "mode": "fast", "threads": 1}, ["--quick"]),
        ({"quick": True, "mode": "fast", "threads": 4}, ["--quick", "--threads", "4"]),
        ({"mode": "full", "threads": 8}, ["--full", "--threads", "8"]),
        ({"mode": "full", "threads": "8; rm -rf ~"}, ["--full"]),  # not a count: left out
        ({"mode": "full", "threads": True}, ["--full"]),
        ({"mode": "fast"}, ["--quick"]),  # a fast run checks at the quick sizes
    ],
)
def test_a_record_s_mode_and_threads_go_into_the_command(tmp_path, meta, want):
    rec = records.load_record(record_of(tmp_path / "r", meta, {ROW: wrong()}))
    rs = results.load(rec.result_file())
    words = shlex.split(answers.rerun(ANS, rs))
    assert words[:4] == ["harness", "answers", "--rerun", ROW] and words[4:] == want


def test_harness_answers_names_the_rerun_of_each_problem(tmp_path, capsys):
    root = tmp_path / "r"
    record_of(root, {"quick": True, "mode": "fast", "threads": 1}, {ROW: wrong()})
    out_json = tmp_path / "a.json"
    code = main(["answers", "--results-dir", str(root), "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == exits.REGRESSION
    line = f"harness answers --rerun {shlex.quote(ROW)} --quick"
    assert line in out
    assert json.loads(out_json.read_text())["rows"][0]["rerun"] == line


def test_bench_s_block_of_wrong_answers_names_the_rerun_with_the_run_s_flags(tmp_path):
    from harness.runs import bench

    root = tmp_path / "r"
    rec = records.load_record(
        record_of(root, {"quick": False, "mode": "full", "suites": ["models"]}, {ROW: wrong()})
    )
    out = io.StringIO()
    flags = ("--full", "--threads", "2", "--project", "my proj")
    code = bench.report(bench.BenchRun(rec, 0, 1.0, ["models"]), root, out=out, rerun=flags)
    block = out.getvalue().split("!!!")[1].split("run record:")[0]
    assert code == exits.PASS
    want = f"harness answers --rerun {shlex.quote(ROW)} --full --threads 2 --project 'my proj'"
    assert f"    rerun the check alone: {want}" in block, block


def test_bench_s_block_escapes_a_hostile_row_in_its_command(tmp_path):
    import pathlib

    from harness.verdict.resultset import ResultSet

    rs = ResultSet(pathlib.Path(tmp_path / "x.json"), "m", "c" * 40, "e", None, {})
    rs.answers = {answerfacts.answer_row(HOSTILE): wrong(reproduce=None)}
    block = "\n".join(answers.problems(rs, ("--quick",)))
    # the title, the row, its command, the pointer to `harness answers`: one line each
    assert "\x1b" not in block and block.count("\n") == 3
    assert "rerun the check alone: harness answers --rerun $'" in block


# ---- the check alone -------------------------------------------------------------------------


def test_only_the_check_stops_after_the_check_even_through_except_exception():
    import torch

    from harness.measure import answers as measure_answers
    from harness.measure import timing

    calls = {"new": 0, "reference": 0, "swallowed": 0}
    x = torch.arange(8.0)

    def new():
        calls["new"] += 1
        return x * 2

    def reference():
        calls["reference"] += 1
        return x + x

    def track():
        try:
            return timing.measure_paired(
                new, reference, answer=measure_answers.allclose("2x vs x + x", no_fp64="test")
            )
        except Exception:  # a benchmark's own guard must not swallow the stop and time the row
            calls["swallowed"] += 1
            return [1.0]

    with measure_answers.only_the_check() as caught:
        track()
        calls["after"] = True  # never reached: the block ends at the check
    assert caught.reached and caught.answer.status == SAME and caught.error is None
    assert calls == {"new": 1, "reference": 1, "swallowed": 0}  # one call each: no warm-up
    assert not measure_answers._ONLY  # the block is left as it was found

    # a side that raises: the check's fail_to_run, with the error kept
    def broken():
        raise RuntimeError("no C++ compiler")

    with measure_answers.only_the_check() as caught:
        timing.measure_paired(broken, reference, answer=measure_answers.allclose("b", no_fp64="t"))
    assert caught.reached and caught.answer.status == FAIL_TO_RUN
    assert isinstance(caught.error, RuntimeError)


def test_outside_only_the_check_the_row_is_timed_as_before(monkeypatch):
    import torch

    from harness.measure import answers as measure_answers
    from harness.measure import timing

    monkeypatch.setenv("HARNESS_QUICK", "1")
    calls = []
    x = torch.arange(4.0)

    def side():
        calls.append(1)
        return x

    samples = timing.measure_paired(
        side, side, samples=3, warmup=1, answer=measure_answers.exact("x vs x")
    )
    assert len(samples) == 3 and len(calls) > 2  # the check, the warm-up, the timed rounds


def test_a_row_over_the_reference_workload_reaches_no_check():
    from harness.measure import answers as measure_answers

    def base():
        return None

    base.is_reference = True
    with measure_answers.only_the_check() as caught:
        measure_answers.before_timing(lambda: None, base)
    assert caught.reached and caught.answer is None


def test_the_rows_checked_where_they_are_timed_are_the_suites_setup_caches():
    """CHECKED_WHERE_TIMED (the verdict layer's list, for the hint) against the suites' source:
    every paired row of a class with a setup_cache (its own or inherited) is on it, and every
    entry of it names such a class."""
    from harness.measure.workloads import pairs

    def has_cache(node, classes) -> bool:
        if any(isinstance(f, ast.FunctionDef) and f.name == "setup_cache" for f in node.body):
            return True
        bases = [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in classes]
        return any(has_cache(classes[b], classes) for b in bases if b != node.name)

    cached: set[str] = set()
    for path in sorted((REPO / "suites" / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text())
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        cached |= {f"{path.stem}.{n}." for n, node in classes.items() if has_cache(node, classes)}
    assert "fusion.MemoryBandwidth." in cached  # the reading finds what it looks for
    paired = list(pairs.ROWS)
    for row in paired:
        assert row.startswith(tuple(cached)) == row.startswith(CHECKED_WHERE_TIMED), row
    for prefix in CHECKED_WHERE_TIMED:
        assert any(r.startswith(prefix) for r in paired), prefix


# ---- the command line ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--quick"], "--quick goes with --rerun ROW"),
        (["--device", "cuda"], "--device goes with --rerun ROW"),
        (["--rerun", CHAIN, "--bench", "x"], "leave out --bench"),
        (["--rerun", CHAIN, "--quick", "--full"], "--quick and --full exclude each other"),
        (["--rerun", CHAIN, "--threads", "0"], "thread count must be >= 1"),
    ],
)
def test_rerun_s_flags_are_checked_before_anything_runs(tmp_path, capsys, argv, said):
    code = main(["answers", "--results-dir", str(tmp_path), *argv])
    assert code == exits.BAD_INPUT and said in capsys.readouterr().err


# ---- .ci/gpu-check's answers step ---------------------------------------------------------------


def test_the_answers_step_is_opt_in_and_fits_a_call_of_its_own():
    from harness.runs import gpucheck
    from harness.runs.gpucheck import steps

    step = next(s for s in gpucheck.OPT_IN if s.name == "answers")
    assert "answers" in steps.STEPS and "answers" not in [s.name for s in gpucheck.PLAN]
    assert gpucheck.selected(None) == list(gpucheck.PLAN)  # the 8-minute plan is unchanged
    assert gpucheck.selected(["env", "answers"]) == [gpucheck.PLAN[0], step]
    # alone, with the wheels, within the deadline as every plan is
    assert step.budget_s + gpucheck.WHEELS_BUDGET_S + gpucheck.MARGIN_S <= gpucheck.DEADLINE_S
    assert step.cpu_budget_s + gpucheck.WHEELS_BUDGET_S <= gpucheck.REHEARSAL_DEADLINE_S
    text = gpucheck.dry_run_text()
    assert "- answers (budget 240 s, opt-in)" in text and "--only NAME" in text
    assert "gpu-check-step answers" in text and "--device cuda" in text
    with pytest.raises(BadInput, match="opt-in \\(--only NAME\\): answers"):
        gpucheck.selected(["nosuch"])


def test_the_answer_selection_names_paired_rows_the_suites_have():
    """Every regex of the step selects a paired row the suites declare (pairs.ROWS, held against
    the suites by tests/test_answers_suites.py), none checked only where it is timed."""
    from harness.measure.workloads import pairs
    from harness.runs.gpucheck import steps

    def found(regex: str) -> list[str]:
        return [
            b
            for b in pairs.ROWS
            if any(re.search(regex, b + params) for params in ("", "('x')", "('mlp')"))
        ]

    for regex in steps.ANSWER_ROWS + steps.REHEARSAL_ANSWER_ROWS:
        hits = found(regex)
        assert hits, regex
        assert not [b for b in hits if b.startswith(CHECKED_WHERE_TIMED)], regex
    on_gpu = {b for regex in steps.ANSWER_ROWS for b in found(regex)}
    assert "models.CudnnBenchmarkOnOverOff.track_cudnn_benchmark_on_over_off" in on_gpu
    assert not any(b.startswith("dataloader.") for b in on_gpu)
    words = steps.answers_command("cuda")
    assert words[:2] == ["harness", "answers"] and words[-3:] == ["--quick", "--device", "cuda"]
    assert words.count("--rerun") == len(steps.ANSWER_ROWS)


def _step(tmp_path, monkeypatch, make) -> dict:
    from harness.runs import gpucheck
    from harness.runs.gpucheck import steps

    seen = {}

    def rerun(project, request, say=None):
        seen["request"] = request
        return make(request)

    monkeypatch.setattr(answercheck, "rerun", rerun)
    ctx = gpucheck.Context(REPO, tmp_path / "out", tmp_path / "work", "cuda")
    ctx.out.mkdir()
    result = steps.step_answers(ctx)
    if "request" in seen:
        assert seen["request"].device == "cuda" and seen["request"].mode == "quick"
        assert seen["request"].patterns == steps.ANSWER_ROWS
    return result


def test_the_answers_step_passes_on_same_answers_and_lists_n_a(tmp_path, monkeypatch):
    def make(request):
        return Reran(
            [Rerun(CHAIN, same()), Rerun(f"{COMPILED}('mlp')", Answer(NOT_APPLICABLE, "w"))],
            "quick",
            1,
            "cuda",
            request.record,
        )

    result = _step(tmp_path, monkeypatch, make)
    assert result["status"] == "pass" and result["figures"]["counts"] == {SAME: 1, "n/a": 1}
    assert result["figures"]["rows"][CHAIN]["status"] == SAME
    assert json.loads((tmp_path / "out" / "answers.json").read_text())["exit"] == exits.PASS
    assert "answers --rerun: exit 0" in (tmp_path / "out" / "answers.txt").read_text()


def test_the_answers_step_fails_on_a_wrong_answer_and_keeps_its_reproduction(tmp_path, monkeypatch):
    from harness.measure import answers as measure_answers
    from harness.runs.gpucheck import steps

    def make(request):
        kept = request.record / measure_answers.REPRODUCE_DIR / measure_answers.REPRODUCE_FILE
        kept.parent.mkdir(parents=True)
        kept.write_bytes(b"pt")
        return Reran([Rerun(CHAIN, wrong())], "quick", 1, "cuda", request.record)

    result = _step(tmp_path, monkeypatch, make)
    assert result["status"] == "fail" and "exit 1" in result["detail"]
    assert (tmp_path / "out" / steps.ANSWERS_WRONG).read_bytes() == b"pt"
    assert result["figures"]["reproduce"] == steps.ANSWERS_WRONG


@pytest.mark.parametrize(
    "statuses, status",
    [((FAIL_TO_RUN,), "fail"), ((NOT_APPLICABLE,), "n/a"), ((None,), "fail")],
)
def test_the_answers_step_s_other_outcomes(tmp_path, monkeypatch, statuses, status):
    made = reran(*statuses)
    result = _step(tmp_path, monkeypatch, lambda request: made)
    assert result["status"] == status, result


def test_the_answers_step_fails_when_its_selection_is_bad_input(tmp_path, monkeypatch):
    def make(request):
        raise BadInput("no row zzz")

    result = _step(tmp_path, monkeypatch, make)
    assert result["status"] == "fail" and "no row zzz" in result["detail"]


@pytest.mark.slow  # one compile on the CPU: ~25 s on 2 cores
def test_cpu_rehearsal_of_the_answers_step(tmp_path):
    from test_gpucheck import _rehearse

    got = _rehearse(tmp_path, ["answers"])["answers"]
    assert got["status"] == "pass" and got["figures"]["exit"] == exits.PASS
    rows = got["figures"]["rows"]
    assert rows[CHAIN]["status"] == SAME
    assert {r["status"] for n, r in rows.items() if n.startswith("transfer.")} == {"n/a"}


# ---- end to end ------------------------------------------------------------------------------


def _rerun_cli(tmp_path: Path, noise: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(TMPDIR=str(tmp_path), HARNESS_TEST_ANSWER_NOISE=noise)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "answers", "--rerun", CHAIN, "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_the_real_command_reruns_a_fusion_row_s_check(tmp_path):
    """The compiled pointwise chain's check, in-process: same (exit 0, no record kept), then with
    noise of twice its tolerance on the compiled side: WRONG (exit 1), its reproduction kept."""
    clean = _rerun_cli(tmp_path)
    assert clean.returncode == exits.PASS, clean.stdout + clean.stderr
    assert f"{CHAIN}: same" in clean.stdout and "1 same" in clean.stdout
    assert "reproduce:" not in clean.stdout
    assert not list(tmp_path.glob("harness-answers-rerun-*"))  # nothing kept: removed

    noisy = _rerun_cli(tmp_path, r"PointwiseChain\.track_compiled_over_eager=2")
    assert noisy.returncode == exits.REGRESSION, noisy.stdout + noisy.stderr
    assert f"{CHAIN}: WRONG" in noisy.stdout and "answers --rerun: exit 1" in noisy.stdout
    kept = re.search(r"reproduce: (\S+first-wrong\.pt)", noisy.stdout)
    assert kept, noisy.stdout
    path = Path(kept[1])
    assert path.is_file() and path.is_relative_to(tmp_path)
    import torch

    saved = torch.load(path, weights_only=True)
    assert saved["row"] == CHAIN and saved["new"] and saved["reference"]
