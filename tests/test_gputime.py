"""The GPU timing path's logic with a device's readings injected (no GPU here): batching, the
stopping rule, the time-based warm-up, throttled samples, paired rounds, cold samples; the NVML
reader on a fake NVML; the busy fraction and ATen share from profiler events; row facts in the
run record."""

from __future__ import annotations

import random
import statistics
import types

import pytest

from harness.core import clocks, records, settings
from harness.core.exits import BadInput
from harness.measure import activity, gputime, rowfacts, timing


class FakeGpu:
    """A device whose calls take `per_call` GPU seconds (times `jitter` noise), `host` host
    seconds; a fake wall clock advanced by what each sample takes."""

    def __init__(self, per_call=10e-6, host=20e-6, jitter=0.0, seed=0):
        self.per_call, self.host, self.jitter = per_call, host, jitter
        self.rng = random.Random(seed)
        self.t = 0.0
        self.calls: list[tuple[str, int]] = []

    def now(self):
        return self.t

    def _cost(self, fn):
        base = self.per_call(fn) if callable(self.per_call) else self.per_call
        return base * (1 + self.rng.uniform(-self.jitter, self.jitter))

    def run(self, fn, batch):
        self.calls.append((getattr(fn, "label", "fn"), batch))
        gpu = sum(self._cost(fn) for _ in range(batch))
        self.t += max(gpu, self.host * batch)
        return gpu, self.host * batch

    def run_cold(self, fn):
        self.calls.append((getattr(fn, "label", "fn"), "cold"))
        gpu = self._cost(fn) * 1.5  # from cold caches
        self.t += gpu + 1e-3
        return gpu, self.host


class FakeReader:
    """Clock readings from a script (the last one repeats)."""

    available = True
    why = ""

    def __init__(self, script, sm_max_mhz=None):
        self.script = list(script)
        self.reads = 0
        self.sm_max_mhz = sm_max_mhz

    def sample(self):
        item = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        return item if isinstance(item, clocks.ClockSample) else clocks.ClockSample(item)

    def identity(self):
        return clocks.GpuIdentity("GPU-1234", clocks.UNLOCKED, self.sm_max_mhz)


def labelled(name):
    def fn():
        return None

    fn.label = name
    return fn


def run(fns, gpu, reader, rule=None, **kw):
    return gputime.sample(
        fns, gpu, reader, rule or gputime.StopRule(budget_s=1.0), now=gpu.now, **kw
    )


def test_the_batch_grows_until_one_sample_holds_a_millisecond_of_gpu_time():
    gpu = FakeGpu(per_call=7e-6)
    batch = gputime.batch_for(labelled("f"), gpu)
    assert batch * 7e-6 >= gputime.TARGET_SAMPLE_S
    assert batch * 7e-6 < 4 * gputime.TARGET_SAMPLE_S  # grown to it, not far past it
    assert gputime.batch_for(labelled("f"), FakeGpu(per_call=5e-3)) == 1  # a long call alone


def test_a_quiet_row_stops_on_its_noise_after_at_least_ten_samples():
    gpu = FakeGpu(per_call=50e-6, jitter=0.001)
    got = run([labelled("f")], gpu, FakeReader([1980]))
    assert got.stopped == "noise" and len(got.sides[0].gpu_s) >= gputime.MIN_SAMPLES
    assert got.series_noise <= gputime.NOISE_TARGET
    assert all(abs(x - 50e-6) < 1e-7 for x in got.sides[0].gpu_s)  # per call, not per batch
    assert got.sides[0].host_s[0] == pytest.approx(20e-6)
    facts = got.facts()
    assert facts["stopped"] == "noise" and facts["sm_clock_mhz"] == 1980
    assert facts["clock_note"] == "" and facts["dropped_throttled"] == 0


def test_a_noisy_row_stops_at_its_budget_and_records_its_noise():
    gpu = FakeGpu(per_call=1e-3, jitter=0.3)
    got = run([labelled("f")], gpu, FakeReader([1980]), gputime.StopRule(budget_s=0.05))
    assert got.stopped == "budget"
    assert got.series_noise > gputime.NOISE_TARGET
    assert len(got.sides[0].gpu_s) >= gputime.MIN_SAMPLES


