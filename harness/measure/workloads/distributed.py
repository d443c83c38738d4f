"""Distributed data-parallel training: DDP steps of an MLP measured inside torchrun workers.

Two halves in one module:
- the benchmark side (`measure(world_size)`): builds a Plan for the run's mode and device and
  starts `python -m torch.distributed.run -m harness.measure.workloads.distributed` through
  harness.measure.torchrun (free port, own timeout, nothing left running); returns the JSON the
  workers wrote. One launch measures every row of the suite for one world size, because a
  launch costs seconds (torchrun and every worker import torch);
- the worker side (`worker_main`, run by torchrun in each rank): joins the process group (gloo
  on CPU, NCCL on CUDA with a gloo group beside it for the untimed barriers), runs the Plan's
  sections and rank 0 writes the result atomically.

Timing inside the workers goes through harness.measure.timing like every other suite: paired
rows are `timing.measure_paired` (both sides in alternating order in the same rounds, one ratio
per round), with a fixed number of rounds and no time budget, so every rank runs the same
number of collectives (a budget could stop one rank a round earlier than the other: a hang),
and wall time, because waiting for the other ranks is part of a distributed step and is not
this process's CPU time. Each side of a pair ends in a barrier of all ranks, so a round starts
together everywhere; the ratio is of the sides' own times, without that barrier. Rank 0's
figures are reported.

Sections (rows of suites/benchmarks/distributed.py):
- scaling: a DDP step of all ranks (each its own batch: weak scaling) over a single-process
  step of the same model and batch on rank 0 while the others wait. Ratio 1 is perfect scaling;
  the scaling efficiency is its inverse;
- all_reduce: `dist.all_reduce` of a float32 tensor as large as the model's gradients;
  bandwidth = tensor bytes / time (nccl-tests' "algorithm bandwidth"; bus bandwidth is
  2(n-1)/n of it);
- bucket_cap: DDP with `bucket_cap_mb=N` over DDP with the default 25 MB;
- bucket_view: `gradient_as_bucket_view=True` over False;
- no_sync: K micro-batches accumulated under `no_sync()` (one all-reduce) over the same K
  micro-batches synchronised every time (K all-reduces), one optimizer step each;
- data_parallel: `nn.DataParallel` over all GPUs in one process (global batch = world x batch)
  over DDP; needs CUDA and 2+ GPUs, otherwise recorded as not applicable with the reason.

Threads (harness.measure.threads): each worker uses the run's CPU thread count divided by the
world size, at least 1 (1 in quick and fast runs); the result records it as
`threads_per_worker`.

Answers (harness.measure.answers, docs/answers.md#what-each-pair-compares): before each paired
section's timing, the workers check its two sides from one seeded model: the parameters after
Plan.answer_steps steps of each side (DDP against one process stepping over every rank's batch
concatenated, which DDP's averaged gradients equal; or DDP with one knob against DDP without),
by the tolerance rule, the float64 run being one process's steps in float64. Rank 0's verdicts
come back in the result's "answers" (by the row's name), and each row's teardown records its own
(`record_answer`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import sys
import time

import torch

from harness.core import settings
from harness.core.env import default_device_name

SECTIONS = ("scaling", "all_reduce", "bucket_cap", "bucket_view", "no_sync", "data_parallel")
# the suite's rows (suites/benchmarks/distributed.py, without parameters) and the section each
# reads; tests/test_distributed.py checks the table covers the suite
ROW_SECTIONS = {
    "DistributedStepOverSingleProcess.track_step_time_over_single_process": "scaling",
    "DistributedStepOverSingleProcess.track_distributed_step_time": "scaling",
    "DistributedStepOverSingleProcess.track_single_process_step_time": "scaling",
    "AllReduceOfGradientSizedTensor.track_bandwidth": "all_reduce",
    "BucketCapOverDefault.track_step_time_over_default_bucket_cap": "bucket_cap",
    "GradientAsBucketView.track_step_time_with_over_without_bucket_view": "bucket_view",
    "NoSyncAccumulation.track_no_sync_over_sync_every_micro_batch": "no_sync",
    "DataParallelOverDistributed.track_data_parallel_over_distributed": "data_parallel",
}
DEFAULT_BUCKET_CAP_MB = 25  # DDP's default
SIZES = {  # the MLP and the timing rounds per mode
    "fast": {
        "batch": 16,
        "features": 256,
        "hidden": 768,
        "layers": 3,
        "classes": 10,
        "rounds": 12,
        "warmup": 2,
    },  # 1.4 M parameters: 5.6 MB of gradients
    "full": {
        "batch": 64,
        "features": 1024,
        "hidden": 2048,
        "layers": 4,
        "classes": 100,
        "rounds": 40,
        "warmup": 3,
    },
}
LAUNCH_TIMEOUT_S = {"fast": 300, "full": 1800}
TIMEOUT_ENV = settings.DISTRIBUTED_TIMEOUT_S.name  # overrides LAUNCH_TIMEOUT_S (a slow machine)


@dataclasses.dataclass
class Plan:
    """Everything a worker needs to know, passed as JSON on its command line."""

    device: str = "cpu"  # "cpu" or "cuda" (rank r uses cuda:r)
    threads: int = 1  # torch CPU threads per worker
    batch: int = 16  # per worker, per (micro-)step
    features: int = 256
    hidden: int = 768
    layers: int = 3
    classes: int = 10
    rounds: int = 12
    warmup: int = 2
    bucket_caps_mb: list = dataclasses.field(default_factory=lambda: [1, 100])
    micro_batches: list = dataclasses.field(default_factory=lambda: [4])
    sections: list = dataclasses.field(default_factory=lambda: list(SECTIONS))
    seed: int = 0
    collective_timeout_s: float = 300.0  # a stuck collective raises in the worker after this
    answer_steps: int = 3  # steps of each side the answer check compares the parameters after

    @property
    def backend(self) -> str:
        return "nccl" if self.device == "cuda" else "gloo"

    def check(self) -> Plan:
        unknown = [s for s in self.sections if s not in SECTIONS]
        if unknown:
            raise ValueError(f"unknown distributed section(s) {unknown}; choose from {SECTIONS}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"distributed device must be 'cpu' or 'cuda', got {self.device!r}")
        for name in (
            "threads",
            "batch",
            "features",
            "hidden",
            "layers",
            "classes",
            "rounds",
            "warmup",
            "answer_steps",
        ):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(
                    f"distributed plan: {name} must be a whole number >= 1, "
                    f"got {getattr(self, name)!r}"
                )
        if any(not (isinstance(c, (int, float)) and c > 0) for c in self.bucket_caps_mb):
            raise ValueError(f"bucket_cap_mb values must be > 0, got {self.bucket_caps_mb}")
        if any(not isinstance(k, int) or k < 2 for k in self.micro_batches):
            raise ValueError(
                f"micro-batch counts must be whole numbers >= 2, got {self.micro_batches}"
            )
        return self


# --------------------------------------------------------------------------------------------
# Benchmark side


def mode() -> str:
    return "full" if settings.FULL.get() else "fast"


def device_type() -> str:
    from harness.measure.workloads import device

    return device().type


def world_sizes() -> list[int]:
    """World sizes measured: on CPU 2 (fast; also the machine's core count in full mode), on
    CUDA one process per GPU (full mode also every power of two below the GPU count)."""
    if torch.cuda.is_available() and default_device_name().startswith("cuda"):
        n = torch.cuda.device_count()
        sizes = {n} | (
            {2**k for k in range(1, n.bit_length()) if 2**k < n} if settings.FULL.get() else set()
        )
        return sorted(sizes)
    cores = os.cpu_count() or 2
    return sorted({2} | ({cores} if settings.FULL.get() and cores > 2 else set()))


def bucket_caps_mb() -> list[int]:
    return [1, 5, 10, 50, 100] if settings.FULL.get() else [1, 100]


def micro_batch_counts() -> list[int]:
    return [2, 4, 8] if settings.FULL.get() else [4]


def launch_timeout_s() -> float:
    """Seconds one launch may take before the launcher kills it: $HARNESS_DISTRIBUTED_TIMEOUT_S,
    else 300 (fast) or 1800 (full)."""
    from harness.core.exits import BadInput

    seconds = settings.DISTRIBUTED_TIMEOUT_S.get()
    if seconds is None:
        return float(LAUNCH_TIMEOUT_S[mode()])
    if not (seconds > 0 and math.isfinite(seconds)):
        raise BadInput(
            f"${TIMEOUT_ENV} must be a positive number of seconds, got "
            f"{settings.DISTRIBUTED_TIMEOUT_S.raw()!r}"
        )
    return seconds


def matching(regexes: list[str]) -> list[str]:
    """The sections whose rows any of asv's --bench `regexes` selects (re.search on the full
    name, as asv); every section when none matches, which costs only time."""
    import re

    chosen = {
        section
        for row, section in ROW_SECTIONS.items()
        if any(re.search(rx, f"distributed.{row}") for rx in regexes)
    }
    return [s for s in SECTIONS if s in chosen] or list(SECTIONS)


def selected_sections() -> list[str]:
    """The sections this run measures: HARNESS_DISTRIBUTED_SECTIONS (set by the runner from
    --bench: a launch runs every section, and one row needs one), else all."""
    wanted = settings.DISTRIBUTED_SECTIONS.get()
    return [s for s in SECTIONS if s in wanted] if wanted else list(SECTIONS)


def plan_for(world_size: int) -> Plan:
    from harness.measure.threads import run_threads

    sizes = SIZES[mode()]
    return Plan(
        sections=selected_sections(),
        device=device_type(),
        threads=max(1, run_threads() // world_size),
        bucket_caps_mb=bucket_caps_mb(),
        micro_batches=micro_batch_counts(),
        collective_timeout_s=launch_timeout_s(),
        **sizes,
    ).check()


def measure(world_size: int, plan: Plan | None = None, *, timeout_s: float | None = None) -> dict:
    """Launch `world_size` workers through torchrun, run `plan` (the run's mode by default) and
    return rank 0's result: {"meta": {...}, section: {...}}."""
    from harness.core.exits import BadInput
    from harness.measure import torchrun

    if not isinstance(world_size, int) or world_size < 1:
        raise BadInput(
            f"distributed benchmark: world size must be a whole number >= 1, got {world_size!r}"
        )
    plan = plan or plan_for(world_size)
    try:
        plan.check()
    except ValueError as exc:
        raise BadInput(f"distributed benchmark: {exc}") from None
    if plan.device == "cuda" and world_size > torch.cuda.device_count():
        raise BadInput(
            f"distributed benchmark: world size {world_size} needs one GPU per process; "
            f"this machine has {torch.cuda.device_count()}"
        )
    timeout_s = timeout_s or launch_timeout_s()
    return torchrun.launch(
        __name__,
        ["--plan", json.dumps(dataclasses.asdict(plan))],
        nproc=world_size,
        timeout_s=timeout_s,
        what=f"distributed benchmark (world size {world_size}, {plan.backend})",
    )


# --------------------------------------------------------------------------------------------
# Worker side (inside torchrun)


def _mlp(plan: Plan, dev: torch.device) -> torch.nn.Module:
    from harness.core.env import seed_everything

    seed_everything(plan.seed)  # the same weights on every rank and for every variant
    dims = [plan.features] + [plan.hidden] * plan.layers
    layers: list[torch.nn.Module] = []
    for a, b in zip(dims, dims[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(dims[-1], plan.classes))
    return torch.nn.Sequential(*layers).to(dev).train()


class _Worker:
    """One rank's state (device, control group, seeded data) and the pieces a timed side is made
    of: `work(...)` is a training step, `side(work)` ends it with a barrier of all ranks."""

    def __init__(self, plan: Plan, rank: int, world: int, local_rank: int, control):
        self.plan, self.rank, self.world, self.control = plan, rank, world, control
        self.dev = (
            torch.device("cuda", local_rank) if plan.device == "cuda" else torch.device("cpu")
        )
        self.batches = self.batches_of(rank)

    def batches_of(self, rank: int) -> list:
        """Rank `rank`'s batches (each rank its own data; any rank can make any rank's)."""
        gen = torch.Generator().manual_seed(self.plan.seed + 1 + rank)
        return [self.batch(gen) for _ in range(max([1, *self.plan.micro_batches]))]

    def batch(self, gen, scale: int = 1):
        x = torch.randn(self.plan.batch * scale, self.plan.features, generator=gen)
        y = torch.randint(0, self.plan.classes, (self.plan.batch * scale,), generator=gen)
        return x.to(self.dev), y.to(self.dev)

    def ddp(self, **options):
        return self.ddp_of(_mlp(self.plan, self.dev), **options)

    def ddp_of(self, model, **options):
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.dev.index] if self.dev.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, **options)

    def work(self, model, micro: int = 1, sync_every: bool = True, batch=None):
        """A training step: zero_grad, `micro` forward/backward passes (under DDP all but the
        last inside no_sync() unless `sync_every`), one SGD step, then wait for the device."""
        opt = torch.optim.SGD(model.parameters(), lr=0.01)  # stateless: one per side is the same
        batches = [batch] if batch is not None else self.batches[:micro]

        def run():
            opt.zero_grad(set_to_none=True)
            for i, (x, y) in enumerate(batches):
                quiet = not sync_every and i < len(batches) - 1
                with model.no_sync() if quiet else contextlib.nullcontext():
                    torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            if self.dev.type == "cuda":
                torch.cuda.synchronize(self.dev)

        return run

    def side(self, work, rank0_only: bool = False):
        """One side of a pair: `work` (on rank 0 alone if `rank0_only`, the others waiting),
        then a barrier of all ranks, so that every round starts together everywhere."""

        def run():
            if self.rank == 0 or not rank0_only:
                work()
            torch.distributed.barrier(group=self.control)

        return run

    def paired(self, work, base, *, rank0_only: tuple[bool, bool] = (False, False)):
        """Per round, `work`'s time over `base`'s: (ratios, work times, base times) on this rank.

        timing.measure_paired runs the two sides in the same rounds in alternating order (and the
        warm-up); each side ends in a barrier of all ranks so that every round starts together
        everywhere. The ratio is of the sides' own times, taken inside the side and without that
        barrier: on a small model a barrier's round trip would otherwise weigh on both sides and
        pull the ratio towards 1."""
        from harness.measure import timing

        times: tuple[list, list] = ([], [])
        sides = [
            self.side(_timed(fn, into), only)
            for fn, into, only in zip((work, base), times, rank0_only)
        ]
        timing.measure_paired(
            *sides,
            self.dev,
            warmup=self.plan.warmup,
            samples=self.plan.rounds,
            budget_s=math.inf,
            clock="wall",
        )
        kept = [t[-self.plan.rounds :] for t in times]  # the timed rounds, not the warm-up
        return [a / b for a, b in zip(*kept) if b > 0], kept[0], kept[1]


