"""Operator-level explanations: per-operator counts and profile summaries stored in run records
(harness.measure.profiles), their differences (harness.verdict.operators) and how `harness
history` shows them in text, Markdown and JSON."""

import json
import pathlib
import textwrap

import pytest

from harness.cli import main
from harness.core import records
from harness.measure import profiles, timing
from harness.verdict import operators
from tests.test_gate_support import write_set
from tests.test_history import OPS, RATIO, UNITS, canary_like

CLEAN = {
    "aten::abs": 1,
    "aten::add": 3,
    "aten::cos": 1,
    "aten::mul": 3,
    "aten::sin": 1,
    "aten::sqrt": 1,
}
INJECTED = dict(CLEAN, **{"aten::sqrt": 2})


def summary(sqrt_us: float, sqrt_calls: float, sin_us: float = 100.0) -> dict:
    ops = [
        {"name": "aten::sin", "calls": 1.0, "self_cpu_us": sin_us, "self_cuda_us": 0.0},
        {"name": "aten::sqrt", "calls": sqrt_calls, "self_cpu_us": sqrt_us, "self_cuda_us": 0.0},
        {"name": "aten::mul", "calls": 3.0, "self_cpu_us": 20.0, "self_cuda_us": 0.0},
    ]
    ops.sort(key=lambda o: -o["self_cpu_us"])
    return {
        "calls": 50,
        "threads": 1,
        "device": "cpu",
        "ops": ops,
        "self_cuda_us": 0.0,
        "self_cpu_us": sum(o["self_cpu_us"] for o in ops),
    }


def profile_file(injected: bool) -> dict:
    chain = summary(140.0, 2.0) if injected else summary(70.0, 1.0)
    return {
        "schema": 1,
        "threads": 1,
        "device": "cpu",
        "budget_s": 2.0,
        "top": 30,
        "skipped": {},
        "workloads": {"canary.Canary": {"chain": chain, "reference": summary(70.0, 1.0)}},
    }


def write_runs(root, series, *, clean, profiled=(), quick=True, machine="m1-cpu"):
    """Like tests.test_history.write_runs, with op-counts.json in every run (the first `clean`
    ones clean, then injected) and profiles.json in the runs listed in `profiled`."""
    for i, benches in enumerate(series):
        commit = f"{i:040x}"
        run_id = f"20261201T{i // 60:02d}{i % 60:02d}00Z-{commit[:8]}"
        meta = {
            "commit": commit,
            "machine": machine,
            "quick": quick,
            "mode": "fast",
            "profiled": i in profiled,
        }
        with records.writing(root, machine, run_id, meta) as d:
            write_set(d / "asv", commit, benches, machine=machine, units=UNITS)
            (d / "fingerprint.json").write_text(json.dumps({"torch": "2.14.1", "torch_threads": 1}))
            counts = CLEAN if i < clean else INJECTED
            (d / profiles.OP_COUNTS).write_text(
                json.dumps(
                    {
                        "schema": 1,
                        "rows": {
                            OPS: {"unit": "ops", "total": sum(counts.values()), "counts": counts}
                        },
                    }
                )
            )
            if i in profiled:
                (d / profiles.PROFILES).write_text(json.dumps(profile_file(i >= clean)))


# ---- the pure differences ----


def test_count_changes_name_the_extra_operator():
    assert operators.count_changes(CLEAN, INJECTED) == [
        {"op": "aten::sqrt", "before": 1, "after": 2, "delta": 1}
    ]
    changes = operators.count_changes(
        {"aten::add": 2, "aten::mul": 1}, {"aten::add": 1, "aten::cat": 3}
    )
    assert [(c["op"], c["delta"]) for c in changes] == [
        ("aten::cat", 3),
        ("aten::add", -1),
        ("aten::mul", -1),
    ]
    assert operators.count_changes(CLEAN, dict(CLEAN)) == []


