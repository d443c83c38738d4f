"""Every paired row of the suites checks that its two sides compute the same thing
(harness.measure.workloads.pairs declares each check; harness.measure.answers decides).

The table (pairs.ROWS) is checked against the suites both ways, and each row built in-process at
its smallest sizes must reach measure_paired with a declared check whose rule is the table's; the
training pairs' sides share no storage; the subtle decisions (DataLoader, loss logging,
set_to_none) give `same` on the real workload and `WRONG` once one side is perturbed. The rows
measured elsewhere (MemoryBandwidth in setup_cache, the distributed rows inside torchrun workers)
record their answers from the row's teardown; a slow test runs a real quick `harness bench`.
"""

from __future__ import annotations

import ast
import gc
import inspect
import itertools
import math
import re
import weakref
from pathlib import Path

import pytest
import torch
from test_workloads import suite_module

from harness.core import answerfacts, records, tolerances
from harness.core.answerfacts import EXACT, NOT_APPLICABLE, RULES, SAME, TOLERANCE, WRONG, Answer
from harness.measure import answers, rowfacts, timing
from harness.measure.answers import Pair
from harness.measure.workloads import NotApplicable, pairs

ROOT = Path(__file__).resolve().parents[1]
SUITES = sorted(p.stem for p in (ROOT / "suites" / "benchmarks").glob("*.py") if p.stem[0] != "_")
# measured outside measure_paired: their answers are recorded by the row's teardown
ELSEWHERE = ("fusion.MemoryBandwidth.", "distributed.")
# CUDA only: built on a CPU below with the CUDA parts stood in for
CUDA_ONLY = ("transfer.", "models.CudnnBenchmarkOnOverOff.")
# declared by models.build_compiled_pair, another part of the same change (a project's models)
COMPILED_OVER_EAGER = "models.CompiledOverEager.track_compiled_over_eager"


def paired_rows() -> dict[str, str]:
    """Every paired row of the suites, read from their source (whatever the mode: a class a
    suite keeps to full runs is one too): {row: its class's name}. A paired row is a track_
    method of unit "ratio" of a class asv discovers (not named with "_"), its own or a base's of
    the same module, but no `*_over_reference` row (over the machine's yardstick, not a second
    way of computing one thing)."""
    out = {}
    for area in SUITES:
        tree = ast.parse((ROOT / "suites" / "benchmarks" / f"{area}.py").read_text())
        classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}

        def ratio_methods(name: str, classes=classes) -> set[str]:
            node = classes.get(name)
            if node is None:
                return set()
            own = {
                a.targets[0].value.id
                for a in node.body
                if isinstance(a, ast.Assign)
                and isinstance(a.targets[0], ast.Attribute)
                and a.targets[0].attr == "unit"
                and isinstance(a.targets[0].value, ast.Name)
                and isinstance(a.value, ast.Constant)
                and a.value.value == "ratio"
            }
            for base in node.bases:
                if isinstance(base, ast.Name):
                    own |= ratio_methods(base.id, classes)
            return own

        for name in classes:
            if name.startswith("_"):
                continue
            for method in ratio_methods(name):
                if method.startswith("track_") and not method.endswith("_over_reference"):
                    out[f"{area}.{name}.{method}"] = name
    return out


def imported_rows() -> dict[str, type]:
    """The paired rows whose class this run's suites define (a full-runs-only class is left out
    of a quick run's module), with the class."""
    out = {}
    for row, cname in paired_rows().items():
        cls = getattr(suite_module(row.split(".")[0]), cname, None)
        if inspect.isclass(cls):
            out[row] = cls
    return out


ROWS = imported_rows()


def test_the_table_lists_every_paired_row_of_the_suites_and_no_other():
    assert set(paired_rows()) == set(pairs.ROWS), (
        "a paired row without its answer check (add it to harness.measure.workloads.pairs.ROWS "
        "and declare the check in its workload), or a table row the suites no longer have"
    )
    for row, entry in pairs.ROWS.items():
        assert entry.what and any(rule in entry.rule for rule in (*RULES, "n/a")), row


def test_the_answers_page_lists_every_paired_row():
    page = (ROOT / "docs" / "answers.md").read_text()
    section = page.split("## What each pair compares", 1)[1].split("\n## ", 1)[0]
    missing = [row for row in pairs.ROWS if f"`{row}`" not in section]
    assert not missing, f"docs/answers.md does not list {missing}"


