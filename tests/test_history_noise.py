"""Each row's noise between runs, learned from the machine's history (harness.verdict.noise),
and the gate that uses it."""

import json
import math
import random
import statistics

import pytest

from harness.cli import main
from harness.core import records
from harness.verdict import noise
from harness.verdict.gate import run_gate
from tests.test_gate_support import write_set

# git's processes started cheaply from this worker (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("light_git_spawns")

RAW = "models.Inference.track_inference_time"
RATIO = "fusion.PointwiseChain.track_compiled_over_eager"
STEP = "models.TrainingStep.track_step_time"
UNITS = {RAW: "seconds", RATIO: "ratio", STEP: "seconds"}


def levels(n, sd, level=1.0, seed=0):
    """n runs' central values drawn around `level` with a relative sd between runs."""
    rng = random.Random(seed)
    return [level * math.exp(rng.gauss(0, sd)) for _ in range(n)]


# ---- the estimator ----


@pytest.mark.parametrize("seed", range(5))
def test_the_spread_of_a_steady_series_is_its_sd_between_runs(seed):
    s = noise.spread(levels(30, 0.04, seed=seed))
    assert s.runs == 30 and s.segments == 1
    assert 0.025 < s.sigma < 0.06


@pytest.mark.parametrize("seed", range(5))
def test_a_real_step_does_not_widen_the_spread(seed):
    """A 20% slowdown from night k on is a step, not noise: the estimate stays within 20% of the
    same history without it."""
    steady = levels(30, 0.02, seed=seed)
    stepped = [v * (1.2 if i >= 18 else 1.0) for i, v in enumerate(steady)]
    plain, split = noise.spread(steady), noise.spread(stepped)
    assert split.segments == 2
    assert abs(split.sigma / plain.sigma - 1) < 0.2
    # without segmentation the step would have more than doubled it
    logs = [math.log(v) for v in stepped]
    pooled = noise.shamos([b - a for i, a in enumerate(logs) for b in logs[i + 1 :]])
    assert pooled > 2 * plain.sigma


def test_one_extreme_run_cannot_widen_the_spread_enough_to_hide_a_regression():
    """A hostile or swapping run (x100, or x0.01) moves the estimate by a few percent, not more:
    it is in n - 1 of the n(n - 1)/2 pairs."""
    base = levels(20, 0.03, seed=3)
    plain = noise.spread(base).sigma
    for extreme in (100.0, 0.01, 1e9):
        hostile = base[:10] + [extreme] + base[10:]
        assert noise.spread(hostile).sigma < 1.25 * plain
    # even three such runs of thirty leave the threshold far below the cap
    many = base + [1e6, 1e-6, 1e6]
    assert noise.threshold_of(noise.spread(many).sigma) < 2 * noise.threshold_of(plain)


def test_too_few_runs_teach_nothing():
    assert noise.spread([1.0, 1.1, 0.9, 1.0]) is None
    assert noise.spread([1.0, 1.1, 0.9, 1.0, 1.05]) is not None
    assert noise.spread([1.0, 0.0, -1.0, float("nan"), 1.0, 1.0]) is None


def test_threshold_widens_with_a_noisier_run_and_says_what_it_catches():
    t = noise.threshold_of(0.02)
    assert t == pytest.approx(math.expm1(noise.MULTIPLE * 0.02 * math.sqrt(2)))
    assert noise.threshold_of(0.02, (1.0, 2.0)) > t
    assert noise.smallest_caught(0.02) > t


def test_a_short_quiet_history_is_pooled_with_its_kind_and_a_long_one_speaks_for_itself():
    """Five quiet runs of a row whose kind moves 10% between runs cannot show the row's tail:
    its sigma is pooled up towards its kind's; thirty runs keep nearly their own; pooling never
    narrows a row."""
    kinds = {"quiet": "raw time", "a": "raw time", "b": "raw time", "c": "raw time"}
    for n, pulled in ((5, True), (30, False)):
        spreads = {k: noise.spread(levels(n, 0.10, seed=i)) for i, k in enumerate("abc")}
        spreads["quiet"] = noise.spread(levels(n, 0.01, seed=9))
        out = noise.pooled(spreads, kinds)
        own, kind = spreads["quiet"].sigma, statistics.median(s.sigma for s in spreads.values())
        assert out["quiet"].own == own and out["quiet"].sigma > own
        # five runs: half the kind's noise at least; thirty: less than half of it
        assert (out["quiet"].sigma > kind / 2) == pulled
        for k in "abc":
            assert out[k].sigma >= spreads[k].sigma


