"""Instruction rows beyond the built-in workloads, without valgrind: every registered model's
rows (inference, training step, an opt-in compile row), the opt-out, the counting plan, a
project's own rows from its benchmark modules, why a row is not counted, faults told apart, and
what the gate says of rows it does not judge. The counts themselves: test_instructions_valgrind
(slow tier)."""

from __future__ import annotations

import os
import re
import signal

import pytest
from test_gate_support import write_set

from harness.cli import main
from harness.core import exits, settings, zoo
from harness.measure import instructions
from harness.measure.workloads import instructions as wl
from harness.verdict import compare, instead

ROW = wl.row


def _register(name, **kw):
    return zoo.register_model(
        name,
        build=lambda cfg: zoo.get_model("mlp").build_fn(zoo.get_model("mlp").config("small")),
        inputs=zoo.get_model("mlp").inputs_fn,
        small=dict(zoo.get_model("mlp").small),
        full=dict(zoo.get_model("mlp").small),
        **kw,
    )


def test_every_registered_model_has_inference_and_training_rows_and_opt_in_compile_rows(
    clean_registry,
):
    _register("mine")
    _register("big", instructions="one call takes minutes under valgrind")
    _register("compiled", compile_instructions=True)
    _register("compiled_late", compile_instructions="full")
    keys = wl.keys()
    # the zoo's rows keep their names; every model gets both rows, compile rows where opted in
    for name in zoo.model_names():
        assert f"{name}_inference" in keys and f"{name}_training_step" in keys
    assert "mlp_compile" in keys and "alexnet_compile" in keys and "mine_compile" not in keys
    assert {"compiled_compile", "compiled_late_compile"} <= set(keys)
    assert "pointwise_chain_compiled" in keys  # the built-in workloads, in this repository
    big = wl.workload("big_inference")
    assert big.skip == "big is not counted: one call takes minutes under valgrind"
    assert wl.workload("big_training_step").skip == big.skip
    assert wl.workload("compiled_compile").full_only == ""
    assert wl.workload("compiled_late_compile").full_only.startswith("full runs only")
    assert wl.workload("compiled_compile").inject is wl.inside_compile
    assert wl.workload("mine_inference").inject is None
    with pytest.raises(KeyError, match="unknown instruction workload 'nope_inference'"):
        wl.workload("nope_inference")


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"instructions": False}, "instructions= is True"),
        ({"instructions": "  "}, "instructions= is True"),
        ({"compile_instructions": "yes"}, "compile_instructions= is False, True or 'full'"),
    ],
)
def test_a_bad_instruction_option_is_refused_at_registration(clean_registry, kw, message):
    with pytest.raises(ValueError, match=message):
        _register("bad", **kw)


def test_a_models_plan_comes_from_its_flops_and_the_zoos_rows_keep_theirs(clean_registry):
    assert wl.model_plan("mlp", "inference")["layouts"] == (6, 12)  # measured, kept
    assert wl.model_plan("resnet18", "inference")["calls"] == 1
    _register("light")
    assert wl.inference_flops("light") < wl.HEAVY_FLOPS
    assert {k: v for k, v in wl.model_plan("light", "training_step").items() if k != "cost"} == (
        wl.LIGHT
    )
    # a heavy model's calls are kernels: one counted call, fewer layouts; the zoo's ResNet-18
    # has one call too, by its own plan (and its FLOPs say the same)
    assert wl.inference_flops("resnet18") >= wl.HEAVY_FLOPS
    planned = wl.planned(wl.workload("light_inference"))
    assert (planned.calls, planned.warmup, planned.layouts) == (5, 10, (3, 8))


