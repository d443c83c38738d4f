"""Instruction counts on synthetic callgrind output: parsing, grouping, verdicts, explanations,
history steps, and n/a without valgrind. The real counter under valgrind is in
test_instructions_valgrind.py (a minute or more per valgrind process)."""

from __future__ import annotations

import json

import pytest
from test_gate_support import write_set

from harness.cli import main
from harness.core import records, settings
from harness.core.files import write_json_atomic
from harness.measure import callgrind, instructions
from harness.measure.workloads import NotApplicable
from harness.measure.workloads import instructions as wl
from harness.verdict import compare, functions, history

ROW = "instructions.InstructionsPerCall.track_instructions('mlp_inference')"
UNITS = {ROW: "instructions"}
FINGERPRINT = {
    "valgrind": "valgrind-3.19.0",
    "cpu_capability": "AVX2",
    "python": "CPython 3.11.7",
    "threads": 1,
    "torch": "2.14.1",
}

# Two dumps of the same workload (10 calls): the head's at::native::add_kernel does more work,
# and the eval loop calls itself (merged recursion level 'fn'2') and through a C function.
DUMP = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
desc: Trigger: Client Request: harness-0
summary: {total}
totals: {total}

ob=/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so
fl=???
fn=at::native::add_kernel(at::TensorIteratorBase&)
0 {add}
fn=at::native::mul_kernel(at::TensorIteratorBase&)
0 300000
ob=/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0
fl=ceval.c
fn=_PyEval_EvalFrameDefault
12 200000
cfn=_PyEval_EvalFrameDefault'2
calls=10 12
12 50000
cob=/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so
cfn=at::native::add_kernel(at::TensorIteratorBase&)
calls=10 0
0 {add}
fn=_PyEval_EvalFrameDefault'2
12 50000
ob=/tmp/harness-inductor-cache-x/ab/cabcdef.so
fn=cpp_fused_cos_0
0 40000
ob=/usr/lib/x86_64-linux-gnu/libc.so.6
fn=malloc
0 {malloc}
"""


def write_dump(path, add=400_000, malloc=10_000):
    total = add + 300_000 + 250_000 + 40_000 + malloc
    path.write_text(DUMP.format(add=add, malloc=malloc, total=total))
    return path


def test_parse_self_and_inclusive_counts_groups_and_top_functions(tmp_path):
    dump = callgrind.parse(write_dump(tmp_path / "cg.1.1"))
    assert dump.trigger == "harness-0" and dump.total == 1_000_000
    py = ("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0", "_PyEval_EvalFrameDefault")
    assert dump.self_counts[py] == 250_000  # both recursion levels, merged
    # the call to itself is in its self count already; the call to add_kernel is added once
    assert dump.inclusive[py] == 250_000 + 400_000
    s = callgrind.summarize(
        [dump], calls=10, top=3, kernel_dirs=("/tmp/harness-inductor-cache-x",), overhead=1000
    )
    assert s["per_call"] == (1_000_000 - 1000) / 10 and s["layouts"] == [s["per_call"]]
    assert s["groups"] == {
        "libtorch": 70_000.0,
        "python": 25_000.0,
        "inductor kernel": 4000.0,
        "other": 1000.0,
    }
    assert [f["function"] for f in s["functions"]] == [
        "libtorch_cpu.so:at::native::add_kernel(at::TensorIteratorBase&)",
        "libtorch_cpu.so:at::native::mul_kernel(at::TensorIteratorBase&)",
        "libpython3.11.so.1.0:_PyEval_EvalFrameDefault",
    ]
    assert s["functions_total"] == 5
    # two memory layouts: their mean, per function too
    other = callgrind.parse(write_dump(tmp_path / "cg.2.1", add=410_000))
    both = callgrind.summarize([dump, other], calls=10, top=1, overhead=1000)
    assert both["layouts"] == [99_900.0, 100_900.0] and both["per_call"] == 100_400.0
    assert both["functions"][0]["self"] == 40_500.0
    assert (
        callgrind.function_key(
            "/tmp/torchinductor_root/xy/c123.so",
            "kernel",
            callgrind.group_of("/tmp/torchinductor_root/xy/c123.so"),
        )
        == "<inductor>:kernel"
    )


def summary(per_call: float, add: float) -> dict:
    return {
        "per_call": per_call,
        "groups": {"libtorch": add + 30_000, "python": 25_000},
        "functions": [
            {
                "function": "libtorch_cpu.so:at::native::add_kernel(at::TensorIteratorBase&)",
                "group": "libtorch",
                "self": add,
                "inclusive": add,
            },
            {
                "function": "libtorch_cpu.so:at::native::mul_kernel(at::TensorIteratorBase&)",
                "group": "libtorch",
                "self": 30_000.0,
                "inclusive": 30_000.0,
            },
        ],
    }


def write_side(root, commit, per_call, add, fingerprint=FINGERPRINT):
    """An asv result set with one instruction row and its stored per-function summary."""
    path = write_set(root, commit, {ROW: per_call}, units=UNITS)
    record = {"schema": 1, "fingerprint": fingerprint, "rows": {ROW: summary(per_call, add)}}
    (root / records.INSTRUCTIONS).mkdir(exist_ok=True)
    (root / records.INSTRUCTIONS / "instructions.InstructionsPerCall.json").write_text(
        json.dumps(record)
    )
    return path


def gate(capsys, *args):
    code = main(["gate", *map(str, args)])
    return code, capsys.readouterr().out


def test_an_instruction_row_beyond_its_tolerance_is_a_regression_named_by_function(
    tmp_path, capsys
):
    b = write_side(tmp_path / "b", "aaaaaaaa11", 100_000, 40_000)
    h = write_side(tmp_path / "h", "bbbbbbbb22", 101_200, 41_200)
    code, out = gate(capsys, b, h)
    assert code == 1, out
    line = next(x for x in out.splitlines() if x.startswith(ROW))
    assert "REGRESSION" in line and "+1.20% (+1,200/call)" in line
    assert "at::native::add_kernel +1.2k/call (+3.0%)" in line  # where the cost went
    # the same change within a wider tolerance passes; one below the default too
    assert gate(capsys, b, h, "--instruction-tolerance", "0.02")[0] == 0
    h2 = write_side(tmp_path / "h2", "cccccccc33", 100_300, 40_300)
    code, out = gate(capsys, b, h2)
    assert code == 0 and "+0.30%" in out and "REGRESSION" not in out


def test_fewer_instructions_are_an_improvement_and_exit_0(tmp_path, capsys):
    b = write_side(tmp_path / "b", "aaaaaaaa11", 100_000, 40_000)
    h = write_side(tmp_path / "h", "bbbbbbbb22", 90_000, 30_000)
    code, out = gate(capsys, b, h)
    assert code == 0 and compare.IMPROVED in out and "add_kernel -10k/call (-25.0%)" in out


def test_counts_from_another_valgrind_or_cpu_capability_are_not_compared(tmp_path, capsys):
    b = write_side(tmp_path / "b", "aaaaaaaa11", 100_000, 40_000)
    h = write_side(
        tmp_path / "h",
        "bbbbbbbb22",
        150_000,
        90_000,
        dict(FINGERPRINT, valgrind="valgrind-3.22.0", cpu_capability="AVX512"),
    )
    code, out = gate(capsys, b, h)
    line = next(x for x in out.splitlines() if x.startswith(ROW))
    assert code == 6 and compare.NOT_JUDGED in line and "not comparable" in line
    assert (
        "valgrind valgrind-3.19.0 vs valgrind-3.22.0" in line
        and "cpu_capability AVX2 vs AVX512" in line
    )
    # another torch is what ab compares: not a reason
    h2 = write_side(
        tmp_path / "h2", "cccccccc33", 150_000, 90_000, dict(FINGERPRINT, torch="2.15.0")
    )
    assert gate(capsys, b, h2)[0] == 1


def test_a_count_without_its_fingerprint_is_not_compared(tmp_path, capsys):
    b = write_set(tmp_path / "b", "aaaaaaaa11", {ROW: 100_000}, units=UNITS)
    h = write_side(tmp_path / "h", "bbbbbbbb22", 150_000, 90_000)
    code, out = gate(capsys, b, h)
    assert code == 6 and "no instruction fingerprint on base" in out


def test_explanation_ranks_by_self_delta_and_marks_one_sided_functions():
    b, h = summary(100_000, 40_000), summary(120_000, 50_000)
    h["functions"].insert(
        0,
        {"function": "libc.so.6:memcpy", "group": "other", "self": 10_000.0, "inclusive": 10_000.0},
    )
    # base lists every function it ran (functions_total): memcpy was not called there
    b["functions_total"] = len(b["functions"])
    ch = functions.changes(b, h)
    assert ch[0].function == "libc.so.6:memcpy" and not ch[0].partial and ch[0].delta == 10_000
    add = "at::native::add_kernel +10k/call (+25.0%)"
    assert functions.explain(b, h) == f"memcpy +10k/call (new); {add}"
    # a list cut at 30k: memcpy may have run just below it on base; what is sure ranks it
    b["functions_total"] = 900
    ch = functions.changes(b, h)
    assert [functions.short_name(c.function) for c in ch[:2]] == [add.split()[0], "memcpy"]
    assert ch[1].partial and ch[1].sure == 0 and ch[1].delta == 10_000
    assert functions.explain(b, h, top=2) == (
        f"{add}; memcpy +0..+10k/call (outside base's top functions)"
    )
    h["functions"][0]["self"] = 45_000.0  # its sure part, 15k, now the largest
    assert functions.explain(b, h, top=1) == (
        "memcpy +15k..+45k/call (outside base's top functions)"
    )
    assert (
        functions.short_name(
            "libtorch_cpu.so:void at::native::(anonymous namespace)::f<float>(int)"
        )
        == "void at::native::(anonymous namespace)::f<float>"
    )


def test_rows_are_na_with_the_install_command_without_valgrind(monkeypatch, tmp_path):
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    monkeypatch.setenv(instructions.RECORD_ENV, str(tmp_path))
    assert "apt-get install valgrind" in instructions.unavailable()
    counts = instructions.count_rows(
        [instructions.Target(ROW, "harness.measure.workloads.instructions", "mlp_inference")]
    )
    with pytest.raises(NotApplicable, match="valgrind not found on PATH"):
        instructions.row_value(counts, ROW)
    # the run record says it too: bench's table and the gate's note show the command
    assert "apt-get install valgrind" in records.read_not_counted(tmp_path)[ROW]
    with pytest.raises(NotApplicable, match="not selected"):
        instructions.row_value(
            counts, "instructions.InstructionsPerCall.track_instructions('other')"
        )
    with pytest.raises(RuntimeError, match="boom"):
        instructions.row_value({ROW: {"failed": "boom"}}, ROW)


def test_rows_are_na_with_the_install_command_without_a_c_compiler(monkeypatch, tmp_path):
    real = instructions.shutil.which
    monkeypatch.setattr(
        instructions.shutil, "which", lambda name: None if name in ("gcc", "cc") else real(name)
    )
    if real("valgrind") is None:
        pytest.skip("valgrind is not installed here: its own message comes first")
    monkeypatch.setenv(instructions.RECORD_ENV, str(tmp_path))
    counts = instructions.count_rows(
        [instructions.Target(ROW, "harness.measure.workloads.instructions", "mlp_inference")]
    )
    with pytest.raises(NotApplicable, match=r"no C compiler \(gcc\).*`apt-get install gcc`"):
        instructions.row_value(counts, ROW)
    assert "apt-get install gcc" in records.read_not_counted(tmp_path)[ROW]


def test_selection_by_key_and_by_the_runs_bench_regexes_and_unknown_workloads(monkeypatch):
    def target(key):
        return instructions.Target(wl.row(key), wl.SOURCE, key, key)

    keys = ["mlp_inference", "resnet18_inference", "word_lm_inference"]
    monkeypatch.setenv(instructions.SELECT_ENV, "mlp_inference, word_lm_inference")
    assert [t.key for t in instructions.selected([target(k) for k in keys])] == [
        "mlp_inference",
        "word_lm_inference",
    ]
    monkeypatch.delenv(instructions.SELECT_ENV)
    # a --bench regex with a comma (one per line, as the run passes them)
    monkeypatch.setenv(
        settings.INSTRUCTION_BENCH.name, "track_instructions\\('(mlp|resnet18)_inference'\\)\nx,y"
    )
    assert [t.key for t in instructions.selected([target(k) for k in keys])] == [
        "mlp_inference",
        "resnet18_inference",
    ]
    with pytest.raises(KeyError, match="unknown instruction workload 'nope'"):
        instructions.workload_of(
            instructions.Target(ROW, "harness.measure.workloads.instructions", "nope")
        )


def test_history_steps_on_a_lasting_change_beyond_the_tolerance_only():
    flat = [100_000.0, 100_020.0, 99_990.0, 100_010.0] * 2
    assert history.find_steps(flat + [100_040.0] * 8, True, 0, tolerance=0.005) == []
    steps = history.find_steps(flat + [101_500.0] * 8, True, 0, tolerance=0.005)
    assert [(s["index"], s["status"]) for s in steps] == [(8, history.CONFIRMED)]
    assert history.find_steps(flat + [101_500.0] + flat, True, 0, tolerance=0.005) == []


def test_history_names_the_functions_behind_an_instruction_step(tmp_path, capsys):
    root = tmp_path / "results"
    for i in range(8):
        commit = f"{i:040x}"
        run_id = f"20261201T00{i:02d}00Z-{commit[:8]}"
        per_call, add = (100_000, 40_000) if i < 4 else (102_000, 42_000)
        with records.writing(root, "m1-cpu", run_id, {"commit": commit}) as d:
            write_side(d / "asv", commit, per_call, add)
            (d / records.INSTRUCTIONS).mkdir()
            (d / "asv" / records.INSTRUCTIONS / "instructions.InstructionsPerCall.json").rename(
                d / records.INSTRUCTIONS / "instructions.InstructionsPerCall.json"
            )
    assert main(["history", "--results-dir", str(root), "--min-side", "4"]) == 1
    out = capsys.readouterr().out
    assert "instructions: 100,000 in 4 runs before, 102,000 in 4 after (+2.00%" in out
    assert (
        "functions whose self counts changed most: at::native::add_kernel +2k/call (+5.0%)" in out
    )
    assert "self instructions per call by library: libtorch +2,000" in out


def test_ab_runs_instruction_rows_apart_from_the_pairs():
    import re

    from harness.runs import ab

    only = re.compile(ab.suite_regex("canary", [], "instructions"))
    rest = re.compile(ab.suite_regex("canary", ["Canary"], "timing"))
    names = [
        "canary.Canary.track_instructions",
        "canary.Canary.track_time",
        "fusion.X.track_instructions",
    ]
    assert [n for n in names if only.search(n)] == ["canary.Canary.track_instructions"]
    assert [n for n in names if rest.search(n)] == ["canary.Canary.track_time"]


def test_spread_layouts_widen_the_tolerance_and_say_so(tmp_path, capsys):
    def side(root, commit, per_call, layouts):
        path = write_side(root, commit, per_call, 40_000)
        f = root / records.INSTRUCTIONS / "instructions.InstructionsPerCall.json"
        data = json.loads(f.read_text())
        data["rows"][ROW]["layouts"] = layouts
        f.write_text(json.dumps(data))
        return path

    b = side(tmp_path / "b", "aaaaaaaa11", 100_000, [99_000, 100_000, 101_000])
    h = side(tmp_path / "h", "bbbbbbbb22", 101_200, [100_200, 101_200, 102_200])
    code, out = gate(capsys, b, h)
    line = next(x for x in out.splitlines() if x.startswith(ROW))
    # a 1% layout spread: 3 standard errors of the difference are ~2.5%, so +1.2% is not a change
    assert code == 0 and "memory layouts' standard error" in line, line
    tight = side(tmp_path / "t", "cccccccc33", 101_200, [101_190, 101_200, 101_210])
    base = side(tmp_path / "b2", "dddddddd44", 100_000, [99_990, 100_000, 100_010])
    assert gate(capsys, base, tight)[0] == 1  # tight layouts: the default tolerance stands


def test_merge_joins_the_shards_instruction_records(tmp_path):
    from harness.runs import merge

    recs = []
    for i, row in enumerate([ROW, ROW.replace("mlp_inference", "word_lm_inference")]):
        d = tmp_path / f"shard{i}"
        (d / records.INSTRUCTIONS).mkdir(parents=True)
        (d / records.INSTRUCTIONS / "instructions.InstructionsPerCall.json").write_text(
            json.dumps(
                {"schema": 1, "fingerprint": FINGERPRINT, "rows": {row: summary(1000.0 + i, 10.0)}}
            )
        )
        recs.append(records.RunRecord(d, {}))
    staging = tmp_path / "merged"
    for rel, data in merge._operator_files(recs).items():
        write_json_atomic(staging / rel, data)
    joined = records.read_instructions(staging)
    assert set(joined) == {ROW, ROW.replace("mlp_inference", "word_lm_inference")}
    assert joined[ROW]["fingerprint"] == FINGERPRINT