def test_rows_of_another_kind_do_not_pool_together():
    spreads = {"r": noise.spread(levels(6, 0.01, seed=1)), "t": noise.spread(levels(6, 0.2))}
    out = noise.pooled(spreads, {"r": "paired ratio", "t": "raw time"})
    assert out["r"].sigma == spreads["r"].sigma


# ---- the gate with it ----


def write_runs(root, series, machine="m1-cpu", mode="quick", start=0, label=None):
    """One run record per dict (row -> samples), oldest first; returns their folders."""
    out = []
    for i, benches in enumerate(series, start):
        commit = "c" * 40
        run_id = f"20261201T{i // 60:02d}{i % 60:02d}00Z-{commit[:8]}-{i:06x}"
        meta = {"commit": commit, "machine": machine, "mode": mode}
        if label:
            meta["label"] = label
        with records.writing(root, machine, run_id, meta) as d:
            write_set(d / "asv", commit, benches, machine=machine, units=UNITS)
            fp = {"torch": "2.14.1", "torch_threads": 1, "cpu": "x", "commit": commit}
            (d / "fingerprint.json").write_text(json.dumps(fp))
        out.append(records.runs_dir(root) / machine / run_id)
    return out


def run_of(level_raw, level_ratio, seed, within=0.01):
    rng = random.Random(seed)
    return {
        RAW: [level_raw * math.exp(rng.gauss(0, within)) for _ in range(12)],
        RATIO: [level_ratio * math.exp(rng.gauss(0, within)) for _ in range(12)],
        STEP: [level_raw * 3 * math.exp(rng.gauss(0, within)) for _ in range(12)],
    }


def history(root, n=10, sd=0.02, seed=0):
    raws, ratios = levels(n, sd, 1e-3, seed), levels(n, sd / 4, 0.8, seed + 100)
    return write_runs(root, [run_of(r, q, seed + i) for i, (r, q) in enumerate(zip(raws, ratios))])


def test_a_rows_noise_does_not_depend_on_the_rows_selected(tmp_path):
    """Each kind's typical spread and the outlier test are the whole suite's: --bench RAW gives
    RAW the threshold it has in a gate of every row."""
    history(tmp_path, n=6, sd=0.01)
    want = noise.Wanted("m1-cpu", noise.mode_of(records.list_runs(tmp_path)[0].meta))
    alone, every = noise.learn(tmp_path, want, only={RAW}), noise.learn(tmp_path, want)
    assert set(alone.spreads) == {RAW}
    assert alone.row(RAW).threshold == every.row(RAW).threshold
    assert every.spreads[RAW].own is not None  # STEP, a raw time too, pooled it


def test_raw_times_are_judged_by_their_history_and_the_note_says_so(tmp_path):
    history(tmp_path)
    a, b = write_runs(tmp_path, [run_of(1e-3, 0.8, 50), run_of(1.5e-3, 0.8, 51)], start=20)
    out = run_gate(str(a), str(b), root=tmp_path)
    raw = next(r for r in out.rows if r.name == RAW)
    assert raw.verdict == "REGRESSION" and raw.basis == "history"
    assert "history of 10 runs" in raw.note and "between runs" in raw.note
    assert out.code == 1 and "by history noise" in out.summary()
    assert any("noise between runs learned from 10 clean" in line for line in out.learned.header())
    off = run_gate(str(a), str(b), root=tmp_path, history=False)
    raw = next(r for r in off.rows if r.name == RAW)
    assert raw.verdict == "not judged" and "no calibrated noise band" in raw.note


