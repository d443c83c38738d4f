"""Fusion: eager vs torch.compile (inductor) for four workloads.

- pointwise_chain: `x.cos().cos()` (two kernels eager, one fused kernel compiled);
- norm_activation: LayerNorm followed by GELU, inference;
- training_step: forward + loss + backward + SGD step of the zoo's MLP, with the model compiled
  (the optimizer stays eager, as in the usual `model = torch.compile(model)` advice);
- cross_entropy_loss: `nn.CrossEntropyLoss()` forward and backward on a batch of logits, the
  module compiled as the seed suggests (`torch.compile(nn.CrossEntropyLoss())`): eager runs
  log_softmax and nll_loss (and their backward kernels) one after the other.

Bandwidth (bytes moved, GB/s) of the memory-bound ones at sizes beyond the cache: bandwidth.py.

compiled() and eager() are the two sides of the suite's paired row: each compiled side gets its
own deep copy of a module target (the training step's MLP), each side its own optimizer and
logits, so that the answer check (harness.measure.answers, tolerance rule, docs/answers.md)
compares two computations from one starting state, never a tensor with itself.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from harness.core import sizes as core_sizes
from harness.core.env import seed_everything
from harness.measure import answers
from harness.measure.workloads import full_mode, model_config, pairs, to_device

WORKLOADS = ("pointwise_chain", "norm_activation", "training_step", "cross_entropy_loss")


@dataclasses.dataclass
class FusionCase:
    name: str
    device: torch.device
    # fn(module_or_function) -> argument-free callable running one call of the workload
    make_call: Callable[[Callable], Callable[[], object]]
    target: Callable  # what torch.compile wraps (function or module)
    example_args: tuple  # for timing.graph_breaks(target, *example_args)
    # tests swap in "eager" (dynamo without inductor) to exercise the path without a slow compile
    backend: str = "inductor"
    # fp64_call(target64) -> the eager call on float64 inputs (the answer check's float64 run)
    fp64_call: Callable[[Callable], Callable[[], object]] | None = None

    def __post_init__(self):
        self._key = object()  # this case's sides pair with each other only

    def eager(self) -> Callable[[], object]:
        fn = self.make_call(self.target)
        return pairs.offer(fn, "fusion", self._key, "eager", _Side(self, self.target, fn))

    def compiled(self) -> Callable[[], object]:
        """A fresh compiled callable; it compiles on its first call (a warm-up call). A module
        target is deep-copied first (its state now): the compiled side trains its own copy."""
        own = _own_copy(self.target)
        fn = self.make_call(torch.compile(own, backend=self.backend))
        return pairs.offer(fn, "fusion", self._key, "compiled", _Side(self, own, fn))


def _own_copy(target):
    if isinstance(target, nn.Module) and any(True for _ in target.parameters()):
        return copy.deepcopy(target)
    return target


@dataclasses.dataclass
class _Side:
    case: FusionCase
    target: object  # the module or function this side calls (compiled: its own copy)
    fn: Callable  # make_call's callable: its `result`, where it has one, is what is compared


ROWS = {
    "pointwise_chain": "fusion.PointwiseChain.track_compiled_over_eager",
    "norm_activation": "fusion.NormActivationBlock.track_compiled_over_eager",
    "training_step": "fusion.SmallModelTrainingStep.track_compiled_over_eager",
    "cross_entropy_loss": "fusion.CompiledCrossEntropyLoss.track_compiled_over_eager",
}


def _pair(new: _Side, ref: _Side, key) -> answers.Pair:
    """compiled vs eager by the tolerance rule, the float64 run being the eager call on float64
    copies of the target and inputs. The training step's dropout draws inductor's own random
    numbers when compiled, so its check compiles a copy of its own with fallback_random (eager's
    random ops, as PyTorch's accuracy runs do); the timed compiled side is left as it is."""
    case = ref.case
    start = pairs.Start(ref.target) if isinstance(ref.target, nn.Module) else None
    new_call = None
    if case.name == "training_step":
        new = _Side(case, _own_copy(ref.target), None)
        new.fn = case.make_call(torch.compile(new.target, backend=case.backend))

        def new_call():
            import torch._inductor.config

            with torch._inductor.config.patch(fallback_random=True):
                return new.fn()

    def prepare():
        if start is not None:
            pairs.same_start(new.target, ref.target)
            start.take()

    def fp64():
        target = start.model_fp64() if start is not None else ref.target
        fn = case.fp64_call(target)
        result = getattr(fn, "result", None)
        out = fn()
        return result(out) if result else out

    return answers.Pair(
        pairs.what(ROWS[case.name]),
        new_result=getattr(new.fn, "result", None),
        reference_result=getattr(ref.fn, "result", None),
        fp64=fp64 if case.fp64_call is not None else None,
        no_fp64="" if case.fp64_call is not None else "no float64 run for this workload",
        prepare=prepare,
        compiled=True,
        inputs=case.example_args,
        new_call=new_call,
    )


pairs.family("fusion", {("compiled", "eager"): _pair})


def _pointwise(x):
    return x.cos().cos()


def build(name: str, device: torch.device) -> FusionCase:
    if name not in WORKLOADS:
        raise ValueError(f"unknown fusion workload {name!r}; choose from {', '.join(WORKLOADS)}")
    gen = seed_everything()
    full = full_mode()
    if name == "pointwise_chain":
        x = torch.randn(core_sizes.pointwise_elements(full, device), generator=gen).to(device)

        def make_call(fn):
            return lambda: fn(x)

        def fp64_call(fn):
            return lambda: fn(x.double())

        return FusionCase(name, device, make_call, _pointwise, (x,), fp64_call=fp64_call)
    if name == "norm_activation":
        rows, dim = core_sizes.norm_activation(full, device)
        block = nn.Sequential(nn.LayerNorm(dim), nn.GELU()).to(device).eval()
        x = torch.randn(rows, dim, generator=gen).to(device)

        def make_call(mod, x=x):
            def call():
                with torch.no_grad():
                    return mod(x)

            return call

        return FusionCase(
            name,
            device,
            make_call,
            block,
            (x,),
            fp64_call=lambda mod: make_call(mod, x.double()),
        )
    if name == "cross_entropy_loss":
        rows, classes = core_sizes.cross_entropy(full, device)
        logits = torch.randn(rows, classes, generator=gen).to(device).requires_grad_()
        targets = torch.randint(0, classes, (rows,), generator=gen).to(device)

        def make_call(loss_fn, dtype=None):
            # each side its own logits (the same values): its backward writes their gradient
            own = logits.detach().to(dtype or logits.dtype, copy=True).requires_grad_()

            def call():
                own.grad = None
                loss = loss_fn(own, targets)
                loss.backward()
                return loss

            call.result = lambda loss: answers.Results(loss=loss, **{"grad logits": own.grad})
            return call

        return FusionCase(
            name,
            device,
            make_call,
            nn.CrossEntropyLoss(),
            (logits, targets),
            fp64_call=lambda fn: make_call(fn, torch.float64),
        )
    # training_step
    from harness.core.zoo import get_model

    spec, cfg = get_model("mlp"), model_config("mlp", device)
    model = spec.build(cfg).to(device).train()
    inputs = to_device(spec.inputs(cfg), device)
    targets = spec.targets(cfg).to(device)

    def make_call(mod, inputs=inputs):
        # each side its own SGD over its own model (the compiled side: a copy of the model)
        opt = torch.optim.SGD(mod.parameters(), lr=0.01)
        own = getattr(mod, "_orig_mod", mod)  # torch.compile's wrapper: its module

        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(mod(*inputs), targets)
            loss.backward()
            opt.step()
            return loss

        step.result = lambda loss: answers.training_result(own, loss)
        return step

    return FusionCase(
        name,
        device,
        make_call,
        model,
        inputs,
        fp64_call=lambda mod: make_call(mod, pairs.in_fp64(inputs)),
    )
