"""Fused vs unfused beyond torch.compile: the byte counts behind the bandwidth rows,
fair optimizer/attention/checkpointing comparisons, the new units in the gate, the report's
2x-claim section. Small tensors, no inductor compile."""

from __future__ import annotations

import re

import pytest
import torch
from test_gate_support import draw, write_set

from harness.measure import timing, traffic
from harness.measure.workloads import NotApplicable, attention, bandwidth, checkpointing, optimizers
from harness.verdict import compare, metrics, summary
from harness.verdict.results import Entry

CPU = torch.device("cpu")
N = 1000


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_chain_bytes_eager_4n_fused_2n(dtype):
    chain = bandwidth.build("pointwise_chain", CPU, N)
    chain.args = (chain.args[0].to(dtype),)
    itemsize = chain.args[0].element_size()
    assert (
        bandwidth.eager_bytes(chain.eager()) == 4 * N * itemsize
    )  # read x, write t, read t, write y
    assert bandwidth.fused_bytes(chain) == 2 * N * itemsize  # read x, write y
    add = bandwidth.build("multiply_add", CPU, N)
    assert (bandwidth.eager_bytes(add.eager()), bandwidth.fused_bytes(add)) == (16 * N, 8 * N)


def test_traffic_counts_in_place_out_and_views():
    x, y = torch.ones(N), torch.empty(N)
    assert traffic.count(lambda: x.add_(1)).bytes == 8 * N  # read and write x
    assert traffic.count(lambda: torch.cos(x, out=y)).bytes == 8 * N  # out= is written, not read
    views = traffic.count(lambda: x.view(10, 100).t().unsqueeze(0))
    assert (views.kernels, views.bytes) == (0, 0)
    norm = bandwidth.build("norm_activation", CPU, 4 * bandwidth.NORM_DIM)
    # LayerNorm reads x, weight, bias and writes y, mean, rstd; GELU reads y and writes the output
    rows, dim = 4, bandwidth.NORM_DIM
    expected = 4 * (rows * dim + 2 * dim + rows * dim + 2 * rows + 2 * rows * dim)
    assert bandwidth.eager_bytes(norm.eager()) == expected


def test_bandwidth_rows_from_one_loop(monkeypatch):
    monkeypatch.setattr(timing, "FAST", {"warmup": 1, "samples": 3, "budget_s": 10.0})
    monkeypatch.setattr(bandwidth, "BACKEND", "eager")
    f = bandwidth.measure("multiply_add", CPU, 1 << 12)
    assert f["copy_bytes"] == 2 * 4 * (1 << 12)
    assert len(f["copy_gbps"]) == len(f["eager"]["gbps"]) == len(f["fused_over_eager"]) == 3
    for mode, moved in (("eager", 4), ("fused", 2)):
        assert f[mode]["bytes"] == moved * 4 * (1 << 12)
        for gbps, copy, frac in zip(f[mode]["gbps"], f["copy_gbps"], f[mode]["fraction"]):
            assert frac == pytest.approx(gbps / copy)


def test_measure_rounds_times_every_side_each_round():
    calls = []
    out = timing.measure_rounds(
        [lambda: calls.append("a"), lambda: calls.append("b"), lambda: calls.append("c")],
        CPU,
        warmup=1,
        samples=4,
        budget_s=10,
    )
    assert [len(x) for x in out] == [4, 4, 4] and len(calls) == 15
    assert calls[3:6] == ["a", "b", "c"] and calls[6:9] == ["b", "c", "a"]  # rotating order


@pytest.fixture
def small_optimizer_model(monkeypatch):
    monkeypatch.setenv("HARNESS_SIZES", "optimizer.layers=8,optimizer.width=8")


@pytest.mark.parametrize("name", optimizers.OPTIMIZERS)
def test_optimizer_variants_same_update_different_op_counts(name, small_optimizer_model):
    params, ops = {}, {}
    for impl in optimizers.IMPLS:
        step, model = optimizers.build(name, impl, CPU)  # build() takes the first step
        params[impl] = [p.detach().clone() for p in model.parameters()]
        ops[impl] = timing.ops_per_call(step, CPU)
    assert len(params["for_loop"]) == 16
    start = [p.detach() for p in optimizers.many_parameter_model(CPU).parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(start, params["for_loop"])), (
        "the step moved nothing"
    )
    for impl in ("foreach", "fused"):
        for a, b in zip(params[impl], params["for_loop"]):
            torch.testing.assert_close(a, b)  # same update: the timing comparison is fair
    assert ops["for_loop"] > ops["foreach"] > ops["fused"] >= 1, ops
    assert ops["for_loop"] >= 16  # at least one kernel per parameter


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_backends_match_hand_written(causal):
    s = {"batch": 1, "heads": 2, "seq": 16, "head_dim": 8}
    ref = attention.build("hand_written", causal, CPU, s)()
    ran = 0
    for impl in attention.BACKENDS:
        try:
            out = attention.build(impl, causal, CPU, s)()
        except NotApplicable:
            continue
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
        ran += 1
    assert ran >= 2  # math and the CPU flash kernel everywhere


def test_fused_attention_holds_less_memory_and_fewer_kernels():
    s = {"batch": 1, "heads": 2, "seq": 256, "head_dim": 16}
    hand, flash = (attention.build(i, False, CPU, s) for i in ("hand_written", "flash"))
    scores = 2 * 256 * 256 * 4  # the (heads, seq, seq) fp32 score matrix the hand-written one holds
    assert timing.peak_tensor_bytes(hand, CPU) >= scores
    assert timing.peak_tensor_bytes(flash, CPU) < scores
    assert traffic.count(flash).kernels == 1 < traffic.count(hand).kernels


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present: the CUDA backends apply")
@pytest.mark.parametrize("impl", ["efficient", "cudnn"])
def test_cuda_only_backends_are_na_with_reason_on_cpu(impl):
    with pytest.raises(NotApplicable, match=f"'{impl}'.*CUDA only.*runs on cpu"):
        attention.build(impl, False, CPU)


