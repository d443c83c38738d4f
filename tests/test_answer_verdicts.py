"""Answer rows in the verdicts (harness.verdict.answers): judged absolutely by the gate, counted
apart, the single-run form `harness answers`, and the views (bench's summary, report, advise).
Records are written by hand: an asv result set and the row facts an answer check leaves."""

from __future__ import annotations

import json
import math
import shlex

import pytest
from test_gate_support import draw, write_set

from harness.cli import main
from harness.core import answerfacts, exits, records
from harness.core.answerfacts import FAIL_TO_RUN, NOT_APPLICABLE, SAME, WRONG, Answer
from harness.verdict import answers, compare, gate, results

ROW = "models.CompiledOverEager.track_compiled_over_eager('fastpath')"
ANS = answerfacts.answer_row(ROW)
OTHER = "fusion.PointwiseChain.track_compiled_over_eager"
OTHER_ANS = answerfacts.answer_row(OTHER)
UNITS = {ROW: "ratio", OTHER: "ratio"}
WHAT = "torch.compile(model) vs eager, inference"
SOURCE = "torch._dynamo.utils.same's default tol=1e-4"


def same(value: float = 0.02) -> Answer:
    return Answer(
        SAME,
        WHAT,
        reason="1 output(s) within tolerance",
        value=value,
        output="output",
        outputs=1,
        max_abs=value * 1e-4,
        rtol=1e-4,
        atol=1e-4,
        tolerance_source=SOURCE,
    )


def wrong(reproduce: str | None = "answers/first-wrong.pt") -> Answer:
    return Answer(
        WRONG,
        WHAT,
        reason=(
            "output[0]: RMSE against float64 0.31, the reference side's 1.2e-07 (max |diff| 0.52)"
        ),
        value=5200.0,
        output="output[0]",
        outputs=2,
        max_abs=0.52,
        max_rel=0.3,
        cosine=0.97,
        fp64_error=0.31,
        fp64_error_reference=1.2e-7,
        rtol=1e-4,
        atol=1e-4,
        tolerance_source=SOURCE,
        reproduce=reproduce,
    )


def failed() -> Answer:
    return Answer(FAIL_TO_RUN, WHAT, reason="RuntimeError: no C++ compiler found")


def na(reason: str = "the model draws random numbers in eval mode") -> Answer:
    return Answer(NOT_APPLICABLE, WHAT, reason=reason)


def write_answers(folder, found: dict[str, Answer]) -> None:
    for row, a in found.items():
        records.write_row_facts(folder, answerfacts.answer_row(row), {"answer": a.to_facts()})


def one_set(tmp_path, name, commit, found: dict[str, Answer], timings=None, seed=1):
    """An asv results tree (the timed rows) and the answer rows' facts beside it."""
    timings = timings if timings is not None else {r: draw(30, seed=seed) for r in UNITS}
    path = write_set(tmp_path / name, commit, timings, units=UNITS)
    write_answers(tmp_path / name, found)
    return path


def gate_of(tmp_path, base: dict, head: dict, **kw) -> tuple[int, str, dict]:
    b = one_set(tmp_path, "base", "aaaaaaaa11", base, seed=1, **kw)
    h = one_set(tmp_path, "head", "bbbbbbbb22", head, seed=2, **kw)
    out = tmp_path / "gate.json"
    code = main(["gate", str(b), str(h), "--json", str(out)])
    return code, out.read_text(), json.loads(out.read_text())


def rows_of(data: dict) -> dict[str, dict]:
    return {r["name"]: r for r in data["rows"]}


# ---- reading ---------------------------------------------------------------------------------


def test_answer_facts_become_rows_of_the_result_set(tmp_path):
    path = one_set(tmp_path, "run", "a" * 10, {ROW: wrong(), OTHER: failed(), "x.Y.track_z": na()})
    rs = results.load(path)
    e = rs.entries[ANS]
    assert e.unit == answerfacts.UNIT == "error/tol" and e.value == 5200.0 and not e.failed
    assert rs.answers[ANS].output == "output[0]"
    assert rs.entries[OTHER_ANS].failed  # fail_to_run: a failed row, its reason the error
    assert rs.errors[OTHER_ANS] == "RuntimeError: no C++ compiler found"
    assert rs.entries[answerfacts.answer_row("x.Y.track_z")].skipped  # n/a: skipped
    assert rs.entries[ROW].unit == "ratio"  # the timed rows stay as they are