def test_rows_not_counted_here_say_why_and_start_no_valgrind(clean_registry, monkeypatch):
    def never_built(cfg):  # an opted-out model is not run at all, not even for its plan
        raise AssertionError("an opted-out model was built")

    zoo.register_model(
        "big",
        build=never_built,
        inputs=zoo.get_model("mlp").inputs_fn,
        small=dict(zoo.get_model("mlp").small),
        full=dict(zoo.get_model("mlp").small),
        instructions="too big",
    )
    monkeypatch.delenv(settings.FULL.name, raising=False)
    targets = [
        instructions.Target(ROW(k), wl.SOURCE, k, k)
        for k in ("big_inference", "alexnet_compile", "mlp_inference")
    ]
    todo, failed, not_counted = instructions._plans(targets)
    assert [t.key for t, _ in todo] == ["mlp_inference"] and not failed
    assert not_counted[ROW("big_inference")] == "big is not counted: too big"
    assert not_counted[ROW("alexnet_compile")] == (
        "full runs only: a compile costs 178-486 s under valgrind on a busy 2-core runner"
    )
    monkeypatch.setenv(settings.FULL.name, "1")
    todo, _, not_counted = instructions._plans(targets)
    assert [t.key for t, _ in todo] == ["alexnet_compile", "mlp_inference"]
    counts = {ROW("big_inference"): {"n/a": "big is not counted: too big"}}
    from harness.measure.workloads import NotApplicable

    with pytest.raises(NotApplicable, match="too big"):
        instructions.row_value(counts, ROW("big_inference"))


def test_a_projects_benchmark_module_adds_rows_to_the_counter(
    tmp_path, monkeypatch, capsys, clean_registry
):
    import sys

    project = tmp_path / "proj"
    monkeypatch.setitem(sys.modules, "models", None)  # the project's, imported below, then gone
    del sys.modules["models"]
    assert main(["init", str(project)]) == exits.PASS
    capsys.readouterr()
    (project / "benchmarks" / "broken.py").write_text("raise ImportError('no such thing')\n")
    monkeypatch.setenv(settings.OWN_MODELS.name, "1")
    monkeypatch.setenv(settings.PROJECT.name, str(project))
    monkeypatch.syspath_prepend(str(project))  # ASV_PYTHONPATH, in a benchmark process
    rows = wl.project_rows()
    assert [(r.key, r.name) for r in rows] == [("tiny_cnn.forward", "forward")]
    assert rows[0].source == str(project / "benchmarks" / "tiny_cnn.py")
    assert "cannot import" in capsys.readouterr().err  # said, not silent
    target = instructions.Target(ROW(rows[0].key), rows[0].source, rows[0].name, rows[0].key)
    w = instructions.workload_of(target)
    assert isinstance(w, wl.InstructionWorkload)
    assert w.build(tmp_path)().shape == (8, 10)  # the factory builds the call it counts
    # a table that is not one fails its own rows, never the run's other rows
    bad = project / "benchmarks" / "bad_table.py"
    bad.write_text("INSTRUCTION_WORKLOADS = {'x': 1}\n")
    other = project / "benchmarks" / "not_a_table.py"
    other.write_text("INSTRUCTION_WORKLOADS = [1]\n")
    rows = {r.key: r for r in wl.project_rows()}
    assert set(rows) == {"bad_table.x", "not_a_table.INSTRUCTION_WORKLOADS", "tiny_cnn.forward"}
    targets = [instructions.Target(ROW(r.key), r.source, r.name, r.key) for r in rows.values()]
    todo, failed, _ = instructions._plans(targets)
    assert [t.key for t, _ in todo] == ["tiny_cnn.forward"]
    assert failed[ROW("bad_table.x")] == (
        f"TypeError: {bad}: INSTRUCTION_WORKLOADS['x'] is a int, not an InstructionWorkload "
        "(a dict of name -> harness.instructions.InstructionWorkload: docs/own-project.md)"
    )
    assert (
        "INSTRUCTION_WORKLOADS is a list, not a dict"
        in failed[ROW("not_a_table.INSTRUCTION_WORKLOADS")]
    )


