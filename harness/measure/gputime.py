"""GPU time that measures the GPU: the sampling loop of every CUDA timing row.

Two strategies over one loop, as NVBench has them:
- batch (the default): `batch` back-to-back calls between a pair of CUDA events, the batch grown
  until one sample holds at least TARGET_SAMPLE_S of GPU time, so that a sample is GPU work and
  not one launch; GPU time per call = event time / batch. The host time per call beside it is
  the wall time from the first launch to the end of the sample's synchronise, over batch (what a
  caller waits; much more than the GPU time means the host is the bottleneck);
- cold: one call per sample, after an L2 flush (a buffer of COLD_FLUSH_L2 x the L2 size written
  outside the events) and queued behind a spin (torch.cuda._sleep) long enough to hide its
  launch, so that the events time the call's GPU work from cold caches; the host time is then
  the time to enqueue the call. For rows whose working set fits in L2 (cache_mode).

Sampling: after the warm-up calls (compilation, autotuning), the GPU is warmed up by time until
its SM clock is steady (an idle GPU ramps up); then samples are taken until at least
MIN_SAMPLES are kept and the median's relative noise (relative_noise) is below NOISE_TARGET, or
the row's budget ends. After each sample the clock reader is asked: a sample taken while a
thermal or power limit was active is dropped and counted; at the power cap alone a sample is
kept while the SM clock holds 75% of the card's maximum (harness.core.clocks), and counted.
Sides timed together (a paired ratio, bandwidth against a copy) take turns within each round,
their order rotating, and a round with a dropped sample is dropped whole.

The device is passed in (`Device`: CudaDevice here), as is the clock reader
(harness.core.clocks), so the loop's logic is tested on a CPU with a device's readings
injected.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from harness.core.clocks import power_cap_floor

TARGET_SAMPLE_S = 1e-3  # GPU time one sample holds at least (batch mode)
MAX_BATCH = 10_000
MIN_SAMPLES = 10
NOISE_TARGET = 0.005  # relative noise of the median at which sampling stops
MAX_SAMPLES = 2_000
# A row whose samples keep being dropped (a throttled GPU) stops at this many budgets.
HARD_STOP_BUDGETS = 5.0
WARM_MIN_S = 0.1  # the time-based warm-up lasts at least this long
WARM_MAX_S = 1.0  # and at most this long while the clock is still moving
WARM_NO_CLOCK_S = 0.3  # without a clock reader: this long, as a ramp-up usually takes
STEADY_READS = 3  # consecutive clock readings within STEADY_SPREAD make the clock steady
STEADY_SPREAD = 0.01
COLD_FLUSH_L2 = 2  # the flush buffer is this many times the L2 size
COLD_SPIN_MARGIN = 2.0  # the spin before a cold call lasts this many times its enqueue time
COLD_SPIN_MAX_S = 0.01
BATCH, COLD = "batch", "cold"


class Device(Protocol):
    """What the loop needs from a GPU."""

    def run(self, fn: Callable[[], object], batch: int) -> tuple[float, float]:
        """(GPU seconds, host seconds) of `batch` back-to-back calls, synchronised."""

    def run_cold(self, fn: Callable[[], object]) -> tuple[float, float]:
        """(GPU seconds, host enqueue seconds) of one call after an L2 flush."""


@dataclasses.dataclass(frozen=True)
class StopRule:
    """When sampling stops (NVBench's stopping criterion, pluggable): at least `min_samples`
    kept and the noise of `series` at or below `noise_target`; or `budget_s` of sampling spent
    with `min_samples` kept; or `max_samples` taken; or HARD_STOP_BUDGETS budgets spent whatever
    was kept (a GPU that throttles through the whole row)."""

    budget_s: float = 1.0
    min_samples: int = MIN_SAMPLES
    noise_target: float = NOISE_TARGET
    max_samples: int = MAX_SAMPLES

    def why_stop(self, series: list[float], taken: int, elapsed_s: float) -> str | None:
        if len(series) >= self.min_samples and relative_noise(series) <= self.noise_target:
            return "noise"
        if taken >= self.max_samples:
            return "samples"
        if elapsed_s >= self.budget_s and len(series) >= self.min_samples:
            return "budget"
        if elapsed_s >= HARD_STOP_BUDGETS * self.budget_s:
            return "budget"
        return None


def relative_noise(xs: Sequence[float]) -> float:
    """The relative standard error of the median, estimated robustly: 1.2533 (the median's
    efficiency) x 1.4826 x MAD (a standard deviation that one outlier cannot inflate) / sqrt(n),
    over the median. Infinite for fewer than 3 values."""
    if len(xs) < 3:
        return math.inf
    med = statistics.median(xs)
    if med == 0:
        return math.inf
    mad = statistics.median(abs(x - med) for x in xs)
    return 1.2533 * 1.4826 * mad / math.sqrt(len(xs)) / abs(med)


@dataclasses.dataclass
class Side:
    """One timed callable's kept samples, per call."""

    gpu_s: list[float] = dataclasses.field(default_factory=list)
    host_s: list[float] = dataclasses.field(default_factory=list)
    batch: int = 1


@dataclasses.dataclass
class Sampling:
    """What one GPU measurement saw: each side's samples and how sampling went."""

    sides: list[Side]
    mode: str
    stopped: str  # noise, budget or samples
    taken: int  # rounds sampled, kept or not
    dropped: int  # rounds dropped while a thermal or power limit was active
    capped: int  # rounds kept at the power cap, the clock above its floor
    throttles: list[str]  # the limits seen
    clocks_mhz: list[int]  # the SM clock after each kept round (empty without a reader)
    temperatures_c: list[int]  # the GPU temperature after each kept round, where read
    powers_w: list[float]  # the board power after each kept round, where read
    warmup_s: float
    steady: bool | None  # the clock was steady when sampling began (None: not read)
    clock_note: str  # what could not be checked ("" when the clock was read)
    series_noise: float  # the noise the stop rule read (the ratio's, for a paired row)

    def side_facts(self, i: int) -> dict:
        s = self.sides[i]
        return {
            "gpu_s": statistics.median(s.gpu_s) if s.gpu_s else None,
            "host_s": statistics.median(s.host_s) if s.host_s else None,
            "noise": relative_noise(s.gpu_s) if len(s.gpu_s) >= 3 else None,
            "batch": s.batch,
            "raw_gpu_s": [float(x) for x in s.gpu_s],
            "raw_host_s": [float(x) for x in s.host_s],
        }

    def wall_per_call(self, i: int) -> float | None:
        """The time per call a caller waits, what a busy fraction is over: in batch mode the GPU
        time per call (the events span every launch); in cold mode the larger of the GPU time
        and the enqueue time (the spin hid the launch from the events, not from the caller)."""
        s = self.sides[i]
        if not s.gpu_s:
            return None
        gpu = statistics.median(s.gpu_s)
        if self.mode == COLD and s.host_s:
            return max(gpu, statistics.median(s.host_s))
        return gpu

    def facts(self) -> dict:
        """The record's view of the sampling (harness.measure.rowfacts)."""
        clocks = self.clocks_mhz
        return {
            "mode": self.mode,
            "samples": len(self.sides[0].gpu_s),
            "taken": self.taken,
            "dropped_throttled": self.dropped,
            "kept_at_power_cap": self.capped,
            "throttles": self.throttles,
            "stopped": self.stopped,
            "noise": _finite(self.series_noise),
            "warmup_s": round(self.warmup_s, 3),
            "clock_steady": self.steady,
            "sm_clock_mhz": statistics.median(clocks) if clocks else None,
            "sm_clock_min_mhz": min(clocks) if clocks else None,
            "temperature_max_c": max(self.temperatures_c, default=None),
            "power_median_w": statistics.median(self.powers_w) if self.powers_w else None,
            "clock_note": self.clock_note,
        }


def _finite(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else x


def sample(
    fns: Sequence[Callable[[], object]],
    device: Device,
    reader,
    rule: StopRule,
    *,
    mode: str = BATCH,
    series: Callable[[list[Side]], list[float]] | None = None,
    now: Callable[[], float] = time.perf_counter,
) -> Sampling:
    """Time `fns` (already warmed up by calls) together: the time-based warm-up, then rounds
    until `rule` stops them. `series(sides)` is what the noise is read on (default: the first
    side's GPU times per call; a paired ratio passes the per-round ratios)."""
    if mode not in (BATCH, COLD):
        raise ValueError(f"mode must be {BATCH!r} or {COLD!r}, got {mode!r}")
    series = series or (lambda sides: sides[0].gpu_s)
    # the clock first: a batch sized on an idle GPU's low clock would hold too little work
    warmup_s, steady = warm_up(fns, [1] * len(fns), device, reader, now)
    batches = [1 if mode == COLD else batch_for(fn, device) for fn in fns]
    sides = [Side(batch=b) for b in batches]
    clocks: list[int] = []
    temperatures: list[int] = []
    powers: list[float] = []
    throttles: list[str] = []
    dropped = taken = capped = 0
    floor = power_cap_floor(reader.identity()) if reader.available else None
    t0 = now()
    while True:
        got = []
        for i in rotation(taken, len(fns)):
            gpu, host = device.run_cold(fns[i]) if mode == COLD else device.run(fns[i], batches[i])
            got.append((i, gpu / batches[i], host / batches[i]))
        taken += 1
        reading = reader.sample()
        limits = reading.dropping(floor)
        if limits:
            dropped += 1
            throttles.extend(t for t in limits if t not in throttles)
        else:
            capped += bool(reading.throttles)
            for i, gpu, host in got:
                sides[i].gpu_s.append(gpu)
                sides[i].host_s.append(host)
            if reading.sm_mhz is not None:
                clocks.append(reading.sm_mhz)
            if reading.temperature_c is not None:
                temperatures.append(reading.temperature_c)
            if reading.power_w is not None:
                powers.append(reading.power_w)
        stop = rule.why_stop(series(sides), taken, now() - t0)
        if stop:
            return Sampling(
                sides,
                mode,
                stop,
                taken,
                dropped,
                capped,
                throttles,
                clocks,
                temperatures,
                powers,
                warmup_s,
                steady,
                "" if reader.available else reader.why,
                relative_noise(series(sides)),
            )


def cache_mode(cache: str, peak_bytes: int, l2_bytes: int) -> str:
    """The strategy a row is timed with: `cache` "warm" is BATCH, "cold" is COLD, "auto" is COLD
    where all the process held on the device at the warm-up's peak fits in L2 (back to back, that
    data would stay in L2 between calls, which it does not between a model's layers), else
    BATCH."""
    if cache not in ("auto", "warm", "cold"):
        raise ValueError(f"cache must be 'auto', 'warm' or 'cold', got {cache!r}")
    if cache == "auto":
        return COLD if 0 < peak_bytes <= l2_bytes else BATCH
    return COLD if cache == "cold" else BATCH


def batch_for(fn: Callable[[], object], device: Device) -> int:
    """Calls per sample: grown until one sample holds at least TARGET_SAMPLE_S of GPU time."""
    batch = 1
    while batch < MAX_BATCH:
        gpu, _ = device.run(fn, batch)
        if gpu >= TARGET_SAMPLE_S:
            return batch
        per_call = gpu / batch
        grow = TARGET_SAMPLE_S / per_call if per_call > 0 else 10.0
        batch = min(MAX_BATCH, max(batch * 2, math.ceil(batch * grow * 1.2)))
    return batch


def warm_up(fns, batches, device: Device, reader, now) -> tuple[float, bool | None]:
    """Run the sides by time until the SM clock is steady: STEADY_READS readings within
    STEADY_SPREAD, after at least WARM_MIN_S and for at most WARM_MAX_S; WARM_NO_CLOCK_S without
    a reader. Returns (seconds spent, steady or None when the clock could not be read)."""
    t0 = now()
    reads: list[int] = []
    while True:
        for fn, b in zip(fns, batches):
            device.run(fn, b)
        spent = now() - t0
        if not reader.available:
            if spent >= WARM_NO_CLOCK_S:
                return spent, None
            continue
        mhz = reader.sample().sm_mhz
        if mhz is not None:
            reads.append(mhz)
        last = reads[-STEADY_READS:]
        steady = len(last) == STEADY_READS and (max(last) - min(last)) <= STEADY_SPREAD * max(last)
        if spent >= WARM_MIN_S and steady:
            return spent, True
        if spent >= WARM_MAX_S:
            return spent, False


def rotation(round_: int, n: int) -> list[int]:
    """The order `n` sides run in a round: rotating, so that no side always runs first."""
    return [(round_ + k) % n for k in range(n)]


class CudaDevice:
    """A CUDA device for the loop: CUDA events on the current stream, one synchronise per
    sample, the L2 flush buffer and the spin's clock rate made once per process."""

    def __init__(self, device, torch_module=None):
        if torch_module is None:  # tests pass a stand-in that records the calls
            import torch as torch_module

        self.torch = torch_module
        self.device = torch_module.device(device)
        self._flush = None
        self.flush_bytes = 0  # the flush buffer this device holds on the GPU (cold samples)
        self._cycles_per_s = None
        self._enqueue_s = COLD_SPIN_MAX_S / COLD_SPIN_MARGIN  # until a call was enqueued

    def _events(self):
        e = self.torch.cuda.Event
        return e(enable_timing=True), e(enable_timing=True)

    def run(self, fn, batch: int) -> tuple[float, float]:
        start, end = self._events()
        t0 = time.perf_counter()
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        host = time.perf_counter() - t0
        return start.elapsed_time(end) / 1000.0, host

    def run_cold(self, fn) -> tuple[float, float]:
        torch = self.torch
        if self._flush is None:
            l2 = torch.cuda.get_device_properties(self.device).L2_cache_size
            self.flush_bytes = max(COLD_FLUSH_L2 * l2, 1 << 20)
            self._flush = torch.empty(self.flush_bytes, dtype=torch.uint8, device=self.device)
        self._flush.zero_()  # outside the events: the flush is not the call's time
        # the spin covers the call's enqueue (the fastest seen: a call that waits for the stream,
        # such as a pageable copy, would otherwise grow the spin sample by sample)
        spin = min(COLD_SPIN_MARGIN * self._enqueue_s, COLD_SPIN_MAX_S)
        torch.cuda._sleep(int(spin * self.cycles_per_s()))
        start, end = self._events()
        t0 = time.perf_counter()
        start.record()
        fn()
        end.record()
        host = time.perf_counter() - t0
        self._enqueue_s = min(self._enqueue_s, host)
        end.synchronize()
        return start.elapsed_time(end) / 1000.0, host

    def cycles_per_s(self) -> float:
        """The spin kernel's cycles per second, timed once (its clock is the SM clock)."""
        if self._cycles_per_s is None:
            cycles = 1_000_000
            start, end = self._events()
            start.record()
            self.torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            self._cycles_per_s = cycles / max(start.elapsed_time(end) / 1000.0, 1e-6)
        return self._cycles_per_s