def test_samples_taken_while_throttled_are_dropped_and_counted():
    power = clocks.ClockSample(1400, reasons=0x4)  # power cap
    probe = FakeReader([1980])  # how many readings the warm-up takes first
    warming = FakeGpu(per_call=100e-6)
    gputime.warm_up([labelled("f")], [1], warming, probe, warming.now)  # sample()'s warm-up
    warm = [1980] * probe.reads
    script = warm + [1980] * 3 + [power, power, 1980, clocks.ClockSample(1500, reasons=0x20), 1980]
    gpu = FakeGpu(per_call=100e-6)
    reader = FakeReader(script)
    got = run([labelled("f")], gpu, reader)
    assert got.dropped == 3
    assert got.throttles == ["power cap", "thermal (software)"]
    assert got.taken == len(got.sides[0].gpu_s) + 3
    assert 1400 not in got.clocks_mhz and 1500 not in got.clocks_mhz


def test_at_the_power_cap_a_sample_is_kept_while_the_clock_holds_three_quarters_of_its_max():
    # 1980 MHz max: the floor is 1485 MHz; thermal limits drop a sample whatever the clock
    assert clocks.power_cap_floor(clocks.GpuIdentity("u", clocks.UNLOCKED, 1980)) == 1485
    assert clocks.power_cap_floor(clocks.GpuIdentity("u", clocks.UNLOCKED)) is None
    assert clocks.ClockSample(1800, reasons=0x4).dropping(1485) == []
    assert clocks.ClockSample(1400, reasons=0x4).dropping(1485) == ["power cap"]
    assert clocks.ClockSample(1800, reasons=0x4).dropping(None) == ["power cap"]
    assert clocks.ClockSample(1900, reasons=0x4 | 0x20).dropping(1485) == ["thermal (software)"]

    capped, slow = clocks.ClockSample(1800, reasons=0x4), clocks.ClockSample(1400, reasons=0x4)
    probe = FakeReader([1980], sm_max_mhz=1980)
    warming = FakeGpu(per_call=100e-6)
    gputime.warm_up([labelled("f")], [1], warming, probe, warming.now)  # sample()'s warm-up
    script = [1980] * probe.reads + [capped, capped, slow, 1980]
    got = run([labelled("f")], FakeGpu(per_call=100e-6), FakeReader(script, sm_max_mhz=1980))
    assert got.dropped == 1 and got.throttles == ["power cap"]
    assert got.capped >= 2 and 1800 in got.clocks_mhz and 1400 not in got.clocks_mhz
    assert got.facts()["kept_at_power_cap"] == got.capped


def test_a_gpu_that_throttles_throughout_stops_after_its_hard_budget():
    gpu = FakeGpu(per_call=1e-3)
    got = run(
        [labelled("f")],
        gpu,
        FakeReader([clocks.ClockSample(900, reasons=0x40)]),
        gputime.StopRule(budget_s=0.02),
    )
    assert got.stopped == "budget" and got.sides[0].gpu_s == []
    assert got.dropped == got.taken > 0
    assert gpu.t <= gputime.HARD_STOP_BUDGETS * 0.02 + 0.2  # warm-up plus the hard stop


def test_the_warm_up_runs_until_the_clock_is_steady():
    ramp = [345, 600, 1100, 1700, 1950, 1975, 1980, 1980, 1980]
    gpu = FakeGpu(per_call=1e-3)
    reader = FakeReader(ramp)
    spent, steady = gputime.warm_up([labelled("f")], [1], gpu, reader, gpu.now)
    assert steady is True and spent >= gputime.WARM_MIN_S
    assert reader.reads >= 7  # went on through the ramp, not a fixed count of calls


def test_a_clock_that_never_settles_ends_the_warm_up_at_its_limit():
    gpu = FakeGpu(per_call=1e-3)
    wobbly = FakeReader([1500, 1900] * 1000)
    spent, steady = gputime.warm_up([labelled("f")], [1], gpu, wobbly, gpu.now)
    assert steady is False and gputime.WARM_MAX_S <= spent < gputime.WARM_MAX_S + 0.01


