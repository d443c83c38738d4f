"""How to measure: one timing path for every benchmark, plus the deterministic counters.

In the spirit of `torch.utils.benchmark.Timer`, *what* runs (harness.measure.workloads) is kept
apart from *how* it is measured (this module). Every timing goes through `measure`:

- at least one warm-up call first (never zero, also in quick mode): it absorbs lazy
  initialisation, CUDA context start-up, cudnn autotuning and torch.compile compilation,
  so that compilation is never inside a run-time sample (compile time has its own benchmark,
  `compile_seconds`);
- one sample per call, in seconds, so that asv's statistics (confidence interval, Mann-Whitney
  test in `asv compare`) and the gate see real per-iteration spread;
- on CUDA the row's time is GPU time (harness.measure.gputime): CUDA events over batches of
  back-to-back calls (or single calls after an L2 flush where the row's data fits in L2), sampled
  until the
  median is steady, with the host time per call, the clock and throttled samples beside it;
  on CPU the loop below uses `time.perf_counter` (or the process's CPU time, see _clock).
- inside a run that writes a record (`harness bench`), each row's facts go there
  (harness.measure.rowfacts): on CUDA the busy fraction and the sampling's figures, on a CPU the
  ATen share (harness.measure.activity), each from one profiled call after the timing.

Comparisons (compiled/eager, pinned/pageable, AMP/fp32, workers N/0) go through
`measure_paired`: both sides in alternating order in the same rounds spread over a few
seconds, one ratio (fastest over fastest) per quarter second of rounds.
Raw times get a companion row from `measure_over_reference`: the time over a fixed reference
workload timed in the same rounds (harness.measure.reference), so that machine speed cancels.
Every timed call is guarded: if torch.compile compiled during it, the benchmark fails with the
recompile reason instead of reporting compilation as run time.

`asv_samples(samples)` wraps the list the way a `track_` benchmark hands it to asv:
`{"samples": [...], "number": 1}` with `unit = "seconds"`, "ratio" or "relative".
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import torch

from harness.core import settings
from harness.core.env import synchronize
from harness.measure import answers, gputime, inject
from harness.measure.activity import quiet_stderr

# fast (default) and full settings for the sampling loop; full_mode() (HARNESS_FULL) picks one.
# paired_window_s: the wall-clock window a paired comparison is spread over (measure_paired)
FAST = {"warmup": 2, "samples": 60, "budget_s": 1.0, "paired_window_s": 4.0}
FULL = {"warmup": 3, "samples": 60, "budget_s": 5.0, "paired_window_s": 8.0}
MIN_SAMPLES = 3
BLOCK_S = 0.25  # one paired sample per quarter second of rounds (measure_paired)
QUIET_SHARE = 0.5  # the share of those blocks kept as samples: the quietest (quiet_blocks)
# but at least this many: 7 against 7 is the fewest that Mann-Whitney judges at the gate's alpha
MIN_QUIET_BLOCKS = 7
MAX_WINDOW_ROUNDS = 200_000  # a window of microsecond calls stops here (memory of the lists)


def loop_settings() -> dict:
    """FAST or FULL (full_mode()); HARNESS_PAIRED_WINDOW_S (set by `harness ab`) overrides the
    paired window."""
    cfg = dict(FULL if settings.FULL.get() else FAST)
    window = settings.PAIRED_WINDOW_S.get()
    if window is not None:
        if not window >= 0:
            raise ValueError(
                f"{settings.PAIRED_WINDOW_S.name} must be >= 0 seconds, got {window!r}"
            )
        cfg["paired_window_s"] = window
    return cfg


def measure(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
    *,
    warmup: int | None = None,
    samples: int | None = None,
    budget_s: float | None = None,
    cache: str = "auto",
) -> list[float]:
    """Per-call times of `fn()` in seconds, after `warmup` (>= 1) untimed calls.

    On CUDA: GPU time per call (harness.measure.gputime), sampled until the median is steady
    or `budget_s` ends (`samples` caps the samples). `cache`: "warm" (batches of back-to-back
    calls), "cold" (single calls after an L2 flush) or "auto": cold where everything the process
    holds on the device at the warm-up's peak fits in L2 (gputime.cache_mode), else warm: back to
    back, such a row's data would stay in L2 between calls, as it does not in a model.

    Stops after `samples` calls, or earlier once `budget_s` seconds of timed calls have passed
    and at least MIN_SAMPLES were taken (slow full-size workloads on small machines).

    Under `harness ab` (HARNESS_PAIRED_WINDOW_S set) the calls fill that wall-clock window
    instead, whatever `samples`/`budget_s` say, and each quarter second gives one sample, its
    fastest call: ab judges a raw time by a process's fastest call, and 60 calls of a 60 us model
    (4 ms), or the canary's 400 calls (50 ms), say more about those milliseconds of the host
    than about the code (docs/measurements.md#ab-interleaved-pairs).
    """
    window = settings.PAIRED_WINDOW_S.get()
    (fn,) = inject.measured_side([fn])  # test-only (HARNESS_TEST_SLOWDOWN_ROWS)
    if torch.device(device).type == "cuda":
        sampling = gpu_sampling([fn], device, warmup, samples, window or budget_s, cache)
        _record_gpu([fn], device, sampling)
        return sampling.sides[0].gpu_s
    if window:
        (times,), stamps = _timed_rounds([fn], device, warmup, None, None, "wall", window_s=window)
        times = [fastest for fastest, _ in block_minima(times, times, stamps)]
    else:
        times = _timed_rounds([fn], device, warmup, samples, budget_s, "wall")[0][0]
    _record_cpu([fn], device, statistics.median(times))
    return times


def measure_returning(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
    *,
    warmup: int | None = None,
    samples: int | None = None,
    budget_s: float | None = None,
) -> tuple[list[float], list]:
    """`measure`, also keeping what each timed call returned (e.g. an epoch's sample count and
    compute time, from which the DataLoader benchmarks derive throughput and efficiency)."""
    returned: list = []
    times = _timed_rounds(
        [lambda: returned.append(fn())], device, warmup, samples, budget_s, "wall"
    )[0][0]
    return times, returned[len(returned) - len(times) :]


def measure_paired(
    fn: Callable[[], object],
    base: Callable[[], object],
    device: torch.device | str = "cpu",
    *,
    warmup: int | None = None,
    samples: int | None = None,
    budget_s: float | None = None,
    clock: str | None = None,
    answer: answers.Pair | None = None,
) -> list[float]:
    """The time of `fn()` over the time of `base()` timed beside it, as samples: compiled/eager,
    pinned/pageable, AMP/fp32, workers N/0, or a workload over the machine's reference workload.

    Both sides run in the same rounds of one timing loop, in alternating order (fn first in even
    rounds, base first in odd ones), so that what slows the machine slows both. Returned as
    samples (unit "ratio", lower is better) for the gate's and asv's tests.

    By default the rounds fill a wall-clock window (loop_settings()["paired_window_s"]: 4 s fast,
    8 s full) and each quarter second of rounds (BLOCK_S) gives one sample: the fastest fn call
    of that block over its fastest base call, for the quieter half of the blocks (quiet_blocks).
    Why: a shared host has bursts that slow the two sides unevenly; a block is short against a
    burst and long against one call, and the fastest call is what the code costs when nothing
    else gets in the way. Figures: docs/measurements.md#paired-windows-quarter-second-blocks.

    `samples=N` (or a `budget_s`) instead fixes the rounds, one ratio per round: for callers that
    pace rounds themselves (the canary; the distributed workers, whose rounds are collective).

    `clock` (see _clock): by default the process's CPU time when the run uses one CPU thread on
    a CPU device, else wall time; "wall" where work happens outside this process (DataLoader
    workers).

    On CUDA (unless `clock="wall"`): both sides' GPU time per call (harness.measure.gputime),
    taking turns in each round, one ratio per round; sampling stops once the ratio's median is
    steady or the budget ends.

    First, before any timed or warm-up call, the answer check (harness.measure.answers): each
    side called once after the same seed, the results compared by the pair's rule (`answer`, or
    the check `answers.declare` tagged the two callables with), the verdict recorded as the row's
    answer. A row over the reference workload is no pair and is not checked.
    """
    answers.before_timing(fn, base, device, answer)
    fn, base = inject.measured_side([fn, base])  # test-only (HARNESS_TEST_SLOWDOWN_ROWS)
    if torch.device(device).type == "cuda" and clock != "wall":
        sampling = gpu_sampling(
            [fn, base], device, warmup, samples, budget_s, "auto", series=gpu_ratios
        )
        _record_gpu([fn, base], device, sampling)
        return gpu_ratios(sampling.sides)
    if samples is not None or budget_s is not None:
        (work, ref), _ = _timed_rounds([fn, base], device, warmup, samples, budget_s, clock)
        ratios = [w / r for w, r in zip(work, ref) if r > 0]
    else:
        cfg = loop_settings()  # reads the environment once
        window = cfg.get("paired_window_s", cfg["budget_s"])
        (work, ref), stamps = _timed_rounds(
            [fn, base], device, warmup, None, None, clock, window_s=window
        )
        ratios = block_ratios(work, ref, stamps, BLOCK_S)
    if torch.device(device).type == "cpu":
        _record_cpu([fn, base], device, statistics.median(work))
    return ratios


def block_ratios(
    work: list[float], base: list[float], stamps: list[float], block_s: float = BLOCK_S
) -> list[float]:
    """The samples of a paired window: per block of rounds started within `block_s` seconds of
    the block's first round, the fastest `work` time over the fastest `base` time of that block,
    for the quieter half of the blocks (quiet_blocks), in time order. A round longer than a block
    is a block of its own (then this is the per-round ratio of the quieter rounds)."""
    return [x / y for x, y in quiet_blocks(block_minima(work, base, stamps, block_s)) if y > 0]


def block_minima(
    work: list[float], base: list[float], stamps: list[float], block_s: float = BLOCK_S
) -> list[tuple[float, float]]:
    """(fastest work time, fastest base time) per block of rounds, in time order."""
    out: list[tuple[float, float]] = []
    w: list[float] = []
    b: list[float] = []
    begin = None
    for t, x, y in zip(stamps, work, base):
        if w and t - begin >= block_s:
            out.append((min(w), min(b)))
            w, b = [], []
        if not w:
            begin = t
        w.append(x)
        b.append(y)
    if w:
        out.append((min(w), min(b)))
    return out


def quiet_count(blocks: int) -> int:
    """How many of a window's `blocks` quiet_blocks keeps: QUIET_SHARE, at least
    MIN_QUIET_BLOCKS."""
    return min(blocks, max(MIN_QUIET_BLOCKS, math.ceil(QUIET_SHARE * blocks)))


def quiet_blocks(blocks: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The QUIET_SHARE of blocks in which the machine was quietest, in time order. A block's
    slowness is the larger of its two times over that side's fastest block: a burst on the host
    slows both sides of a block, the code under test slows every block of its side alike (so
    which blocks are kept does not depend on it, and a 10% slower side still reads 10% slower).

    Why: some host states outlast a block and slow the two sides unevenly, so a median over all
    blocks would depend on how much of the window they covered. What belongs to the process
    itself stays (most of it went with the fixed hash seed, harness.runs.bench.HASH_SEED).
    Figures: docs/measurements.md#the-quieter-half-of-the-blocks."""
    if not blocks:
        return []
    fastest_work = min(w for w, _ in blocks) or 1.0
    fastest_base = min(b for _, b in blocks) or 1.0
    keep = quiet_count(len(blocks))
    order = sorted(
        range(len(blocks)),
        key=lambda i: max(blocks[i][0] / fastest_work, blocks[i][1] / fastest_base),
    )
    return [blocks[i] for i in sorted(order[:keep])]