def _timed(fn, into: list):
    """`fn`, appending its own wall time to `into`."""

    def run():
        t0 = time.perf_counter()
        fn()
        into.append(time.perf_counter() - t0)

    return run


def run_sections(plan: Plan, w: _Worker) -> dict:
    """Every section of `plan` on this rank; the same collectives in the same order on all ranks.
    meta.section_s records each section's seconds (what a launch spends where)."""
    from harness.measure import timing

    spent: dict[str, float] = {}
    out: dict = {"answers": {}}
    t0 = time.perf_counter()
    base = w.ddp()  # default DDP: bucket_cap_mb=25, gradient_as_bucket_view=False
    n_params = sum(p.numel() for p in base.parameters())
    for name in [s for s in SECTIONS if s in plan.sections]:
        started = time.perf_counter()
        out["answers"].update(check_section(plan, w, name))
        if name == "scaling":
            single = _mlp(plan, w.dev)  # the same model, not wrapped: no communication at all
            ratios, ddp_s, single_s = w.paired(
                w.work(base), w.work(single), rank0_only=(False, True)
            )
            out[name] = {"ratios": ratios, "ddp_step_s": ddp_s, "single_step_s": single_s}
        elif name == "all_reduce":
            tensor = torch.ones(n_params, dtype=torch.float32, device=w.dev)

            def all_reduce(tensor=tensor):
                torch.distributed.all_reduce(tensor)
                if w.dev.type == "cuda":
                    torch.cuda.synchronize(w.dev)

            seconds = timing.measure(
                all_reduce, w.dev, warmup=plan.warmup, samples=plan.rounds, budget_s=math.inf
            )
            nbytes = tensor.numel() * tensor.element_size()
            out[name] = {
                "bytes": nbytes,
                "seconds": seconds,
                "bytes_per_s": [nbytes / s for s in seconds if s > 0],
            }
        elif name == "bucket_cap":
            out[name] = {
                str(cap): w.paired(w.work(w.ddp(bucket_cap_mb=cap)), w.work(base))[0]
                for cap in plan.bucket_caps_mb
            }
        elif name == "bucket_view":
            out[name] = w.paired(w.work(w.ddp(gradient_as_bucket_view=True)), w.work(base))[0]
        elif name == "no_sync":
            out[name] = {
                str(k): w.paired(
                    w.work(base, micro=k, sync_every=False), w.work(base, micro=k, sync_every=True)
                )[0]
                for k in plan.micro_batches
            }
        elif name == "data_parallel":
            out[name] = _data_parallel(plan, w, base)
        spent[name] = round(time.perf_counter() - started, 2)
    out["meta"] = {
        "world_size": w.world,
        "backend": plan.backend,
        "device": plan.device,
        "threads_per_worker": torch.get_num_threads(),
        "parameters": n_params,
        "gradient_bytes": n_params * 4,
        "rounds": plan.rounds,
        "torch": torch.__version__,
        "measure_s": round(time.perf_counter() - t0, 2),
        "section_s": spent,
        "plan": dataclasses.asdict(plan),
    }
    return out