def test_without_a_clock_reader_the_warm_up_is_by_time_and_the_row_says_so():
    gpu = FakeGpu(per_call=1e-3)
    reader = clocks.NoClocks("nvidia-ml-py not installed: SM clock and throttling not checked")
    got = run([labelled("f")], gpu, reader)
    assert got.steady is None and gputime.WARM_NO_CLOCK_S <= got.warmup_s < 0.35
    assert got.facts()["clock_note"].startswith("nvidia-ml-py not installed")
    assert got.facts()["sm_clock_mhz"] is None


def test_paired_sides_take_turns_and_the_noise_is_read_on_their_ratio():
    def cost(fn):
        return 2e-4 if fn.label == "work" else 1e-4

    gpu = FakeGpu(per_call=cost, jitter=0.002)
    work, base = labelled("work"), labelled("base")
    got = run([work, base], gpu, FakeReader([1980]), series=timing.gpu_ratios)
    sampled = [c for c in gpu.calls if c[1] == got.sides[0].batch or c[1] == got.sides[1].batch]
    firsts = [sampled[i][0] for i in range(len(sampled) - 2 * got.taken, len(sampled), 2)]
    assert firsts[:4] == ["work", "base", "work", "base"]  # the order rotates round by round
    ratios = timing.gpu_ratios(got.sides)
    assert len(ratios) == got.taken and all(abs(r - 2.0) < 0.02 for r in ratios)
    assert got.sides[0].batch != got.sides[1].batch  # each side batched to its own length


def test_cold_samples_are_single_calls_after_a_flush():
    gpu = FakeGpu(per_call=1e-4)
    got = run([labelled("f")], gpu, FakeReader([1980]), mode=gputime.COLD)
    assert got.mode == "cold" and got.sides[0].batch == 1
    assert any(c[1] == "cold" for c in gpu.calls)
    assert got.sides[0].gpu_s[0] == pytest.approx(1.5e-4)


def test_a_busy_fraction_is_over_what_a_caller_waits_per_call():
    # cold: 15 us of GPU work behind a 40 us enqueue; the caller waits the enqueue
    cold = run([labelled("f")], FakeGpu(per_call=1e-5, host=4e-5), FakeReader([1980]), mode="cold")
    assert cold.wall_per_call(0) == pytest.approx(4e-5)
    cold = run([labelled("f")], FakeGpu(per_call=1e-4, host=4e-5), FakeReader([1980]), mode="cold")
    assert cold.wall_per_call(0) == pytest.approx(1.5e-4)
    # batch: the events span every launch, so the GPU time per call is already the wait
    batch = run([labelled("f")], FakeGpu(per_call=1e-5, host=4e-5), FakeReader([1980]))
    assert batch.wall_per_call(0) == pytest.approx(1e-5)


def test_rows_whose_device_data_fits_in_l2_are_timed_cold():
    l2 = 60 << 20
    assert gputime.cache_mode("auto", 4 << 20, l2) == gputime.COLD  # 4 MB: would stay in L2
    assert gputime.cache_mode("auto", 256 << 20, l2) == gputime.BATCH  # 4x L2: streams anyway
    assert gputime.cache_mode("auto", 0, l2) == gputime.BATCH  # nothing on the device: a copy
    assert gputime.cache_mode("warm", 1 << 20, l2) == gputime.BATCH
    assert gputime.cache_mode("cold", 1 << 30, l2) == gputime.COLD
    with pytest.raises(ValueError, match="cache must be"):
        gputime.cache_mode("tepid", 1, l2)


def test_relative_noise_is_the_median_s_robust_standard_error():
    assert gputime.relative_noise([1.0, 1.0]) == float("inf")
    xs = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.0, 1.01]
    # MAD 0.01: 1.2533 * 1.4826 * 0.01 / 3 / 1.0
    assert gputime.relative_noise(xs) == pytest.approx(1.2533 * 1.4826 * 0.01 / 3, rel=1e-6)
    with pytest.raises(ValueError, match="mode"):
        run([labelled("f")], FakeGpu(), FakeReader([1980]), mode="lukewarm")