def measure_over_reference(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
    *,
    warmup: int | None = None,
    samples: int | None = None,
    budget_s: float | None = None,
) -> list[float]:
    """`fn()`'s time over the reference workload's (harness.measure.reference) timed beside it,
    as measure_paired samples: a time with the machine's momentary speed divided out (unit
    "relative")."""
    from harness.measure.reference import reference_workload

    return measure_paired(
        fn, reference_workload(device), device, warmup=warmup, samples=samples, budget_s=budget_s
    )


def measure_rounds(
    fns: list[Callable[[], object]],
    device: torch.device | str = "cpu",
    *,
    warmup: int | None = None,
    samples: int | None = None,
    budget_s: float | None = None,
    clock: str | None = None,
) -> list[list[float]]:
    """Per-call times of each of `fns`, all timed in the same rounds in rotating order: the
    raw material of `measure_paired` for more than two sides, e.g. eager, fused and a plain
    device copy, so that their bandwidths are read against the copy of the same seconds.
    The clock is measure_paired's (see _clock); on CUDA, GPU time per call as in measure()."""
    if torch.device(device).type == "cuda" and clock != "wall":
        sampling = gpu_sampling(list(fns), device, warmup, samples, budget_s, "auto")
        return [side.gpu_s for side in sampling.sides]
    return _timed_rounds(list(fns), device, warmup, samples, budget_s, clock)[0]


