"""`harness ab`'s verdict across processes (harness.verdict.between) and its sequential stop, on
synthetic per-pair ratios; the gate over two ab records; duet's CPU sets."""

from __future__ import annotations

import json
import math
import os
import pathlib
import random
import types

import pytest
from test_gate_support import draw, write_set

from harness.cli import main
from harness.core import exits, records
from harness.runs import ab
from harness.verdict import between, compare


def spread(center: float, sd: float, n: int, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * math.exp(rng.gauss(0, sd)) for _ in range(n)]


def test_same_needs_the_interval_inside_the_band():
    tight = spread(1.0, 0.005, 10)
    d = between.decide(tight, 0.02)
    assert d.verdict == between.SAME and d.interval.low > 1 / 1.02 and d.interval.high < 1.02
    # the same centre with ten times the spread crosses the band: not SAME, not DIFFERENT
    assert between.decide(spread(1.0, 0.05, 10), 0.02).verdict == between.UNKNOWN


def test_different_needs_the_interval_wholly_beyond_the_band():
    slower = spread(1.06, 0.005, 8)
    d = between.decide(slower, 0.02)
    assert d.verdict == between.DIFFERENT and d.worse and d.interval.low > 1.02
    faster = spread(0.94, 0.005, 8)
    d = between.decide(faster, 0.02)
    assert d.verdict == between.DIFFERENT and d.worse is False
    # a throughput that went up is better, not worse
    assert between.decide(slower, 0.02, higher_is_better=True).worse is False
    # 3% slower but its interval reaches inside +-2%: not yet DIFFERENT
    assert between.decide(spread(1.03, 0.03, 6), 0.02).verdict == between.UNKNOWN


def test_unknown_below_the_fewest_pairs_and_says_what_decides_it():
    d = between.decide([1.10, 1.11], 0.02)
    assert d.verdict == between.UNKNOWN and "at least 3" in d.why
    ratios = spread(1.0, 0.02, 5, seed=3)
    assert between.decide(ratios, 0.02).verdict == between.UNKNOWN
    more = between.pairs_to_decide(ratios, 0.02)
    assert more is not None and more > 5
    # with that many pairs of the same spread the row is decided
    assert between.decide(spread(1.0, 0.02, more + 5, seed=3), 0.02).verdict == between.SAME


def test_an_outlier_pair_makes_a_row_unknown_not_different():
    ratios = [1.0, 1.002, 0.998, 1.001, 1.35]  # one pair caught a host hiccup on the head side
    assert between.decide(ratios, 0.02).verdict == between.UNKNOWN


def test_only_raw_and_normalised_rows_are_judged_across_processes():
    assert between.judged_across_processes("seconds")
    assert between.judged_across_processes("samples/s")
    assert between.judged_across_processes("relative")
    for unit in ("ratio", "ops", "instructions", "bytes"):
        assert not between.judged_across_processes(unit), unit


def test_judge_replaces_not_judged_raw_rows_and_leaves_the_rest():
    rows = [
        compare.Row("a.time", "seconds", 1.0, 1.1, 1.1, compare.NOT_JUDGED, "raw time"),
        compare.Row("a.same", "seconds", 1.0, 1.0, 1.0, compare.NOT_JUDGED, "raw time"),
        compare.Row("a.open", "seconds", 1.0, 1.0, 1.0, compare.NOT_JUDGED, "raw time"),
        compare.Row("a.ratio", "ratio", 1.0, 1.0, 1.0, compare.OK, "paired"),
        compare.Row("a.gone", "seconds", 1.0, None, None, compare.FAILED, "failed"),
    ]
    pairs = {
        "a.time": [(1.0, r) for r in spread(1.08, 0.005, 6)],
        "a.same": [(1.0, r) for r in spread(1.0, 0.002, 6)],
        "a.open": [(1.0, r) for r in spread(1.0, 0.08, 6)],
        "a.ratio": [(1.0, 1.5)] * 6,  # paired rows keep the gate's verdict
        "a.gone": [(1.0, None)] * 6,
    }
    out = {r.name: r for r in between.judge(rows, pairs, 0.02)}
    assert out["a.time"].verdict == compare.REGRESSION and "DIFFERENT" in out["a.time"].note
    assert "n=6" in out["a.time"].note and "[" in out["a.time"].note  # the interval and n shown
    assert out["a.same"].verdict == compare.OK and "SAME" in out["a.same"].note
    assert (
        out["a.open"].verdict == compare.UNKNOWN and "pairs would decide it" in out["a.open"].note
    )
    assert out["a.ratio"].verdict == compare.OK and out["a.ratio"].note == "paired"
    assert out["a.gone"].verdict == compare.FAILED