def test_an_exact_mismatch_reads_as_infinity_and_a_damaged_answer_is_bad_input(tmp_path):
    exact = Answer(WRONG, "copy", rule=answerfacts.EXACT, value=math.inf, output="output")
    path = one_set(tmp_path, "run", "a" * 10, {ROW: exact})
    assert results.load(path).entries[ANS].value == math.inf
    records.write_row_facts(tmp_path / "run", ANS, {"answer": {"status": "fine", "what": ""}})
    with pytest.raises(exits.BadInput, match=r"row-facts.*answer 'status' is not one of"):
        results.load(path)
    # a reproduction file outside the record is refused by name
    hostile = dataclass_replace(wrong(), reproduce="../../etc/passwd")
    records.write_row_facts(tmp_path / "run", ANS, {"answer": hostile.to_facts()})
    with pytest.raises(exits.BadInput, match="reproduction file"):
        results.load(path)


def dataclass_replace(a: Answer, **kw) -> Answer:
    import dataclasses

    return dataclasses.replace(a, **kw)


# ---- the gate --------------------------------------------------------------------------------


def test_a_wrong_answer_on_head_fails_the_gate_against_a_clean_base(tmp_path, capsys):
    code, _, data = gate_of(tmp_path, {ROW: same(), OTHER: same()}, {ROW: wrong(), OTHER: same()})
    out = capsys.readouterr().out
    assert code == exits.REGRESSION, out
    row = rows_of(data)[ANS]
    assert row["verdict"] == compare.WRONG and row["answer"] == WRONG
    assert row["answer_base"] == SAME
    note = row["note"]
    for said in (
        "output 'output[0]'",  # the output
        "max |diff| 0.52",  # the error
        "5.2e+03 x tolerance",
        "RMSE against float64 0.31",
        "cosine 0.970000",
        "rtol 0.0001, atol 0.0001",  # the tolerance
        SOURCE,  # and its source
        "answers/first-wrong.pt",  # the reproduction
        "torch.load(path, weights_only=True)",
        "harness answers --rerun ",  # the rerun of the check alone
        "track_compiled_over_eager",
    ):
        assert said in note, (said, note)
    assert "1 WRONG answer(s)" in out and ANS in out
    assert data["answers"] == {WRONG: 1, SAME: 1}
    # the timed rows keep their own verdicts and are counted as before
    assert rows_of(data)[ROW]["verdict"] in (compare.OK, compare.IMPROVED, compare.REGRESSION)
    assert data["judged"] == 2 and "answers: 1 WRONG, 1 same" in out


def test_the_rerun_command_names_the_timed_row_alone(tmp_path):
    import shlex

    code, _, data = gate_of(tmp_path, {ROW: same()}, {ROW: wrong()})
    note = rows_of(data)[ANS]["note"]
    cmd = note.split("rerun the check alone: ")[1].split("; base")[0]
    assert shlex.split(cmd)[:4] == ["harness", "answers", "--rerun", ROW]


def test_a_wrong_answer_fails_with_no_answer_rows_on_the_base(tmp_path):
    code, _, data = gate_of(tmp_path, {}, {ROW: wrong()})
    assert code == exits.REGRESSION
    row = rows_of(data)[ANS]
    assert row["verdict"] == compare.WRONG and "new row" in row["note"]


def test_a_wrong_answer_fails_whatever_the_base_says(tmp_path):
    code, _, data = gate_of(tmp_path, {ROW: wrong()}, {ROW: wrong()})
    assert code == exits.REGRESSION and rows_of(data)[ANS]["verdict"] == compare.WRONG


