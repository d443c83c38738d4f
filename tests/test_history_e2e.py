"""End to end: `harness history` over real `harness bench --quick --suite canary` runs.

Four real runs into one results folder (~20-40 s each on two shared cores): two clean, then two
with HARNESS_CANARY_EXTRA=1 (one more op, an erf, per call). The middle two also store profile
summaries (`--profile`). With `--min-side 2` (the default 4 would need 8 runs; the 16-run proof
is in the README) the history must name the op-count step at the third run, the first injected
one, with the operator that changed, and no other new step: with 2 runs a side a statistical row
cannot be confirmed (Mann-Whitney p >= 0.33), which is why --min-side below 4 is for counters.
"""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.core import records
from harness.measure import profiles
from harness.verdict import operators

# one xdist worker runs these tests, so the four runs happen once (tox: --dist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("history-canary")]
MACHINE = "history-e2e-cpu"
OPS = "canary.Canary.track_ops"


@pytest.fixture(scope="session")  # once per worker, also when xdist interleaves modules
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("history-e2e") / "results"
    with pytest.MonkeyPatch.context() as mp:
        for i, (extra, profile) in enumerate([(0, False), (0, True), (1, True), (1, False)]):
            mp.setenv("HARNESS_CANARY_EXTRA", str(extra))
            # the instruction row (a valgrind process each run) is test_instructions_valgrind's
            argv = [
                "bench",
                "--quick",
                "--suite",
                "canary",
                "--results-dir",
                str(root),
                "--machine",
                MACHINE,
                "--bench",
                r"^canary\.Canary\.track_(?!instructions)",
            ] + (["--profile"] if profile else [])
            assert main(argv) == 0, f"run {i + 1} failed"
    return root


def test_history_names_the_first_injected_run_and_the_extra_operator(root, tmp_path, capsys):
    out = tmp_path / "history.json"
    code = main(["history", "--results-dir", str(root), "--min-side", "2", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 1, text
    runs = records.list_runs(root, MACHINE)
    assert len(runs) == 4
    steps = json.loads(out.read_text())["machines"][0]["steps"]
    new = [s for s in steps if s["new"]]
    assert [(s["benchmark"], s["position"], s["run_id"]) for s in new] == [
        (OPS, 3, runs[2].run_id)
    ], text
    # anything else listed is on the canary's timing rows and not confirmed (2 runs a side)
    assert all(
        s["benchmark"].startswith("canary.Canary.track_time") and not s["new"]
        for s in steps
        if s not in new
    ), text
    step = new[0]
    assert (step["before"], step["after"], step["last_before"]) == (10, 11, runs[1].run_id)
    assert step["operators"] == [{"op": "aten::erf", "before": 0, "after": 1, "delta": 1}]
    assert "which operators: aten::erf +1 (0 -> 1)" in text
    assert "environment differences: none (same fingerprint)" in text


def test_runs_store_operator_counts_and_profile_summaries_when_asked(root):
    runs = records.list_runs(root, MACHINE)
    for rec, profiled in zip(runs, [False, True, True, False]):
        assert rec.meta["operator_pass"] == "done" and rec.meta["profiled"] is profiled
        assert profiles.read_op_counts(rec.path)[OPS]["total"] in (10, 11)
        assert (profiles.read_profiles(rec.path) is not None) is profiled
    prof = profiles.read_profiles(runs[1].path)
    assert prof["threads"] == 1 and set(prof["workloads"]["canary.Canary"]) == {
        "chain",
        "reference",
    }
    chain = prof["workloads"]["canary.Canary"]["chain"]
    assert chain["calls"] >= 1 and len(chain["ops"]) <= profiles.TOP
    # the profile difference of the first bad run names the extra erf by its calls per call
    diff, lines = operators.explain_timing(
        "canary.Canary.track_time_over_reference", runs[1], runs[2]
    )
    erf = next(c for c in diff["chain"]["ops"] if c["op"] == "aten::erf")
    assert (erf["calls_before"], erf["calls_after"]) == (0, 1.0), diff
    assert (
        lines[0].startswith("operator-level profile, chain (self CPU us per call")
        and "calls 0 -> 1" in lines[0]
    )
    _, lines = operators.explain_timing("canary.Canary.track_time_over_reference", runs[2], runs[3])
    assert lines == [
        f"operator-level profile difference: no profile stored in {runs[3].run_id} "
        "(quick run; `harness bench --profile` or --full stores one)"
    ]