def test_a_dead_counting_child_is_told_apart_by_how_it_ended():
    task = {"key": "w", "layout": 1, "timeout_s": 30}
    killed = lambda sig: sig & 0x7F  # noqa: E731 (a wait status: ended by a signal)
    assert instructions._death(task, killed(signal.SIGALRM)) == (
        "the counting child (w, layout 1) ran past its time limit of 30 s and was ended"
    )
    assert "crashed under valgrind (SIGSEGV)" in instructions._death(task, killed(signal.SIGSEGV))
    assert "exited with 3" in instructions._death(task, 3 << 8)
    assert instructions._death(task, None).endswith("died before writing its result")
    assert os.WIFSIGNALED(killed(signal.SIGALRM))


def test_a_compile_rows_own_tolerance_and_a_wide_aa_spread_say_so():
    fp = {"valgrind": "v", "cpu_capability": "AVX2", "python": "p", "threads": 1}
    info = ({"fingerprint": fp, "tolerance": 0.01}, {"fingerprint": fp, "tolerance": 0.01})
    row = compare._instructions("r", "instructions", 100.0, 100.8, 1.008, 0.005, info)
    assert row.verdict == compare.OK and "tolerance 1.00% (the row's own" in row.note
    row = compare._instructions("r", "instructions", 100.0, 101.2, 1.012, 0.005, info)
    assert row.verdict == compare.REGRESSION
    # a calibrated A/A spread above the tolerance: judged at the spread, and said
    row = compare._instructions("r", "instructions", 100.0, 101.2, 1.012, 0.005, info, band=0.02)
    assert row.verdict == compare.OK
    assert "calibrated A/A spread 2.00% exceeds the tolerance 1.00%" in row.note
    # another inductor instruction set: not comparable
    other = ({"fingerprint": {**fp, "inductor_vec_isa": "avx2"}}, {"fingerprint": fp})
    row = compare._instructions("r", "instructions", 100.0, 100.0, 1.0, 0.005, other)
    assert row.verdict == compare.NOT_JUDGED and "inductor_vec_isa avx2 vs None" in row.note


def test_the_gate_names_what_would_judge_a_row_it_does_not_judge():
    rows = [
        compare.Row(
            "models.Inference.track_inference_time('tiny', False, False)",
            "seconds",
            1.0,
            1.9,
            1.9,
            compare.NOT_JUDGED,
            "raw time: no calibrated noise band",
        ),
        compare.Row(
            "models.TrainingStep.track_step_time('other', False, False)",
            "seconds",
            1.0,
            1.0,
            1.0,
            compare.NOT_JUDGED,
            "raw time: no calibrated noise band",
        ),
        compare.Row(
            "fusion.PointwiseChain.track_compile_time",
            "seconds",
            1.0,
            1.0,
            1.0,
            compare.NOT_JUDGED,
            "raw time: no calibrated noise band",
        ),
        compare.Row(
            "models.Inference.track_inference_time('tiny', False, True)",  # channels_last
            "seconds",
            1.0,
            1.0,
            1.0,
            compare.NOT_JUDGED,
            "raw time: no calibrated noise band",
        ),
        compare.Row(
            "models.Inference.track_inference_time('mine', False, False)",
            "seconds",
            1.0,
            1.0,
            1.0,
            compare.NOT_JUDGED,
            "raw time: no calibrated noise band",
        ),
        compare.Row(ROW("tiny_inference"), "instructions", 1.0, 1.0, 1.0, compare.OK, "x"),
        compare.Row(ROW("mlp_compile"), "instructions", 1.0, 1.0, 1.0, compare.OK, "x"),
        compare.Row("x.Y.track_ratio", "ratio", 1.0, 1.0, 1.0, compare.OK, "paired"),
    ]
    # both sides hold mine_inference, which a --bench selection left out of the rows
    held = {r.name for r in rows} | {ROW("mine_inference")}
    notes = [r.note for r in instead.annotate(rows, compare.NOT_JUDGED, held)]
    assert notes[0] == (
        "raw time: no calibrated noise band; judged instead by its instruction row "
        f"'tiny_inference' (ok), or {instead.OTHERS}"
    )
    assert "'other_training_step' (instructions suite, not in this run)" in notes[1]
    # the pointwise chain's compile is no model's: mlp_compile counts another program
    assert notes[2] == f"raw time: no calibrated noise band; judged instead by {instead.OTHERS}"
    # the instruction row counts the model as built (contiguous), not in channels_last
    assert notes[3] == notes[2]
    assert "its instruction row 'mine_inference' (not selected by --bench)" in notes[4]
    assert notes[5:] == ["x", "x", "paired"]  # judged rows keep their notes
    assert instead.compile_key("fusion.X.track_compile_time('mlp')") == "mlp_compile"