def test_an_answer_check_that_failed_to_run_is_a_failed_benchmark(tmp_path, capsys):
    code, _, data = gate_of(tmp_path, {ROW: same()}, {ROW: failed()})
    out = capsys.readouterr().out
    assert code == exits.FAILED
    row = rows_of(data)[ANS]
    assert row["verdict"] == compare.FAILED and "no C++ compiler" in row["note"]
    assert "1 FAILED" in out and "no C++ compiler" in out.split("gate: exit")[1]


def test_failed_beats_wrong_in_the_exit_code(tmp_path):
    code, _, _ = gate_of(tmp_path, {}, {ROW: wrong(), OTHER: failed()})
    assert code == exits.FAILED  # 3 > 2 > 1 > 6 > 0


def test_an_error_that_grew_tenfold_is_a_regression_within_tolerance(tmp_path):
    code, _, data = gate_of(tmp_path, {ROW: same(0.01)}, {ROW: same(0.5)})
    row = rows_of(data)[ANS]
    assert code == exits.REGRESSION and row["verdict"] == compare.REGRESSION
    assert "grew" in row["note"] and "still within its tolerance" in row["note"]
    # below the floor (0.1 in error/tol) growth is rounding: not a regression
    code, _, data = gate_of(tmp_path / "small", {ROW: same(0.001)}, {ROW: same(0.05)})
    assert code == exits.PASS and rows_of(data)[ANS]["verdict"] == compare.OK
    # a WRONG base fixed on head is an improvement
    code, _, data = gate_of(tmp_path / "fixed", {ROW: wrong()}, {ROW: same()})
    assert code == exits.PASS and rows_of(data)[ANS]["verdict"] == compare.IMPROVED


def test_a_base_without_answer_rows_judges_the_head_s_as_new_rows(tmp_path, capsys):
    code, _, data = gate_of(tmp_path, {}, {ROW: same(), OTHER: same()})
    out = capsys.readouterr().out
    assert code == exits.PASS, out
    row = rows_of(data)[ANS]
    assert row["verdict"] == compare.OK and "new row" in row["note"]
    assert compare.MISSING not in out and data["answers"] == {SAME: 2}


def test_an_answer_row_on_the_base_only_is_a_note_not_a_failure(tmp_path, capsys):
    code, _, data = gate_of(tmp_path, {ROW: same()}, {})
    assert code == exits.PASS  # the timed rows were judged; the answer row not
    row = rows_of(data)[ANS]
    assert row["verdict"] == compare.NOT_JUDGED and "base only" in row["note"]
    assert data["answers"] == {answers.BASE_ONLY: 1}
    assert "1 on the base only (not judged)" in capsys.readouterr().out


def test_n_a_is_not_judged_and_not_counted_as_judged(tmp_path, capsys):
    # no timed rows on either side: answer rows alone
    b = one_set(tmp_path, "base", "aaaaaaaa11", {}, timings={"x.Y.track_kernels": 3})
    h = one_set(tmp_path, "head", "bbbbbbbb22", {ROW: na()}, timings={"x.Y.track_kernels": 3})
    code = main(["gate", str(b), str(h), "--bench", "answer_"])
    out = capsys.readouterr().out
    assert code == exits.UNDECIDED, out  # nothing judged: never a pass
    assert "answer n/a: the model draws random numbers" in out
    assert "answers: 1 n/a (not judged)" in out
    # with a judged counter beside it: the counter passes, the n/a stays unjudged
    code = main(["gate", str(b), str(h)])
    out = capsys.readouterr().out
    assert code == exits.PASS and "1 judged (1 ok)" in out and "1 n/a (not judged)" in out


