"""The test-only slowdown of a real workload (harness.runs.slowdown, `harness calibrate
--slowdown`): the wiring, with a simulated clock; no timed assertion. The figures it produces on a
loaded machine are in docs/measurements.md (the gate's proof on real workloads), not asserted
here."""

from __future__ import annotations

import importlib.util
import itertools
import math
import pathlib

import pytest
from test_gate_support import draw, write_set

from harness.cli import main
from harness.runs import calibrate, slowdown
from harness.runs.spec import RunSpec
from harness.verdict.gate import run_gate

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load(bench: pathlib.Path, module: str, monkeypatch, fraction: str, side: str = "all"):
    monkeypatch.setenv(slowdown.SWITCH, fraction)
    monkeypatch.setenv(slowdown.SIDE_SWITCH, side)
    spec = importlib.util.spec_from_file_location(f"_scratch_{module}", bench / f"{module}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FakeClock:
    """The thread CPU clock: 1 µs per read; the workload advances it by its own cost."""

    def __init__(self):
        self.now = 0.0

    def thread_time(self):
        self.now += 1e-6
        return self.now


def test_the_slowed_call_waits_the_fraction_of_its_own_call_time_measured_once(
    tmp_path, monkeypatch
):
    mod = load(slowdown.write_suite(ROOT, "mlp", tmp_path), "models", monkeypatch, "0.25")
    clock = FakeClock()
    monkeypatch.setattr(mod.time, "thread_time", clock.thread_time)
    calls = []
    durations = itertools.cycle([0.002, 0.004, 0.003])  # CPU seconds per call on the fake clock

    def work():
        calls.append(next(durations))
        clock.now += calls[-1]

    fn = mod.slowed(work)
    fn()  # first call: itself, one more warm call, then the calibration calls; no wait
    calibration = calls[2:]
    assert len(calibration) >= slowdown.CALIBRATION_CALLS
    # enough calls for their fastest to be the steady state's: their CPU time, not a count
    assert sum(calibration[:-1]) < slowdown.CALIBRATION_S <= sum(calibration)
    for _ in range(3):
        before, t0 = len(calls), clock.now
        fn()
        assert len(calls) == before + 1  # later calls run the workload once...
        # ...and then 25% of the fastest call's CPU time (2 ms), not of the median call's (3 ms):
        # the whole wait, its own clock reads (1 us each on this clock) included
        assert clock.now - t0 - calls[-1] == pytest.approx(0.0005, abs=1.5e-6)


def test_zoo_model_wrapper_keeps_the_real_rows_for_one_model_and_slows_only_when_asked(
    tmp_path, monkeypatch
):
    bench = slowdown.write_suite(ROOT, "mlp", tmp_path)
    assert sorted(p.name for p in bench.iterdir()) == ["__init__.py", "models.py"]
    slowed = load(bench, "models", monkeypatch, "0.1")
    assert slowed.Inference.params == (["mlp"], [False], [False])
    assert slowed.Inference.track_inference_time_over_reference.unit == "relative"
    bench_case = slowed.Inference()
    bench_case.setup("mlp", False, False)
    assert bench_case.fn.__qualname__.startswith("slowed.")
    assert slowed.TrainingStep.params == (["mlp"], [False], [False])
    step = slowed.TrainingStep()
    step.setup("mlp", False, False)
    assert step.fn.__qualname__.startswith("slowed.")
    clean = load(bench, "models", monkeypatch, "")
    plain = clean.Inference()
    plain.setup("mlp", False, False)
    assert not plain.fn.__qualname__.startswith("slowed.")
    plain_step = clean.TrainingStep()
    plain_step.setup("mlp", False, False)
    assert not plain_step.fn.__qualname__.startswith("slowed.")


def test_zoo_model_wrapper_slows_the_compiled_side_of_its_paired_row(tmp_path, monkeypatch):
    mod = load(slowdown.write_suite(ROOT, "mlp", tmp_path), "models", monkeypatch, "0.1")
    assert mod.CompiledOverEager.params == (["mlp"],)
    assert mod.CompiledOverEager.track_compiled_over_eager.unit == "ratio"
    for side, eager_slowed in (("compiled", False), ("all", True)):
        mod.SIDE = side
        pair = mod.CompiledOverEager()
        pair.setup("mlp")  # builds the torch.compile wrapper; nothing compiles until a call
        assert pair.compiled.__qualname__.startswith("slowed.")
        assert pair.eager.__qualname__.startswith("slowed.") == eager_slowed
        plain = mod.Inference()
        plain.setup("mlp", False, False)
        assert (
            plain.fn.__qualname__.startswith("slowed.") == eager_slowed
        )  # a whole-model slowdown only


def test_fusion_wrapper_slows_the_chosen_side(tmp_path, monkeypatch):
    mod = load(
        slowdown.write_suite(ROOT, "pointwise_chain", tmp_path), "fusion", monkeypatch, "0.1"
    )
    for side, eager_slowed in (("compiled", False), ("all", True)):
        mod.SIDE = (
            side  # read per call of make_call, as set from HARNESS_TEST_SLOWDOWN_SIDE at import
        )
        case = mod.PointwiseChain()
        case.setup()
        assert case.track_compiled_over_eager.unit == "ratio"
        assert (
            case.case.make_call(case.case.target).__qualname__.startswith("slowed.") == eager_slowed
        )
        # compiled(): make_call gets the torch.compile wrapper, not the target (no compile here)
        assert case.case.make_call(lambda x: x).__qualname__.startswith("slowed.")


def test_several_workloads_share_one_scratch_folder_one_wrapper_module_per_suite(
    tmp_path, monkeypatch
):
    bench = slowdown.write_suite(
        ROOT, ["pointwise_chain", "training_step", "mlp", "word_lm"], tmp_path
    )
    assert sorted(p.name for p in bench.iterdir()) == ["__init__.py", "fusion.py", "models.py"]
    assert slowdown.modules_for(["word_lm", "pointwise_chain", "mlp"]) == ["fusion", "models"]
    fusion = load(bench, "fusion", monkeypatch, "0.1", "compiled")
    assert fusion.PointwiseChain.__mro__[1].__name__ == "PointwiseChain"
    assert fusion.SmallModelTrainingStep.track_compiled_over_eager.unit == "ratio"
    assert not hasattr(fusion, "AttentionOverHandWritten")  # only the chosen workloads' classes
    models = load(bench, "models", monkeypatch, "0.1", "compiled")
    assert models.Inference.params == (["mlp", "word_lm"], [False], [False])
    assert models.CompiledOverEager.params == (["mlp", "word_lm"],)


def _fake_runs(monkeypatch, tmp_path, slowed_scale: float):
    """calibrate.asv_run replaced by result files of one paired-ratio row: clean runs draw around
    1.0, the slowed run (extra environment given) around slowed_scale. Returns the call log
    (result folder names) and the --bench selection of each call."""
    calls, selected = [], []

    def fake(project, bench_dir, results, spec, commit):
        calls.append(results.name)
        selected.append(list(spec.benches))
        scale = slowed_scale if dict(spec.env).get("X") else 1.0
        return write_set(
            results,
            commit,
            {"w.ratio": draw(30, seed=len(calls), scale=scale)},
            machine=spec.machine,
            units={"w.ratio": "ratio"},
        )

    monkeypatch.setattr(calibrate, "asv_run", fake)
    return calls, selected


@pytest.mark.parametrize("aa", [True, False])
def test_trials_without_the_aa_half_skip_run_c_and_report_false_alarms_as_not_measured(
    tmp_path, monkeypatch, aa
):
    calls, _ = _fake_runs(monkeypatch, tmp_path, slowed_scale=1.2)
    out = calibrate.trials(
        ROOT,
        2,
        tmp_path / "root",
        tmp_path / "w",
        0.05,
        RunSpec(machine="m1-cpu"),
        bench_dir=tmp_path,
        slowed_env={"X": "1"},
        log=lambda m: None,
        aa=aa,
    )
    assert out["caught"] == 2
    assert calls == (
        ["t0-A", "t0-B", "t0-C", "t1-A", "t1-B", "t1-C"] if aa else ["t0-A", "t0-B", "t1-A", "t1-B"]
    )
    assert out["false_alarms"] == (0 if aa else None)
    assert out["per_benchmark"]["w.ratio"]["caught"] == 2


def test_trials_run_only_the_benchmarks_bench_selects(tmp_path, monkeypatch):
    _, selected = _fake_runs(monkeypatch, tmp_path, slowed_scale=1.2)
    calibrate.trials(
        ROOT,
        1,
        tmp_path / "root",
        tmp_path / "w",
        0.05,
        RunSpec(machine="m1-cpu", benches=("compiled_over_eager",)),
        bench_dir=tmp_path,
        slowed_env={"X": "1"},
        log=lambda m: None,
    )
    assert selected == [["compiled_over_eager"]] * 3  # A, B and C alike


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--no-aa"], "go with --slowdown"),
        (["--slowdown", "0.1"], "--slowdown needs --workload"),
        (["--slowdown", "0.1", "--workload", "nosuchmodel"], "unknown workload 'nosuchmodel'"),
        (["--workload", "mlp"], "go with --slowdown"),
        (["--bench", "compiled_over_eager"], "go with --slowdown"),
        (["--slowdown", "-1", "--workload", "mlp"], "fraction of the call time"),
    ],
)
def test_bad_slowdown_options_are_bad_input(tmp_path, capsys, argv, says):
    code = main(
        [
            "calibrate",
            "--trials",
            "1",
            "--results-dir",
            str(tmp_path / "r"),
            "--work",
            str(tmp_path / "w"),
            *argv,
        ]
    )
    assert code == 3
    assert says in capsys.readouterr().err