# ---- each row, built in-process at its smallest sizes --------------------------------------


@pytest.fixture
def smallest(monkeypatch):
    monkeypatch.delenv("HARNESS_FULL", raising=False)
    monkeypatch.setenv(
        "HARNESS_SIZES",
        "dataloader.length=8,dataloader.image=32,dataloader.epochs=1,"
        "optimizer.layers=3,optimizer.width=4,"
        "attention.batch=1,attention.heads=2,attention.seq=8,attention.head_dim=4",
    )
    from harness.measure.workloads import checkpointing

    monkeypatch.setattr(
        checkpointing,
        "config",
        lambda device: {
            "batch": 2,
            "seq_len": 8,
            "d_model": 8,
            "nhead": 2,
            "dim_ff": 16,
            "nlayers": 2,
            "num_classes": 3,
        },
    )
    yield
    import torch._dynamo

    torch._dynamo.reset()


class _Stop(Exception):
    """Raised where measure_paired would start checking: the row reached it."""


def _combos(cls) -> list[tuple]:
    params = getattr(cls, "params", None)
    if params is None:
        return [()]
    if not isinstance(params, tuple):
        params = (params,)
    return list(itertools.product(*params))


def _row_name(row: str, combo: tuple) -> str:
    return row + (f"({', '.join(rowfacts._repr(p) for p in combo)})" if combo else "")


def reach_the_check(row: str, monkeypatch, combo: tuple | None = None) -> dict:
    """Set the row up as asv does (its name current) and run its track_ method up to
    measure_paired's answer check: {"pair", "new", "reference", "bench", "combo"}, the callables
    the check would call (the declared ones of a row declared for, `answers.declare_for_row`).
    The first applicable parameter combination unless `combo` is given."""
    cls = ROWS[row]
    method = row.rsplit(".", 1)[1]
    seen: dict = {}

    def stop(fn, base, device="cpu", pair=None, row=None):
        name = rowfacts.current_row()
        pair = pair or answers.declared(fn, base)
        if pair is None and name in answers._FOR_ROW:
            pair, fn, base = answers._FOR_ROW[name]
        seen.update(pair=pair, new=fn, reference=base)
        raise _Stop

    monkeypatch.setattr(answers, "before_timing", stop)
    reasons = []
    for params in [combo] if combo is not None else _combos(cls):
        name = _row_name(row, params)
        monkeypatch.setattr(rowfacts, "current_row", lambda name=name: name)
        bench = cls()
        try:
            bench.setup(*params)
        except NotApplicable as e:
            reasons.append(str(e))
            if hasattr(bench, "teardown"):
                bench.teardown(*params)
            continue
        case = getattr(bench, "case", None)
        if case is not None:
            case.backend = "eager"  # dynamo without inductor: no C++ compile in the default tier
        try:
            getattr(bench, method)(*params)
        except _Stop:
            pass
        seen.update(bench=bench, combo=params)
        return seen
    pytest.skip(f"{row}: not applicable here: {reasons[0] if reasons else '?'}")


IN_PROCESS = [
    r for r in sorted(ROWS) if not r.startswith(ELSEWHERE + CUDA_ONLY) and r != COMPILED_OVER_EAGER
]
# the cheapest applicable parameters where the first combination is a slow one on two cores
CHEAPEST = {
    "amp.AutocastOverFp32.track_autocast_over_fp32": ("word_lm", "bf16"),
    "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous": (
        "resnet18",
        "inference",
    ),
}


@pytest.mark.parametrize("row", IN_PROCESS)
def test_each_paired_row_reaches_its_timing_with_a_declared_check(row, smallest, monkeypatch):
    seen = reach_the_check(row, monkeypatch, CHEAPEST.get(row))
    pair = seen.get("pair")
    assert isinstance(pair, Pair), f"{row}: measure_paired would find no declared check"
    assert pair.what == pairs.ROWS[row].what
    assert not pair.not_applicable and pair.rule in RULES
    assert pair.rule in pairs.ROWS[row].rule, (pair.rule, pairs.ROWS[row].rule)
    if "bench" in seen and hasattr(seen["bench"], "teardown"):
        seen["bench"].teardown(*seen["combo"])