def test_the_summary_counts_answers_apart_from_timing_rows(tmp_path):
    rows = [
        compare.Row("t.ratio", "ratio", 1.0, 1.0, 1.0, compare.OK),
        compare.Row("t.rel", "relative", 1.0, 1.0, 1.0, compare.NOT_JUDGED, "raw time: x"),
    ]
    for i, status in enumerate([SAME] * 24 + [WRONG] + [NOT_APPLICABLE] * 2):
        verdict = {SAME: compare.OK, WRONG: compare.WRONG}.get(status, compare.NOT_JUDGED)
        rows.append(compare.Row(f"a.B.answer_{i}", "error/tol", 0, 0, None, verdict, answer=status))
    said = gate.tally(rows)
    assert said.startswith("1 judged (1 ok); 1 not judged")
    assert said.endswith("answers: 1 WRONG, 24 same, 2 n/a (not judged)")
    assert gate.exit_code(rows) == exits.REGRESSION


def test_a_run_compared_with_itself_stays_bad_input(tmp_path):
    path = one_set(tmp_path, "run", "a" * 10, {ROW: wrong()})
    assert main(["gate", str(path), str(path)]) == exits.BAD_INPUT


def test_bench_selects_answer_rows_like_any_row(tmp_path, capsys):
    b = one_set(tmp_path, "base", "aaaaaaaa11", {ROW: same()})
    h = one_set(tmp_path, "head", "bbbbbbbb22", {ROW: wrong()})
    assert main(["gate", str(b), str(h), "--bench", "^" + OTHER.replace(".", r"\.") + "$"]) == 0
    capsys.readouterr()
    code = main(["gate", str(b), str(h), "--bench", "answer_compiled_over_eager"])
    out = capsys.readouterr().out
    assert code == exits.REGRESSION and ANS in out and ROW not in out.split("gate:")[0]


def test_answer_rows_stand_right_after_their_timed_row(tmp_path):
    _, _, data = gate_of(tmp_path, {ROW: same(), OTHER: same()}, {ROW: same(), OTHER: same()})
    names = [r["name"] for r in data["rows"]]
    assert names.index(ANS) == names.index(ROW) + 1
    assert names.index(OTHER_ANS) == names.index(OTHER) + 1


def test_the_json_of_an_exact_mismatch_holds_no_infinity(tmp_path):
    exact = Answer(WRONG, "copy", rule=answerfacts.EXACT, value=math.inf, output="output")
    _, text, data = gate_of(tmp_path, {}, {ROW: exact})
    assert "Infinity" not in text and rows_of(data)[ANS]["head"] is None
    assert "not bit-identical" in rows_of(data)[ANS]["note"]


# ---- the single-run form: harness answers ----------------------------------------------------


def record(root, i: int, found: dict[str, Answer], timings=None, quick: bool = True):
    """A run record of machine m (a quick run) holding the timed rows and `found`'s answers;
    the models suite's benchmark takes a `model` parameter, as the real one does."""
    commit = f"{i:040x}"
    run_id = f"20261201T{i:02d}0000Z-{commit[:8]}"
    timings = timings if timings is not None else {r: draw(20, seed=i) for r in UNITS}
    meta = {"commit": commit, "quick": quick, "mode": "fast", "suites": ["fusion", "models"]}
    with records.writing(root, "m", run_id, meta) as d:
        write_set(d / "asv", commit, timings, machine="m", units=UNITS)
        bjson = d / "asv" / "benchmarks.json"
        known = json.loads(bjson.read_text())
        known[ROW.split("(")[0]] = {"name": ROW.split("(")[0], "param_names": ["model"]}
        bjson.write_text(json.dumps(known))
        write_answers(d, found)
    return root / "runs" / "m" / run_id