def test_profile_changes_rank_operators_by_self_time_change():
    ch = operators.profile_changes(summary(70.0, 1.0), summary(140.0, 2.0, sin_us=101.0))
    assert ch["time"] == "self CPU" and ch["total_before"] == 190.0 and ch["total_after"] == 261.0
    first = ch["ops"][0]
    assert (first["op"], first["before_us"], first["after_us"], first["delta_us"]) == (
        "aten::sqrt",
        70.0,
        140.0,
        70.0,
    )
    assert (first["calls_before"], first["calls_after"]) == (1.0, 2.0)
    assert [c["op"] for c in ch["ops"]] == ["aten::sqrt", "aten::sin"]  # aten::mul did not change
    # an operator that only one side lists (outside its top operators) counts as 0 there
    after = summary(70.0, 1.0)
    after["ops"].append(
        {"name": "aten::cat", "calls": 1.0, "self_cpu_us": 500.0, "self_cuda_us": 0.0}
    )
    assert operators.profile_changes(summary(70.0, 1.0), after)["ops"][0]["op"] == "aten::cat"
    # beyond the top changes, an operator whose calls per call changed is still listed
    ch = operators.profile_changes(summary(70.0, 1.0), summary(70.1, 2.0, sin_us=130.0), top=1)
    assert [(c["op"], c["calls_after"]) for c in ch["ops"]] == [
        ("aten::sin", 1.0),
        ("aten::sqrt", 2.0),
    ]


def test_cuda_summaries_compare_device_time():
    b, a = summary(70.0, 1.0), summary(70.0, 1.0)
    for s, us in ((b, 10.0), (a, 30.0)):
        s["device"] = "cuda"
        s["ops"][0]["self_cuda_us"] = us
        s["self_cuda_us"] = us
    ch = operators.profile_changes(b, a)
    assert ch["time"] == "self CUDA" and ch["ops"][0]["delta_us"] == 20.0


@pytest.mark.parametrize(
    "row, workload",
    [
        ("canary.Canary.track_ops", "canary.Canary"),
        (
            "models.Inference.track_inference_time('alexnet', False, True)",
            "models.Inference('alexnet', False, True)",
        ),
        ("fusion.PointwiseChain.track_compiled_over_eager", "fusion.PointwiseChain"),
        ("not a row", None),
    ],
)
def test_a_row_maps_to_its_workload(row, workload):
    assert profiles.workload_of(row) == workload


# ---- history shows them ----


def test_history_names_the_operators_of_an_op_count_step_and_the_profile_of_a_timing_step(
    tmp_path, capsys
):
    root = tmp_path / "results"
    write_runs(root, canary_like(8, 8), clean=8, profiled=(7, 8))
    out_json, out_md = tmp_path / "h.json", tmp_path / "h.md"
    assert (
        main(
            [
                "history",
                "--results-dir",
                str(root),
                "--json",
                str(out_json),
                "--markdown",
                str(out_md),
            ]
        )
        == 1
    )
    text = capsys.readouterr().out
    assert "which operators: aten::sqrt +1 (1 -> 2)" in text
    assert (
        "operator-level profile, chain (self CPU us per call; total 190 -> 260): "
        "aten::sqrt 70 -> 140 (+70; calls 1 -> 2)"
    ) in text
    assert "operator-level profile, reference" in text  # the yardstick's profile, unchanged
    steps = {s["benchmark"]: s for s in json.loads(out_json.read_text())["machines"][0]["steps"]}
    assert steps[OPS]["operators"] == [{"op": "aten::sqrt", "before": 1, "after": 2, "delta": 1}]
    assert steps[OPS]["profile"] is None
    chain = steps[RATIO]["profile"]["chain"]
    assert chain["ops"][0]["op"] == "aten::sqrt" and chain["ops"][0]["delta_us"] == 70.0
    assert steps[RATIO]["operators"] is None
    md = out_md.read_text()
    # Markdown shows what the runs say as text (harness.core.escape): '>' is an entity there
    assert "which operators: aten::sqrt +1 (1 -&gt; 2)" in md and "aten::sqrt 70 -&gt; 140" in md


def test_history_says_when_a_run_stores_no_profile(tmp_path, capsys):
    root = tmp_path / "results"
    write_runs(
        root, canary_like(8, 8), clean=8, profiled=(7,)
    )  # the first bad run is a plain quick run
    assert main(["history", "--results-dir", str(root), "--bench", "over_reference"]) == 1
    ninth = records.list_runs(root, "m1-cpu")[8].run_id
    assert (
        f"operator-level profile difference: no profile stored in {ninth} (quick run;"
        in capsys.readouterr().out
    )


