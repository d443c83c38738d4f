"""The measuring side of trustworthy verdicts: paired rounds, the compile guard, the reference
workload, the run's thread count and what harness bench tells the suites."""

from __future__ import annotations

import os

import pytest
import torch

from harness.core.exits import BadInput
from harness.measure import timing
from harness.measure.reference import reference_workload
from harness.measure.threads import default_threads, fix_threads, parse_threads, run_threads
from harness.runs import spec
from harness.runs.spec import RunSpec


def test_paired_rounds_alternate_the_order_and_return_one_ratio_per_round():
    calls = []
    ratios = timing.measure_paired(
        lambda: calls.append("a"),
        lambda: calls.append("b"),
        "cpu",
        warmup=1,
        samples=4,
        budget_s=10,
    )
    assert len(ratios) == 4 and all(r > 0 for r in ratios)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]  # warm-up, then alternating


def test_block_ratio_is_fastest_over_fastest_per_quarter_second_of_rounds():
    stamps = [0.0, 0.1, 0.2, 0.3, 0.45, 0.6, 2.0]
    work = [5.0, 4.0, 6.0, 3.0, 9.0, 9.0, 7.0]
    base = [2.0, 4.0, 3.0, 1.0, 2.0, 3.0, 2.0]
    # blocks start at 0.0 (rounds at 0, .1, .2), 0.3 (.3, .45), 0.6 (.6), 2.0 (a long round)
    assert timing.block_ratios(work, base, stamps, 0.25) == [
        4.0 / 2.0,
        3.0 / 1.0,
        9.0 / 3.0,
        7.0 / 2.0,
    ]
    assert timing.block_ratios([1.0], [0.0], [0.0]) == []  # a zero-time base is no sample


def test_paired_samples_are_the_quieter_blocks_and_a_slower_side_still_reads_slower():
    # 16 blocks: compiled 2.2 / eager 3.5 when quiet; in 6 of them a host state slows both
    # sides, the compiled side more (as measured for the pointwise chain under load)
    quiet, burst = (2.2, 3.5), (3.2, 4.2)
    blocks = [burst if i in (1, 2, 3, 9, 10, 15) else quiet for i in range(16)]
    kept = timing.quiet_blocks(blocks)
    assert kept == [quiet] * 8  # the quieter half, every burst block out
    slowed = timing.quiet_blocks([(w * 1.1, b) for w, b in blocks])
    assert slowed == [
        (w * 1.1, b) for w, b in kept
    ]  # the same blocks kept: a 10% slowdown stays 10%
    few = [quiet, burst, quiet, burst, quiet]
    assert timing.quiet_blocks(few) == few  # below MIN_QUIET_BLOCKS every block is a sample
    # through block_ratios: one round per block here, so each block's ratio is its round's
    stamps = [0.3 * i for i in range(16)]
    ratios = timing.block_ratios([w for w, _ in blocks], [b for _, b in blocks], stamps, 0.25)
    assert ratios == [2.2 / 3.5] * 8