def test_compiled_over_eager_is_declared_by_its_builder(smallest, monkeypatch):
    seen = reach_the_check(COMPILED_OVER_EAGER, monkeypatch)
    seen["bench"].teardown(*seen["combo"])
    if seen.get("pair") is None:
        pytest.xfail("models.build_compiled_pair declares its check in the projects' part")
    assert seen["pair"].rule in RULES


# training pairs: the row and the parameters whose sides take a step
TRAINING = [
    ("amp.AutocastOverFp32.track_autocast_over_fp32", ("word_lm", "bf16")),
    ("fusion.SmallModelTrainingStep.track_compiled_over_eager", ()),
    ("fusion.CompiledCrossEntropyLoss.track_compiled_over_eager", ()),
    ("fusion.OptimizerStepOverForLoop.track_step_over_for_loop", ("Adam", "fused")),
    ("fusion.GradientCheckpointing.track_checkpointed_over_plain", ()),
    (
        "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous",
        ("alexnet", "training"),
    ),
    ("training_loop.ZeroGrad.track_set_to_none_over_zero_fill", ("mlp",)),
    ("training_loop.LossLogging.track_accumulated_over_item_each_step", ("mlp",)),
]


# the second tier: the pairs of over 4 s each under load (alexnet channels-last training: ~18 s)
SLOW_TRAINING = (
    "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous",
    "amp.AutocastOverFp32.track_autocast_over_fp32",
)


@pytest.mark.parametrize(
    "row, combo",
    [
        pytest.param(r, c, id=r, marks=[pytest.mark.slow] if r in SLOW_TRAINING else [])
        for r, c in TRAINING
    ],
)
def test_training_pairs_share_no_storage_and_give_the_same_answer(
    row, combo, smallest, monkeypatch
):
    seen = reach_the_check(row, monkeypatch, combo)
    try:
        _share_nothing_and_agree(row, seen)
    finally:
        if hasattr(seen["bench"], "teardown"):
            seen["bench"].teardown(*seen["combo"])  # what setup retained (freed memory) goes back


def _share_nothing_and_agree(row: str, seen: dict) -> None:
    pair, new, ref = seen["pair"], seen["new"], seen["reference"]
    answer, error = answers.check(pair, new, ref)
    assert error is None and answer.status == SAME, (row, answer.reason)
    # after the check, the results hold each side's live tensors: none may be the other's
    if pair.prepare:
        pair.prepare()
    a = pair.new_result(new()) if pair.new_result else new()
    b = pair.reference_result(ref()) if pair.reference_result else ref()
    a, b = answers.flatten(a), answers.flatten(b)
    live = [k for k in b if k.startswith(("param ", "grad ", "state "))]
    assert live, f"{row}: no parameters or gradients compared"
    shared = [
        k for k in live if a[k].untyped_storage().data_ptr() == b[k].untyped_storage().data_ptr()
    ]
    assert not shared, f"{row}: the two sides share {shared[:3]}"


def test_a_pair_over_shared_parameters_is_refused():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="share parameters"):
        pairs.training_pair("training_loop.ZeroGrad.track_set_to_none_over_zero_fill", model, model)


# ---- the subtle decisions: same on the real workload, WRONG once a side is perturbed --------


def _dataloader_sides(monkeypatch, dataset=None):
    from harness.measure.workloads import dataloader as dl

    row = "dataloader.WorkersOverNoWorkers.track_workers_over_no_workers(2, False, 4, False)"
    monkeypatch.setattr(rowfacts, "current_row", lambda: row)
    dev = torch.device("cpu")
    workers = dl.build_loader(2, False, 4, False, dev)
    if dataset is not None:
        monkeypatch.setattr(dl, "SyntheticJpegDataset", dataset)
    none = dl.build_loader(0, False, 4, False, dev)
    return workers, none, answers._FOR_ROW.pop(row)


def test_dataloader_workers_agree_on_labels_shapes_and_indices(smallest, monkeypatch):
    workers, none, (pair, new, ref) = _dataloader_sides(monkeypatch)
    assert pair.rule == EXACT
    answer, error = answers.check(pair, new, ref)
    assert error is None and answer.status == SAME, answer.reason
    assert answer.outputs == 4  # labels, shapes, dtype, indices: never the augmented pixels
    del workers, none


