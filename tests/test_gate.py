"""The gate on synthetic asv result sets: verdicts, directions, exit codes, bad input."""

from __future__ import annotations

import json
import math
import re

import pytest
from test_gate_support import draw, write_set

from harness.cli import main
from harness.verdict import compare, gate


def run_cli(capsys, *args):
    code = main(["gate", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def verdicts(out: str) -> dict[str, str]:
    """benchmark name -> verdict, read back from the printed table."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("benchmark")) + 2
    found = {}
    for line in lines[start:]:
        if line.startswith("gate:"):
            break
        for v in (
            compare.OK,
            compare.IMPROVED,
            compare.REGRESSION,
            compare.FAILED,
            compare.MISSING,
            compare.SKIPPED,
            compare.BAD,
            compare.NOT_JUDGED,
        ):
            if f"  {v}" in line:
                found[line.split()[0]] = v
    return found


def pair(tmp_path, base: dict, head: dict, **kw):
    b = write_set(tmp_path / "base", "aaaaaaaa11", base, **kw)
    h = write_set(tmp_path / "head", "bbbbbbbb22", head, **kw)
    return b, h


# Paired ratios are judged by the statistics on every machine; reference-normalised times only
# with a calibrated noise band, raw times and throughputs only below one (docs/gate.md).
PAIRED = {"t.ratio": "ratio"}
NORMALISED = {"t.rel": "relative"}


def noise_file(tmp_path, bands: dict[str, float]):
    path = tmp_path / "noise.json"
    path.write_text(
        json.dumps({"machine": "m1-cpu", "benchmarks": {k: {"band": v} for k, v in bands.items()}})
    )
    return path


def test_ten_percent_slowdown_of_a_paired_row_is_flagged(tmp_path, capsys):
    b, h = pair(
        tmp_path,
        {"t.ratio": draw(30, seed=1)},
        {"t.ratio": draw(30, seed=2, scale=1.10)},
        units=PAIRED,
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 1, out
    assert verdicts(out) == {"t.ratio": "REGRESSION"} and "paired ratio: p=" in out


def test_paired_row_of_unlike_work_is_judged_at_its_drift_allowance(tmp_path, capsys):
    # no space: verdicts() splits
    drifty = "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous('alexnet')"
    units = {drifty: "ratio", "t.ratio": "ratio"}
    b, h = pair(
        tmp_path,
        {drifty: draw(30, seed=1), "t.ratio": draw(30, seed=3)},
        {drifty: draw(30, seed=2, scale=1.07), "t.ratio": draw(30, seed=4, scale=1.07)},
        units=units,
    )
    code, out, _ = run_cli(capsys, b, h)
    # the same 7% move: beyond a plain paired row's 5%, inside the 10% drift allowance
    assert code == 1 and verdicts(out) == {drifty: "ok", "t.ratio": "REGRESSION"}, out
    assert "paired ratio, drift allowance 10%: p=" in out and "threshold 10.0%" in out
    b, h = pair(
        tmp_path / "far",
        {drifty: draw(30, seed=1)},
        {drifty: draw(30, seed=2, scale=1.15)},
        units=units,
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 1 and verdicts(out) == {drifty: "REGRESSION"}  # judged, not switched off


def test_optimizer_step_row_rides_out_host_drift_but_flags_a_fallback_to_the_for_loop(
    tmp_path, capsys
):
    # native code over the Python loop: its ratio moved 22% inside one loaded process (metrics)
    row = "fusion.OptimizerStepOverForLoop.track_step_over_for_loop('AdamW','foreach')"
    units = {row: "ratio"}
    b, h = pair(
        tmp_path,
        {row: draw(30, seed=1, scale=0.60)},
        {row: draw(30, seed=2, scale=0.60 * 1.22)},
        units=units,
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 0 and verdicts(out) == {row: "ok"}, out
    assert "drift allowance 30%" in out
    # the wide threshold is the row's own allowance, not a machine band to recalibrate
    assert "built-in drift allowances above 10%" in out and "recalibrate" not in out
    # foreach falling back to one kernel per tensor: the step costs what the loop costs
    b, h = pair(
        tmp_path / "fallback",
        {row: draw(30, seed=1, scale=0.60)},
        {row: draw(30, seed=2, scale=1.0)},
        units=units,
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 1 and verdicts(out) == {row: "REGRESSION"}, out


def test_normalised_row_is_judged_once_calibrated(tmp_path, capsys):
    b, h = pair(
        tmp_path,
        {"t.rel": draw(30, seed=1)},
        {"t.rel": draw(30, seed=2, scale=1.10)},
        units=NORMALISED,
    )
    code, out, _ = run_cli(capsys, b, h)
    # nothing judged is undecided (exit 6), never a plain pass
    assert code == 6 and verdicts(out) == {"t.rel": "not judged"}
    assert "normalised time: no calibrated noise band" in out
    assert "0 judged; 1 not judged (normalised time: no calibrated noise band)" in out
    code, out, _ = run_cli(capsys, b, h, "--noise", noise_file(tmp_path, {"t.rel": 0.03}))
    assert code == 1 and verdicts(out) == {"t.rel": "REGRESSION"}
    assert "normalised time, noise band 3.0%: p=" in out
    code, out, _ = run_cli(capsys, b, h, "--noise", noise_file(tmp_path, {"t.rel": 0.20}))
    assert code == 0 and "threshold 20.0%" in out and "1 judged (1 ok)" in out
    assert "calibrated noise bands above 10% hide smaller timing changes for: t.rel" in out
    assert "recalibrate on a quieter machine" in out and "built-in drift" not in out


def test_aa_pair_from_one_distribution_passes(tmp_path, capsys):
    for seed in range(5):
        b, h = pair(
            tmp_path / str(seed),
            {"t.ratio": draw(30, seed=seed)},
            {"t.ratio": draw(30, seed=100 + seed)},
            units=PAIRED,
        )
        code, out, _ = run_cli(capsys, b, h)
        assert code == 0, out
        assert "REGRESSION" not in out


def test_speedup_is_improvement_not_failure(tmp_path, capsys):
    b, h = pair(
        tmp_path,
        {"t.ratio": draw(30, seed=1)},
        {"t.ratio": draw(30, seed=2, scale=0.8)},
        units=PAIRED,
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 0 and "improved" in out


def test_raw_time_is_not_judged_without_a_narrow_calibrated_band(tmp_path, capsys):
    # 30% slower in raw seconds: on a shared runner that is within run-to-run drift
    b, h = pair(tmp_path, {"t.time": draw(30, seed=1)}, {"t.time": draw(30, seed=2, scale=1.3)})
    code, out, _ = run_cli(capsys, b, h)
    assert code == 6 and verdicts(out) == {"t.time": "not judged"}
    assert "raw time: no calibrated noise band" in out
    code, out, _ = run_cli(capsys, b, h, "--noise", noise_file(tmp_path, {"t.time": 0.15}))
    assert code == 6 and "raw time: noise band 15% >= threshold 5%" in out
    # a dedicated runner's band below the threshold: the raw row is judged
    code, out, _ = run_cli(capsys, b, h, "--noise", noise_file(tmp_path, {"t.time": 0.02}))
    assert code == 1 and verdicts(out) == {"t.time": "REGRESSION"}
    assert "raw time, noise band 2.0%: p=" in out


def test_throughput_is_higher_better_when_judged(tmp_path, capsys):
    units = {"t.rate": "samples/s"}
    narrow = noise_file(tmp_path, {"t.rate": 0.01})
    b, h = pair(
        tmp_path,
        {"t.rate": draw(30, 1000, seed=1)},
        {"t.rate": draw(30, 1000, seed=2, scale=0.85)},
        units=units,
    )
    code, out, _ = run_cli(capsys, b, h, "--noise", narrow)
    assert code == 1 and "REGRESSION" in out and "raw throughput" in out
    assert run_cli(capsys, b, h)[0] == 6, "no band: not judged, so undecided"
    b, h = pair(
        tmp_path / "up",
        {"t.rate": draw(30, 1000, seed=1)},
        {"t.rate": draw(30, 1000, seed=2, scale=1.2)},
        units=units,
    )
    assert run_cli(capsys, b, h, "--noise", narrow)[0] == 0


def test_shift_within_threshold_or_noise_band_passes(tmp_path, capsys):
    # 3% slower with tight samples: significant, but below the 5% threshold
    b, h = pair(
        tmp_path,
        {"t.ratio": draw(40, cv=0.005, seed=1)},
        {"t.ratio": draw(40, cv=0.005, seed=2, scale=1.03)},
        units=PAIRED,
    )
    assert run_cli(capsys, b, h)[0] == 0
    # 10% slower, but this paired row's calibrated noise band is 15%
    b, h = pair(
        tmp_path / "n",
        {"t.ratio": draw(30, seed=1)},
        {"t.ratio": draw(30, seed=2, scale=1.10)},
        units=PAIRED,
    )
    code, out, _ = run_cli(capsys, b, h, "--noise", noise_file(tmp_path, {"t.ratio": 0.15}))
    assert code == 0 and "threshold 15.0%" in out


def test_few_samples_fall_back_to_asvs_confidence_intervals(tmp_path, capsys):
    # 3+3 samples cannot reach p < 0.002 in any Mann-Whitney test; asv's rule decides instead
    tight = [1.00, 1.01, 0.99]
    b, h = pair(tmp_path, {"t.ratio": tight}, {"t.ratio": [x * 1.3 for x in tight]}, units=PAIRED)
    code, out, _ = run_cli(capsys, b, h)
    assert code == 1 and "3+3 samples, too few for Mann-Whitney: 99% CIs do not overlap" in out
    wide = [0.7, 1.0, 1.4]
    b, h = pair(
        tmp_path / "w", {"t.ratio": wide}, {"t.ratio": [x * 1.3 for x in wide]}, units=PAIRED
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 0 and "99% CIs overlap" in out and "(beyond threshold, not significant)" in out


def test_a_bare_number_is_not_judged(tmp_path, capsys):
    # the old compiled/eager row: a median ratio of two timing loops, 1.1 -> 22.8 on identical code
    b, h = pair(tmp_path, {"t.ratio": 1.1}, {"t.ratio": 22.8}, units=PAIRED)
    code, out, _ = run_cli(capsys, b, h)
    assert code == 6 and verdicts(out) == {"t.ratio": "not judged"}
    assert "no samples on either side; a bare number cannot be tested" in out


def test_counters_exact_and_memory_tolerance(tmp_path, capsys):
    units = {"k": "kernels", "mem": "bytes", "gb": "graph breaks"}
    b, h = pair(
        tmp_path,
        {"k": 10, "mem": 1_000_000, "gb": 0},
        {"k": 10, "mem": 1_015_000, "gb": 0},
        units=units,
    )
    assert run_cli(capsys, b, h)[0] == 0
    b, h = pair(
        tmp_path / "2", {"k": 10, "mem": 1e6, "gb": 0}, {"k": 11, "mem": 1e6, "gb": 0}, units=units
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 1 and "exact: +1 kernels" in out
    b, h = pair(
        tmp_path / "3",
        {"k": 10, "mem": 1e6, "gb": 0},
        {"k": 10, "mem": 1.05e6, "gb": 1},
        units=units,
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 1 and verdicts(out) == {"gb": "REGRESSION", "k": "ok", "mem": "REGRESSION"}


def test_table_always_printed_and_markdown(tmp_path, capsys):
    b, h = pair(
        tmp_path,
        {"a.time": draw(30, seed=1), "b.k": 5},
        {"a.time": draw(30, seed=2, scale=1.2), "b.k": 5},
        units={"a.time": "ratio"},
    )
    md = tmp_path / "gate.md"
    code, out, _ = run_cli(capsys, b, h, "--markdown", md)
    assert code == 1
    for word in ("benchmark", "base", "head", "ratio", "verdict", "a.time", "b.k"):
        assert word in out
    text = re.sub(r" +", " ", md.read_text())
    assert text.count("\n|") >= 3 and "**REGRESSION**" in text and "| b.k |" in text


def test_failed_and_missing_exit_2(tmp_path, capsys):
    b, h = pair(
        tmp_path,
        {"a.time": draw(30, seed=1), "gone.k": 3},
        {"a.time": draw(30, seed=1), "new.k": 3},
        units={"a.time": "ratio"},
    )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 2 and verdicts(out) == {"a.time": "ok", "gone.k": "MISSING", "new.k": "MISSING"}
    # a benchmark whose suite the other run did not hold (a --suite selection) says so
    from harness.verdict.results import load

    base, head = load(b), load(h)
    head.suites = ("a",)
    notes = {r.name: r.note for r in compare.compare(base, head)}
    assert notes["gone.k"] == "not in head: suite gone was not run there (its run held a)"
    assert notes["new.k"] == f"not in base ({base.path})"  # unknown there: the file is named
    # ... or that its run's --bench selection left out
    base.benches = ("a.time", "^other$")
    notes = {r.name: r.note for r in compare.compare(base, head)}
    assert notes["new.k"] == (
        "not in base: not selected there (its run was restricted to --bench a.time "
        "--bench '^other$')"
    )
    base.benches = ("k$",)  # it would have selected new.k: the file is named
    assert {r.name: r.note for r in compare.compare(base, head)}["new.k"].endswith(f"({base.path})")
    b, h = pair(tmp_path / "f", {"a.k": 3}, {"a.k": None})
    code, out, _ = run_cli(capsys, b, h)
    assert code == 2 and "FAILED" in out and "failed on head" in out
    b, h = pair(tmp_path / "s", {"a.k": 3}, {"a.k": math.nan})
    assert run_cli(capsys, b, h)[0] == 2


def test_skipped_on_both_sides_is_counted_and_nothing_compared_is_bad(tmp_path, capsys):
    b, h = pair(tmp_path, {"a.k": math.nan, "b.k": 1}, {"a.k": math.nan, "b.k": 1})
    code, out, _ = run_cli(capsys, b, h, "--json", str(tmp_path / "v.json"))
    # counted and said, left out of the table (a --bench selection skips dozens of parameters)
    assert code == 0 and "1 skipped" in out and "1 row(s) skipped on both sides" in out
    assert not any(line.startswith("a.k") for line in out.splitlines())
    assert any(line.startswith("b.k") for line in out.splitlines())
    rows = json.loads((tmp_path / "v.json").read_text())["rows"]
    assert {r["name"]: r["verdict"] for r in rows} == {"a.k": "skipped", "b.k": "ok"}
    b, h = pair(tmp_path / "2", {"a.k": math.nan}, {"a.k": math.nan})
    code, out, err = run_cli(capsys, b, h)
    assert code == 3 and "nothing was compared" in err


@pytest.mark.parametrize(
    "damage, needle",
    [
        ("truncate", "corrupt or truncated JSON"),
        ("missing", "result file or folder not found"),
        ("empty-samples", "empty sample list"),
        ("nan-sample", "sample is nan"),
        ("no-benchmarks-json", "no benchmarks.json"),
        ("unknown-unit", "unknown benchmark unit"),
        ("bad-structure", "malformed"),
    ],
)
def test_bad_input_exit_3_names_the_file(tmp_path, capsys, damage, needle):
    b, h = pair(tmp_path, {"a.time": draw(30, seed=1)}, {"a.time": draw(30, seed=2)})
    if damage == "truncate":
        h.write_text(h.read_text()[:-40])
    elif damage == "missing":
        h = h.with_name("nope.json")
    elif damage in ("empty-samples", "nan-sample", "bad-structure"):
        d = json.loads(h.read_text())
        col = d["result_columns"].index("samples")
        if damage == "bad-structure":
            d["results"]["a.time"] = 7
        else:
            d["results"]["a.time"][col] = (
                [[]] if damage == "empty-samples" else [[1e-3, float("nan")]]
            )
        h.write_text(json.dumps(d))
    elif damage == "no-benchmarks-json":
        (h.parent.parent / "benchmarks.json").unlink()
    elif damage == "unknown-unit":
        bj = h.parent.parent / "benchmarks.json"
        d = json.loads(bj.read_text())
        d["a.time"]["unit"] = "furlongs"
        bj.write_text(json.dumps(d))
    code, out, err = run_cli(capsys, b, h)
    assert code == 3, (out, err)
    text = out + err
    assert needle in text
    if damage not in ("unknown-unit",):
        assert str(h.name) in text or "a.time" in text


def test_different_machines_exit_3_unless_allowed(tmp_path, capsys):
    b = write_set(tmp_path / "b", "aaaaaaaa11", {"a.time": draw(30, seed=1)}, machine="m1-cpu")
    h = write_set(tmp_path / "h", "bbbbbbbb22", {"a.time": draw(30, seed=2)}, machine="m2-cpu")
    code, _, err = run_cli(capsys, b, h)
    assert code == 3 and "not comparable" in err and "m2-cpu" in err
    # compared, but a raw time without a band is not judged: undecided, not bad input
    assert run_cli(capsys, b, h, "--allow-machine-mismatch")[0] == 6  # the older spelling
    assert run_cli(capsys, b, h, "--allow-env-change")[0] == 6


@pytest.mark.parametrize(
    "key,base,head,blocks",
    [
        ("cpu", "Xeon A", "Xeon B", True),
        ("gpu", "H100", "H200", True),
        ("torch_threads", 1, 2, True),
        ("torch", "2.14.1", "2.15.0", False),
        ("driver", "550", "560", False),
    ],
)
def test_comparability_from_fingerprints(tmp_path, capsys, key, base, head, blocks):
    """Another device or thread count makes timings meaningless (exit 3); software versions are
    what nightlies and baselines compare, so they are only listed."""
    b, h = pair(tmp_path, {"k": 5}, {"k": 5})
    for f, value in ((b, base), (h, head)):
        fp = {
            "cpu": "Xeon A",
            "gpu": None,
            "torch_threads": 1,
            "torch": "2.14.1",
            "cuda_available": False,
            key: value,
        }
        (f.parent / "fingerprint.json").write_text(json.dumps(fp))
    code, out, err = run_cli(capsys, b, h)
    assert code == (3 if blocks else 0), (out, err)
    assert str(head) in out + err
    if blocks:
        assert run_cli(capsys, b, h, "--allow-env-change")[0] == 0


def test_changed_benchmark_is_shown_not_judged(tmp_path, capsys):
    b, h = pair(tmp_path, {"a.time": draw(30, seed=1)}, {"a.time": draw(30, seed=2, scale=2.0)})
    bj = h.parent.parent / "benchmarks.json"
    data = json.loads(bj.read_text())
    data["a.time"]["version"] = "2"
    bj.write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, b, h)
    assert code == 6 and "benchmark changed, not compared" in out


def test_unknown_bench_name_exit_3(tmp_path, capsys):
    b, h = pair(tmp_path, {"a.time": draw(30, seed=1)}, {"a.time": draw(30, seed=2)})
    code, _, err = run_cli(capsys, b, h, "--bench", "no.such")
    assert code == 3 and "no.such" in err
    assert run_cli(capsys, b, h, "--bench", "a.time")[0] == 6  # found, compared, not judged


def test_a_bench_pattern_selects_by_the_name_without_parameters_and_lists_what_it_could(
    tmp_path, capsys
):
    cases = {f"m.Inference.track_time('{m}', {cl})": 1 for m in "ab" for cl in (False, True)}
    cases["m.Inference.track_time_over_reference('a', False)"] = 2
    b, h = pair(tmp_path, cases, cases)
    # every case name ends in its parameters: the name without them is searched too
    code, out, _ = run_cli(
        capsys, b, h, "--bench", "Inference.track_time$", "--json", tmp_path / "j"
    )
    assert code == 0, out
    rows = json.loads((tmp_path / "j").read_text())["rows"]
    assert sorted(r["name"] for r in rows) == sorted(n for n in cases if "reference" not in n)
    # a full name as listed selects itself, parentheses and all
    one = "m.Inference.track_time('a', True)"
    run_cli(capsys, b, h, "--bench", one, "--json", tmp_path / "j")
    assert [r["name"] for r in json.loads((tmp_path / "j").read_text())["rows"]] == [one]
    # a pattern matching nothing: exit 3, once, no table, the names in forms a pattern can use
    code, out, err = run_cli(capsys, b, h, "--bench", "track_nothing$")
    assert code == 3 and out == "" and err.count("matches no benchmark") == 1
    assert "  m.Inference.track_time (4 cases, e.g. m.Inference.track_time('a', False))" in err
    assert "  m.Inference.track_time_over_reference (1 cases" in err
    assert compare.selects("Inference.track_time$", "m.Inference.track_time('a', 1)")
    assert not compare.selects("Inference.track_time$", "m.Inference.track_time_x('a', 1)")


def test_commit_latest_and_baseline_specs(tmp_path, capsys, monkeypatch):
    root = tmp_path / "results"
    monkeypatch.setenv("HARNESS_RESULTS_DIR", str(root))  # the results root, as --results-dir
    units = {"a.time": "ratio"}
    write_set(root / "asv", "aaaaaaaa11", {"a.time": draw(30, seed=1)}, date=1, units=units)
    write_set(
        root / "asv", "bbbbbbbb22", {"a.time": draw(30, seed=2, scale=1.3)}, date=2, units=units
    )
    assert run_cli(capsys, "aaaa", "latest")[0] == 1
    assert run_cli(capsys, "aaaaaaaa", "bbbbbbbb")[0] == 1
    code, out, err = run_cli(capsys, "cccc", "latest")
    assert code == 3 and "cccc" in err and "aaaaaaaa" in err
    # said once, on stderr, with no empty table above it
    assert out == "" and err.count("'cccc'") == 1 and len(err.splitlines()) == 1
    code, _, err = run_cli(capsys, "baseline", "latest")
    assert code == 3 and "no baseline for machine" in err
    bl = root / "baselines"
    write_set(bl, "aaaaaaaa11", {"a.time": draw(30, seed=1)}, units=units)
    assert run_cli(capsys, "baseline", "latest")[0] == 1
    # the baseline against its own folder is the same run twice: a check that cannot fail
    code, _, err = run_cli(capsys, "baseline:m1-cpu", bl / "m1-cpu")
    assert code == 3 and "compared with itself" in err
    assert run_cli(capsys, "baseline:m1-cpu", "aaaa")[0] == 0  # the same numbers, another run


def test_render_one_table_two_formats():
    rows = [
        compare.Row("x.time", "seconds", 1e-3, 1.1e-3, 1.1, compare.REGRESSION, "p=1e-05"),
        compare.Row("x.mem", "bytes", 2**20, 2**20, 1.0, compare.OK),
    ]
    text, md = gate.table(rows, "text"), gate.table(rows, "markdown")
    assert "1 ms" in text and "1.1 ms" in text and "1 MiB" in text
    md = re.sub(r" +", " ", md)  # column padding aside
    assert "| x.time | 1 ms | 1.1 ms | 1.100 | **REGRESSION** | p=1e-05 |" in md
    assert "**" not in text, "bold is for Markdown only"


def test_environment_differences_are_listed_above_the_table(tmp_path, capsys):
    """The fingerprint saved with each run is read: a torch change is listed, not hidden."""
    b, h = pair(tmp_path, {"k": 5}, {"k": 5})
    for f, torch_version in ((b, "2.14.1"), (h, "2.15.0.dev")):
        (f.parent / "fingerprint.json").write_text(
            json.dumps({"torch": torch_version, "cpu": "same cpu", "torch_threads": 1})
        )
    code, out, _ = run_cli(capsys, b, h)
    assert code == 0
    env = out.partition("base aaaaaaaa")[0]
    assert "environment differences" in env and "2.14.1" in env and "2.15.0.dev" in env
    assert "same cpu" not in env and "torch_threads" not in env, "equal settings are not listed"


def test_many_samples_do_not_overflow_the_exact_test_bound():
    """`harness ab` merges processes: hundreds of samples per side (an OverflowError was exit
    70)."""
    assert compare.min_attainable_p(800, 800) == 0.0
    assert compare.min_attainable_p(3, 3) == pytest.approx(0.1)