# --------------------------------------------------------------------------------------------
# GPU time (harness.measure.gputime) and the row's facts (harness.measure.rowfacts)

_gpu_devices: dict = {}  # per device: the CUDA sampler and the clock reader, made once a process


def gpu_ratios(sides) -> list[float]:
    return [w / b for w, b in zip(sides[0].gpu_s, sides[1].gpu_s) if b > 0]


def gpu_sampling(
    fns, device, warmup=None, samples=None, budget_s=None, cache="auto", series=None
) -> gputime.Sampling:
    """The count warm-up (compilation, autotuning), then gputime's sampling of `fns` on a CUDA
    device: the one GPU measurement every CUDA row (and the GPU proof kit) goes through."""
    from harness.core import clocks

    cfg = loop_settings()
    device = torch.device(device)
    key = str(device)
    if key not in _gpu_devices:
        _gpu_devices[key] = (_GuardedDevice(gputime.CudaDevice(device)), clocks.reader_for(device))
    sampler, reader = _gpu_devices[key]
    torch.cuda.reset_peak_memory_stats(device)
    _warm(fns, device, warmup)
    # what the row holds at its peak, not the cold samples' flush buffer an earlier row left
    peak = torch.cuda.max_memory_allocated(device) - sampler.inner.flush_bytes
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    mode = gputime.cache_mode(cache, peak, l2)
    rule = gputime.StopRule(budget_s=cfg["budget_s"] if budget_s is None else budget_s)
    if samples is not None:
        rule = dataclasses.replace(
            rule, max_samples=samples, min_samples=min(rule.min_samples, samples)
        )
    sampler.fns = fns
    return gputime.sample(fns, sampler, reader, rule, mode=mode, series=series)