def test_a_row_judged_across_processes_keeps_its_device_facts():
    row = compare.Row(
        "a.gpu", "seconds", 1.0, 1.1, 1.1, compare.NOT_JUDGED, "GPU time: noisy", device="busy 31%"
    )
    (out,) = between.judge([row], {"a.gpu": [(1.0, r) for r in spread(1.08, 0.005, 6)]}, 0.02)
    assert out.verdict == compare.REGRESSION and out.note.endswith("; busy 31%")


def _ab_records(tmp_path, base_vals, head_vals, pairs, units=None):
    """Two run records as `harness ab` leaves them: base, and head with its per-pair values."""
    root = tmp_path / "results"
    made = []
    for label, vals in (("base", base_vals), ("head", head_vals)):
        run_id = records.new_run_id("aaaaaaaa11", label)
        with records.writing(
            root, "m1-cpu", run_id, {"commit": "aaaaaaaa11", "label": label}
        ) as st:
            write_set(st / "asv", "aaaaaaaa11", vals, units=units)
            if label == "head":
                records.write_ab_pairs(st, made[0].run_id, pairs, dict.fromkeys(pairs, "seconds"))
        made.append(records.load_record(records.runs_dir(root) / "m1-cpu" / run_id))
    return root, made


def _gate(capsys, root, base, head, *extra):
    code = main(["gate", str(base.path), str(head.path), "--results-dir", str(root), *extra])
    return code, capsys.readouterr().out


def test_the_gate_over_ab_records_judges_raw_rows_across_processes(tmp_path, capsys):
    slower = {"t.time": [(1.0, r) for r in spread(1.06, 0.005, 6)]}
    root, (base, head) = _ab_records(
        tmp_path, {"t.time": draw(10, seed=1)}, {"t.time": draw(10, seed=2)}, slower
    )
    code, out = _gate(capsys, root, base, head, "--json", str(tmp_path / "g.json"))
    assert code == exits.REGRESSION and "DIFFERENT" in out
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["exit"] == 1 and data["judged"] == 1 and data["rows"][0]["verdict"] == "REGRESSION"


def test_rows_left_unknown_exit_6_and_are_listed_first(tmp_path, capsys):
    wide = {"t.time": [(1.0, r) for r in spread(1.0, 0.1, 4)]}
    root, (base, head) = _ab_records(
        tmp_path, {"t.time": draw(10, seed=1)}, {"t.time": draw(10, seed=2)}, wide
    )
    code, out = _gate(capsys, root, base, head)
    assert code == exits.UNDECIDED
    assert out.index("UNKNOWN, neither SAME nor DIFFERENT") < out.index("benchmark")
    summary = next(line for line in out.splitlines() if line.startswith("gate: exit 6"))
    assert "0 judged; 1 UNKNOWN" in summary and "still UNKNOWN" in out
    # a regression elsewhere outranks undecided rows
    root2, (b2, h2) = _ab_records(
        tmp_path / "2",
        {"t.time": draw(10, seed=1), "k": 1},
        {"t.time": draw(10), "k": 2},
        wide,
        units={"k": "ops"},
    )
    assert _gate(capsys, root2, b2, h2)[0] == exits.REGRESSION