def test_dataloader_answer_is_wrong_when_a_label_differs(smallest, monkeypatch):
    from harness.measure.workloads import dataloader as dl

    class OneLabelOff(dl.SyntheticJpegDataset):
        def __getitem__(self, i):
            image, label = super().__getitem__(i)
            return image, label + (i == 5)

    workers, none, (pair, new, ref) = _dataloader_sides(monkeypatch, OneLabelOff)
    answer, _ = answers.check(pair, new, ref)
    assert answer.status == WRONG and answer.output == "labels", answer.reason
    # the check holds the loaders weakly: dropping them (the row's teardown) ends their workers
    gone = weakref.ref(workers)
    del workers, none
    gc.collect()
    assert gone() is None
    assert answers.check(pair, new, ref)[0].status == "fail_to_run"


def _training_loop_pair(builder, variants, monkeypatch):
    from harness.measure.workloads import training_loop as tl

    dev = torch.device("cpu")
    new, ref = (getattr(tl, builder)("mlp", v, dev) for v in variants)
    return answers.declared(new, ref), new, ref


@pytest.mark.slow  # the second tier: ~8 s of the default tier's budget under load
def test_loss_logging_tolerates_the_logged_sum_and_not_one_parameter_bit(monkeypatch):
    pair, new, ref = _training_loop_pair("logged_loop", (False, True), monkeypatch)
    assert (pair.rule, pair.exact) == (TOLERANCE, ("grad ", "param "))
    answer, _ = answers.check(pair, new, ref)
    assert answer.status == SAME, answer.reason
    result = pair.new_result
    tol = tolerances.answer("float32")

    def logged_off_by(factor):
        def of(total):
            out = result(total)
            out["logged"] = out["logged"] * (1 + factor * tol.rtol)
            return out

        return of

    pair.new_result = logged_off_by(0.3)  # within the logged value's tolerance: the same
    assert answers.check(pair, new, ref)[0].status == SAME
    pair.new_result = logged_off_by(3)
    wrong = answers.check(pair, new, ref)[0]
    assert wrong.status == WRONG and wrong.output == "logged", wrong.reason

    def one_bit_off(total):
        out = result(total)
        w = out["param 0.weight"].detach().clone()
        w.view(-1)[0] = torch.nextafter(w.view(-1)[0], torch.tensor(math.inf))
        out["param 0.weight"] = w
        return out

    pair.new_result = one_bit_off
    wrong = answers.check(pair, new, ref)[0]
    assert wrong.status == WRONG and wrong.output == "param 0.weight", wrong.reason


def test_set_to_none_is_bit_identical_to_zero_fill_and_one_ulp_is_wrong(monkeypatch):
    pair, new, ref = _training_loop_pair("training_step", (True, False), monkeypatch)
    assert pair.rule == EXACT
    answer, _ = answers.check(pair, new, ref)
    assert answer.status == SAME and answer.value == 0.0, answer.reason
    monkeypatch.setenv("HARNESS_TEST_ANSWER_NOISE", "ZeroGrad=0.001")
    row = "training_loop.ZeroGrad.track_set_to_none_over_zero_fill('mlp')"
    wrong, _ = answers.check(pair, new, ref, row=row)
    assert wrong.status == WRONG and wrong.value == math.inf and wrong.output == "loss"


@pytest.mark.slow  # the second tier: ~6 s of the default tier's budget under load
def test_eval_forward_modes_are_bit_identical_on_cpu(monkeypatch):
    from harness.measure.workloads import training_loop as tl

    sides = {m: tl.eval_forward("alexnet", m, torch.device("cpu")) for m in tl.EVAL_MODES}
    for new, ref in [("no_grad", "grad_enabled"), ("inference_mode", "grad_enabled")]:
        pair = answers.declared(sides[new], sides[ref])
        answer, _ = answers.check(pair, sides[new], sides[ref])
        assert (pair.rule, answer.status, answer.value) == (EXACT, SAME, 0.0), (new, ref)
    pair = answers.declared(sides["inference_mode"], sides["no_grad"])
    assert pair is not None and pair.model is not None  # random ops in eval mode get named


# ---- the CUDA-only rows, built on a CPU with the CUDA parts stood in for ------------------