def test_history_says_when_a_run_stores_no_operator_counts(tmp_path, capsys):
    from tests.test_history import write_runs as write_plain

    root = tmp_path / "results"
    write_plain(root, canary_like(4, 4))
    assert main(["history", "--results-dir", str(root), "--bench", "track_ops"]) == 1
    assert "which operators: no per-operator counts stored in" in capsys.readouterr().out


def test_min_side_lets_a_short_history_step_on_counters_only(tmp_path, capsys):
    root = tmp_path / "results"
    write_runs(root, canary_like(2, 2), clean=2)
    assert main(["history", "--results-dir", str(root)]) == 0  # 2 + 2 runs: possible at most
    out = tmp_path / "h.json"
    assert main(["history", "--results-dir", str(root), "--min-side", "2", "--json", str(out)]) == 1
    data = json.loads(out.read_text())["machines"][0]
    assert data["min_side"] == 2
    assert [(s["benchmark"], s["position"]) for s in data["steps"] if s["new"]] == [(OPS, 3)]
    assert main(["history", "--results-dir", str(root), "--min-side", "1"]) == 3


# ---- the operator pass over a suite ----

TOY = """
    import torch
    from harness.measure import timing
    from harness.measure.workloads import NotApplicable

    class Chain:
        params = [1, 2]
        param_names = ["extra"]

        def setup(self, extra):
            self.x = torch.ones(64)
            self.fn = lambda: self.x.sin().add(extra) if extra == 1 else self.x.sin().add(1).mul(2)

        def track_ops(self, extra):
            return timing.ops_per_call(self.fn)
        track_ops.unit = "ops"

        def track_time(self, extra):
            return 1.0
        track_time.unit = "seconds"

        def profile_targets(self, extra):
            return {"chain": self.fn}

    class Broken:
        def track_time(self):
            return 1.0
        track_time.unit = "seconds"

        def profile_targets(self):
            raise RuntimeError("no workload")

    class CudaOnly:
        def setup(self):
            raise NotApplicable("needs CUDA")

        def track_ops(self):
            return 0
        track_ops.unit = "ops"

        def profile_targets(self):
            return {}
"""


def test_the_operator_pass_breaks_counters_down_and_profiles_workloads(tmp_path):
    pkg = tmp_path / "toy_bench_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "toy.py").write_text(textwrap.dedent(TOY))
    benchmarks = {
        "version": 2,
        "toy.Chain.track_ops": {"unit": "ops", "params": [["1", "2"]]},
        "toy.Chain.track_time": {"unit": "seconds", "params": [["1", "2"]]},
        "toy.CudaOnly.track_ops": {"unit": "ops", "params": []},
        "toy.Broken.track_time": {"unit": "seconds", "params": []},
    }
    assert profiles.wanted(benchmarks, ["toy"], profile=False)
    assert not profiles.wanted(benchmarks, ["other"], profile=False)
    counts, profs = profiles.collect(pkg, benchmarks, ["toy"], profile=True, budget_s=0.05)
    assert counts["rows"]["toy.Chain.track_ops(1)"] == {
        "unit": "ops",
        "total": 2,
        "counts": {"aten::add": 1, "aten::sin": 1},
    }
    assert counts["rows"]["toy.Chain.track_ops(2)"]["counts"] == {
        "aten::add": 1,
        "aten::mul": 1,
        "aten::sin": 1,
    }
    assert "toy.CudaOnly.track_ops" not in counts["rows"]
    chain = profs["workloads"]["toy.Chain(2)"]["chain"]
    assert chain["calls"] >= 1 and chain["device"] == "cpu" and chain["threads"] >= 1
    names = [o["name"] for o in chain["ops"]]
    assert {"aten::sin", "aten::add", "aten::mul"} <= set(names) and len(names) <= profiles.TOP
    assert all(o["calls"] == 1.0 for o in chain["ops"] if o["name"] in ("aten::sin", "aten::mul"))
    assert profs["skipped"] == {"toy.CudaOnly": "needs CUDA"}
    assert profs["workloads"]["toy.Broken"] == {
        "error": "profile_targets failed: RuntimeError: no workload"
    }
    counts, profs = profiles.collect(pkg, benchmarks, ["toy"], profile=False)
    assert profs is None and len(counts["rows"]) == 2