def answers_cli(capsys, root, *args) -> tuple[int, str, str]:
    code = main(["answers", *map(str, args), "--results-dir", str(root)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_answers_passes_a_run_whose_answers_are_the_same(tmp_path, capsys):
    root = tmp_path / "results"
    record(root, 1, {ROW: same(), OTHER: same(), "x.Y.track_z": na()})
    code, out, _ = answers_cli(capsys, root)
    assert code == exits.PASS, out
    assert "answers: exit 0 (pass); 2 same, 1 n/a" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "pass" in lines["fastpath"]  # the per-model column: the model's parameter
    assert "pass" in lines["fusion.PointwiseChain"]  # a benchmark without one: itself


def test_answers_exits_1_on_a_wrong_answer_naming_it(tmp_path, capsys):
    root = tmp_path / "results"
    rec = record(root, 1, {ROW: wrong(), OTHER: same()})
    out_json = tmp_path / "a.json"
    code, out, _ = answers_cli(capsys, root, rec.name, "--json", out_json)
    assert code == exits.REGRESSION, out
    assert f"WRONG {ANS}" in out and "max |diff| 0.52" in out
    assert str(rec / "answers" / "first-wrong.pt") in out
    # the run was quick: so is the rerun of its check
    assert f"harness answers --rerun {shlex.quote(ROW)} --quick" in out
    data = json.loads(out_json.read_text())
    assert data["exit"] == 1 and data["counts"] == {WRONG: 1, SAME: 1}
    models = {m["model"]: m["answer"] for m in data["models"]}
    assert models == {"fastpath": WRONG, "fusion.PointwiseChain": "pass"}
    row = next(r for r in data["rows"] if r["row"] == ANS)
    assert row["status"] == WRONG and row["timed_row"] == ROW and row["model"] == "fastpath"
    assert row["output"] == "output[0]" and "--rerun" in row["rerun"]


def test_answers_exits_2_on_an_answer_check_that_failed_to_run(tmp_path, capsys):
    root = tmp_path / "results"
    record(root, 1, {ROW: failed(), OTHER: wrong()})
    code, out, _ = answers_cli(capsys, root, "latest")
    assert code == exits.FAILED and "fail_to_run" in out and "no C++ compiler" in out


def test_answers_is_undecided_when_no_answer_was_judged(tmp_path, capsys):
    root = tmp_path / "results"
    record(root, 1, {ROW: na()})
    code, out, _ = answers_cli(capsys, root)
    assert code == exits.UNDECIDED and "no answer was judged" in out
    record(root, 2, {})  # a run made before answer checks
    code, out, _ = answers_cli(capsys, root)
    assert code == exits.UNDECIDED and "holds no answer rows" in out


def test_answers_selects_by_suite_and_bench_and_refuses_what_selects_nothing(tmp_path, capsys):
    root = tmp_path / "results"
    record(root, 1, {ROW: wrong(), OTHER: same()})
    assert answers_cli(capsys, root, "--suite", "fusion")[0] == exits.PASS
    # a pattern may name the timed row: its answer row is selected
    assert answers_cli(capsys, root, "--bench", r"^fusion\.")[0] == exits.PASS
    code, out, _ = answers_cli(capsys, root, "--bench", "track_compiled_over_eager\\('fast")
    assert code == exits.REGRESSION
    code, _, err = answers_cli(capsys, root, "--suite", "amp")
    assert code == exits.BAD_INPUT and "holds no answer row" in err and "fusion, models" in err
    code, _, err = answers_cli(capsys, root, "--bench", "nothing-like-it")
    assert code == exits.BAD_INPUT and "selects no answer row" in err


def test_answers_refuses_damaged_facts_naming_the_file(tmp_path, capsys):
    root = tmp_path / "results"
    rec = record(root, 1, {ROW: same()})
    path = records.row_facts_file(rec, ANS)
    data = json.loads(path.read_text())
    data["answer"]["value"] = "small"
    path.chmod(0o644)
    path.write_text(json.dumps(data))
    code, _, err = answers_cli(capsys, root)
    assert code == exits.BAD_INPUT and str(path) in err and "'value' is not a number" in err


def test_answers_markdown_escapes_what_the_record_says(tmp_path, capsys):
    root = tmp_path / "results"
    hostile = dataclass_replace(failed(), reason="<script>x</script> | `rm` [a](b)")
    record(root, 1, {ROW: hostile})
    md = tmp_path / "a.md"
    code, out, _ = answers_cli(capsys, root, "--markdown", md)
    text = md.read_text()
    assert code == exits.FAILED and "<script>" not in text and "&lt;script&gt;" in text
    assert "\\[a\\](b)" in text and " [a](b)" not in text  # no link: shown as text


# ---- the views: bench's summary, report, advise ----------------------------------------------


def test_bench_prints_wrong_answers_loudly_and_keeps_its_exit_code(tmp_path, capsys):
    import io

    from harness.runs import bench

    root = tmp_path / "results"
    rec = records.load_record(record(root, 1, {ROW: wrong(), OTHER: failed()}))
    out = io.StringIO()
    code = bench.report(bench.BenchRun(rec, 0, 1.0, ["fusion", "models"]), root, out=out)
    text = out.getvalue()
    assert code == exits.PASS, text  # the benchmarks ran: bench's code is theirs
    block = text[text.index("!!!") :]
    assert "1 WRONG answer(s) and 1 answer check(s) that failed to run" in block
    assert f"WRONG {ANS}: output 'output[0]'" in block and "rtol 0.0001" in block
    assert f"fail_to_run {OTHER_ANS}: RuntimeError: no C++ compiler found" in block
    assert f"harness answers {rec.run_id}" in block
    # the table's answer column
    table = text[: text.index("!!!")]
    assert "answer (error/tol)" in table
    assert "compiled/eager, pointwise chain" in table and "fail_to_run" in table
    # a run of paired rows beyond the key ratios (a project's own, the models suite alone)
    rec = records.load_record(record(root, 2, {ROW: wrong()}, timings={ROW: draw(20, seed=2)}))
    out = io.StringIO()
    bench.report(bench.BenchRun(rec, 0, 1.0, ["models"]), root, out=out)
    table = out.getvalue().split("!!!")[0]
    assert "paired ratios" in table and "WRONG 5.2e+03" in table, table


def test_bench_s_table_is_unchanged_without_answer_rows(tmp_path):
    import io

    from harness.runs import bench

    root = tmp_path / "results"
    rec = records.load_record(record(root, 1, {}))
    out = io.StringIO()
    bench.report(bench.BenchRun(rec, 0, 1.0, ["fusion", "models"]), root, out=out)
    assert "answer" not in out.getvalue().split("run record:")[0] and "!!!" not in out.getvalue()


def test_advise_never_recommends_a_tip_whose_answer_is_wrong(tmp_path, capsys):
    from test_advise import _ratios, write_run

    from harness.verdict import advice

    root = tmp_path / "results"
    no_grad = "training_loop.EvalForward.track_no_grad_over_grad_enabled"
    rec = write_run(root, {no_grad: (["model"], {("'mlp'",): _ratios(0.8)})})
    code = main(["advise", "--results-dir", str(root)])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("no_grad "))
    assert code == 0 and advice.HELPS in line  # 1.25x faster: helps
    write_answers(rec, {f"{no_grad}('mlp')": wrong()})
    out_json = tmp_path / "advice.json"
    code = main(["advise", "--results-dir", str(root), "--json", str(out_json)])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("no_grad "))
    assert code == 0 and advice.HELPS not in line.replace("would read helps", "")
    assert advice.NOT_RECOMMENDED in line and "would read helps" in line
    assert "WRONG answer: output 'output[0]'" in line and "rtol 0.0001" in line
    (tip,) = [t for t in json.loads(out_json.read_text())["tips"] if t["tip"] == "no_grad"]
    assert tip["lines"][0]["verdict"] == advice.NOT_RECOMMENDED
    assert tip["lines"][0]["answer"] == WRONG
    # an answer that could not be checked is not recommended either; a same one changes nothing
    write_answers(rec, {f"{no_grad}('mlp')": failed()})
    main(["advise", "--results-dir", str(root)])
    assert advice.NOT_CHECKED in capsys.readouterr().out
    write_answers(rec, {f"{no_grad}('mlp')": same()})
    main(["advise", "--results-dir", str(root)])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("no_grad "))
    assert advice.HELPS in line and "not recommended" not in line