def test_transfer_pairs_compare_the_bytes(monkeypatch):
    from harness.measure.workloads import transfer

    monkeypatch.setattr(transfer, "require_cuda", lambda device, what: None)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self.clone())
    monkeypatch.setattr(transfer, "batch_shape", lambda device=None, full=None: (2, 3, 4, 4))
    dev = torch.device("cpu")
    pinned, pageable = (transfer.build(m, True, "uint8", dev) for m in ("pinned", "pageable"))
    pair = answers.declared(pinned, pageable)
    assert pair.rule == EXACT and answers.check(pair, pinned, pageable)[0].status == SAME
    uint8, float32 = (transfer.build("pinned", True, p, dev) for p in ("uint8", "float32"))
    pair = answers.declared(uint8, float32)
    assert pair.rule == TOLERANCE and answers.check(pair, uint8, float32)[0].status == SAME
    assert pair.fp64().dtype == torch.float64
    nb, blocking = (transfer.copy_then_compute("pinned", b, dev, batches=2) for b in (True, False))
    pair = answers.declared(nb, blocking)
    assert pair.rule == EXACT and answers.check(pair, nb, blocking)[0].status == SAME


def test_cudnn_benchmark_on_and_off_are_a_pair(monkeypatch):
    from harness.measure.workloads import models

    dev = torch.device("cpu")
    on = models.with_cudnn_benchmark(models.build("alexnet", "inference", False, False, dev), True)
    off = models.with_cudnn_benchmark(
        models.build("alexnet", "inference", False, False, dev), False
    )
    pair = answers.declared(on, off)
    assert pair.rule == TOLERANCE and pair.what == pairs.what(
        "models.CudnnBenchmarkOnOverOff.track_cudnn_benchmark_on_over_off"
    )
    assert answers.check(pair, on, off)[0].status == SAME
    models.set_cudnn_benchmark(False)


# ---- the rows measured elsewhere record their answers from the row's teardown --------------


def test_memory_bandwidth_checks_where_it_times_and_its_row_records_it(tmp_path, monkeypatch):
    from harness.measure.workloads import bandwidth

    monkeypatch.setattr(bandwidth, "BACKEND", "eager")
    monkeypatch.setattr(timing, "FAST", {"warmup": 1, "samples": 1, "budget_s": 0.0})
    figures = {"multiply_add": bandwidth.measure("multiply_add", torch.device("cpu"), n=4096)}
    facts = figures["multiply_add"]["answer"]
    assert facts["status"] == SAME and facts["rule"] == TOLERANCE
    monkeypatch.setenv("HARNESS_RUN_RECORD", str(tmp_path))
    suite = suite_module("fusion")
    bench = suite.MemoryBandwidth()
    for row in ("track_gbps_eager", "track_fused_over_eager"):  # only the paired row records
        name = f"fusion.MemoryBandwidth.{row}('multiply_add')"
        monkeypatch.setattr(rowfacts, "current_row", lambda name=name: name)
        bench.teardown(figures, "multiply_add")
    stored = records.read_row_facts(tmp_path)
    assert list(stored) == ["fusion.MemoryBandwidth.answer_fused_over_eager('multiply_add')"]
    assert Answer.from_facts(stored[list(stored)[0]]["answer"], "t").status == SAME


def test_distributed_rows_record_the_answer_their_launch_brought_back(tmp_path, monkeypatch):
    from harness.measure.workloads import distributed as wl

    row = wl.row_name("bucket_cap", 1)
    assert row == "distributed.BucketCapOverDefault.track_step_time_over_default_bucket_cap(1)"
    facts = Answer(SAME, "x", TOLERANCE, "4 output(s) within tolerance", value=0.0).to_facts()
    cache = {"2": {"answers": {row: facts}, "bucket_cap": {"1": [1.0]}}}
    monkeypatch.setenv("HARNESS_RUN_RECORD", str(tmp_path))
    suite = suite_module("distributed")
    for name in (row, "distributed.AllReduceOfGradientSizedTensor.track_bandwidth(2)"):
        monkeypatch.setattr(rowfacts, "current_row", lambda name=name: name)
        suite.BucketCapOverDefault().teardown(cache, 1)
    stored = records.read_row_facts(tmp_path)
    assert list(stored) == [answerfacts.answer_row(row)]