def test_recording_counts_sees_what_ops_per_call_counted():
    import torch

    x = torch.ones(8)
    with timing.recording_counts() as got:
        n = timing.ops_per_call(lambda: x.cos().cos().add(1))
    assert n == 3 and got == [("ops", {"aten::cos": 2, "aten::add": 1})]
    assert timing._count_recorders == []


def test_nightly_summary_names_the_operators(tmp_path, monkeypatch, capsys):
    from harness.runs import nightly

    root = tmp_path / "results"
    monkeypatch.setattr(nightly, "publish", lambda root, html_dir: 0)
    monkeypatch.setattr(nightly, "vendor_dashboard", lambda html: [])
    write_runs(root, canary_like(5, 4), clean=5, profiled=(4, 5))
    assert main(["nightly", "--skip-bench", "--results-dir", str(root), "--machine", "m1-cpu"]) == 1
    newest = records.list_runs(root, "m1-cpu")[-1].run_id
    summary = (root / "report" / f"steps-{newest}.md").read_text()
    assert "- which operators: aten::sqrt +1 (1 -&gt; 2)" in summary
    assert "- operator-level profile, chain" in summary and "aten::sqrt 70 -&gt; 140" in summary


def test_a_breakdown_that_does_not_add_up_to_the_stored_count_says_so(tmp_path, capsys):
    root = tmp_path / "results"
    rows = canary_like(4, 4)
    for r in rows[4:]:
        r[OPS] = 12  # asv stored 12 in the bad runs; their operator pass counted 11
    write_runs(root, rows, clean=4)
    assert main(["history", "--results-dir", str(root), "--bench", "track_ops"]) == 1
    fifth = records.list_runs(root, "m1-cpu")[4].run_id
    out = capsys.readouterr().out
    assert "which operators: aten::sqrt +1 (1 -> 2)" in out
    assert f"{fifth}: the operator pass counted 11, asv 12" in out


def test_a_failed_profile_is_named_not_compared(tmp_path):
    recs = []
    for i, workload in enumerate(
        [{"chain": summary(70.0, 1.0)}, {"error": "profile_targets failed: boom"}]
    ):
        d = tmp_path / f"run{i}"
        d.mkdir()
        data = dict(profile_file(False), workloads={"canary.Canary": workload})
        (d / profiles.PROFILES).write_text(json.dumps(data))
        recs.append(records.RunRecord(d, {"profiled": True}))
    diff, lines = operators.explain_timing(RATIO, *recs)
    assert diff is None and lines == [
        "operator-level profile difference: profiling canary.Canary failed "
        "in run1 (profile_targets failed: boom)"
    ]


# ---- which runs profile (no asv: its command is replaced by one writing a result) ----


@pytest.mark.parametrize(
    "full, quick, asked, profiled",
    [
        (True, False, None, True),  # full runs (nightly) always store profiles
        (False, True, None, False),  # quick runs store per-operator counts only
        (False, True, True, True),  # harness bench --quick --profile
    ],
)
def test_full_runs_and_profile_runs_store_profiles(
    tmp_path, monkeypatch, full, quick, asked, profiled
):
    from harness.runs import asv, bench
    from harness.runs.spec import RunSpec

    calls = []

    def fake_asv(run):  # the asv runner writes a result, as `asv run` would
        write_set(run.results, "0" * 40, {OPS: 10}, machine="m1-cpu", units=UNITS)
        return asv.AsvResult(0, "", "", 0.1, sorted((run.results / "m1-cpu").glob("0*.json")))

    monkeypatch.setattr(asv, "run", fake_asv)
    monkeypatch.setattr(
        bench,
        "operator_pass",
        lambda project, staging, names, env, *, profile, out, bench_dir: (
            calls.append(profile) or "done"
        ),
    )
    spec = RunSpec.from_flags(full=full, quick=quick, suites=("canary",), machine="m1-cpu")
    ran = bench.run(
        pathlib.Path(__file__).resolve().parents[1],
        tmp_path / "results",
        spec,
        sha="0" * 40,
        profile=asked,
    )
    assert calls == [profiled]
    assert ran.record.meta["profiled"] is profiled and ran.record.meta["operator_pass"] == "done"