def test_a_project_workload_names_the_timing_rows_it_judges():
    from harness.measure import instructions
    from harness.measure.workloads.instructions import InstructionWorkload

    def build(folder):
        return lambda: None

    w = InstructionWorkload("forward", build, times="Inference.track_forward_time")
    assert w.times == ("Inference.track_forward_time",)
    with pytest.raises(TypeError, match="'forward': times must name timing rows"):
        InstructionWorkload("forward", build, times=(len,))
    # kept in the row's summary under the module's asv name
    assert instructions._timing_rows("/p/benchmarks/mine.py", w.times) == [
        "mine.Inference.track_forward_time"
    ]
    # the gate reads it from either side's summaries; the head's declaration wins
    base = {ROW("mine.old"): {"workload": "mine.old", "times": ["mine.A.track_t"]}}
    head = {
        ROW("mine.fwd"): {"workload": "mine.fwd", "times": ["mine.A.track_t", "mine.B.track_u"]},
        ROW("mlp_inference"): {"workload": "mlp_inference"},
    }
    own = instead.declared(base, head)
    assert own == {"mine.A.track_t": "mine.fwd", "mine.B.track_u": "mine.fwd"}
    raw = "raw time: no calibrated noise band"
    rows = [
        compare.Row("mine.A.track_t", "seconds", 1.0, 1.0, 1.0, compare.NOT_JUDGED, raw),
        compare.Row("mine.B.track_u('x', 2)", "seconds", 1.0, 1.0, 1.0, compare.NOT_JUDGED, raw),
        compare.Row("mine.C.track_v", "seconds", 1.0, 1.0, 1.0, compare.NOT_JUDGED, raw),
        compare.Row(ROW("mine.fwd"), "instructions", 1.0, 1.02, 1.02, compare.REGRESSION, "x"),
    ]
    notes = [r.note for r in instead.annotate(rows, compare.NOT_JUDGED, own=own)]
    assert notes[0] == (
        f"{raw}; judged instead by its instruction row 'mine.fwd' (REGRESSION), or {instead.OTHERS}"
    )
    assert "its instruction row 'mine.fwd' (REGRESSION)" in notes[1]  # every case of it
    assert notes[2] == f"{raw}; judged instead by {instead.OTHERS}"  # declared by none


def test_a_skipped_or_failed_instruction_row_shows_its_reason_in_the_gate(tmp_path, capsys):
    import json

    from harness.core import records

    row, failed = ROW("big_inference"), ROW("crashy_inference")
    units = {r: "instructions" for r in (row, failed, ROW("mlp_inference"))}
    sides = []
    for side in ("b", "h"):
        benches = {row: float("nan"), failed: None, ROW("mlp_inference"): 5.0}
        path = write_set(tmp_path / side, "a" * 40, benches, units=units)
        folder = path.parent.parent
        (folder / records.INSTRUCTIONS).mkdir()
        (folder / records.INSTRUCTIONS / "instructions.InstructionsPerCall.json").write_text(
            json.dumps(
                {
                    "rows": {},
                    "not_counted": {row: "big is not counted: too big"},
                    "failed": {failed: "the counting child (crashy_inference, layout 0) crashed"},
                }
            )
        )
        sides.append(path)
    main(["gate", str(sides[0]), str(sides[1])])
    out = capsys.readouterr().out
    assert "skipped on both sides: big is not counted: too big" in out
    assert "benchmark failed on both sides: the counting child (crashy_inference" in out