def test_row_names_are_spelled_as_asv_spells_them():
    from asv_runner.benchmarks._base import _repr_no_address

    from harness.measure.workloads import bandwidth

    assert bandwidth.row_name("pointwise_chain") == (
        f"fusion.MemoryBandwidth.track_fused_over_eager({_repr_no_address('pointwise_chain')})"
    )
    assert rowfacts._repr("pointwise_chain") == _repr_no_address("pointwise_chain")


# ---- the generic parts answers gained for the suites ---------------------------------------


def test_prepare_runs_before_every_check_and_its_failure_is_fail_to_run():
    calls = []
    pair = Pair("p", prepare=lambda: calls.append("prepare"))
    answers.check(pair, lambda: calls.append("new") or 1, lambda: calls.append("ref") or 1)
    assert calls == ["prepare", "new", "ref"]

    def broken():
        raise RuntimeError("cannot copy")

    answer, error = answers.check(Pair("p", prepare=broken), lambda: 1, lambda: 1)
    assert answer.status == "fail_to_run" and isinstance(error, RuntimeError)


def test_an_ill_conditioned_output_is_not_comparable_rather_than_wrong():
    truth = torch.linspace(1, 2, 2000, dtype=torch.float64)
    far = (truth * 1.05).float()  # the reference side itself 5% off float64
    worse = (truth * 0.8).float()  # past 2x its error: WRONG by the plain float64 rule
    answer = answers.check(Pair("ill", fp64=lambda: truth), lambda: worse, lambda: far)[0]
    assert answer.status == NOT_APPLICABLE and "ill-conditioned in float32" in answer.reason
    assert answer.value is None and answer.output == "output"
    # a reference as accurate as float32 is: the same new side is judged, and wrong
    good = truth.float()
    answer = answers.check(Pair("ok", fp64=lambda: truth), lambda: worse, lambda: good)[0]
    assert answer.status == WRONG
    # beside an ill-conditioned output, a well-conditioned one that differs is still WRONG
    both64 = answers.Results(ill=truth, fine=truth)
    pair = Pair("both", fp64=lambda: both64)
    new = answers.Results(ill=worse, fine=worse)
    answer = answers.check(pair, lambda: new, lambda: answers.Results(ill=far, fine=good))[0]
    assert answer.status == WRONG and answer.output == "fine", answer.reason


def test_batch_norm_over_two_values_makes_a_training_pair_not_comparable():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    tiny = (torch.randn(2, 3, 3, 3),)  # 1x1 maps, batch 2: two values per channel
    assert "fewer than 4 values per channel (1: 2)" in pairs.tiny_batch_norm(model, tiny)
    assert pairs.tiny_batch_norm(model, (torch.randn(2, 3, 6, 6),)) == ""
    assert pairs.tiny_batch_norm(model.eval(), tiny) == ""  # running statistics: no matter
    before = model[1].running_mean.clone()
    pairs.tiny_batch_norm(model.train(), tiny)
    assert torch.equal(model[1].running_mean, before)  # a copy was probed, not the model


def test_exact_outputs_under_the_tolerance_rule():
    pair = Pair("mixed", exact=("param ",))
    ref = answers.Results(logged=torch.tensor(1.0), **{"param w": torch.ones(3)})
    close = answers.Results(logged=torch.tensor(1.00001), **{"param w": torch.ones(3)})
    assert answers.check(pair, lambda: close, lambda: ref)[0].status == SAME
    bit = torch.ones(3)
    bit[1] = torch.nextafter(bit[1], torch.tensor(2.0))
    off = answers.Results(logged=torch.tensor(1.0), **{"param w": bit})
    wrong = answers.check(pair, lambda: off, lambda: ref)[0]
    assert wrong.status == WRONG and wrong.output == "param w" and wrong.value == math.inf


def test_cosine_rule_early_exit_for_a_gradient_that_is_rounding():
    # a gradient that is zero up to rounding has no direction: its cosine is noise, allclose
    # at the pair's band says it is the same
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, generator=g) * 1e-9
    new = torch.randn(64, generator=g) * 1e-4
    strict = Pair("c", rule="cosine")
    assert answers.check(strict, lambda: new, lambda: ref)[0].status == WRONG
    band = Pair("c", rule="cosine", tolerance=tolerances.Tolerance(1e-2, 1e-3, "t"))
    answer = answers.check(band, lambda: new, lambda: ref)[0]
    assert answer.status == SAME and answer.value < 1
    far = torch.randn(64, generator=g)  # past the band and pointing elsewhere: wrong
    assert answers.check(band, lambda: far, lambda: ref + 1)[0].status == WRONG


