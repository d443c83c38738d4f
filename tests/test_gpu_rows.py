"""GPU-time rows judged by their recorded noise and a floor, between comparable GPUs only, never
a bare "not judged"; every row with device facts shows `busy NN%` or `ATen share NN%`."""

from __future__ import annotations

import pathlib

import pytest

from harness.verdict import compare, gpurows, instead
from harness.verdict.resultset import Entry, ResultSet

H200 = {"gpu": "NVIDIA H200", "gpu_uuid": "GPU-aaaa1111", "gpu_clock_policy": "unlocked"}
ROW = "fusion.PointwiseChain.track_eager_time"


def gpu_facts(noise=0.001, busy=0.97, taken=20, dropped=0, throttles=()):
    return {
        "device": "cuda",
        "noise": noise,
        "busy": busy,
        "taken": taken,
        "dropped_throttled": dropped,
        "throttles": list(throttles),
        "gpu_s": 1e-3,
        "host_s": 1.1e-3,
    }


def result_set(per_call_s, facts, fingerprint=H200, name=ROW, unit="seconds"):
    samples = [per_call_s * (1 + d) for d in (-0.001, 0.0, 0.001) * 5]
    entry = Entry(name, unit, per_call_s, samples)
    return ResultSet(
        pathlib.Path("/nowhere/result.json"),
        "host-NVIDIA-H200",
        "c0ffee",
        "env",
        None,
        {name: entry},
        fingerprint=dict(fingerprint),
        facts={name: facts} if facts else {},
    )


def row_of(base, head):
    (row,) = compare.compare(base, head)
    return row


def test_a_gpu_time_3_percent_slower_with_quiet_samples_is_a_regression():
    row = row_of(result_set(1e-3, gpu_facts()), result_set(1.03e-3, gpu_facts()))
    assert row.verdict == compare.REGRESSION and row.threshold == gpurows.FLOOR
    assert "GPU time: noise 0.10%/0.10%, threshold 2.0% (floor)" in row.note
    assert row.note.endswith("busy 97%")


def test_a_gpu_time_within_the_floor_is_ok_and_beyond_it_faster_is_improved():
    assert row_of(result_set(1e-3, gpu_facts()), result_set(1.01e-3, gpu_facts())).verdict == (
        compare.OK
    )
    assert row_of(result_set(1e-3, gpu_facts()), result_set(0.95e-3, gpu_facts())).verdict == (
        compare.IMPROVED
    )


def test_the_threshold_grows_with_the_recorded_noise():
    row = row_of(result_set(1e-3, gpu_facts(0.01)), result_set(1.04e-3, gpu_facts(0.01)))
    # 5 x hypot(1%, 1%) = 7.1%: a 4% move is inside it
    assert row.verdict == compare.OK and row.threshold == pytest.approx(0.0707, abs=1e-3)
    assert "(5 x noise)" in row.note


def test_a_launch_bound_noisy_row_is_not_judged_and_says_why():
    base = result_set(20e-6, gpu_facts(noise=0.03, busy=0.12))
    head = result_set(30e-6, gpu_facts(noise=0.04, busy=0.10))
    row = row_of(base, head)
    assert row.verdict == compare.NOT_JUDGED
    assert row.note.startswith("GPU time: launch-bound (busy 10%) and noisy")
    assert row.note.endswith("busy 10%, launch-bound")


def test_a_throttled_row_is_not_judged_and_names_the_limit():
    head = result_set(1.1e-3, gpu_facts(taken=30, dropped=20, throttles=["power cap"]))
    row = row_of(result_set(1e-3, gpu_facts()), head)
    assert row.verdict == compare.NOT_JUDGED
    assert "throttled on head: 20 of 30 samples dropped (power cap)" in row.note


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"gpu_uuid": "GPU-bbbb2222"}, "GPU time: different card (aaaa1111 vs bbbb2222)"),
        ({"gpu_clock_policy": "locked"}, "GPU time: not comparable: clock policy unlocked vs"),
        ({"gpu": "NVIDIA A100-SXM4-80GB"}, "GPU time: not comparable: GPU model"),
        ({"gpu_uuid": None}, "GPU time: not comparable: the card (UUID) is unknown on head"),
    ],
)
def test_gpu_rows_of_another_card_model_or_clock_policy_are_not_judged(change, why):
    head = result_set(1.5e-3, gpu_facts(), fingerprint={**H200, **change})
    row = row_of(result_set(1e-3, gpu_facts()), head)
    assert row.verdict == compare.NOT_JUDGED and row.note.startswith(why)


def test_a_raw_time_without_gpu_facts_keeps_the_calibrated_band_rule():
    row = row_of(result_set(1e-3, None), result_set(1.5e-3, None))
    assert row.verdict == compare.NOT_JUDGED
    assert row.note == f"raw time: no calibrated noise band; judged instead by {instead.OTHERS}"