def test_per_row_tally_counts_the_gate_verdict_and_the_verdict_if_judged(tmp_path):
    # a relative row 20% slower: not judged without a calibrated band, REGRESSION if it were
    units = {"t.rel": "relative", "t.ratio": "ratio"}
    b = write_set(
        tmp_path / "base",
        "aaaaaaaa11",
        {"t.rel": draw(30, seed=1), "t.ratio": draw(30, seed=3), "t.off": math.nan},
        units=units,
    )
    h = write_set(
        tmp_path / "head",
        "bbbbbbbb22",
        {"t.rel": draw(30, seed=2, scale=1.2), "t.ratio": draw(30, seed=4), "t.off": math.nan},
        units=units,
    )
    outcome = run_gate(str(b), str(h), root=tmp_path / "none")
    assert outcome.code == 0
    per_bench: dict = {}
    cells = calibrate._tally(
        per_bench, outcome.rows, "caught", calibrate.if_all_judged(outcome, 0.05)
    )
    assert per_bench["t.rel"] == {
        "caught": 0,
        "false_alarms": 0,
        "caught_if_judged": 1,
        "false_alarms_if_judged": 0,
        "judged": False,
        "skipped": False,
    }
    assert per_bench["t.ratio"]["judged"] and per_bench["t.ratio"]["caught_if_judged"] == 0
    # a row outside the run's selection (skipped on both sides) is marked, so the table leaves
    # it out instead of calling it judged
    assert per_bench["t.off"]["skipped"] and not per_bench["t.ratio"]["skipped"]
    assert "(if judged: REGRESSION)" in cells["t.rel"]