def test_the_test_switch_beats_the_cosine_early_exit(monkeypatch):
    # noise sized to each rule: at 2x it must pass both the cosine and the band, at 0.1x neither
    ref = answers.Results(out=torch.full((256,), 1e-4), loss=torch.tensor(2.0))
    pair = Pair("c", rule="cosine", max_loss_rel=0.02)
    pair.tolerance = tolerances.Tolerance(2e-2, 2e-2 * 1e-4, "t")

    def side():
        return answers.Results((k, v.clone()) for k, v in ref.items())

    for factor, expect in ((2.0, WRONG), (0.1, SAME)):
        monkeypatch.setenv("HARNESS_TEST_ANSWER_NOISE", f"x={factor}")
        got = {answers.check(pair, side, side, row="s.C.track_x")[0].status for _ in range(3)}
        assert got == {expect}, factor


def test_a_row_declared_for_is_checked_by_its_own_callables(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_RUN_RECORD", str(tmp_path))
    row = "s.C.track_a_over_b(1)"
    answers.declare_for_row(
        Pair("facts", rule="exact"), lambda: torch.ones(2), lambda: torch.ones(2), row=row
    )
    monkeypatch.setattr(rowfacts, "current_row", lambda: row)
    timing.measure_paired(lambda: None, lambda: None, samples=2, warmup=1)
    stored = records.read_row_facts(tmp_path)["s.C.answer_a_over_b(1)"]["answer"]
    assert stored["status"] == SAME and stored["rule"] == "exact"
    timing.measure_paired(lambda: None, lambda: None, samples=2, warmup=1)  # ab's next block
    assert answers.LAST[row].status == SAME  # checked again, not "undeclared"
    answers.declare_for_row(Pair("x"), lambda: 1, lambda: 1, row=None)  # outside a row
    monkeypatch.setattr(rowfacts, "current_row", lambda: None)
    answers.declare_for_row(Pair("x"), lambda: 1, lambda: 1)
    assert None not in answers._FOR_ROW


def test_offer_pairs_the_latest_live_side_of_each_variant():
    made = []
    pairs.family(
        "test.family", {("new", "ref"): lambda a, b, key: made.append((a, b)) or Pair("t")}
    )

    def side(tag):
        def call():
            return tag

        return call

    first = pairs.offer(side(1), "test.family", "k", "new", "n1")
    assert made == []  # no reference yet
    ref = pairs.offer(side(2), "test.family", "k", "ref", "r")
    assert made == [("n1", "r")] and answers.declared(first, ref).what == "t"
    other = pairs.offer(side(3), "test.family", "other key", "ref", "x")
    assert answers.declared(first, other) is None  # another key: no pair
    second = pairs.offer(side(4), "test.family", "k", "new", "n2")
    assert made[-1] == ("n2", "r") and answers.declared(second, ref) is not None
    step = pairs.offer(
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1).step, "test.family", "m", "new"
    )
    assert callable(step) and hasattr(step, pairs._SIDE)  # a bound method is wrapped


# ---- end to end ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")
def test_the_distributed_workers_check_every_paired_row():
    from harness.measure.workloads import distributed as wl

    plan = wl.Plan(batch=4, features=16, hidden=32, layers=1, rounds=2, warmup=1)
    result = wl.measure(2, plan, timeout_s=240)
    got = {row: facts["status"] for row, facts in result["answers"].items()}
    rows = {r for r in pairs.ROWS if r.startswith("distributed.")}
    assert {re.sub(r"\(.*\)$", "", r) for r in got} == rows
    data_parallel = "distributed.DataParallelOverDistributed.track_data_parallel_over_distributed"
    assert got.pop(data_parallel) == NOT_APPLICABLE  # CPU: no GPUs
    assert set(got.values()) == {SAME}, result["answers"]