class FakeClock:
    """The timing loop's clock (timing.time), advanced only by the calls it times: how many
    rounds fill a window is then the loop's rule, not how busy the machine is (with real sleeps
    a loaded runner fit half the rounds a quiet one did)."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    process_time = perf_counter

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_paired_rounds_by_default_fill_the_window_one_sample_per_block(monkeypatch):
    monkeypatch.setattr(
        timing, "FAST", {"warmup": 1, "samples": 2, "budget_s": 0.0, "paired_window_s": 0.3}
    )
    monkeypatch.setattr(timing, "BLOCK_S", 0.1)
    clock = FakeClock()
    monkeypatch.setattr(timing, "time", clock)
    calls = []

    def side(name):
        def call():
            calls.append(name)
            clock.sleep(0.004)

        return call

    ratios = timing.measure_paired(side("a"), side("b"), "cpu", clock="wall")
    assert clock.now >= 0.3  # the window, not the 2 `samples` of measure()
    # 8 ms per round: the window's 0.3 s hold 38 rounds, both sides each round (and a warm-up)
    assert calls.count("a") == calls.count("b") == 1 + 38
    assert ratios == pytest.approx([1.0] * 3)  # one sample per 0.1 s block


def test_timing_loops_keep_freed_memory_and_nested_retains_restore_once(monkeypatch):
    from harness.measure import allocator

    seen = []

    class FakeLibc:
        def mallopt(self, param, value):
            seen.append(("mallopt", param, value))

        def malloc_trim(self, pad):
            seen.append(("trim",))

    monkeypatch.setattr(allocator, "_libc", lambda: FakeLibc())
    outer = allocator.retain_freed_memory()
    timing.measure(lambda: seen.append("call"), "cpu", warmup=1, samples=2)
    assert seen[:2] == [
        ("mallopt", allocator._M_MMAP_MAX, 0),
        ("mallopt", allocator._M_TRIM_THRESHOLD, 2**31 - 1),
    ]
    assert seen[2:] == ["call"] * 3  # the loop's own retain nested inside: nothing restored yet
    outer()
    outer()
    assert [s for s in seen if s != "call"][2:] == [
        ("mallopt", allocator._M_MMAP_MAX, 65536),
        ("mallopt", allocator._M_TRIM_THRESHOLD, 128 * 1024),
        ("trim",),
    ]
    seen.clear()
    timing.measure(lambda: None, "cpu", warmup=1, samples=1)  # alone, the loop retains and restores
    assert [s[0] for s in seen] == ["mallopt", "mallopt", "mallopt", "mallopt", "trim"]


def test_a_timed_call_that_recompiles_fails_with_the_reason():
    import torch._dynamo

    torch._dynamo.reset()
    fn = torch.compile(lambda x: x.cos() + 1, backend="eager", dynamic=False)
    inputs = iter(
        [torch.ones(4)] * 3 + [torch.ones(5)] * 10
    )  # warm-up and 2 rounds, then a new shape
    with pytest.raises(
        timing.CompiledDuringTiming, match=r"timed call 3 .*size mismatch at index 0"
    ):
        timing.measure(lambda: fn(next(inputs)), "cpu", warmup=1, samples=5, budget_s=10)
    torch._dynamo.reset()


def test_a_first_compile_inside_the_timed_calls_is_named_too():
    import torch._dynamo

    torch._dynamo.reset()
    fns = iter([lambda x: x] + [torch.compile(lambda x: x.sin(), backend="eager")] * 10)
    current = {"fn": next(fns)}

    def call():
        out = current["fn"](torch.ones(3))
        current["fn"] = next(fns)  # the warm-up ran the plain function; the timed calls compile
        return out

    with pytest.raises(timing.CompiledDuringTiming, match="a first compile"):
        timing.measure(call, "cpu", warmup=1, samples=3, budget_s=10)
    torch._dynamo.reset()


def test_cpu_reference_does_not_run_torch():
    # a torch change must not move the yardstick: the CPU reference dispatches no aten op
    ref = reference_workload("cpu")
    assert timing.ops_per_call(ref, "cpu") == 0
    assert (
        len(timing.measure_over_reference(lambda: sum(range(1000)), "cpu", warmup=1, samples=3))
        == 3
    )


def test_thread_count_follows_the_mode_and_the_override(monkeypatch):
    cores = os.cpu_count() or 1
    assert default_threads(full=False, quick=True) == 1
    assert default_threads(full=False, quick=False) == 1
    assert default_threads(full=True, quick=True) == 1
    assert default_threads(full=True, quick=False) == cores
    monkeypatch.setenv("HARNESS_THREADS", "3")
    assert run_threads() == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(BadInput, match="thread count"):
            parse_threads(bad)
    before = torch.get_num_threads()
    monkeypatch.setenv("HARNESS_THREADS", "1")
    try:
        assert fix_threads() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_bench_tells_the_suites_quick_mode_threads_and_the_scratch_folders():
    from harness.runs.scratch import RunScratch

    with RunScratch() as scratch:
        env = RunSpec(mode="quick").environment(scratch)
        assert env["TORCHINDUCTOR_CACHE_DIR"] == str(scratch.root / "inductor")
        assert env["TMPDIR"] == env["TMP"] == env["TEMP"] == str(scratch.root / "tmp")
    assert (
        env["HARNESS_QUICK"] == "1" and env["HARNESS_FULL"] == "0" and env["HARNESS_THREADS"] == "1"
    )
    env = RunSpec(mode="full", threads=5).environment()
    assert (
        env["HARNESS_QUICK"] == "0" and env["HARNESS_FULL"] == "1" and env["HARNESS_THREADS"] == "5"
    )
    assert (
        RunSpec.from_flags(quick=True).size == "small"
        and RunSpec.from_flags(full=True).size == "full"
    )


def test_bench_fixes_the_suites_hash_seed_unless_the_caller_set_one(monkeypatch):
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    assert RunSpec(mode="quick").environment()["PYTHONHASHSEED"] == spec.HASH_SEED == "0"
    monkeypatch.setenv("PYTHONHASHSEED", "123")
    assert RunSpec(mode="quick").environment()["PYTHONHASHSEED"] == "123"


def test_bench_threads_zero_is_bad_input(capsys, tmp_path):
    from harness.cli import main

    assert (
        main(
            [
                "bench",
                "--quick",
                "--suite",
                "transfer",
                "--threads",
                "0",
                "--results-dir",
                str(tmp_path),
            ]
        )
        == 3
    )
    assert "thread count must be >= 1" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_under_ab_a_raw_time_fills_the_window_one_fastest_call_per_quarter_second(monkeypatch):
    # harness ab sets the window: 60 calls of a fast model would cover a few milliseconds only
    monkeypatch.setenv("HARNESS_PAIRED_WINDOW_S", "0.6")
    clock = FakeClock()  # calls take what they say, on a quiet machine or a loaded one
    monkeypatch.setattr(timing, "time", clock)
    calls = []

    def call():
        calls.append(clock.perf_counter())
        clock.sleep(0.001 if len(calls) % 7 else 0.004)  # every 7th call slower

    samples = timing.measure(call, "cpu", warmup=1)
    assert calls[-1] - calls[1] >= 0.55  # the timed calls spanned the window
    assert 2 <= len(samples) <= 4 and len(calls) > 60  # a sample per quarter second
    assert max(samples) < 0.004  # each sample is its block's fastest call, never a slow one
    # a fixed count (the canary's 400 calls for the gate's test) gives way to the window too
    del calls[:]
    assert 2 <= len(timing.measure(call, "cpu", warmup=1, samples=5)) <= 4
    assert calls[-1] - calls[1] >= 0.55
    monkeypatch.delenv("HARNESS_PAIRED_WINDOW_S")
    assert len(timing.measure(call, "cpu", warmup=1, samples=5)) == 5  # outside ab: per call


@pytest.mark.parametrize("extra", ["0", "1"])
def test_the_canarys_paired_sides_are_the_same_calls_but_the_injected_op(monkeypatch, extra):
    """Its paired row holds only while both timed sides are like work: the switch is read once
    in setup, never during a timed call (an environment lookup there moved the clean row by 6%
    between processes), and only the switch adds an op to the chain."""
    from test_workloads import suite_module

    from harness.core import settings

    monkeypatch.setenv("HARNESS_CANARY_EXTRA", extra)
    reads = []
    real = settings.Setting.get

    def counted(self, environ=None):
        reads.append(self.name)
        return real(self, environ)

    monkeypatch.setattr(settings.Setting, "get", counted)
    bench = suite_module("canary").Canary()
    bench.setup()
    assert reads.count("HARNESS_CANARY_EXTRA") == 1
    del reads[:]
    bench.fn(), bench.reference()
    assert reads == []  # the timed calls read no setting
    ops = timing.ops_per_call(bench.fn), timing.ops_per_call(bench.reference)
    assert ops[0] == ops[1] + (extra == "1") and ops[1] >= 10