def test_paired_and_cpu_rows_show_their_device_facts():
    sides = {"device": "cuda", "sides": [{"busy": 0.31}, {"busy": 0.96}], "busy": 0.31}
    name = "fusion.PointwiseChain.track_compiled_over_eager"
    row = row_of(
        result_set(0.5, sides, name=name, unit="ratio"),
        result_set(0.5, sides, name=name, unit="ratio"),
    )
    assert row.verdict == compare.OK and row.note.endswith("busy 31%/96%, launch-bound")
    cpu = {"device": "cpu", "aten_share": 0.42, "time_s": 1e-3}
    row = row_of(result_set(1e-3, cpu), result_set(1e-3, cpu))
    assert row.note == (
        f"raw time: no calibrated noise band; judged instead by {instead.OTHERS}; ATen share 42%"
    )
    assert "launch-bound" not in gpurows.label({"device": "cpu", "aten_share": 0.01})


def test_launch_bound_is_a_cuda_row_with_a_side_under_half_busy():
    assert gpurows.launch_bound({"device": "cuda", "busy": 0.49})
    assert not gpurows.launch_bound({"device": "cuda", "busy": 0.5})
    assert gpurows.launch_bound({"device": "cuda", "sides": [{"busy": 0.9}, {"busy": 0.2}]})
    assert not gpurows.launch_bound({"device": "cpu", "aten_share": 0.1})
    assert not gpurows.launch_bound(None)


# ---- history steps on GPU-time rows ----


def _gpu_history(root, levels, uuids=None, facts=None):
    import json
    import random

    from harness.core import records
    from tests.test_gate_support import write_set

    rng = random.Random(3)
    for i, level in enumerate(levels):
        commit = f"{i:040x}"
        run_id = f"20261201T00{i:02d}00Z-{commit[:8]}"
        with records.writing(root, "m1-gpu", run_id, {"commit": commit}) as d:
            samples = [level * (1 + rng.gauss(0, 0.002)) for _ in range(20)]
            write_set(d / "asv", commit, {ROW: samples}, machine="m1-gpu", units={ROW: "seconds"})
            fp = {**H200, "gpu_uuid": (uuids or {}).get(i, H200["gpu_uuid"]), "commit": commit}
            (d / "fingerprint.json").write_text(json.dumps(fp))
            records.write_row_facts(d, ROW, (facts or {}).get(i) or gpu_facts(noise=0.001))


def test_history_steps_on_a_gpu_time_that_moved_3_percent(tmp_path):
    from harness.verdict import history

    _gpu_history(tmp_path, [1e-3] * 6 + [1.03e-3] * 6)
    found = history.detect(tmp_path, "m1-gpu")
    (step,) = found.steps
    assert step.benchmark == ROW and step.status == "confirmed" and step.position == 7
    assert ROW not in found.not_judged


def test_history_does_not_judge_a_gpu_time_across_cards(tmp_path):
    from harness.verdict import history

    _gpu_history(tmp_path, [1e-3] * 6 + [1.03e-3] * 6, uuids={7: "GPU-other"})
    found = history.detect(tmp_path, "m1-gpu")
    assert found.steps == []
    assert found.not_judged[ROW] == (
        "GPU time: different card (aaaa1111 vs other): no threshold measured across cards of "
        "this model yet (run 8 of 12)"
    )


def test_history_does_not_judge_a_gpu_time_throttled_in_a_run(tmp_path):
    from harness.verdict import history

    throttled = gpu_facts(noise=0.001, taken=30, dropped=20, throttles=["power cap"])
    _gpu_history(tmp_path, [1e-3] * 6 + [1.03e-3] * 6, facts={9: throttled})
    found = history.detect(tmp_path, "m1-gpu")
    assert found.steps == []
    assert found.not_judged[ROW] == (
        "GPU time: throttled in run 10 of 12: 20 of 30 samples dropped (power cap)"
    )


def test_a_series_without_fingerprints_or_too_noisy_is_not_judged_and_says_why():
    quiet = gpu_facts(noise=0.001, busy=None)
    assert gpurows.series_threshold([(quiet, None), (quiet, None)]) == (
        None,
        "GPU time: not comparable: a run has no fingerprint (GPU model, card and clocks "
        "unknown) (run 1 of 2)",
    )
    noisy = gpu_facts(noise=0.05, busy=0.0)
    limit, why = gpurows.series_threshold([(noisy, H200), (noisy, H200)])
    assert limit is None and why.startswith("GPU time: launch-bound (busy 0%) and noisy")


def test_the_report_lists_each_rows_device_facts():
    from harness.verdict.report import device_section

    facts = {**gpu_facts(busy=0.3, dropped=2), "sm_clock_mhz": 1830, "kept_at_power_cap": 5}
    text = "\n".join(device_section(result_set(1e-3, facts)))
    (row,) = [ln for ln in text.splitlines() if ln.startswith(f"| {ROW}")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:] == ["30%", "0.10%", "1830 MHz", "2 of 20 (5 kept at the power cap)"]
    assert "below 50%: launch-bound" in text

    cpu = result_set(1e-3, {"aten_share": 0.42})
    assert "| ATen share 42%" in "\n".join(device_section(cpu)).replace("  ", " ")
    assert device_section(result_set(1e-3, None)) == []


def test_a_lower_power_limit_or_max_clock_is_listed_among_the_differences():
    from harness.verdict.results import environment_differences

    base = result_set(1e-3, gpu_facts(), fingerprint={**H200, "gpu_power_limit_w": 700.0})
    head = result_set(1e-3, gpu_facts(), fingerprint={**H200, "gpu_power_limit_w": 500.0})
    assert environment_differences(base, head) == [("gpu_power_limit_w", "700.0", "500.0")]