class _GuardedDevice:
    """gputime's device with the compile guard around every sample (CompiledDuringTiming)."""

    def __init__(self, inner):
        self.inner, self.fns = inner, []

    def _guarded(self, run, fn, *args):
        before = _compile_events()
        out = run(fn, *args)
        if _compile_events() != before:
            raise _compile_failure(0, self.fns, self.fns.index(fn) if fn in self.fns else 0)
        return out

    def run(self, fn, batch):
        return self._guarded(self.inner.run, fn, batch)

    def run_cold(self, fn):
        return self._guarded(self.inner.run_cold, fn)


def _measured(fns) -> list[tuple[int, Callable[[], object]]]:
    """(index, callable) of the sides whose facts are the row's: not the reference workload's
    (harness.measure.reference), which only divides the machine's speed out."""
    return [(i, fn) for i, fn in enumerate(fns) if not getattr(fn, "is_reference", False)]


def _record_gpu(fns, device, sampling) -> None:
    from harness.measure import rowfacts

    if rowfacts.recording():
        rowfacts.record(gpu_facts(fns, device, sampling))


def gpu_facts(fns, device, sampling: gputime.Sampling) -> dict:
    """A CUDA row's facts: the sampling's figures, each side's GPU and host time per call and
    busy fraction (one profiled call each), the reference workload's side left out."""
    from harness.measure import activity

    sides = []
    for i, fn in _measured(fns):
        side = sampling.side_facts(i)
        per_call = sampling.wall_per_call(i)
        side["busy"] = (
            activity.busy_fraction(activity.profile_call(fn, device), per_call)
            if per_call
            else None
        )
        sides.append(side)
    busy = [s["busy"] for s in sides if s["busy"] is not None]
    # a side's own figures, then the sampling's: the row's noise is the series' (a ratio's for a
    # row over the reference workload)
    return {
        "device": "cuda",
        **(sides[0] if len(sides) == 1 else {"sides": sides}),
        **sampling.facts(),
        "busy": min(busy) if busy else None,
    }


