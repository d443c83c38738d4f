"""`harness history`: change points over run records (asv's Potts fit for statistical rows, any
change for exact counters), the first bad night explained, acknowledgements, exit codes."""

import json
import random

import pytest

from harness.cli import main
from harness.core import records
from harness.verdict import history
from harness.verdict.history import CONFIRMED, MIN_SIDE, POSSIBLE, find_steps
from tests.test_gate_support import write_set

RATIO = "canary.Canary.track_time_over_reference"
OPS = "canary.Canary.track_ops"
UNITS = {RATIO: "ratio", OPS: "ops", "canary.Canary.track_time": "seconds"}


def noisy(n, level=1.0, sd=0.02, seed=0):
    rng = random.Random(seed)
    return [level * rng.gauss(1.0, sd) for _ in range(n)]


# ---- the asv function we rely on (not a documented API): pin its call and its answer ----


def test_asv_solve_potts_approx_signature_and_result_are_as_used():
    from asv.step_detect import solve_potts_approx

    right, values, dists = solve_potts_approx([1.0] * 6 + [2.0] * 6, [1.0] * 12, gamma=0.5)
    assert list(right) == [6, 12] and list(values) == [1.0, 2.0] and len(dists) == 2


# ---- synthetic series ----


@pytest.mark.parametrize("seed", range(5))
def test_a_10_percent_step_after_10_points_is_found_at_the_11th(seed):
    values = noisy(10, seed=seed) + noisy(10, level=1.1, seed=seed + 100)
    steps = find_steps(values, exact=False, threshold=0.05)
    assert [(s["index"], s["status"]) for s in steps] == [(10, CONFIRMED)]
    assert 0.05 < steps[0]["size"] < 0.15 and steps[0]["p"] < history.ALPHA


@pytest.mark.parametrize("seed", range(20))
def test_a_a_noise_gives_no_step(seed):
    assert find_steps(noisy(20, seed=seed), exact=False, threshold=0.05) == []


@pytest.mark.parametrize("where", [3, 9, 15])
def test_a_lone_outlier_gives_no_step(where):
    values = noisy(20, seed=where)
    values[where] *= 1.5
    assert find_steps(values, exact=False, threshold=0.05) == []


def test_a_change_in_the_newest_runs_is_possible_until_enough_runs_follow():
    values = noisy(12) + noisy(MIN_SIDE - 1, level=1.2, seed=5)
    assert [s["status"] for s in find_steps(values, False, 0.05)] == [POSSIBLE]
    values += noisy(1, level=1.2, seed=6)
    assert [(s["index"], s["status"]) for s in find_steps(values, False, 0.05)] == [(12, CONFIRMED)]


def test_exact_counters_step_on_any_change_but_not_on_a_blip():
    assert [(s["index"], s["status"]) for s in find_steps([10] * 8 + [11] * 8, True, 0)] == [
        (8, CONFIRMED)
    ]
    assert find_steps([10] * 8 + [11] + [10] * 8, True, 0) == []


# ---- run records ----


def write_runs(root, series: list[dict], machine="m1-cpu", torch=None, start=0):
    """One run record per dict (benchmark -> samples or number), in that order."""
    for i, benches in enumerate(series, start):
        commit = f"{i:040x}"
        run_id = f"20261201T{i // 60:02d}{i % 60:02d}00Z-{commit[:8]}"
        with records.writing(root, machine, run_id, {"commit": commit, "machine": machine}) as d:
            write_set(d / "asv", commit, benches, machine=machine, units=UNITS)
            fp = {
                "torch": (torch or {}).get(i, "2.14.1"),
                "torch_threads": 1,
                "cpu": "x",
                "commit": commit,
            }
            (d / "fingerprint.json").write_text(json.dumps(fp))


def canary_like(clean: int, injected: int, seed=0):
    rows = []
    for i in range(clean + injected):
        extra = i >= clean
        rows.append(
            {
                RATIO: noisy(20, level=1.11 if extra else 1.0, sd=0.01, seed=seed + i),
                OPS: 11 if extra else 10,
                "canary.Canary.track_time": noisy(20, level=4e-4, sd=0.3, seed=seed + 50 + i),
            }
        )
    return rows


