"""What the instruction counter counts (harness.measure.instructions): one call of each workload.

Each entry builds an argument-free callable inside the counting process (under valgrind, where
everything runs tens of times slower), before any instruction is counted. A model row builds its
model from the registry there (seeded: the same weights in every process; a ResNet-18's random
initialisation takes seconds uninstrumented). What is costly to build and does not change the
count may be prepared natively first, in the benchmark's own process (`prepare`, writing into
the folder `build` reads).

The rows of a run (`rows`), each `instructions.InstructionsPerCall.track_instructions(KEY)`:
- every registered model of the run (the zoo's in this repository, only a project's own in a
  project of its own: harness.core.user_models.suite_models): `<model>_inference` and
  `<model>_training_step` at the small configuration, and `<model>_compile` where the model
  opts in (register_model's `instructions=` and `compile_instructions=`);
- in this repository, the built-in workloads below (a pointwise chain, Adam steps, a collate);
- in a project of its own, the `INSTRUCTION_WORKLOADS` table of each of its benchmark modules,
  as `<module>.<name>` (docs/own-project.md).

Sizes are the small configurations in every mode: an instruction count judges the code path, and
a full-size call would take minutes under valgrind. `calls` and `warmup` (uninstrumented calls
first: Python 3.11 specialises a code object after it ran a few times, and the first calls
allocate what later calls reuse) were chosen from measurements, see docs/measurements.md; a
model's are chosen from its small configuration's FLOPs (`model_plan`), the same for every run.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from pathlib import Path

import torch

SOURCE = __name__  # the source (harness.measure.instructions.Target) of the harness's own rows
ROW_TIMEOUT_S = 600.0  # a counting child's own limit: past it, its row fails and the others count
COMPILE_TIMEOUT_S = 1200.0
# compile rows: a compile's count moves more between processes than a call's (docs/measurements.md)
COMPILE_TOLERANCE = 0.01
TABLE = "INSTRUCTION_WORKLOADS"  # the table a benchmark module of a project of its own defines


@dataclasses.dataclass(frozen=True)
class InstructionWorkload:
    """One instruction row's workload. `build(folder)` runs in the counting process and returns
    the argument-free callable whose calls are counted; `prepare(folder)` (optional) runs
    natively first and writes what `build` loads from `folder`."""

    name: str
    build: Callable[[Path], Callable[[], object]]
    prepare: Callable[[Path], None] | None = None
    calls: int = 5  # counted calls per memory layout (the row: their total / calls, averaged)
    warmup: int = 10  # uninstrumented calls before them
    # memory layouts counted (fast, full): a Python-heavy call's count moves by up to ~0.7% with
    # where its objects lie (CPython's method cache is keyed by addresses); the mean over layouts
    # moves far less (harness.measure.instructions)
    layouts: tuple[int, int] = (3, 8)
    # modules the counting process imports before forking this workload's children (once for
    # all of them: the optimizers and torchvision import dynamo, ~16 s under valgrind); one of
    # harness.measure.instructions.PHASES, or more, which the child then imports itself
    imports: tuple[str, ...] = ()
    cost: float = 1.0  # rough seconds per layout under valgrind: the costliest start first
    timeout_s: float = ROW_TIMEOUT_S  # per counting child (one layout): past it the row fails
    # why this row is counted in full runs only ("" : every run), with what it costs
    full_only: str = ""
    # why this row is not counted at all (a model that opted out at registration), shown in it
    skip: str = ""
    # where calibrate's extra work goes (harness.measure.instructions._slowed): None after each
    # call; or place(fn, work) -> a callable that runs `work` inside fn's own work (a compile)
    inject: Callable | None = None
    what: str = ""  # one line: what one call is
    # the row's own relative tolerance where its A/A spread needs more than the gate's default
    # (a compile row's); the gate judges it at the larger of the two
    tolerance: float | None = None
    # calls, warmup, layouts and cost computed when the row is counted (a model's, from its
    # FLOPs: model_plan), not when the table is listed
    plan: Callable[[], dict] | None = None
    # the timing rows of the same module that time this call ("Class.track_method", every case
    # of it): the gate's note on them, not judged on a shared runner, names this row instead
    times: tuple[str, ...] = ()

    def __post_init__(self):
        if isinstance(self.times, str):  # times="Inference.track_forward_time": one row
            object.__setattr__(self, "times", (self.times,))
        if not all(isinstance(t, str) for t in self.times):
            raise TypeError(
                f"instruction workload {self.name!r}: times must name timing rows as strings, "
                f"'Class.track_method'; got {self.times!r}"
            )


# ---- models: inference, training step, compile ----


def _model(name: str, mode: str):
    """The model (seeded: the same weights in every process), its inputs and targets, built from
    the registry in the counting process."""
    from harness.core.zoo import get_model

    spec = get_model(name)
    model = spec.build("small").train(mode == "training")
    return model, spec.inputs("small"), spec.targets("small"), spec.loss


def _inference(name: str) -> Callable[[Path], Callable[[], object]]:
    def build(folder: Path):
        model, inputs, _, _ = _model(name, "inference")

        def call():
            with torch.inference_mode():
                return model(*inputs)

        return call

    return build


def _training_step(name: str) -> Callable[[Path], Callable[[], object]]:
    def build(folder: Path):
        model, inputs, targets, loss_fn = _model(name, "training")
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(*inputs), targets)
            loss.backward()
            opt.step()
            return loss

        return step

    return build


COMPILE_CACHES = "compile-caches"  # below the folder the workloads load from


def _compile(name: str) -> Callable[[Path], Callable[[], object]]:
    """One real compile per call: dynamo reset, a fresh inductor and FX cache folder (inductor's
    own fresh_cache: in-memory caches cleared too), torch.compile of the model's inference (eval
    mode, no_grad) and its first call, which compiles. Compile workers are off in the counting
    process (TORCHINDUCTOR_COMPILE_THREADS=1): their work would run in other processes."""

    def build(folder: Path):
        import torch._dynamo
        from torch._inductor.utils import fresh_cache

        model, inputs, _, _ = _model(name, "inference")
        caches = folder / COMPILE_CACHES
        caches.mkdir(exist_ok=True)

        def compile_once():
            torch._dynamo.reset()  # which also drops dynamo's compile callbacks
            for work in _INSIDE_COMPILE:  # calibrate's extra work (inside_compile), if any
                _on_compile_start(work)
            # kept until the run's scratch is removed: deleting it would be counted too
            with fresh_cache(dir=caches, delete=False), torch.no_grad():
                return torch.compile(model)(*inputs)

        return compile_once

    return build


# calibrate's extra work for a compile row, registered by the compile itself after its reset
_INSIDE_COMPILE: list[Callable[[], None]] = []


def _on_compile_start(work: Callable[[], None]) -> None:
    from torch._dynamo.callback import callback_handler

    callback_handler.register_start_callback(lambda args: work())


def inside_compile(fn: Callable[[], object], work: Callable[[], None]) -> Callable[[], object]:
    """calibrate's extra work placed inside the compile itself: a dynamo compile-start callback
    (it runs in dynamo's compile session, before tracing), not in the compiled model's calls.
    The compile row's own call registers it after its reset (which drops every callback)."""

    def slowed():
        _INSIDE_COMPILE.append(work)
        try:
            return fn()
        finally:
            _INSIDE_COMPILE.remove(work)

    return slowed


# A model's counting plan from its small configuration's FLOPs per inference call: light calls
# are mostly Python and dispatch, whose count moves with where objects lie (more calls, more
# layouts); heavy ones are kernels, slow under valgrind and steady (one call, fewer layouts).
HEAVY_FLOPS = 10e6
LIGHT = {"calls": 5, "warmup": 10, "layouts": (3, 8)}
HEAVY = {"calls": 1, "warmup": 1, "layouts": (1, 2)}
# the zoo's rows keep the plans they were measured with (docs/measurements.md)
_ZOO_PLANS = {
    "mlp_training_step": {**LIGHT, "cost": 3.5},
    # two thirds of its instructions are Python's: its count moves most with the layout
    "mlp_inference": {**LIGHT, "layouts": (6, 12), "cost": 1.5},
    "word_lm_inference": {**LIGHT, "cost": 3},
    "resnet18_inference": {**HEAVY, "cost": 12},
    "alexnet_inference": {**HEAVY, "cost": 14},
}


@functools.cache
def inference_flops(name: str) -> float:
    """FLOPs of one inference call of a model's small configuration (torch's FlopCounterMode:
    matmuls and convolutions), counted natively; deterministic."""
    from torch.utils.flop_counter import FlopCounterMode

    from harness.core.zoo import get_model

    spec = get_model(name)
    model, inputs = spec.build("small"), spec.inputs("small")
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    return float(counter.get_total_flops())


def model_plan(name: str, mode: str) -> dict:
    """calls, warmup, layouts and cost of a model's row (mode: inference or training_step)."""
    key = f"{name}_{mode}"
    if key in _ZOO_PLANS:
        return dict(_ZOO_PLANS[key])
    heavy = inference_flops(name) >= HEAVY_FLOPS
    plan = dict(HEAVY if heavy else LIGHT)
    # rough seconds per layout under valgrind (~1 G instructions per 20 s), for the order only
    work = inference_flops(name) * (3 if mode == "training_step" else 1)
    plan["cost"] = round(1.0 + work / 5e7, 1)
    return plan


_DYNAMO = ("torch._dynamo",)
_VISION = ("torch._dynamo", "torchvision")  # torchvision imports dynamo itself
_COMPILE = ("torch._dynamo", "torch._inductor.compile_fx")


def _uses_torchvision(name: str) -> bool:
    from harness.core.zoo import BUILTIN_ORIGIN, get_model

    return get_model(name).origin == BUILTIN_ORIGIN and name in ("alexnet", "resnet18")


def model_workloads(name: str) -> dict[str, InstructionWorkload]:
    """A registered model's rows: `<name>_inference`, `<name>_training_step` (skipped with the
    reason where the model opted out) and `<name>_compile` where it opted in. Its plan (calls,
    layouts) is read only when it is counted (`planned`)."""
    from harness.core.zoo import get_model

    spec = get_model(name)
    skip = "" if spec.instructions is True else f"{name} is not counted: {spec.instructions}"
    vision = _uses_torchvision(name)
    out = {}
    for mode, build, imports, what in (
        ("inference", _inference, _VISION if vision else (), "inference_mode"),
        (
            "training_step",
            _training_step,
            _VISION if vision else _DYNAMO,
            "forward, loss, backward and SGD step",
        ),
    ):
        key = f"{name}_{mode}"
        out[key] = InstructionWorkload(
            key,
            build(name),
            imports=imports,
            skip=skip,
            what=f"{name} (small): {what}",
            plan=functools.partial(model_plan, name, mode),
        )
    if spec.compile_instructions:
        key = f"{name}_compile"
        out[key] = InstructionWorkload(
            key,
            _compile(name),
            calls=1,
            warmup=1,
            layouts=(1, 1),
            imports=_VISION if vision else _COMPILE,
            cost=_compile_cost(key),
            timeout_s=COMPILE_TIMEOUT_S,
            full_only=_full_only(key) if spec.compile_instructions == "full" else "",
            skip=skip,
            inject=inside_compile,
            tolerance=COMPILE_TOLERANCE,
            what=f"{name} (small): torch.compile of its inference (C++ compiler not counted)",
        )
    return out


# measured seconds of a compile row's counting child (an uncounted compile, then the counted one)
# under valgrind on a shared 2-core runner beside two busy processes
# (docs/measurements.md#compile-rows): the order, and what a row counted in full runs only says
# it costs
_COMPILE_SECONDS = {"mlp_compile": (66, 174), "alexnet_compile": (178, 486)}


def _compile_cost(key: str) -> float:
    return float(max(_COMPILE_SECONDS.get(key, (60,))))  # unknown: a guess, for the order only


def _full_only(key: str) -> str:
    seconds = _COMPILE_SECONDS.get(key)
    return "full runs only: " + (
        f"a compile costs {seconds[0]}-{seconds[1]} s under valgrind on a busy 2-core runner"
        if seconds
        else "a compile under valgrind (a full run's record keeps the seconds it took)"
    )


def planned(w: InstructionWorkload) -> InstructionWorkload:
    """The workload with its plan filled in (a model row's, from model_plan)."""
    return dataclasses.replace(w, **w.plan()) if w.plan is not None else w


# ---- the built-in workloads (this repository's own rows) ----


CHAIN_ELEMENTS = 1 << 16  # the canary's size: kernel work and per-op overhead both show


def _chain(x):
    return x.cos().cos()


def _chain_input() -> torch.Tensor:
    return torch.randn(CHAIN_ELEMENTS, generator=torch.Generator().manual_seed(0))


def _chain_eager(folder: Path):
    x = _chain_input()
    return lambda: _chain(x)


def _chain_compiled(folder: Path):
    x = _chain_input()
    compiled = torch.compile(_chain)
    return lambda: compiled(x)


def _warm_compile(folder: Path) -> None:
    """Fill inductor's cache natively (the counting process inherits TORCHINDUCTOR_CACHE_DIR)."""
    import torch._dynamo

    _chain_compiled(folder)()
    torch._dynamo.reset()


def _optimizer_step(impl: str) -> Callable[[Path], Callable[[], object]]:
    def build(folder: Path):
        from harness.measure.workloads import optimizers

        step, _ = optimizers.build("Adam", impl, torch.device("cpu"))
        return step

    return build


COLLATE_BATCH = 16  # the DataLoader suite's fast batch size


def _collate(folder: Path):
    from torch.utils.data import default_collate

    from harness.measure.workloads import dataloader

    side = dataloader.sizes("cpu", full=False)["image"]
    gen = torch.Generator().manual_seed(0)
    batch = [
        (torch.randn(3, side, side, generator=gen), i % dataloader.NUM_CLASSES)
        for i in range(COLLATE_BATCH)
    ]
    return lambda: default_collate(batch)


BUILTIN = {
    w.name: w
    for w in (
        InstructionWorkload(
            "pointwise_chain_eager",
            _chain_eager,
            layouts=(1, 2),
            cost=1.7,
            what="x.cos().cos() on 2^16 floats, eager",
        ),
        InstructionWorkload(
            "pointwise_chain_compiled",
            _chain_compiled,
            _warm_compile,
            layouts=(1, 2),
            imports=_DYNAMO,
            cost=37,
            what="x.cos().cos() on 2^16 floats, torch.compile (inductor's CPU kernel counted)",
        ),
        InstructionWorkload(
            "adam_foreach_step",
            _optimizer_step("foreach"),
            calls=2,
            warmup=3,
            layouts=(2, 4),
            imports=_DYNAMO,
            cost=3.5,
            what="one Adam step over 128 small parameters, foreach=True",
        ),
        InstructionWorkload(
            "adam_fused_step",
            _optimizer_step("fused"),
            calls=2,
            warmup=3,
            layouts=(2, 4),
            imports=_DYNAMO,
            cost=2.5,
            what="one Adam step over 128 small parameters, fused=True",
        ),
        InstructionWorkload(
            "dataloader_collate",
            _collate,
            layouts=(1, 2),
            cost=1.3,
            what="default_collate of 16 images (3x64x64) and labels",
        ),
    )
}


def workloads() -> dict[str, InstructionWorkload]:
    """This module's table (its rows' keys -> workloads): the run's models' rows, and in this
    repository the built-in workloads."""
    from harness.core import settings
    from harness.core.user_models import suite_models

    table = {}
    for name in suite_models():
        table.update(model_workloads(name))
    if not settings.OWN_MODELS.get():
        table.update(BUILTIN)
    return table


def workload(key: str) -> InstructionWorkload:
    """One row of this module's table: what the counting process looks up (by key, so that a
    row is the same work whatever else is registered)."""
    if key in BUILTIN:
        return BUILTIN[key]
    from harness.core import zoo
    from harness.core.user_models import suite_models

    for name in suite_models():
        if key.startswith(name + "_"):
            found = model_workloads(name).get(key)
            if found is not None:
                return found
    raise KeyError(
        f"unknown instruction workload {key!r}; registered models: {', '.join(zoo.model_names())}"
    )


# Two counts started from threads of one process load a source file at once: the second must not
# see the first's module in sys.modules before it has run.
_LOADING = threading.Lock()


def load_module(source: str):
    """A workload source: a module name, or a .py file loaded under a name of its own (the same
    name for the same path in every process)."""
    import hashlib
    import importlib
    import importlib.util
    import sys

    if not source.endswith(".py"):
        return importlib.import_module(source)
    name = "_harness_instruction_source_" + hashlib.sha256(source.encode()).hexdigest()[:8]
    with _LOADING:
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, source)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
    return module


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of the instructions suite: its key (the suite's parameter), where its workload
    is defined (a module name or a .py path) and its name in that table."""

    key: str
    source: str
    name: str


def project_rows() -> list[Row]:
    """In a project of its own, every entry of the `INSTRUCTION_WORKLOADS` table of each of its
    benchmark modules, keyed `<module>.<name>`. A module that cannot be imported is left out
    here, said on stderr (asv's discovery of that module reports it as a failure)."""
    import sys

    from harness.core import settings
    from harness.core.project import suites

    tree = settings.PROJECT.get()
    if not (settings.OWN_MODELS.get() and tree):
        return []
    found = suites(Path(tree))
    rows = []
    for stem in found.own_modules():
        path = str(found.own / f"{stem}.py")
        try:
            table = getattr(load_module(path), TABLE, None)
        except Exception as exc:  # noqa: BLE001 (reported; the module's own rows fail in asv)
            print(
                f"instructions: cannot import {path} ({type(exc).__name__}: {exc}); "
                f"its {TABLE} rows are left out of this run",
                file=sys.stderr,
            )
            continue
        if isinstance(table, dict):  # an entry that is not a workload fails its own row
            rows += [Row(f"{stem}.{name}", path, name) for name in table]
        elif table is not None:  # one row of its own, failing with the reason (workload_of)
            rows.append(Row(f"{stem}.{TABLE}", path, TABLE))
    return rows


def rows() -> list[Row]:
    """Every row of the instructions suite in this run, in its order."""
    return [Row(k, SOURCE, k) for k in workloads()] + project_rows()


def keys() -> list[str]:
    return [r.key for r in rows()]


def row(key: str) -> str:
    """The asv row of a key in suites/benchmarks/instructions.py."""
    return f"instructions.InstructionsPerCall.track_instructions({key!r})"