@pytest.mark.slow
@pytest.mark.xdist_group("answers-e2e")
def test_a_quick_bench_records_the_answer_rows(tmp_path):
    from harness.cli import main

    root, machine = tmp_path / "results", "answers-e2e-cpu"
    argv = ["bench", "--quick", "--results-dir", str(root), "--machine", machine]
    for suite in ("training_loop", "dataloader", "distributed"):
        argv += ["--suite", suite]
    argv += ["--bench", r"ZeroGrad|WorkersOverNoWorkers|GradientAsBucketView"]
    assert main(argv) == 0
    (run,) = records.list_runs(root, machine)
    facts = {
        row: Answer.from_facts(f["answer"], row)
        for row, f in records.read_row_facts(run.path).items()
        if answerfacts.is_answer_row(row)
    }
    want = {
        "training_loop.ZeroGrad.answer_set_to_none_over_zero_fill('mlp')",
        "training_loop.ZeroGrad.answer_set_to_none_over_zero_fill('alexnet')",
        "dataloader.WorkersOverNoWorkers.answer_workers_over_no_workers(2, False, 16, False)",
        "dataloader.WorkersOverNoWorkers.answer_workers_over_no_workers(2, False, 16, True)",
        "distributed.GradientAsBucketView.answer_step_time_with_over_without_bucket_view",
    }
    assert want <= set(facts), "\n".join(sorted(facts))
    assert all(facts[r].status == SAME for r in want), {r: facts[r].reason for r in want}
    zero_grad = "training_loop.ZeroGrad.answer_set_to_none_over_zero_fill('mlp')"
    assert facts[zero_grad].rule == EXACT  # on a CPU: bit for bit


@pytest.mark.slow
def test_measure_versions_names_a_changed_benchmark_and_only_it(tmp_path):
    import shutil
    import subprocess
    import sys

    old, new = tmp_path / "old", tmp_path / "new"
    for copy in (old, new):
        (copy / "benchmarks").mkdir(parents=True)
        shutil.copy(ROOT / "suites" / "benchmarks" / "__init__.py", copy / "benchmarks")
        shutil.copy(ROOT / "suites" / "benchmarks" / "training_loop.py", copy / "benchmarks")
    suite = new / "benchmarks" / "training_loop.py"
    text = suite.read_text()
    # a teardown is not part of a version; a track_ method's body is
    text = text.replace(
        "    def track_set_to_none_over_zero_fill(self, model):\n",
        "    def teardown(self, model):\n        pass\n\n"
        "    def track_set_to_none_over_zero_fill(self, model):\n        # changed\n",
    )
    suite.write_text(text)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "measure_versions.py"), str(old), str(new)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    changed = [line for line in done.stdout.splitlines() if line.startswith("changed: ")]
    assert changed == ["changed: training_loop.ZeroGrad.track_set_to_none_over_zero_fill"]


def test_comparisons_run_in_slices_with_the_whole_tensor_s_result(monkeypatch):
    # slices bound the float64 temporaries; the figures must be the whole tensor's
    g = torch.Generator().manual_seed(5)
    a = torch.randn(7, 13, generator=g)
    b = a + 1e-3 * torch.randn(7, 13, generator=g)
    b[3, 4] = float("nan")
    a[3, 4] = float("nan")
    tol = tolerances.answer("float32")
    whole = (
        answers._differences(a, b),
        answers._allclose_ratio(a, b, tol),
        answers._rmse(a.nan_to_num(), b.nan_to_num()),
        answers._cosine(a.nan_to_num(), b.nan_to_num()),
        answers._same_bits(a, b),
    )
    monkeypatch.setattr(answers, "_CHUNK", 5)
    sliced = (
        answers._differences(a, b),
        answers._allclose_ratio(a, b, tol),
        answers._rmse(a.nan_to_num(), b.nan_to_num()),
        answers._cosine(a.nan_to_num(), b.nan_to_num()),
        answers._same_bits(a, b),
    )
    assert sliced[0] == whole[0] and sliced[1] == whole[1] and sliced[4] == whole[4] is False
    assert sliced[2] == pytest.approx(whole[2], rel=1e-12)
    assert sliced[3] == pytest.approx(whole[3], rel=1e-12)
    assert answers._same_bits(a, a.clone())  # NaN in the same places agree, in every slice
    b[6, 12] = float("inf")
    assert answers._allclose_ratio(a, b, tol) == math.inf  # in the last slice