# ---- the clock reader (NVML), with a fake NVML module ----


def fake_nvml(reasons=0, app=1980, default_app=1980):
    n = types.SimpleNamespace(NVML_CLOCK_SM=0, NVML_TEMPERATURE_GPU=0)
    n.nvmlDeviceGetClockInfo = lambda h, c: 1755
    n.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reasons
    n.nvmlDeviceGetTemperature = lambda h, t: 61
    n.nvmlDeviceGetPowerUsage = lambda h: 412_000
    n.nvmlDeviceGetApplicationsClock = lambda h, c: app
    n.nvmlDeviceGetDefaultApplicationsClock = lambda h, c: default_app
    n.nvmlDeviceGetMaxClockInfo = lambda h, c: 1980

    def unsupported(h):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    n.nvmlDeviceGetEnforcedPowerLimit = unsupported
    return n


def test_nvml_readings_drop_the_idle_bit_and_name_thermal_and_power_limits(monkeypatch):
    monkeypatch.delenv(settings.GPU_CLOCK_POLICY.name, raising=False)
    s = clocks.NvmlClocks(fake_nvml(reasons=0x1 | 0x4 | 0x40), None, "GPU-abc").sample()
    assert s == clocks.ClockSample(1755, 0x44, 61, 412.0)
    assert s.throttles == ["power cap", "thermal (hardware)"]
    assert clocks.NvmlClocks(fake_nvml(reasons=0x1), None, "x").sample().throttles == []
    ident = clocks.NvmlClocks(fake_nvml(), None, "GPU-abc").identity()
    assert ident == clocks.GpuIdentity("GPU-abc", clocks.UNLOCKED, 1980, None)
    # an idle card without application clocks: the policy is unknown, not unlocked
    idle = fake_nvml(reasons=0x1, app=None, default_app=None)
    assert clocks.NvmlClocks(idle, None, "x").identity().clock_policy == clocks.UNKNOWN


def test_a_declared_clock_policy_holds_where_nvml_is_missing(monkeypatch):
    monkeypatch.delenv(settings.GPU_CLOCK_POLICY.name, raising=False)
    assert clocks.NoClocks("no NVML").identity().clock_policy == clocks.UNKNOWN
    monkeypatch.setenv(settings.GPU_CLOCK_POLICY.name, "locked")
    assert clocks.NoClocks("no NVML").identity().clock_policy == clocks.LOCKED


def test_temperature_and_power_of_the_kept_rounds_are_recorded():
    probe = FakeReader([1980])  # how many readings the warm-up takes first
    warming = FakeGpu(per_call=1e-4)
    gputime.warm_up([labelled("f")], [1], warming, probe, warming.now)
    warm = clocks.ClockSample(1980, 0, 60, 400.0)
    hot = clocks.ClockSample(1400, 0x40, 90, 700.0)  # thermal: dropped, not recorded
    script = [1980] * probe.reads + [warm, clocks.ClockSample(1980, 0, 65, 500.0), hot, warm]
    got = run([labelled("f")], FakeGpu(per_call=1e-4), FakeReader(script)).facts()
    assert got["dropped_throttled"] == 1
    assert got["temperature_max_c"] == 65 and 400.0 <= got["power_median_w"] <= 500.0
    silent = run([labelled("f")], FakeGpu(per_call=1e-4), FakeReader([1980])).facts()
    assert silent["temperature_max_c"] is None and silent["power_median_w"] is None


def test_the_clock_policy_is_locked_when_the_clocks_are_pinned_and_a_declaration_wins(
    monkeypatch,
):
    monkeypatch.delenv(settings.GPU_CLOCK_POLICY.name, raising=False)
    assert clocks.clock_policy(1410, 1980, 0) == clocks.LOCKED  # application clocks set
    assert clocks.clock_policy(1980, 1980, 0x2) == clocks.LOCKED  # the reason says so
    assert clocks.clock_policy(1980, 1980, 0) == clocks.UNLOCKED
    assert clocks.clock_policy(None, None, 0) == clocks.UNKNOWN
    monkeypatch.setenv(settings.GPU_CLOCK_POLICY.name, "locked")
    assert clocks.clock_policy(1980, 1980, 0) == clocks.LOCKED
    monkeypatch.setenv(settings.GPU_CLOCK_POLICY.name, "pinned")
    with pytest.raises(Exception, match="HARNESS_GPU_CLOCK_POLICY must be"):
        clocks.clock_policy(1980, 1980, 0)