# ---- answers: both sides of each pair from one seeded model, the parameters after K steps ----

ROW_PARAMS = {  # the section's rows that are pairs, and the Plan list of their parameter
    "scaling": ("DistributedStepOverSingleProcess.track_step_time_over_single_process", "world"),
    "bucket_cap": ("BucketCapOverDefault.track_step_time_over_default_bucket_cap", "caps"),
    "bucket_view": ("GradientAsBucketView.track_step_time_with_over_without_bucket_view", None),
    "no_sync": ("NoSyncAccumulation.track_no_sync_over_sync_every_micro_batch", "micro"),
    "data_parallel": ("DataParallelOverDistributed.track_data_parallel_over_distributed", None),
}
SUITE = "distributed"  # the suite module's name in asv's row names


def row_name(section: str, param=None) -> str:
    """The row as asv's results spell it: `distributed.Class.track_x(param)`."""
    return f"{SUITE}.{ROW_PARAMS[section][0]}" + (f"({param!r})" if param is not None else "")


def check_section(plan: Plan, w: _Worker, section: str) -> dict:
    """{row: answer facts} for the section's paired rows: on every rank the same collectives in
    the same order; rank 0's verdict kept (the others compare too, unreported)."""
    from harness.measure import answers

    if section not in ROW_PARAMS:
        return {}
    from harness.measure.workloads import pairs

    out = {}
    for param, new, ref, fp64 in _answer_sides(plan, w, section):
        row = row_name(section, param)
        pair = answers.Pair(pairs.what(row.split("(")[0]), fp64=fp64)
        if isinstance(new, str):  # not applicable here, with the reason
            answer = answers.Answer(answers.NOT_APPLICABLE, pair.what, pair.rule, new)
        else:
            answer, error = answers.check(pair, new, ref, w.dev, row=row if w.rank == 0 else None)
            if error is not None:
                raise error
        out[row] = answer.to_facts()
    return out