def _record_cpu(fns, device, median_s: float) -> None:
    """A CPU row's facts: the ATen share of one profiled call of each side."""
    from harness.measure import activity, rowfacts

    if not rowfacts.recording():
        return
    shares = [activity.aten_share(activity.profile_call(fn, device)) for _, fn in _measured(fns)]
    known = [s for s in shares if s is not None]
    facts = {"device": "cpu", "time_s": median_s, "aten_share": min(known) if known else None}
    if len(shares) > 1:
        facts["sides"] = [{"aten_share": s} for s in shares]
    rowfacts.record(facts)


class CompiledDuringTiming(RuntimeError):
    """Dynamo or inductor compiled inside a timed call: that call timed compilation, not the
    workload, so the benchmark fails instead of reporting it."""


def _compile_events() -> int:
    """Compilations so far in this process: dynamo frames converted, AOT autograd graphs and
    inductor graph compiles (cache hit or miss; a lazily compiled backward shows up here).
    Reading them costs a few dictionary lookups, outside the timed region."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:  # dynamo never imported: nothing can compile
        return 0
    c = utils.counters
    inductor = c["inductor"]
    return (
        c["frames"]["total"]
        + c["aot_autograd"]["total"]
        + inductor["fxgraph_cache_hit"]
        + inductor["fxgraph_cache_miss"]
        + inductor["fxgraph_cache_bypass"]
    )


def _compile_failure(round_: int, fns, index: int) -> CompiledDuringTiming:
    from torch._dynamo.utils import guard_failures

    reasons = [str(v[-1]) for v in guard_failures.values() if v]
    why = (
        f"recompile reason (last guard failure): {reasons[-1]}"
        if reasons
        else "no guard failed: a first compile (a new frame or a lazily compiled backward) "
        "that the warm-up calls did not reach"
    )
    return CompiledDuringTiming(
        f"torch.compile compiled during timed call {round_ + 1} of callable {index + 1} "
        f"of {len(fns)}; "
        f"{why}. A timed call that compiles is not a sample: make the warm-up reach every graph "
        "(same shapes, dtypes and modes as the timed calls) or mark the changing input dynamic"
    )


def _clock(device: torch.device, clock: str | None) -> Callable[[], float]:
    """The clock of the CPU timing loop. Wall time (perf_counter) is what a user waits; but on a
    shared machine a short call is descheduled whenever a neighbour's time slice comes, and which
    side of a pair that hits is chance. With one CPU thread all of a call's work runs in this
    process, and its CPU time (process_time) excludes the slices given to others: the paired and
    normalised rows use it then. Raw rows (measure) always use wall time.
    Figures: docs/measurements.md#paired-windows-quarter-second-blocks."""
    if clock is None:
        clock = "cpu" if device.type == "cpu" and torch.get_num_threads() == 1 else "wall"
    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}")
    return time.process_time if clock == "cpu" else time.perf_counter