def test_report_shows_answers_per_model_and_an_answer_column_escaped(tmp_path, capsys):
    root = tmp_path / "results"
    hostile = dataclass_replace(
        wrong(), reason="<img src=x onerror=alert(1)> | [click](http://x)", output="out|put"
    )
    record(root, 1, {ROW: hostile, OTHER: same()})
    out = tmp_path / "report"
    assert main(["report", "--results-dir", str(root), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    section = md[md.index("## Answers") :].split("\n## ")[0]
    assert "| fastpath " in section and f"| {WRONG} " in section  # the per-model column
    assert "| fusion.PointwiseChain | pass " in section.replace("  ", " ").replace("  ", " ")
    assert "<img" not in md and "&lt;img" in section
    assert "\\[click\\](" in section and " [click](" not in md  # no link: shown as text
    assert "out\\|put" in section  # a cell's pipe escaped: the table keeps its columns
    # the answer column in the suite's ratio table
    fusion = md[md.index("## fusion") :].split("\n## ")[0]
    assert "answer (error/tol)" in fusion and "same 0.02" in fusion


# ---- ab and bisect -----------------------------------------------------------------------------

CHECKED_SUITE = '''
import os, sys, types


class _Checked:
    """What harness.measure.answers keeps of a check (its LAST), as the row worker reads it."""

    def __init__(self, facts):
        self.facts = facts

    def to_facts(self):
        return self.facts


def _last():
    mod = sys.modules.setdefault("harness.measure.answers", types.ModuleType("answers"))
    if not hasattr(mod, "LAST"):
        mod.LAST = {}
    return mod.LAST


CALLS = []


def track_fast_over_slow():
    CALLS.append(1)
    # the head's faster side computes something else on its second call (a flaky miscompile)
    wrong = os.environ["SIDE"] == "head" and len(CALLS) == 2
    facts = {"status": "WRONG", "what": "fast vs slow", "value": 40.0, "output": "output"}
    same = {"status": "same", "what": "fast vs slow", "value": 0.01, "output": "output"}
    _last()["rows.track_fast_over_slow"] = _Checked(facts if wrong else same)
    return {"samples": [0.5, 0.52], "number": 1}


track_fast_over_slow.unit = "ratio"
'''


def test_ab_keeps_each_side_s_answer_beside_the_ratio(tmp_path):
    import os
    import pathlib
    import sys

    from harness.runs import ab, interleave

    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "__init__.py").write_text("")
    (bench / "rows.py").write_text(CHECKED_SUITE)
    root = pathlib.Path(__file__).resolve().parents[1]
    sides = [
        interleave.SideRun(
            label,
            sys.executable,
            dict(os.environ, SIDE=label, PYTHONPATH=str(root)),
            bench,
            "0" * 40,
            tmp_path / label,
        )
        for label in ("base", "head")
    ]
    files = interleave.run_pair(sides, r"^rows\.", "m1", work=tmp_path / "w", mode="fork")
    # the worst of the row's blocks: one WRONG among them is the row's answer
    kept = json.loads((tmp_path / "head" / interleave.ANSWERS_FILE).read_text())
    assert kept["rows.track_fast_over_slow"]["status"] == WRONG
    said = []
    for label, f in files.items():
        assert ab._keep_answers({"rows": [f]}, f.parent.parent, label, said.append) == 1
    out = gate.run_gate(str(files["base"]), str(files["head"]), history=False)
    names = [r.name for r in out.rows]
    row = out.rows[names.index("rows.answer_fast_over_slow")]
    assert names.index("rows.answer_fast_over_slow") == names.index("rows.track_fast_over_slow") + 1
    assert (row.answer_base, row.answer, row.verdict) == (SAME, WRONG, compare.WRONG)
    assert (row.base, row.head) == (0.01, 40.0)  # each side's error, beside the ratio row
    assert out.code == exits.REGRESSION and not said


def test_worst_answer_prefers_wrong_then_fail_to_run_then_the_larger_error():
    from harness.runs.interleave import worst_answer

    s1, s2 = {"status": SAME, "value": 0.1}, {"status": SAME, "value": 0.3}
    w, f, n = {"status": WRONG, "differs": True}, {"status": FAIL_TO_RUN}, {"status": "n/a"}
    assert worst_answer(None, s1) is s1 and worst_answer(s1, s2) is s2
    assert worst_answer(w, s2) is w and worst_answer(f, w) is w and worst_answer(n, f) is f
    assert worst_answer(s1, n) is s1 and worst_answer(s1, "junk") is s1


def test_bisect_names_the_commit_range_where_an_answer_changed(tmp_path, monkeypatch):
    from harness.core.exits import RunnerFailed
    from harness.runs import ab, bisect
    from harness.runs.spec import RunSpec

    row = "canary.Canary.track_fast_over_slow"
    good, c1, c2, c3, bad = (c * 40 for c in "abcde")
    spec = RunSpec(machine="m1-cpu", suites=("canary",))
    b = bisect.Bisect(
        pathlib_root(), tmp_path, good, bad, spec, pairs=ab.Pairs(), log=lambda m: None
    )

    def keep(commit, answer, role, against=None, base_run=None):
        run_id = records.new_run_id(commit, b.label)
        meta = {"commit": commit, "bisect": {**b.key, "role": role, "against": against}}
        with records.writing(tmp_path, "m1-cpu", run_id, meta) as staging:
            write_set(staging / "asv", commit, {"canary.Canary.track_ops": 10}, units={})
            write_answers(staging, {row: answer})
            if base_run:
                records.write_ab_pairs(staging, base_run, {}, {})
        return run_id

    g = keep(good, same(), "good")
    keep(bad, wrong(), "bad", base_run=g)
    keep(c1, same(), "step", against=g)
    keep(c3, wrong(), "step", against=g)

    def no_measuring(*args, **kw):
        raise RunnerFailed("asv saved nothing (a build that breaks)")

    monkeypatch.setattr(ab, "run", no_measuring)
    ends = b.ends()
    ans = answerfacts.answer_row(row)
    assert ends.decide == {ans: bisect.WORSE}  # the counter did not move; the answer did
    assert bisect.answer_changes(ends.rows, ends.decide) == [f"{ans}: answer same -> WRONG"]
    assert b.paired is False  # an answer decides in one process a commit
    # c2 cannot be measured: the answer changed somewhere in c2..c3
    found = bisect.search([c1, c2, c3, bad], lambda c: b.classify(c).verdict)
    assert found.first_bad is None and found.range == [c2, c3]
    # with c2 measured (the same answer), c3 is the commit
    keep(c2, same(), "step", against=g)
    found = bisect.search([c1, c2, c3, bad], lambda c: b.classify(c).verdict)
    assert found.first_bad == c3
    # a WRONG answer at both ends did not change between them: it decides nothing
    rows = [
        compare.Row(ans, "error/tol", 40, 40, None, compare.WRONG, answer=WRONG, answer_base=WRONG)
    ]
    assert bisect.decisive(rows) == {}


def pathlib_root():
    import pathlib

    return pathlib.Path(__file__).resolve().parents[1]


def test_an_answer_with_a_nan_figure_leaves_the_record_readable(tmp_path):
    # a float64 run that is NaN itself gives NaN RMSEs: the record must still read
    a = dataclass_replace(wrong(), fp64_error=math.nan, fp64_error_reference=math.nan)
    rs = results.load(one_set(tmp_path, "run", "a" * 10, {ROW: a}))
    assert rs.answers[ANS].status == WRONG and rs.answers[ANS].fp64_error is None


def test_merged_shards_keep_their_answers(tmp_path, capsys):
    from test_hostile_records import record as shard_record

    root = tmp_path / "results"
    one = shard_record(root, benches={ROW: draw(30)}, shard="1/2")
    two = shard_record(root, benches={OTHER: draw(30, seed=3)}, shard="2/2")
    write_answers(one.path, {ROW: wrong()})
    write_answers(two.path, {OTHER: same()})
    assert main(["merge", str(one.path), str(two.path), "--results-dir", str(root)]) == 0
    merged = next(r for r in records.list_runs(root) if r.meta.get("merged_from"))
    capsys.readouterr()
    assert main(["answers", merged.run_id, "--results-dir", str(root)]) == exits.REGRESSION
    assert "1 WRONG, 1 same" in capsys.readouterr().out