def test_history_names_the_first_bad_run_with_its_explanation(tmp_path, capsys):
    root = tmp_path / "results"
    write_runs(root, canary_like(8, 8), torch={8: "2.15.0"})
    out_json = tmp_path / "h.json"
    assert main(["history", "--results-dir", str(root), "--json", str(out_json)]) == 1
    text = capsys.readouterr().out
    ninth = records.list_runs(root, "m1-cpu")[8].run_id
    data = json.loads(out_json.read_text())
    steps = data["machines"][0]["steps"]
    assert {(s["benchmark"], s["run_id"], s["position"], s["status"]) for s in steps} == {
        (OPS, ninth, 9, CONFIRMED),
        (RATIO, ninth, 9, CONFIRMED),
    }
    assert data["exit_code"] == 1 and all(s["new"] and s["direction"] == "worse" for s in steps)
    ops = next(s for s in steps if s["benchmark"] == OPS)
    assert ops["before"] == 10 and ops["after"] == 11
    assert ["torch", "2.14.1", "2.15.0"] in ops["environment"]
    assert any("+1 ops per call" in x for x in ops["explanation"])
    # its noise between runs, learned from the series itself, is too wide to judge it
    assert "canary.Canary.track_time (raw time: moves +-" in text
    assert "between runs on this machine (history: 16 runs)" in text and "25% cap" in text
    assert f"{ninth} (#9)" in text and "torch 2.14.1 -> 2.15.0" in text


def test_acknowledged_steps_are_not_new_and_a_bad_file_is_exit_3(tmp_path, capsys):
    root = tmp_path / "results"
    write_runs(root, [{OPS: 10}] * 5 + [{OPS: 12}] * 5)
    sixth = records.list_runs(root, "m1-cpu")[5].run_id
    ack = root / history.ACK_FILE
    ack.write_text(
        json.dumps({"acknowledged": [{"benchmark": OPS, "run": sixth, "reason": "new op"}]})
    )
    assert main(["history", "--results-dir", str(root)]) == 0
    assert "acknowledged: new op" in capsys.readouterr().out
    ack.write_text('{"acknowledged": [{"benchmark": 3}]}')
    assert main(["history", "--results-dir", str(root)]) == 3
    assert history.ACK_FILE in capsys.readouterr().err


def test_bench_filter_since_and_bad_input(tmp_path, capsys):
    root = tmp_path / "results"
    write_runs(root, canary_like(6, 6))
    assert main(["history", "--results-dir", str(root), "--bench", "track_time$"]) == 0
    assert main(["history", "--results-dir", str(root), "--bench", "track_ops"]) == 1
    assert main(["history", "--results-dir", str(root), "--since", "2026-12-02"]) == 0
    assert main(["history", "--results-dir", str(root), "--bench", "no_such"]) == 3
    assert "no_such" in capsys.readouterr().err
    assert main(["history", "--results-dir", str(root), "--since", "yesterday"]) == 3
    assert main(["history", "--results-dir", str(tmp_path / "empty")]) == 3


def test_report_history_labels_torch_changes(tmp_path):
    root = tmp_path / "results"
    write_runs(root, [{OPS: 10}] * 4, torch={2: "2.15.0", 3: "2.15.0"})
    assert (
        main(["report", "--results-dir", str(root), "--out", str(tmp_path / "r"), "--history", OPS])
        == 0
    )
    md = (tmp_path / "r" / "report.md").read_text()
    assert "torch changed: 2.14.1 -> 2.15.0 at run 20261201T000200Z" in md
    assert md.count("2.15.0 (changed)") == 1 and md.count("| 20261201T") == 4


def test_nightly_writes_a_summary_and_exits_1_on_a_new_step(tmp_path, monkeypatch, capsys):
    from harness.runs import nightly

    root = tmp_path / "results"
    monkeypatch.setattr(nightly, "publish", lambda root, html_dir: 0)
    monkeypatch.setattr(nightly, "vendor_dashboard", lambda html: [])
    write_runs(root, [{OPS: 10}] * 6)
    assert main(["nightly", "--skip-bench", "--results-dir", str(root), "--machine", "m1-cpu"]) == 0
    write_runs(root, [{OPS: 11}] * 4, start=6)
    argv = ["nightly", "--skip-bench", "--results-dir", str(root), "--machine", "m1-cpu"]
    capsys.readouterr()
    assert main(argv) == 1
    # the search for the commit: from the last good night's commit to the first bad one's
    command = (
        f"harness bisect {5:040x} {6:040x} --suite canary "
        "--bench '^canary\\.Canary\\.track_ops$' --machine m1-cpu"
    )
    assert f"nightly: to find the commit: {command}" in capsys.readouterr().out
    newest = records.list_runs(root, "m1-cpu")[-1].run_id
    first = root / "report" / f"steps-{newest}.md"
    summary = first.read_text()
    assert "# New step(s)" in summary and OPS in summary and "(#7)" in summary
    assert command in summary
    assert main(argv) == 1  # the same night again: a second summary, the first kept
    assert first.read_text() == summary and (root / "report" / f"steps-{newest}.2.md").is_file()