def test_a_row_that_moves_too_much_between_runs_is_not_judged_with_the_figure(tmp_path):
    history(tmp_path, sd=0.2)
    a, b = write_runs(tmp_path, [run_of(1e-3, 0.8, 50), run_of(1.6e-3, 0.8, 51)], start=20)
    out = run_gate(str(a), str(b), root=tmp_path)
    raw = next(r for r in out.rows if r.name == RAW)
    assert raw.verdict == "not judged"
    assert "between runs on this machine (history: 10 runs)" in raw.note
    assert "over the 25% cap" in raw.note


def test_with_too_few_runs_a_raw_time_says_how_many_the_history_holds(tmp_path):
    history(tmp_path, n=3)
    a, b = write_runs(tmp_path, [run_of(1e-3, 0.8, 50), run_of(1.0e-3, 0.8, 51)], start=20)
    out = run_gate(str(a), str(b), root=tmp_path)
    raw = next(r for r in out.rows if r.name == RAW)
    assert raw.verdict == "not judged"
    assert "the history holds 3 comparable run(s) of it (5 needed)" in raw.note
    assert out.learned.header()[0].startswith("noise between runs: only 3 earlier clean")


def test_the_judged_runs_dirty_runs_and_other_modes_never_teach_the_noise(tmp_path):
    history(tmp_path, n=6)
    write_runs(tmp_path, [run_of(5e-3, 0.8, 7)] * 3, mode="full", start=30)
    a, b = write_runs(tmp_path, [run_of(1e-3, 0.8, 50), run_of(1.01e-3, 0.8, 51)], start=40)
    dirty = write_runs(tmp_path, [run_of(9e-3, 0.8, 9)], start=45)[0]
    meta = json.loads((dirty / "run.json").read_text())
    (dirty / "run.json").write_text(json.dumps(dict(meta, dirty=True)))
    records.write_manifest(dirty, "m1-cpu", dirty.name)
    out = run_gate(str(a), str(b), root=tmp_path)
    assert len(out.learned.history.runs) == 6
    assert a.name not in out.learned.history.runs and b.name not in out.learned.history.runs
    assert out.learned.history.left_out == {dirty.name: "a dirty tree"}


def test_a_record_changed_after_it_was_written_does_not_teach(tmp_path):
    runs = history(tmp_path, n=6)
    (runs[2] / "asv.log").write_text("edited")
    a, b = write_runs(tmp_path, [run_of(1e-3, 0.8, 50), run_of(1.01e-3, 0.8, 51)], start=40)
    out = run_gate(str(a), str(b), root=tmp_path)
    assert "not a whole record" in out.learned.history.left_out[runs[2].name]
    assert len(out.learned.history.runs) == 5


def test_a_run_off_for_every_row_at_once_is_named_and_left_out(tmp_path):
    rng = random.Random(1)
    series = [run_of(1e-3 * math.exp(rng.gauss(0, 0.02)), 0.8, i) for i in range(9)]
    series.insert(4, run_of(3e-3, 1.6, 99))  # a machine that was swapping
    runs = write_runs(tmp_path, series)
    a, b = write_runs(tmp_path, [run_of(1e-3, 0.8, 50), run_of(1.0e-3, 0.8, 51)], start=40)
    out = run_gate(str(a), str(b), root=tmp_path)
    assert "an outlier for most rows at once" in out.learned.history.left_out[runs[4].name]
    assert runs[4].name in "\n".join(out.learned.header())