def _answer_sides(plan: Plan, w: _Worker, section: str):
    """(row parameter, new side, reference side, float64 run) per paired row of the section;
    each side returns the parameters after plan.answer_steps steps of its own model."""
    start = _mlp(plan, w.dev)  # one seeded starting state; each side a deep copy of it
    global_batches = [
        [torch.cat(parts) for parts in zip(*(w.batches_of(r)[i] for r in range(w.world)))]
        for i in range(max([1, *plan.micro_batches]))
    ]
    fp64 = _fp64(plan, start, global_batches[:1])
    if section == "scaling":
        single = _stepper(plan, start, w.dev, global_batches[:1])
        yield w.world, _stepper(plan, start, w.dev, None, w, {}), single, fp64
    elif section == "bucket_cap":
        for cap in plan.bucket_caps_mb:
            yield (
                cap,
                _stepper(plan, start, w.dev, None, w, {"bucket_cap_mb": cap}),
                _stepper(plan, start, w.dev, None, w, {}),
                fp64,
            )
    elif section == "bucket_view":
        yield (
            None,
            _stepper(plan, start, w.dev, None, w, {"gradient_as_bucket_view": True}),
            _stepper(plan, start, w.dev, None, w, {}),
            fp64,
        )
    elif section == "no_sync":
        for k in plan.micro_batches:
            yield (
                k,
                _stepper(plan, start, w.dev, None, w, {}, micro=k, sync_every=False),
                _stepper(plan, start, w.dev, None, w, {}, micro=k, sync_every=True),
                _fp64(plan, start, global_batches[:k]),
            )
    elif section == "data_parallel":
        reason = data_parallel_unavailable(plan.device, w.world)
        if reason:
            yield None, reason, None, None
            return
        dp = _stepper(plan, start, w.dev, global_batches[:1], data_parallel=w.world)
        if w.rank != 0:  # one process drives every GPU; the others only run their DDP side
            dp = _stepper(plan, start, w.dev, [])
        yield None, dp, _stepper(plan, start, w.dev, None, w, {}), fp64


