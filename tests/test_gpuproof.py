"""The GPU-time proof's judging (harness.runs.gpuproof) and the gpu-measure step's claims, with a
GPU's measurements injected: trials compared across processes by the gate's own GPU rule."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.runs import gpuproof
from harness.runs.gpucheck import checks

H200 = {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-aaaa", "gpu_clock_policy": "unlocked"}


def side(level, rng, noise=0.0008, spread=0.001):
    samples = [level * (1 + rng.gauss(0, spread)) for _ in range(20)]
    facts = {"device": "cuda", "noise": noise, "busy": 0.97, "taken": 20, "dropped_throttled": 0}
    return {"samples": samples, "facts": facts}


def trial(seed, level=1e-3, slowdown=0.03, fingerprint=H200, drift=0.0):
    rng = random.Random(seed)
    rows = {}
    for row in gpuproof.ROWS:
        base = level * (1 + drift)
        rows[row] = {
            "clean": side(base, rng),
            "slowed": side(base * (1 + slowdown), rng),
            "injected_s": base * slowdown,
        }
    return {"fingerprint": dict(fingerprint), "rows": rows}


def test_quiet_trials_pass_every_a_a_and_catch_every_3_percent_slowdown():
    result = gpuproof.tally(gpuproof.compare_trials([trial(i) for i in range(5)]), 0.03)
    n = 4 * len(gpuproof.ROWS)
    assert result["aa"] == {"runs": n, "passed": n, "false_alarms": 0, "not_judged": 0}
    assert result["slowed"] == {"runs": n, "caught": n}
    assert gpuproof.proven(result, 5)
    text = gpuproof.render(result)
    assert f"A/A: {n}/{n} passed (0 false alarms, 0 not judged)" in text
    assert f"slowed by 3%: {n}/{n} caught" in text


def test_a_drift_between_processes_beyond_the_floor_is_a_false_alarm_and_fails_the_proof():
    trials = [trial(0), trial(1, drift=0.04), trial(2)]
    result = gpuproof.tally(gpuproof.compare_trials(trials), 0.03)
    assert result["aa"]["false_alarms"] == 2 * len(gpuproof.ROWS)  # up 4%, then down again
    assert not gpuproof.proven(result, 1)


def test_a_slowdown_under_the_floor_is_missed_and_fails_the_proof():
    result = gpuproof.tally(
        gpuproof.compare_trials([trial(i, slowdown=0.01) for i in range(4)]), 0.01
    )
    assert result["slowed"]["caught"] == 0 and result["aa"]["false_alarms"] == 0
    assert not gpuproof.proven(result, 1)


def test_another_card_leaves_its_comparisons_not_judged_and_unproven():
    other = {**H200, "gpu_uuid": "GPU-bbbb"}
    result = gpuproof.tally(gpuproof.compare_trials([trial(0), trial(1, fingerprint=other)]), 0.03)
    assert result["aa"]["not_judged"] == len(gpuproof.ROWS) and result["aa"]["passed"] == 0
    assert all("different card" in c["note"] for c in result["comparisons"])
    assert not gpuproof.proven(result, 1)


def test_too_few_comparisons_do_not_prove_it():
    result = gpuproof.tally(gpuproof.compare_trials([trial(0), trial(1)]), 0.03)
    assert result["aa"]["passed"] == result["aa"]["runs"] == len(gpuproof.ROWS)
    assert not gpuproof.proven(result, 5) and gpuproof.proven(result, len(gpuproof.ROWS))


# ---- gpu-measure's claims ----


def row(name, value, repeat=None, busy=0.95):
    return {
        "name": name,
        "value": value,
        "repeat": value if repeat is None else repeat,
        "busy": busy,
    }


def claims_of(rows):
    return {c["claim"].split(" (")[0]: c for c in checks.judge_gpu_measure(rows)}


def test_gpu_measure_claims_hold_on_device_bound_figures():
    got = claims_of(
        [
            row("matmul over itself", 1.002),
            row("two matmuls over one", 1.99),
            row("eager pointwise chain", 2.5e-4, 2.51e-4),
            row("compiled/eager pointwise chain", 0.52),
            row("AMP/fp32 alexnet bf16", 0.55),
            row("AMP/fp32 alexnet fp16", 0.5),
        ]
    )
    assert all(c["pass"] for c in got.values()), got
    assert got["x.cos().cos() compiled/eager"]["value"] == 0.52
    assert got["busy NN% on every CUDA row"]["value"] == "6/6"


@pytest.mark.parametrize(
    ("bad", "claim"),
    [
        (row("compiled/eager pointwise chain", 1.9), "x.cos().cos() compiled/eager"),
        (row("AMP/fp32 alexnet fp16", 1.29), "AMP/fp32 alexnet fp16"),
        (row("eager pointwise chain", 2.5e-4, 2.6e-4), "two measurements of each device-bound row"),
        (row("eager pointwise chain", 2.5e-4, busy=None), "busy NN% on every CUDA row"),
        (row("two matmuls over one", 1.8), "two kernels over one"),
    ],
)
def test_gpu_measure_claims_fail_on_the_figures_of_the_first_gpu_run(bad, claim):
    rows = [row("compiled/eager pointwise chain", 0.5), row("two matmuls over one", 2.0)]
    rows = [r for r in rows if r["name"] != bad["name"]] + [bad]
    got = claims_of(rows)
    assert got[claim]["pass"] is False


def test_a_launch_bound_row_is_left_out_of_the_repeatability_claim():
    rows = [row("eager pointwise chain", 2e-5, 3e-5, busy=0.2), row("x", 1e-3, 1.001e-3)]
    got = claims_of(rows)
    assert got["two measurements of each device-bound row"]["pass"] is True


def test_run_starts_one_process_per_trial_in_a_folder_of_its_own(tmp_path, monkeypatch):
    import json

    from harness.core import env, exits, processes

    monkeypatch.setattr(env, "require_gpu", lambda: None)
    (tmp_path / "trial-1.json").write_text("left by an earlier proof")  # never read
    started = []

    def fake_trial(cmd, capture, timeout):
        assert timeout == gpuproof.TRIAL_TIMEOUT_S
        out = cmd[cmd.index("--out") + 1]
        started.append(out)
        if len(started) == 3 and fail:
            return type("P", (), {"returncode": 1, "stderr": "CUDA error: boom"})()
        with open(out, "w") as f:
            json.dump(trial(len(started)), f)
        return type("P", (), {"returncode": 0, "stderr": ""})()

    monkeypatch.setattr(processes, "run_in_session", fake_trial)
    fail = False
    result = gpuproof.run("cuda", 3, tmp_path, log=lambda *_: None)
    assert result["trials_run"] == 4 and len(started) == 4
    assert all(Path(p).parent != tmp_path and Path(p).parent.parent == tmp_path for p in started)
    assert result["aa"]["runs"] == 3 * len(gpuproof.ROWS) and gpuproof.proven(result, 3)

    fail, started[:] = True, []
    with pytest.raises(exits.RunnerFailed, match="trial 2 failed .exit 1.: CUDA error: boom"):
        gpuproof.run("cuda", 3, tmp_path, log=lambda *_: None)