def test_a_cpu_device_has_no_clock_reader_and_says_why():
    reader = clocks.reader_for("cpu")
    assert not reader.available and "not a CUDA device" in reader.why


# ---- busy fraction and ATen share from profiler events ----


def event(name, start, end, device="CPU", parent=None):
    import torch

    return types.SimpleNamespace(
        name=name,
        time_range=types.SimpleNamespace(start=start, end=end),
        device_type=getattr(torch.autograd.DeviceType, device),
        cpu_parent=parent,
    )


def test_interval_union_counts_overlaps_once():
    assert activity.union_length([(0, 10), (5, 15), (20, 25), (21, 22)]) == 20
    assert activity.union_length([]) == 0


def test_the_busy_fraction_is_gpu_activity_over_the_unprofiled_time_per_call():
    events = [
        event("kernel_a", 0, 300, "CUDA"),
        event("Memcpy HtoD", 250, 400, "CUDA"),  # overlaps: counted once
        event("aten::cos", 0, 900),  # host side: not GPU activity
    ]
    assert activity.busy_fraction(events, 1e-3) == pytest.approx(0.4)
    assert activity.busy_fraction(events, 2e-4) == 1.0  # capped: a profiled call runs longer


def test_the_aten_share_counts_top_level_ops_and_compiled_graphs_over_the_call():
    call = event(activity.CALL, 0, 1000)
    outer = event("aten::linear", 100, 400, parent=call)
    inner = event("aten::addmm", 150, 390, parent=outer)  # inside linear: not again
    graph = event("## Call CompiledFxGraph abc ##", 500, 800, parent=call)
    in_graph = event("aten::empty", 510, 520, parent=graph)
    assert activity.aten_share([call, outer, inner, graph, in_graph]) == pytest.approx(0.6)
    assert activity.aten_share([outer]) is None  # no call region: nothing to divide by


def test_a_real_cpu_call_has_an_aten_share_between_zero_and_one():
    import torch

    x = torch.randn(4096)
    share = activity.aten_share(activity.profile_call(lambda: x.cos().sin(), "cpu"))
    assert share is not None and 0.0 < share <= 1.0


# ---- row facts in the run record ----


def _in_benchmark(name, params, body):
    """Call `body` the way asv's runner calls a benchmark: from a method of its Benchmark."""
    cls = type("TrackBenchmark", (), {"__module__": "asv_runner.benchmarks.track"})
    bench = cls()
    bench.name, bench._current_params = name, params

    def do_run(self):
        return body()

    return do_run(bench)


def test_the_current_row_is_named_as_asv_s_results_name_it():
    assert rowfacts.current_row() is None
    row = _in_benchmark("models.Inference.track_time", ("mlp", False), rowfacts.current_row)
    assert row == "models.Inference.track_time('mlp', False)"
    assert _in_benchmark("canary.Canary.track_time", (), rowfacts.current_row) == (
        "canary.Canary.track_time"
    )


