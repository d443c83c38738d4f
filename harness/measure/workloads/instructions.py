"""What the instruction counter counts (harness.measure.instructions): one call of each workload.

Each entry builds an argument-free callable inside the counting process (under valgrind, where
everything runs tens of times slower). What is costly to build and does not change the count
is prepared natively first, in the benchmark's own process: model weights (a ResNet-18's random
initialisation alone is ~0.5 billion instructions) are saved to the folder and loaded back, and
a compiled workload is compiled once so that the counting process finds inductor's cache warm
(same TORCHINDUCTOR_CACHE_DIR) and compiles from it.

Sizes are the zoo's small configurations in every mode: an instruction count judges the code
path, and a full-size ResNet-18 call would take minutes under valgrind. `calls` and `warmup`
(uninstrumented calls first: Python 3.11 specialises a code object after it ran a few times, and
the first calls allocate what later calls reuse) were chosen from measurements, see
docs/measurements.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import torch


@dataclasses.dataclass(frozen=True)
class InstructionWorkload:
    name: str
    build: Callable[
        [Path], Callable[[], object]
    ]  # in the counting process; reads what prepare wrote
    prepare: Callable[[Path], None] | None = None  # natively, before the counting process starts
    calls: int = 5  # counted calls per memory layout (the row: their total / calls, averaged)
    warmup: int = 10  # uninstrumented calls before them
    # memory layouts counted (fast, full): a Python-heavy call's count moves by up to ~0.7% with
    # where its objects lie (CPython's method cache is keyed by addresses); the mean over layouts
    # moves far less (harness.measure.instructions)
    layouts: tuple[int, int] = (3, 8)
    # modules the counting process imports before forking this workload's children (once for
    # all of them: the optimizers and torchvision import dynamo, ~16 s under valgrind)
    imports: tuple[str, ...] = ()
    cost: float = 1.0  # rough seconds per layout under valgrind: the costliest start first


def _model_state(name: str, mode: str) -> Callable[[Path], None]:
    def prepare(folder: Path) -> None:
        from harness.core.zoo import get_model

        spec = get_model(name)
        model = spec.build("small").train(mode == "training")
        torch.save(
            {"model": model, "inputs": spec.inputs("small"), "targets": spec.targets("small")},
            folder / f"{name}.pt",
        )

    return prepare


def _load(folder: Path, name: str) -> dict:
    return torch.load(folder / f"{name}.pt", weights_only=False)


def _inference(name: str) -> Callable[[Path], Callable[[], object]]:
    def build(folder: Path):
        state = _load(folder, name)
        model, inputs = state["model"].eval(), state["inputs"]

        def call():
            with torch.inference_mode():
                return model(*inputs)

        return call

    return build


def _training_step(name: str) -> Callable[[Path], Callable[[], object]]:
    def build(folder: Path):
        from harness.core.zoo import get_model

        state = _load(folder, name)
        model, inputs, targets = state["model"].train(), state["inputs"], state["targets"]
        loss_fn = get_model(name).loss
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(*inputs), targets)
            loss.backward()
            opt.step()
            return loss

        return step

    return build


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


_DYNAMO = ("torch._dynamo",)
_VISION = ("torch._dynamo", "torchvision")  # torchvision imports dynamo itself

WORKLOADS = {
    w.name: w
    for w in (
        InstructionWorkload(
            "mlp_training_step",
            _training_step("mlp"),
            _model_state("mlp", "training"),
            imports=_DYNAMO,
            cost=3.5,
        ),
        # two thirds of its instructions are Python's: its count moves most with the layout
        InstructionWorkload(
            "mlp_inference",
            _inference("mlp"),
            _model_state("mlp", "inference"),
            layouts=(6, 12),
            cost=1.5,
        ),
        InstructionWorkload(
            "word_lm_inference", _inference("word_lm"), _model_state("word_lm", "inference"), cost=3
        ),
        InstructionWorkload(
            "resnet18_inference",
            _inference("resnet18"),
            _model_state("resnet18", "inference"),
            calls=1,
            warmup=1,
            layouts=(1, 2),
            imports=_VISION,
            cost=12,
        ),
        InstructionWorkload(
            "alexnet_inference",
            _inference("alexnet"),
            _model_state("alexnet", "inference"),
            calls=1,
            warmup=1,
            layouts=(1, 2),
            imports=_VISION,
            cost=14,
        ),
        InstructionWorkload("pointwise_chain_eager", _chain_eager, layouts=(1, 2), cost=1.7),
        InstructionWorkload(
            "pointwise_chain_compiled",
            _chain_compiled,
            _warm_compile,
            layouts=(1, 2),
            imports=_DYNAMO,
            cost=37,
        ),
        InstructionWorkload(
            "adam_foreach_step",
            _optimizer_step("foreach"),
            calls=2,
            warmup=3,
            layouts=(2, 4),
            imports=_DYNAMO,
            cost=3.5,
        ),
        InstructionWorkload(
            "adam_fused_step",
            _optimizer_step("fused"),
            calls=2,
            warmup=3,
            layouts=(2, 4),
            imports=_DYNAMO,
            cost=2.5,
        ),
        InstructionWorkload("dataloader_collate", _collate, layouts=(1, 2), cost=1.3),
    )
}


def row(workload: str) -> str:
    """The asv row of a workload in suites/benchmarks/instructions.py."""
    return f"instructions.InstructionsPerCall.track_instructions({workload!r})"


def matching(regexes: list[str]) -> list[str]:
    """The workloads whose rows any of asv's --bench `regexes` selects (re.search, as asv)."""
    import re

    return [w for w in WORKLOADS if any(re.search(rx, row(w)) for rx in regexes)]