def _stepper(
    plan: Plan,
    start: torch.nn.Module,
    dev: torch.device,
    batches,
    w: _Worker | None = None,
    ddp: dict | None = None,
    *,
    micro: int = 1,
    sync_every: bool = True,
    data_parallel: int = 0,
):
    """A side of an answer check: plan.answer_steps training steps of its own copy of `start`
    (under DDP with `ddp`'s options over this rank's batches when `w` is given, else in this
    process over `batches`, each one micro-batch), then {param name: value}."""
    import copy

    from harness.measure import answers

    def run():
        model = copy.deepcopy(start)
        if w is not None:
            wrapped = w.ddp_of(model, **ddp)
            work = w.work(wrapped, micro=micro, sync_every=sync_every)
        else:
            wrapped = (
                torch.nn.DataParallel(model, device_ids=list(range(data_parallel)))
                if data_parallel
                else model
            )
            work = _plain_work(wrapped, batches)
        for _ in range(plan.answer_steps):
            work()
        return answers.Results((f"param {n}", p) for n, p in model.named_parameters())

    return run


def _plain_work(model, batches):
    """One SGD step over `batches` accumulated (the reference for DDP's averaged gradients: the
    mean loss over every rank's batch concatenated)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def run():
        opt.zero_grad(set_to_none=True)
        for x, y in batches:
            torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return run


def _fp64(plan: Plan, start: torch.nn.Module, batches):
    """The one-process steps in float64, from the same starting state."""

    def run():
        import copy

        from harness.measure import answers

        model = copy.deepcopy(start).double()
        work = _plain_work(model, [(x.double(), y) for x, y in batches])
        for _ in range(plan.answer_steps):
            work()
        return answers.Results((f"param {n}", p) for n, p in model.named_parameters())

    return run


def record_answer(cache: dict) -> None:
    """In a row's teardown (the benchmark's process): the answer the workers checked for the row
    running, into the run record. Nothing outside a row or for a row that is no pair."""
    from harness.core.answerfacts import Answer
    from harness.measure import answers, rowfacts

    row = rowfacts.current_row()
    if row is None or not isinstance(cache, dict):
        return
    for result in cache.values():
        facts = (result.get("answers") or {}).get(row) if isinstance(result, dict) else None
        if facts is not None:
            where = f"the distributed workers' answer for {row}"
            answers.record(Answer.from_facts(facts, where), row)
            return


def data_parallel_unavailable(device: str, world: int) -> str | None:
    """Why DataParallel vs DDP cannot be measured here, or None."""
    if device != "cuda":
        return f"DataParallel vs DDP needs 2 or more CUDA GPUs; this machine runs on {device}"
    gpus = torch.cuda.device_count()
    if gpus < 2 or world < 2:
        return (
            f"DataParallel vs DDP needs 2 or more CUDA GPUs (one DDP process per GPU); "
            f"this machine has {gpus}, world size {world}"
        )
    return None


def _data_parallel(plan: Plan, w: _Worker, ddp) -> dict:
    reason = data_parallel_unavailable(plan.device, w.world)
    if reason:
        return {"not_applicable": reason}
    gen = torch.Generator().manual_seed(plan.seed + 100)
    batch = w.batch(gen, scale=w.world)  # the global batch of all DDP ranks, split by DataParallel
    if w.rank == 0:  # one process drives every GPU; the other ranks only wait at the barrier
        dp_work = w.work(
            torch.nn.DataParallel(_mlp(plan, w.dev), device_ids=list(range(w.world))), batch=batch
        )
    else:
        dp_work = None
    return {"ratios": w.paired(dp_work, w.work(ddp), rank0_only=(True, False))[0]}


def worker_main(argv: list[str] | None = None) -> int:
    from harness.core.files import write_json_atomic
    from harness.core.processes import die_with_parent

    die_with_parent()  # torchrun's agent killed (asv timeout, our own timeout): go too
    parser = argparse.ArgumentParser(
        description="one rank of the distributed benchmark (run by torchrun)"
    )
    parser.add_argument("--plan", required=True, help="the Plan as JSON")
    parser.add_argument("--out", required=True, help="where rank 0 writes the result JSON")
    args = parser.parse_args(argv)
    plan = Plan(**json.loads(args.plan)).check()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    torch.set_num_threads(plan.threads)
    if plan.device == "cuda":
        torch.cuda.set_device(local_rank)
    dist = torch.distributed
    dist.init_process_group(
        plan.backend, timeout=datetime.timedelta(seconds=plan.collective_timeout_s)
    )
    try:
        control = dist.new_group(backend="gloo") if plan.backend != "gloo" else dist.group.WORLD
        result = run_sections(plan, _Worker(plan, rank, world, local_rank, control))
        if rank == 0:
            write_json_atomic(args.out, result)
        dist.barrier(group=control)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())