def test_two_runs_that_are_not_one_ab_run_keep_the_gate_s_rules(tmp_path, capsys):
    root, (base, head) = _ab_records(
        tmp_path,
        {"t.time": draw(10, seed=1)},
        {"t.time": draw(10, seed=2)},
        {"t.time": [(1.0, 1.5)] * 6},
    )
    data = json.loads((head.path / records.AB_PAIRS).read_text())
    assert data["base_run"] == base.run_id
    # the head's pairs name another base: not this comparison's, so not used
    other = records.new_run_id("bbbbbbbb22", "other")
    with records.writing(root, "m1-cpu", other, {"commit": "bbbbbbbb22"}) as st:
        write_set(st / "asv", "bbbbbbbb22", {"t.time": draw(10, seed=3)})
    code, out = (
        main(["gate", other, head.run_id, "--results-dir", str(root)]),
        capsys.readouterr().out,
    )
    assert code == exits.UNDECIDED and "raw time: no calibrated noise band" in out


class _FakeJob:
    """What _alternate reads of an ab run, with pairs made up instead of run."""

    def __init__(self, policy, ratios):
        self.pairs, self.ratios, self.budget_s, self.started = policy, ratios, None, 0.0
        self.work = pathlib.Path("/nonexistent")  # fakes write nothing
        self.side = {"base": None, "head": None}  # the two sides, in the order a pair starts
        self.lines: list[str] = []

    def log(self, line):
        self.lines.append(line)


def test_sequential_stop_when_every_row_is_decided_and_fixed_counts(monkeypatch, tmp_path):
    def fake_pair(job, suite, i):
        return {"i": i}

    def fake_values(pairs):
        ratios = [job.ratios[p["i"]] for p in pairs]
        return {"r.time": [(1.0, r) for r in ratios]}, {"r.time": "seconds"}

    monkeypatch.setattr(ab, "_pair", fake_pair)
    monkeypatch.setattr(ab, "pair_values", fake_values)
    steady = spread(1.0, 0.002, 30, seed=1)
    job = _FakeJob(ab.Pairs(most=20), steady)
    runs = ab.SuiteRuns()
    ab._alternate(job, runs, "s")
    assert len(runs.pairs) == between.MIN_PAIRS and "decided after 3 pairs" in job.lines[-1]
    # in reach of --max-pairs (8 pairs would do at this spread): pairs go on to the most
    near = [math.exp(0.014 * (-1) ** i) for i in range(30)]
    job = _FakeJob(ab.Pairs(most=6), near)
    runs = ab.SuiteRuns()
    ab._alternate(job, runs, "s")
    assert len(runs.pairs) == 6 and "rows still UNKNOWN" in job.lines[-1]
    # far beyond it (hundreds of pairs): the run ends after the usual count and says why
    noisy = spread(1.0, 0.2, 30, seed=2)
    job = _FakeJob(ab.Pairs(most=7), noisy)
    runs = ab.SuiteRuns()
    ab._alternate(job, runs, "s")
    assert len(runs.pairs) == ab.DEFAULT_PAIRS and "a quieter runner decides them" in job.lines[-1]
    job = _FakeJob(ab.Pairs(most=20), noisy)
    runs = ab.SuiteRuns()
    ab._alternate(job, runs, "s")
    assert len(runs.pairs) == 10  # judged futile from half of --max-pairs on, not before
    # a slowdown whose first pairs sit near the band's edge is not given up early: at 5 pairs it
    # looks out of reach (about 90 pairs), yet 20 pairs decide it
    edge = [1.00, 1.09, 0.99, 1.07, 1.01] + [1.06 * math.exp(0.01 * (-1) ** i) for i in range(25)]
    assert between.pairs_to_decide(edge[:5], 0.02) > ab.FUTILE * 20
    job = _FakeJob(ab.Pairs(most=20), edge)
    runs = ab.SuiteRuns()
    ab._alternate(job, runs, "s")
    assert 5 < len(runs.pairs) <= 20 and "decided after" in job.lines[-1]
    assert between.decide(edge[: len(runs.pairs)]).verdict == between.DIFFERENT
    job = _FakeJob(ab.Pairs(fixed=4), steady)
    runs = ab.SuiteRuns()
    ab._alternate(job, runs, "s")
    assert len(runs.pairs) == 4


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="duet needs 2 CPUs; this has 1")
def test_duet_gives_each_side_its_own_cpus_and_swaps_them(monkeypatch, tmp_path):
    from harness.runs import interleave

    sets = ab.duet_cpus()
    assert sets and not set(sets[0].split(",")) & set(sets[1].split(","))
    seen = []

    def fake_pair(sides, regex, machine, *, duet_cpus=None, work, mode=None):
        # run_pair pins the i-th side it is handed to the i-th CPU set (tests/test_interleave.py)
        seen.append(dict(zip([s.label for s in sides], duet_cpus)))
        return {s.label: tmp_path / s.label for s in sides}

    monkeypatch.setattr(interleave, "run_pair", fake_pair)
    monkeypatch.setattr(
        ab, "_side_run", lambda job, label, suite, out: types.SimpleNamespace(label=label)
    )
    job = _FakeJob(ab.Pairs(fixed=2, duet=True), [])
    job.spec = types.SimpleNamespace(benches=(), machine="m1")
    for i in range(2):
        ab._pair(job, "s", i)
    first, second = seen
    assert first["base"] != first["head"] and {first["base"], first["head"]} == set(sets)
    assert second["base"] == first["head"] and second["head"] == first["base"]