def test_calibrate_knows_a_projects_instruction_keys(tmp_path, monkeypatch, capsys, clean_registry):
    """`harness calibrate --extra-instructions --workload KEY` checks KEY against the rows the
    project's benchmark processes will have: its models' and its modules' (which import its
    own modules), not the zoo's."""
    import sys

    from harness.runs import calibrate

    project = tmp_path / "proj"
    assert main(["init", str(project)]) == exits.PASS
    monkeypatch.setitem(sys.modules, "models", None)  # the project's, imported below, then gone
    del sys.modules["models"]
    keys = calibrate.instruction_keys(project)
    assert keys == ["tiny_cnn_inference", "tiny_cnn_training_step", "tiny_cnn.forward"]
    assert "cannot import" not in capsys.readouterr().err
    assert str(project) not in sys.path  # put back


def test_bench_prints_the_runs_instruction_rows_and_why_a_row_has_none(tmp_path):
    import json

    from harness.core import records
    from harness.verdict.results import load
    from harness.verdict.summary import summary_table

    counted, opted, failed = ROW("mine_inference"), ROW("big_inference"), ROW("bad_inference")
    units = {r: "instructions" for r in (counted, opted, failed)}
    path = write_set(
        tmp_path / "r", "a" * 40, {counted: 12345.0, opted: float("nan"), failed: None}, units=units
    )
    (tmp_path / "r" / records.INSTRUCTIONS).mkdir()
    (tmp_path / "r" / records.INSTRUCTIONS / "instructions.InstructionsPerCall.json").write_text(
        json.dumps(
            {
                "rows": {counted: {"per_call": 12345.0, "what": "mine (small): inference_mode"}},
                "not_counted": {opted: "big is not counted: too big"},
                "failed": {failed: "the counting child (bad_inference, layout 0) crashed"},
            }
        )
    )
    out = summary_table(load(path))
    assert "instructions per call" in out
    assert re.search(r"mine_inference\s+12,345\s+mine \(small\): inference_mode", out)
    assert re.search(r"big_inference\s+n/a\s+big is not counted: too big", out)
    assert re.search(r"bad_inference\s+failed\s+the counting child", out)
    # no valgrind here: one reason for every row, said once
    nothing = write_set(tmp_path / "s", "a" * 40, {opted: float("nan")}, units=units)
    (tmp_path / "s" / records.INSTRUCTIONS).mkdir()
    (tmp_path / "s" / records.INSTRUCTIONS / "i.json").write_text(
        json.dumps({"rows": {}, "not_counted": {opted: "valgrind not found on PATH: install"}})
    )
    assert "1 rows n/a: valgrind not found on PATH: install" in summary_table(load(nothing))


def test_calibrates_extra_work_for_a_compile_row_runs_inside_each_compile(tmp_path, monkeypatch):
    """The proof of a compile row puts its extra work inside the compile (a dynamo compile-start
    callback the row's call registers after its reset), once per compile, never in a clean one.
    Here with dynamo's eager backend: the same calls, without inductor's seconds."""
    import functools

    import torch

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    w = wl.workload("mlp_compile")
    compile_once = w.build(tmp_path)
    ran = []
    slowed = w.inject(compile_once, lambda: ran.append("work"))
    slowed()
    assert ran == ["work"]
    slowed()
    assert ran == ["work", "work"]  # every call is a fresh compile, with its extra work
    compile_once()
    assert ran == ["work", "work"] and not wl._INSIDE_COMPILE  # a clean compile has none


@pytest.mark.slow  # two inductor compiles, natively
def test_every_counted_compile_is_a_real_one(tmp_path, clean_registry):
    """A compile row's call compiles from nothing each time: dynamo reset, inductor's and the
    FX graph cache fresh (a warm cache would skip lowering and code generation)."""
    import torch
    from torch._dynamo.utils import counters

    compile_once = wl.workload("mlp_compile").build(tmp_path)
    counters.clear()
    for n in (1, 2):
        out = compile_once()
        assert counters["inductor"]["fxgraph_cache_miss"] == n
        assert counters["inductor"]["fxgraph_cache_hit"] == 0
    assert isinstance(out, torch.Tensor)
    assert len(list((tmp_path / wl.COMPILE_CACHES).iterdir())) == 2  # a cache folder each