def test_a_noisier_head_is_said_so_and_widens_its_thresholds(tmp_path):
    history(tmp_path)
    a = write_runs(tmp_path, [run_of(1e-3, 0.8, 50)], start=40)[0]
    b = write_runs(tmp_path, [run_of(1e-3, 0.8, 51, within=0.05)], start=41)[0]
    out = run_gate(str(a), str(b), root=tmp_path)
    head = out.learned.states[1]
    assert head.noisier and head.within > 3
    said = "\n".join(out.learned.header())
    assert "head was measured in a noisier state than its history" in said
    c = write_runs(tmp_path, [run_of(1e-3, 0.8, 52)], start=42)[0]
    calm = run_gate(str(a), str(c), root=tmp_path)
    assert not calm.learned.states[1].noisier and calm.learned.states[1].within < 1.5
    usual = next(r for r in calm.rows if r.name == RAW)
    # five times noisier within the run: its rows would need thresholds past the cap
    too = next(r for r in out.rows if r.name == RAW)
    assert too.verdict == "not judged" and "noisier than its history" in too.note
    # twice: judged, at a threshold widened for it
    d = write_runs(tmp_path, [run_of(1e-3, 0.8, 53, within=0.02)], start=43)[0]
    twice = run_gate(str(a), str(d), root=tmp_path)
    wide = next(r for r in twice.rows if r.name == RAW)
    assert twice.learned.states[1].noisier
    assert "widened x" in wide.note and wide.threshold > 1.3 * usual.threshold


def test_the_cli_option_switches_it_off_and_json_says_how_many_rows_it_judged(tmp_path, capsys):
    history(tmp_path)
    a, b = write_runs(tmp_path, [run_of(1e-3, 0.8, 50), run_of(1.0e-3, 0.8, 51)], start=40)
    js = tmp_path / "gate.json"
    code = main(["gate", str(a), str(b), "--results-dir", str(tmp_path), "--json", str(js)])
    out = capsys.readouterr().out
    data = json.loads(js.read_text())
    assert code == 0 and data["judged_by_history"] == 3 and data["history"]["runs"]
    assert "3 by history noise" in out
    code = main(["gate", str(a), str(b), "--results-dir", str(tmp_path), "--no-history-noise"])
    out = capsys.readouterr().out
    assert "by history noise" not in out and "no calibrated noise band" in out
    args = ["gate", str(a), str(b), "--results-dir", str(tmp_path), "--history-last", "2"]
    assert main(args) == 3


def test_history_finds_a_raw_time_step_that_stands_out_of_its_noise(tmp_path):
    """`harness history` (and nightly) judges raw times with the series' own noise: a 30% step
    over 2% noise between runs is a step; the same series without it is not."""
    from harness.verdict import history as hist

    raws = levels(16, 0.02, 1e-3, seed=4)
    stepped = [r * (1.3 if i >= 8 else 1.0) for i, r in enumerate(raws)]
    write_runs(tmp_path / "a", [run_of(r, 0.8, i) for i, r in enumerate(stepped)])
    write_runs(tmp_path / "b", [run_of(r, 0.8, i) for i, r in enumerate(raws)])
    found = hist.detect(tmp_path / "a", "m1-cpu")
    step = next(s for s in found.steps if s.benchmark == RAW)
    assert step.status == hist.CONFIRMED and step.position == 9 and step.direction == "worse"
    assert RAW not in found.not_judged
    calm = hist.detect(tmp_path / "b", "m1-cpu")
    assert not [s for s in calm.steps if s.benchmark == RAW] and RAW not in calm.not_judged


# ---- the test-only slowdown of named rows (the catch experiment's injection) ----


def test_the_slowdown_switch_names_rows_by_regex():
    from harness.measure import inject

    spec = r"Inference\.track_inference_time\(=0.25;PointwiseChain=0.1"
    assert inject.fraction_for("models.Inference.track_inference_time('mlp')", spec) == 0.25
    assert inject.fraction_for("fusion.PointwiseChain.track_compiled_over_eager", spec) == 0.1
    assert inject.fraction_for("models.Inference.track_inference_time_over_reference", spec) == 0
    assert inject.fraction_for("anything", "") == 0