def test_peak_tensor_bytes_sees_a_temporary():
    n = 1 << 20

    def fn():
        tmp = torch.ones(n)  # 4 MiB, freed before the call returns
        return tmp.sum()

    assert timing.peak_tensor_bytes(fn, CPU) >= 4 * n


def test_checkpointing_same_gradients_less_memory():
    cfg = {
        "batch": 2,
        "seq_len": 32,
        "d_model": 16,
        "nhead": 2,
        "dim_ff": 32,
        "nlayers": 2,
        "num_classes": 3,
    }
    grads, peaks = {}, {}
    for mode in checkpointing.MODES:
        step, model = checkpointing.build(mode, CPU, cfg)
        peaks[mode] = timing.peak_tensor_bytes(step, CPU)
        torch.manual_seed(5)  # dropout: the same masks on both sides (checkpoint replays the RNG)
        step()
        grads[mode] = [p.grad for p in model.parameters()]
    for a, b in zip(grads["plain"], grads["checkpointed"]):
        torch.testing.assert_close(a, b)
    assert peaks["checkpointed"] < peaks["plain"]


def _entry(unit, samples=None, value=None):
    return Entry(
        "x", unit, value if value is not None else sorted(samples)[len(samples) // 2], samples
    )


def test_new_units_have_gate_rules():
    assert metrics.kind_of("bytes moved").exact
    assert metrics.kind_of("GB/s").raw and metrics.kind_of("GB/s").higher_is_better
    frac = metrics.kind_of("fraction of copy bandwidth")
    assert frac.kind == metrics.NORMALISED and frac.higher_is_better
    assert (
        compare.compare_entry(
            _entry("bytes moved", value=200), _entry("bytes moved", value=400)
        ).verdict
        == compare.REGRESSION
    )
    gbps = compare.compare_entry(_entry("GB/s", draw(30, 10)), _entry("GB/s", draw(30, 5, seed=1)))
    assert gbps.verdict == compare.NOT_JUDGED and "no calibrated noise band" in gbps.note
    # normalised by a copy, another kind of work: judged only with a calibrated band
    base, head = (
        _entry("fraction of copy bandwidth", draw(30, 0.9)),
        _entry("fraction of copy bandwidth", draw(30, 0.6, seed=1)),
    )
    unbanded = compare.compare_entry(base, head)
    assert (
        unbanded.verdict == compare.NOT_JUDGED
        and unbanded.note == "normalised bandwidth: no calibrated noise band"
    )
    lower = compare.compare_entry(base, head, band=0.03)
    assert lower.verdict == compare.REGRESSION  # a lower fraction of the copy's bandwidth is worse
    saved = compare.compare_entry(
        _entry("bytes saved", value=1000), _entry("bytes saved", value=500)
    )
    assert saved.verdict == compare.REGRESSION


def _bandwidth_set(tmp_path, copy=30.0):
    b = "fusion.MemoryBandwidth."
    benches, units = {}, {}
    # (workload, eager GB/s, fused GB/s, fused/eager time): a memory-bound and a compute-bound one
    for w, ge, gf, ratio in (
        ("multiply_add", 29.0, 28.0, 0.52),
        ("pointwise_chain", 6.0, 15.0, 0.2),
    ):
        rows = {
            "track_bytes_per_call_eager": (4 << 20, "bytes moved"),
            "track_bytes_per_call_fused": (2 << 20, "bytes moved"),
            "track_gbps_eager": (draw(5, ge), "GB/s"),
            "track_gbps_fused": (draw(5, gf), "GB/s"),
            "track_gbps_copy": (draw(5, copy), "GB/s"),
            "track_fraction_of_copy_bandwidth_eager": (
                draw(5, ge / copy),
                "fraction of copy bandwidth",
            ),
            "track_fraction_of_copy_bandwidth_fused": (
                draw(5, gf / copy),
                "fraction of copy bandwidth",
            ),
            "track_fused_over_eager": (draw(5, ratio), "ratio"),
        }
        for method, (data, unit) in rows.items():
            name = f"{b}{method}('{w}')"
            benches[name], units[name] = data, unit
    return write_set(tmp_path / "asv", "aaaaaaaa11", benches, units=units)


def test_summary_and_report_state_the_2x_claim(tmp_path):
    from harness.cli import main
    from harness.verdict.results import load

    rs = load(_bandwidth_set(tmp_path))
    view = {b.workload: b for b in summary.bandwidth_view(rs)}
    assert not view["multiply_add"].compute_bound and view["pointwise_chain"].compute_bound
    table = summary.summary_table(rs)
    assert "memory-bound" in table and "compute-bound" in table and "4 -> 2 MiB" in table
    out = tmp_path / "report"
    assert main(["report", "--results-dir", str(tmp_path), "--out", str(out)]) == 0
    md = re.sub(r" +", " ", (out / "report.md").read_text())
    assert "so fusion will speed it up by 2x" in md
    assert re.search(
        r"\| multiply_add \|.*\| memory-bound \| holds: 1\.\d\dx measured, 2\.00x predicted", md
    )
    assert re.search(
        r"\| pointwise_chain \|.*\| compute-bound \| does not hold: 5\.\d\dx measured", md
    )
