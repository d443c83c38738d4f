"""The answer check (harness.measure.answers): rules, verdicts, the record, the test switch."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from harness.core import answerfacts, records, tolerances
from harness.core.answerfacts import FAIL_TO_RUN, NOT_APPLICABLE, SAME, WRONG, Answer
from harness.core.exits import BadInput
from harness.measure import answers, timing
from harness.measure.answers import Pair


def _check(pair, new, reference, **kw):
    answer, error = answers.check(pair, new, reference, **kw)
    assert error is None
    return answer


def test_answer_rows_are_named_after_their_timing_rows():
    row = "models.CompiledOverEager.track_compiled_over_eager('word_lm')"
    answer = "models.CompiledOverEager.answer_compiled_over_eager('word_lm')"
    assert answerfacts.answer_row(row) == answer
    assert answerfacts.timed_row(answerfacts.answer_row(row)) == row
    assert answerfacts.answer_row("fusion.PointwiseChain.track_compiled_over_eager") == (
        "fusion.PointwiseChain.answer_compiled_over_eager"
    )
    assert answerfacts.is_answer_row(answerfacts.answer_row(row))
    assert not answerfacts.is_answer_row(row)
    # a parameter holding dots or parentheses stays a parameter
    odd = "amp.X.track_y('a.b', (1, 2))"
    assert answerfacts.answer_row(odd) == "amp.X.answer_y('a.b', (1, 2))"


def test_exact_rule_same_and_wrong():
    x = torch.arange(6.0)
    pair = Pair("copy", rule="exact")
    same = _check(pair, lambda: x.clone(), lambda: x.clone())
    assert (same.status, same.value) == (SAME, 0.0)
    y = x.clone()
    y[3] += 1e-6
    wrong = _check(pair, lambda: y, lambda: x)
    assert wrong.status == WRONG and wrong.value == math.inf
    assert wrong.output == "output" and "bit-identical" in wrong.reason


def test_integer_results_are_exact_under_the_tolerance_rule():
    a = torch.tensor([1, 2, 3])
    b = torch.tensor([1, 2, 4])
    assert _check(Pair("ints"), lambda: a, lambda: a.clone()).status == SAME
    assert _check(Pair("ints"), lambda: a, lambda: b).status == WRONG


def test_tolerance_rule_uses_the_dtype_table():
    ref = torch.randn(100, generator=torch.Generator().manual_seed(0))
    tol = tolerances.answer("float32")
    close = ref + 0.5 * (tol.atol + tol.rtol * ref.abs())
    answer = _check(Pair("f32"), lambda: close, lambda: ref)
    assert answer.status == SAME and 0.4 < answer.value <= 1.0
    assert (answer.rtol, answer.atol) == (tol.rtol, tol.atol)
    assert answer.tolerance_source == tol.source


def test_outside_allclose_without_fp64_is_wrong_and_says_why():
    ref = torch.ones(10)
    answer = _check(Pair("f32", no_fp64="too big"), lambda: ref * 1.01, lambda: ref)
    assert answer.status == WRONG
    assert "no float64 run" in answer.reason and "too big" in answer.reason
    assert answer.value == pytest.approx(0.01 / (1e-4 + 1e-4), rel=1e-3)


def test_fp64_rule_passes_a_side_as_accurate_as_the_reference():
    # float32 sums of cancelling values in two orders (cumsum, sum) differ far beyond allclose,
    # and the new side is nearer the float64 sum: the same answer by the fp64 rule
    g = torch.Generator().manual_seed(1)
    half = torch.randn(2000, 64, generator=g, dtype=torch.float64) * 1e4
    x = torch.cat([half, -half])[torch.randperm(4000, generator=g)]
    x32 = x.float()

    def pairwise():
        return x32.sum(0)

    def sequential():
        return x32.cumsum(0)[-1]

    def fp64():
        return x.sum(0)

    raw = answers.compare(Pair("sums"), answers.flatten(sequential()), answers.flatten(pairwise()))
    assert raw.status == WRONG  # allclose alone would cry wolf
    answer = _check(Pair("sums", fp64=fp64), sequential, pairwise)
    assert answer.status == SAME, answer.reason
    assert answer.fp64_error < answer.fp64_error_reference


def test_fp64_rule_catches_a_less_accurate_side():
    ref = torch.linspace(-1, 1, 2000)

    def fp64():
        return ref.double()

    bad = ref + 0.01
    answer = _check(Pair("shifted", fp64=fp64), lambda: bad, lambda: ref.clone())
    assert answer.status == WRONG
    assert answer.fp64_error == pytest.approx(0.01, rel=1e-3)
    assert "RMSE against float64" in answer.reason


def test_cosine_rule_for_low_precision():
    g = torch.Generator().manual_seed(2)
    ref = torch.randn(256, generator=g)
    pair = Pair("bf16 vs fp32", rule="cosine")
    low = _check(
        pair,
        lambda: {"out": ref.bfloat16(), "loss": ref.sum().bfloat16()},
        lambda: {"out": ref, "loss": ref.sum()},
    )
    assert low.status == SAME and low.cosine > 0.999
    shuffled = ref[torch.randperm(256, generator=g)]
    wrong = _check(pair, lambda: {"out": shuffled}, lambda: {"out": ref})
    assert wrong.status == WRONG and wrong.cosine < 0.5
    assert wrong.output == "output['out']"


def test_cosine_rule_checks_the_loss_relative_difference():
    pair = Pair("amp step", rule="cosine", max_loss_rel=0.01)
    same = answers.Results(loss=torch.tensor(2.0))
    off = answers.Results(loss=torch.tensor(2.1))
    answer = _check(pair, lambda: off, lambda: same)
    assert answer.status == WRONG and answer.loss_rel == pytest.approx(0.05, rel=1e-5)
    assert "loss off by" in answer.reason


def test_shapes_and_missing_outputs_are_wrong():
    a = _check(Pair("s"), lambda: torch.zeros(2, 3), lambda: torch.zeros(3, 2))
    assert a.status == WRONG and "shape" in a.reason
    b = _check(Pair("n"), lambda: (torch.zeros(2),), lambda: (torch.zeros(2), torch.zeros(2)))
    assert b.status == WRONG and "output[1]" in b.reason


def test_nan_in_one_side_only_is_wrong_and_in_both_is_the_same():
    nan = torch.tensor([1.0, float("nan")])
    assert _check(Pair("n"), lambda: nan.clone(), lambda: nan.clone()).status == SAME
    assert _check(Pair("n"), lambda: nan, lambda: torch.tensor([1.0, 2.0])).status == WRONG


def test_training_result_names_gradients_and_parameters():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    loss = model(torch.randn(5, 4)).sum()
    loss.backward()
    names = list(answers.flatten(answers.training_result(model, loss)))
    assert names[0] == "loss"
    assert "grad 0.weight" in names and "param 2.bias" in names


def test_the_first_differing_output_is_named():
    torch.manual_seed(0)
    ref = nn.Linear(4, 3)
    new = nn.Linear(4, 3)
    new.load_state_dict(ref.state_dict())
    with torch.no_grad():
        new.bias[1] += 1.0
    x = torch.randn(2, 4)

    def step(model):
        def call():
            model.zero_grad()
            loss = model(x).pow(2).sum()
            loss.backward()
            return answers.training_result(model, loss)

        return call

    answer = _check(Pair("step"), step(new), step(ref))
    assert answer.status == WRONG
    assert answer.output == "loss"  # outputs keep their order: the loss first
    assert "more output(s) differ" in answer.reason


def test_a_side_that_raises_is_fail_to_run():
    def broken():
        raise RuntimeError("no C++ compiler\nmore")

    answer, error = answers.check(Pair("c"), broken, lambda: 1)
    assert answer.status == FAIL_TO_RUN and answer.reason == "RuntimeError: no C++ compiler"
    assert isinstance(error, RuntimeError)


def test_a_compiled_side_that_compiled_no_graph_is_fail_to_run(monkeypatch):
    counts = iter([0, 0])
    monkeypatch.setattr(answers, "_graphs", lambda: next(counts))
    answer = _check(Pair("c", compiled=True), lambda: torch.ones(2), lambda: torch.ones(2))
    assert answer.status == FAIL_TO_RUN and "compiled no graph" in answer.reason
    counts = iter([0, 1])
    answer = _check(Pair("c", compiled=True), lambda: torch.ones(2), lambda: torch.ones(2))
    assert answer.status == SAME


class _RandomInEval(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.nn.functional.dropout(self.fc(x), 0.5)  # no training=self.training


def test_a_model_random_in_eval_is_named_not_called_wrong():
    torch.manual_seed(0)
    model = _RandomInEval().eval()
    x = torch.randn(4, 8)
    draws = iter([1, 2])

    def side():
        torch.manual_seed(next(draws))  # two streams, as compiled code draws its own
        return model(x)

    answer = _check(Pair("m", model=model, inputs=(x,)), side, side)
    assert answer.status == NOT_APPLICABLE
    assert "bernoulli" in answer.reason and "random numbers in eval mode" in answer.reason


def test_both_sides_start_from_the_same_seed():
    answer = _check(Pair("rand"), lambda: torch.rand(5), lambda: torch.rand(5))
    assert answer.status == SAME and answer.value == 0.0


def test_undeclared_pairs_and_reference_rows():
    answer = _check(None, lambda: 1, lambda: 2)
    assert answer.status == NOT_APPLICABLE and "declare" in answer.reason

    def ref():
        return 1

    ref.is_reference = True
    assert answers.before_timing(lambda: 1, ref) is None


def test_declare_tags_closures_and_wraps_bound_methods():
    class Bench:
        def side(self):
            return torch.ones(2)

    b = Bench()
    pair = Pair("tagged")
    new, ref = answers.declare(b.side, lambda: torch.ones(2), pair)
    assert answers.declared(new, ref) is pair
    assert answers.declared(ref, new) is None  # the roles are the pair's order
    assert torch.equal(new(), torch.ones(2))
    # one callable, a side of two pairs
    other = answers.Pair("second")
    new2, third = answers.declare(new, lambda: torch.ones(2), other)
    assert new2 is new and answers.declared(new, third) is other
    assert answers.declared(new, ref) is pair


def test_the_answer_lands_in_the_record_as_row_facts(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_RUN_RECORD", str(tmp_path))
    row = "fusion.X.track_fast_over_slow('a')"
    x = torch.ones(3)
    answers.before_timing(lambda: x + 1, lambda: x + 2, "cpu", Pair("plus"), row=row)
    facts = records.read_row_facts(tmp_path)
    stored = facts[answerfacts.answer_row(row)][answerfacts.FACTS_KEY]
    answer = Answer.from_facts(stored, "test")
    assert answer.status == WRONG and answer.output == "output"
    assert answers.LAST[row] == answer
    assert answer.seconds is not None and answer.seconds >= 0  # what the check cost
    assert answer.first_call_seconds is None  # not a compiled pair
    # the first WRONG keeps its inputs and both results, loadable without pickle's code paths
    assert answer.reproduce == "answers/first-wrong.pt"
    kept = torch.load(tmp_path / answer.reproduce, weights_only=True)
    assert kept["row"] == row and torch.equal(kept["new"]["output"], x + 1)
    assert torch.equal(kept["reference"]["output"], x + 2)


def test_only_the_first_wrong_of_a_run_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_RUN_RECORD", str(tmp_path))
    monkeypatch.setenv("HARNESS_ANSWER_KEEP_BYTES", "8")
    big = torch.zeros(100)
    first = _check(Pair("a", inputs=(big,)), lambda: big + 1, lambda: big, row="s.C.track_a")
    second = _check(Pair("b"), lambda: big + 2, lambda: big, row="s.C.track_b")
    assert first.reproduce and second.reproduce is None
    kept = torch.load(tmp_path / first.reproduce, weights_only=True)
    assert kept["row"] == "s.C.track_a"
    assert any("400 bytes" in x for x in kept["left_out"])  # over the cap: named, not kept


def test_a_failing_side_still_records_then_fails_the_row(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_RUN_RECORD", str(tmp_path))

    def broken():
        raise ValueError("dynamo error")

    with pytest.raises(ValueError):
        answers.before_timing(broken, lambda: 1, "cpu", Pair("p"), row="s.C.track_x")
    facts = records.read_row_facts(tmp_path)["s.C.answer_x"]["answer"]
    assert facts["status"] == FAIL_TO_RUN and "dynamo error" in facts["reason"]


def test_measure_paired_checks_before_timing(monkeypatch):
    seen = []
    monkeypatch.setattr(answers, "record", lambda answer, row=None: seen.append(answer))
    calls = []

    def new():
        calls.append("new")
        return torch.ones(2)

    def ref():
        calls.append("ref")
        return torch.ones(2)

    timing.measure_paired(new, ref, samples=3, warmup=1, answer=Pair("ones"))
    assert seen[0].status == SAME
    assert calls[:2] == ["new", "ref"]  # the check's calls come before the warm-up's


def test_answer_facts_from_elsewhere_are_checked():
    with pytest.raises(BadInput, match="status"):
        Answer.from_facts({"status": "fine"}, "f.json")
    with pytest.raises(BadInput, match="value"):
        Answer.from_facts({"status": "same", "value": "1"}, "f.json")
    back = Answer.from_facts({"status": "WRONG", "rule": "exact", "differs": True}, "f")
    assert back.value == math.inf
    long = Answer.from_facts({"status": "n/a", "reason": "x" * 10**6}, "f")
    assert len(long.reason) == answerfacts.MAX_TEXT


@pytest.mark.parametrize("rule", ["tolerance", "cosine"])
def test_the_test_switch_is_caught_at_twice_the_tolerance_and_not_at_a_tenth(monkeypatch, rule):
    g = torch.Generator().manual_seed(3)
    ref = answers.Results(out=torch.randn(64, 32, generator=g), loss=torch.tensor(2.5))
    pair = Pair("noisy", rule=rule, max_loss_rel=0.02)
    row = "s.C.track_noisy"

    def side():
        return answers.Results((k, v.clone()) for k, v in ref.items())

    def fp64():
        return answers.Results((k, v.double()) for k, v in ref.items())

    pair.fp64 = fp64
    caught = {}
    for factor in (2.0, 0.1):
        monkeypatch.setenv("HARNESS_TEST_ANSWER_NOISE", f"noisy={factor}")
        statuses = []
        for seed in range(10):
            monkeypatch.setenv("HARNESS_TEST_ANSWER_SEED", str(seed))
            statuses.append(_check(pair, side, side, row=row).status)
        caught[factor] = statuses.count(WRONG)
    assert caught == {2.0: 10, 0.1: 0}