def test_a_process_s_value_is_its_fastest_call_for_raw_times_and_the_median_otherwise():
    calls = [4e-4, 9e-4, 3.8e-4, 5e-3, 4.1e-4]  # preempted calls only ever add time
    assert between.process_value(calls, 9.9, "seconds") == 3.8e-4
    assert between.process_value([100.0, 80.0, 120.0], None, "samples/s") == 120.0
    assert between.process_value([1.0, 1.2, 0.9], None, "relative") == 1.0
    assert between.process_value(None, 2.5, "seconds") == 2.5  # a bare value is all there is


def _sequential_run(draw_log_ratio, most: int = 20, threshold: float = 0.02) -> str:
    """One sequential ab row: a pair at a time, judged after each from MIN_PAIRS on, stopping at
    the first SAME or DIFFERENT (as ab._alternate does)."""
    ratios = []
    for n in range(1, most + 1):
        ratios.append(math.exp(draw_log_ratio()))
        if n >= between.MIN_PAIRS:
            verdict = between.decide(ratios, threshold).verdict
            if verdict != between.UNKNOWN:
                return verdict
    return between.UNKNOWN


@pytest.mark.parametrize(
    "noise", ["normal", pytest.param("heavy-tailed", marks=pytest.mark.slow)]
)  # heavy-tailed: the second tier (~5 s under load)
def test_looking_after_every_pair_keeps_false_differents_of_a_whole_aa_run_under_one_percent(
    noise,
):
    # Every look is one more chance of a false DIFFERENT; the +-threshold band, which a
    # DIFFERENT interval must clear wholly, keeps the whole run's rate low for pairs whose
    # ratios are independent (a host that slows one side only is not: a quieter runner decides).
    rng = random.Random(7)

    def draw():
        if noise == "normal":
            return rng.gauss(0, 0.05)
        return rng.gauss(0, 0.2) if rng.random() < 0.15 else rng.gauss(0, 0.03)

    runs = [_sequential_run(draw) for _ in range(600)]
    false = sum(v == between.DIFFERENT for v in runs) / len(runs)
    assert false <= 0.01, f"{false:.1%} of A/A runs ended DIFFERENT"
    # and a 10% slowdown of the same noise is caught in most runs: the rule is not just mute
    caught = [
        _sequential_run(lambda: math.log(1.10) + draw()) == between.DIFFERENT for _ in range(200)
    ]
    assert sum(caught) / len(caught) >= 0.75