def test_the_measured_side_is_slowed_by_its_fraction_and_the_other_side_never(monkeypatch):
    import time

    from harness.measure import inject

    def work():
        end = time.thread_time() + 0.002
        while time.thread_time() < end:
            pass

    monkeypatch.setenv("HARNESS_TEST_SLOWDOWN_ROWS", "fusion.X=0.5")
    fn, base = inject.measured_side([work, work], row="fusion.X.track_y")
    assert base is work and fn is not work

    def cpu(f, n=20):
        t0 = time.thread_time()
        for _ in range(n):
            f()
        return time.thread_time() - t0

    assert 1.35 < cpu(fn) / cpu(work) < 1.7
    assert inject.measured_side([work], row="other.Row.track")[0] is work
    monkeypatch.delenv("HARNESS_TEST_SLOWDOWN_ROWS")
    assert inject.measured_side([work, work], row="fusion.X.track_y")[0] is work


@pytest.mark.slow  # the second tier: ~6 s of the default tier's budget under load
def test_gate_pull_brings_the_history_that_teaches_the_noise(tmp_path, capsys, monkeypatch):
    """In a pull request: the base named by run id and the machine's newest clean runs are
    pulled; the raw time is judged by the noise they teach."""
    from harness.core import settings
    from tests.store_support import bare_repo, url

    bare = bare_repo(tmp_path / "history.git")
    fleet = tmp_path / "fleet"
    runs = history(fleet, n=8)
    monkeypatch.setenv(settings.STORE_REMOTE.name, url(bare))
    assert main(["store", "push", "--results-dir", str(fleet)]) == 0
    pr = tmp_path / "pr"
    write_runs(pr, [run_of(1.5e-3, 0.8, 60)], start=50)
    capsys.readouterr()
    args = ["--results-dir", str(pr), "--machine", "m1-cpu", "--pull"]
    code = main(["gate", runs[-1].name, "latest", *args])
    out = capsys.readouterr().out
    assert code == 1 and "noise between runs learned from 7 clean" in out
    raw = next(line for line in out.splitlines() if line.startswith(RAW + " "))
    assert "REGRESSION" in raw and "history of 7 runs" in raw
    assert len(records.list_runs(pr)) == 9


def test_the_report_shows_each_rows_noise_beside_its_value(tmp_path):
    history(tmp_path)
    run = write_runs(tmp_path, [run_of(1e-3, 0.8, 70)], start=40)[0]
    out = tmp_path / "report"
    assert main(["report", str(run), "--results-dir", str(tmp_path), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "## Noise between runs" in text and "Learned from 10 clean" in text
    line = next(x for x in text.splitlines() if x.startswith(f"| {RAW}"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1].endswith("us") and cells[2].startswith("+-") and cells[3].endswith("%")
    # the paired ratios' table of their suite carries the two columns too
    assert "smallest change caught" in text.split("## Noise between runs")[0]


def test_a_base_that_strayed_from_its_level_is_no_change_of_the_head(tmp_path):
    """A base run 25% fast for one row (a lucky process) against a head at the history's level:
    beyond the pair's threshold, but the head stands where identical code stands, so ok; a head
    that is slower than both still is a regression."""
    history(tmp_path)
    lucky, usual = write_runs(
        tmp_path, [run_of(0.8e-3, 0.8, 80), run_of(1.0e-3, 0.8, 81)], start=40
    )
    raw = next(r for r in run_gate(str(lucky), str(usual), root=tmp_path).rows if r.name == RAW)
    assert raw.verdict == "ok" and "head within its history's level" in raw.note
    slow = write_runs(tmp_path, [run_of(1.4e-3, 0.8, 82)], start=42)[0]
    raw = next(r for r in run_gate(str(lucky), str(slow), root=tmp_path).rows if r.name == RAW)
    assert raw.verdict == "REGRESSION"


def test_a_row_whose_default_threshold_wins_still_names_its_history(tmp_path):
    history(tmp_path)  # the ratio moves +-0.5% between runs: the gate's 5% wins
    a, b = write_runs(tmp_path, [run_of(1e-3, 0.8, 90), run_of(1e-3, 0.8, 91)], start=40)
    ratio = next(r for r in run_gate(str(a), str(b), root=tmp_path).rows if r.name == RATIO)
    assert ratio.basis == "default" and ratio.history_runs == 10
    assert "threshold 5.0% (the gate's --threshold; history of 10 runs: +-" in ratio.note