def _timed_rounds(
    fns, device, warmup, samples, budget_s, clock=None, *, window_s: float | None = None
) -> tuple[list[list[float]], list[float]]:
    """The one timing loop: per round, each of `fns` is called and timed in turn, the order
    rotating from round to round so that no side always runs first (warm caches, boost clocks).
    A call during which anything compiled raises CompiledDuringTiming (see _compile_events).
    Returns the per-call times of each fn and each round's start (wall seconds from the first).

    Rounds stop after `samples`, or once `budget_s` seconds of timed calls passed; with
    `window_s`, once that many wall seconds passed (measure_paired). Never fewer than
    MIN_SAMPLES. On a CPU device freed memory stays in the process meanwhile
    (harness.measure.allocator): every call reuses resident pages, in every process alike."""
    from harness.measure.allocator import freed_memory_retained

    cfg = loop_settings()
    samples = cfg["samples"] if samples is None else samples
    budget_s = cfg["budget_s"] if budget_s is None else budget_s
    if samples < 1:
        raise ValueError(f"measure() needs samples >= 1, got {samples}")
    device = torch.device(device)
    if device.type == "cuda":
        _warm(fns, device, warmup)
        return _timed_rounds_cuda(fns, samples, budget_s, window_s)
    with freed_memory_retained():
        _warm(fns, device, warmup)
        return _timed_rounds_cpu(fns, device, samples, budget_s, clock, window_s)


def _warm(fns, device, warmup: int | None) -> None:
    """The untimed calls before any sample (`warmup` of each; the settings' count by default)."""
    warmup = loop_settings()["warmup"] if warmup is None else warmup
    if warmup < 1:
        raise ValueError(
            "measure() needs at least one warm-up call: it absorbs compilation and "
            "CUDA start-up, which must never be inside a sample"
        )
    for _ in range(warmup):
        for fn in fns:
            fn()
    synchronize(device)


def _timed_rounds_cpu(fns, device, samples, budget_s, clock, window_s):
    now = _clock(device, clock)
    out: list[list[float]] = [[] for _ in fns]
    stamps: list[float] = []
    spent = 0.0
    wall0 = time.perf_counter()
    round_ = 0
    while True:
        stamps.append(time.perf_counter() - wall0)
        for i in gputime.rotation(round_, len(fns)):
            before = _compile_events()
            t0 = now()
            fns[i]()
            dt = now() - t0
            if _compile_events() != before:
                raise _compile_failure(round_, fns, i)
            out[i].append(dt)
            spent += dt
        round_ += 1
        if _enough(round_, samples, spent, budget_s, time.perf_counter() - wall0, window_s):
            return out, stamps


def _enough(
    rounds: int, samples: int, spent: float, budget_s: float, wall: float, window_s: float | None
) -> bool:
    if window_s is not None:
        return rounds >= MIN_SAMPLES and (wall >= window_s or rounds >= MAX_WINDOW_ROUNDS)
    return rounds >= samples or (rounds >= MIN_SAMPLES and spent > budget_s)