def test_a_cpu_row_timed_inside_a_run_keeps_its_aten_share_in_the_record(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv(settings.RUN_RECORD.name, str(tmp_path))
    x = torch.randn(1 << 14)
    name = "fusion.PointwiseChain.track_eager_time"
    times = _in_benchmark(
        name, (), lambda: timing.measure(lambda: x.cos().cos(), "cpu", samples=5, budget_s=0.2)
    )
    facts = records.read_row_facts(tmp_path)[name]
    assert facts["device"] == "cpu" and 0.0 < facts["aten_share"] <= 1.0
    # the record keeps the samples' median (statistics.median: the mean of the two middle ones
    # for an even count, which the time budget may leave), the same statistic the loop returned
    assert facts["time_s"] == pytest.approx(statistics.median(times))
    # outside a benchmark, or with the measurement suppressed, nothing is written or profiled
    timing.measure(lambda: x.cos(), "cpu", samples=3, budget_s=0.1)
    with rowfacts.suppressed():
        _in_benchmark("s.C.track_other", (), lambda: timing.measure(lambda: x.cos(), "cpu"))
    assert list(records.read_row_facts(tmp_path)) == [name]


def test_row_facts_are_one_file_per_row_and_a_rerun_replaces_its_own(tmp_path):
    records.write_row_facts(tmp_path, "a.B.track_x('p/q', 1)", {"device": "cpu", "n": 1})
    records.write_row_facts(tmp_path, "a.B.track_y", {"device": "cuda", "busy": 0.9})
    records.write_row_facts(tmp_path, "a.B.track_x('p/q', 1)", {"device": "cpu", "n": 2})
    got = records.read_row_facts(tmp_path)
    assert got == {
        "a.B.track_x('p/q', 1)": {"device": "cpu", "n": 2},
        "a.B.track_y": {"device": "cuda", "busy": 0.9},
    }
    # a damaged file of a record is bad input naming it (the gate relies on row facts)
    (tmp_path / records.ROW_FACTS / "broken.json").write_text("{")
    with pytest.raises(BadInput, match="broken.json: row facts file does not parse"):
        records.read_row_facts(tmp_path)


# ---- the CUDA device, with a stand-in torch that records what is called ----


class FakeTorch:
    """Records the order of CUDA calls; events read a fixed clock set by the calls in between."""

    def __init__(self):
        self.log: list[str] = []
        self.clock = 0.0
        torch = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.t = None

            def record(self):
                torch.log.append("record")
                self.t = torch.clock

            def synchronize(self):
                torch.log.append("sync")

            def elapsed_time(self, other):
                assert torch.log[-1] == "sync"  # read right after a synchronise
                return (other.t - self.t) * 1000.0

        def sleep(cycles):
            torch.log.append(f"sleep {cycles}")
            torch.clock += cycles / 1e9

        def props(device):
            return types.SimpleNamespace(L2_cache_size=50 << 20)

        self.cuda = types.SimpleNamespace(Event=Event, _sleep=sleep, get_device_properties=props)
        self.uint8 = "uint8"

    def device(self, name):
        return types.SimpleNamespace(type="cuda", index=None, name=name)

    def empty(self, n, dtype, device):
        torch = self

        class Buffer:
            def zero_(self):
                torch.log.append(f"flush {n}")

        return Buffer()


def test_the_cuda_device_times_a_batch_between_two_events_read_after_a_synchronise():
    torch = FakeTorch()
    dev = gputime.CudaDevice("cuda", torch)

    def call():
        torch.log.append("call")
        torch.clock += 2e-4

    gpu, _ = dev.run(call, 5)
    assert torch.log == ["record"] + ["call"] * 5 + ["record", "sync"]
    assert gpu == pytest.approx(1e-3)  # per batch; sample() divides by the batch


def test_a_cold_call_is_flushed_and_queued_behind_a_bounded_spin():
    torch = FakeTorch()
    dev = gputime.CudaDevice("cuda", torch)
    dev._cycles_per_s = 1e9  # as timed once per process

    def call():
        torch.log.append("call")
        torch.clock += 1e-4

    gpu, _ = dev.run_cold(call)
    flush, spin, *rest = torch.log
    assert flush == f"flush {gputime.COLD_FLUSH_L2 * (50 << 20)}"
    assert dev.flush_bytes == gputime.COLD_FLUSH_L2 * (50 << 20)  # left out of a row's peak
    assert spin.startswith("sleep ") and int(spin.split()[1]) <= gputime.COLD_SPIN_MAX_S * 1e9
    assert rest == ["record", "call", "record", "sync"]  # the flush and spin outside the events
    assert gpu == pytest.approx(1e-4)
    torch.log.clear()
    dev.run_cold(call)
    second = int(torch.log[1].split()[1])
    assert second < int(spin.split()[1])  # the spin follows the enqueue seen, it never grows