def _timed_rounds_cuda(fns, samples: int, budget_s: float, window_s: float | None):
    # Events are recorded on the stream, so queued kernels are timed where they run; one
    # synchronise at the end, none inside the loop (that would time the launch gaps too).
    # Round starts are host-side enqueue times: the launch queue bounds how far they run ahead.
    events: list[list[tuple]] = [[] for _ in fns]
    stamps: list[float] = []
    wall0 = time.perf_counter()
    round_ = 0
    while True:
        stamps.append(time.perf_counter() - wall0)
        for i in gputime.rotation(round_, len(fns)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            before = _compile_events()
            start.record()
            fns[i]()
            end.record()
            if _compile_events() != before:
                raise _compile_failure(round_, fns, i)
            events[i].append((start, end))
        round_ += 1
        wall = time.perf_counter() - wall0
        # budget in wall time here: event times are only known after the final synchronise
        if _enough(round_, samples, wall, budget_s, wall, window_s):
            break
    torch.cuda.synchronize()
    return [[s.elapsed_time(e) / 1000.0 for s, e in pairs] for pairs in events], stamps


def asv_samples(samples: list[float]) -> dict:
    """The value a `track_` benchmark hands asv so that asv keeps every sample (units "seconds",
    "ratio", "relative"): `{"samples": [...], "number": 1}`."""
    if not samples:
        raise ValueError("no samples to report")
    return {"samples": [float(s) for s in samples], "number": 1}


# --------------------------------------------------------------------------------------------
# Compilation


def compile_seconds(
    make_compiled: Callable[[], Callable[[], object]],
    device: torch.device | str = "cpu",
    *,
    cold: bool = False,
) -> float:
    """Seconds torch.compile adds to the first call: first call minus the median steady call.

    `make_compiled()` returns a fresh callable that compiles on its first call. The inductor
    cache state is set explicitly, so that two identical runs measure the same thing (a cold
    cache costs several times a warm one; figures: docs/measurements.md#the-measuring-rules):
    - warm (default): a priming compile first fills the cache directory (under `harness bench`
      a private TORCHINDUCTOR_CACHE_DIR of this run), then dynamo and inductor's in-memory
      caches are cleared and the compile is timed: what a process pays that finds this graph
      on disk, as on a machine that compiled it before. Quick and fast runs measure only this.
    - cold: a fresh, empty cache directory for this one compile (removed afterwards): what a
      fresh machine pays; slow, so full mode only (ColdCompilation).
    """
    import torch._dynamo
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
    from torch._inductor.utils import clear_caches

    torch._dynamo.reset()
    try:
        if cold:
            with (
                tempfile.TemporaryDirectory(prefix="harness-cold-inductor-") as fresh,
                temporary_cache_dir(fresh),
            ):
                return _first_call_overhead(make_compiled(), device)
        make_compiled()()  # priming compile: forward, and backward for a training step
        synchronize(device)
        torch._dynamo.reset()
        clear_caches()
        return _first_call_overhead(make_compiled(), device)
    finally:
        torch._dynamo.reset()


def _first_call_overhead(fn: Callable[[], object], device) -> float:
    from harness.measure import rowfacts

    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    first = time.perf_counter() - t0
    with rowfacts.suppressed():  # the steady calls are not the row's own timing
        steady = statistics.median(measure(fn, device, warmup=1, samples=3, budget_s=1.0))
    return max(first - steady, 0.0)


def graph_breaks(fn: Callable, *args) -> int:
    """Graph breaks dynamo takes in `fn(*args)`, counted as the dynamo goldens count them
    (harness.core.dynamo), so the two never disagree."""
    from harness.core.dynamo import compile_and_count

    _, breaks = compile_and_count(fn, args)
    return sum(breaks.values())


# --------------------------------------------------------------------------------------------
# Counters from the profiler


def _profile_one_call(fn, device):
    from harness.measure.activity import profile_call

    fn()  # warm-up: compilation and lazy init must not be counted
    return profile_call(fn, device)


# Recorders opened by `recording_counts`: every counter below also hands them its breakdown by
# name, so harness.measure.profiles can store which operators make up a counter's row.
_count_recorders: list[list] = []


@contextlib.contextmanager
def recording_counts():
    """Collect `(unit, {name: count})` for every ops_per_call / kernels_per_call inside."""
    got: list = []
    _count_recorders.append(got)
    try:
        yield got
    finally:
        _count_recorders.remove(got)


def _counted(unit: str, names: list[str]) -> int:
    if _count_recorders:
        counts: dict[str, int] = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        for rec in _count_recorders:
            rec.append((unit, counts))
    return len(names)


def ops_per_call(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """Top-level aten operators dispatched by one call (profiler; nested aten calls not counted).

    Eager `x.cos().cos()` dispatches 2; its inductor-compiled version runs one generated kernel
    and dispatches only what the generated wrapper calls (allocations, extern kernels).
    """
    events = _profile_one_call(fn, device)
    names = []
    for evt in events:
        if not evt.name.startswith("aten::") or evt.device_type != torch.autograd.DeviceType.CPU:
            continue
        parent, nested = evt.cpu_parent, False
        while parent is not None:
            if parent.name.startswith("aten::"):
                nested = True
                break
            parent = parent.cpu_parent
        if not nested:
            names.append(evt.name)
    return _counted("ops", names)


def kernels_per_call(fn: Callable[[], object], device: torch.device | str) -> int:
    """GPU kernels launched by one call (profiler CUDA activity; memcpy/memset not counted)."""
    if torch.device(device).type != "cuda":
        raise ValueError("kernels_per_call counts GPU kernels; it needs a CUDA device")
    events = _profile_one_call(fn, device)
    return _counted(
        "kernels",
        [
            e.name
            for e in events
            if e.device_type == torch.autograd.DeviceType.CUDA
            and not e.name.lower().startswith(("memcpy", "memset"))
        ],
    )


# --------------------------------------------------------------------------------------------
# Peak memory


def _proc_status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_rss_peak() -> bool:
    try:  # Linux >= 4.0: "5" resets the peak resident set size (VmHWM)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _return_free_heap() -> None:
    """Give memory that earlier work freed but the C allocator kept back to the OS (glibc's
    malloc_trim), so that what `fn` allocates next faults in new pages and shows in the RSS
    instead of silently reusing resident ones (the peak then read 0 for a 64 MiB tensor)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the peak may be understated after large frees


def peak_memory_bytes(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """Peak memory `fn()` adds over what was in use before it: the CUDA caching allocator's peak
    (`max_memory_allocated`) on a GPU, the peak resident set size (VmHWM, else ru_maxrss) on CPU.

    `fn` should build what it measures (model, inputs) so that weights count too.
    """
    device = torch.device(device)
    gc.collect()
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - base)
    _return_free_heap()
    base_kib = _proc_status_kib("VmRSS")
    if base_kib is not None and _reset_rss_peak():
        kept = fn()  # alive while the peak is read: what fn built counts
        peak_kib = max(_proc_status_kib("VmHWM") or 0, _proc_status_kib("VmRSS") or 0)
        del kept
    else:  # no /proc: the process-lifetime peak, which may predate fn
        base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        fn()
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(max(peak_kib - base_kib, 0) * 1024)


def peak_tensor_bytes(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """Peak bytes of tensor memory that one call of `fn()` holds above what was allocated before
    it (after one warm-up call): CUDA's max_memory_allocated on a GPU; on CPU, the allocation
    and free records of torch's CPU allocator as the profiler reports them (profile_memory),
    replayed in time order. Exact and repeatable, unlike the process RSS (peak_memory_bytes),
    which moves with the C allocator's reuse of freed pages: this is the number to compare
    kernels by (SDPA backends, checkpointing). Memory a kernel takes outside torch's allocator
    (e.g. a library's own scratch) is not seen on CPU.
    """
    device = torch.device(device)
    fn()
    if device.type == "cuda":
        return peak_memory_bytes(fn, device)
    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        kept = fn()
    del kept
    # The raw records: FunctionEvent folds each allocation into the op around it (net per op),
    # which hides a temporary that an op allocates and frees inside itself.
    records = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    ]
    records.sort(key=lambda e: e.start_ns())
    held = peak = 0
    for e in records:
        held += e.nbytes()
        peak = max(peak, held)
    return int(peak)
