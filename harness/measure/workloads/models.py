"""Zoo models: inference and training-step callables, with cudnn.benchmark and channels_last
where they apply, torch.compile against eager (inference and training step, each pair checked
for the same answer: harness.measure.answers), and a build-and-run callable for peak memory."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch

from harness.core import answerfacts, tolerances
from harness.core.env import seed_everything
from harness.measure import answers
from harness.measure.workloads import NotApplicable, model_config, pairs, to_device

LEARNING_RATE = 0.01  # the training steps' SGD


def check(
    model_name: str, cudnn_benchmark: bool, channels_last: bool, device: torch.device
) -> None:
    from harness.core.zoo import get_model

    spec = get_model(model_name)
    if cudnn_benchmark and device.type != "cuda":
        raise NotApplicable(
            f"cudnn.benchmark only affects CUDA; this machine runs on {device.type}"
        )
    if cudnn_benchmark and not spec.image_model:
        raise NotApplicable(f"cudnn.benchmark tunes convolutions; {model_name} has none")
    if channels_last and not spec.image_model:
        raise NotApplicable(f"channels_last applies to 4-d image inputs; {model_name} takes none")


class _Prepared:
    def __init__(self, model_name, channels_last, device):
        from harness.core.zoo import get_model

        self.spec, cfg = get_model(model_name), model_config(model_name, device)
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        self.model = self.spec.build(cfg).to(device, memory_format=fmt)
        self.inputs = tuple(
            x.to(device, memory_format=fmt)
            if isinstance(x, torch.Tensor) and x.dim() == 4
            else to_device(x, device)
            for x in self.spec.inputs(cfg)
        )
        self.targets = self.spec.targets(cfg).to(device)


def set_cudnn_benchmark(enabled: bool) -> None:
    torch.backends.cudnn.benchmark = bool(enabled)


def with_cudnn_benchmark(fn: Callable[[], object], enabled: bool) -> Callable[[], object]:
    """`fn` run with cudnn.benchmark set to `enabled` for each call: the flag is global and read
    per convolution call, so two such callables can alternate within one timing loop (the
    enabled side autotunes during its warm-up call and reuses the choice after)."""

    def call():
        torch.backends.cudnn.benchmark = enabled
        return fn()

    side = pairs.side_state(fn)
    if not isinstance(side, _Side):
        return call
    key = (side.prepared.spec.name, side.mode, str(side.device), side.channels_last)
    return pairs.offer(call, "models.cudnn_benchmark", key, bool(enabled), side)


def build(
    model_name: str, mode: str, cudnn_benchmark: bool, channels_last: bool, device: torch.device
) -> Callable[[], object]:
    """`mode` "inference" (eval, inference_mode) or "training" (train, SGD step)."""
    check(model_name, cudnn_benchmark, channels_last, device)
    set_cudnn_benchmark(cudnn_benchmark)
    p = _Prepared(model_name, channels_last, device)
    side = _Side(p, mode, channels_last, device)
    key = (model_name, mode, str(device), bool(cudnn_benchmark))
    return pairs.offer(_callable(p, mode), "models.channels_last", key, bool(channels_last), side)


# channels_last vs contiguous and cudnn.benchmark on vs off are pairs whose sides two `build`
# calls make: each side is offered (harness.measure.workloads.pairs) and checked by the tolerance
# rule, with the float64 run where allclose fails (docs/answers.md#what-each-pair-compares).


@dataclasses.dataclass
class _Side:
    prepared: _Prepared
    mode: str
    channels_last: bool
    device: torch.device


def _pair_maker(row: str):
    def make(new: _Side, ref: _Side, key) -> answers.Pair:
        a, b = new.prepared, ref.prepared
        if ref.mode == "training":  # by direction: kernels' errors differ past 2x (tolerances)
            return pairs.training_pair(
                row,
                a.model,
                b.model,
                rule=answers.COSINE,
                min_cosine=tolerances.LOW_PRECISION_COSINE,
                max_loss_rel=tolerances.KERNEL_CHOICE_LOSS,
                tolerance=tolerances.answer("float32"),
                source=tolerances.KERNEL_CHOICE_SOURCE,
                not_applicable=pairs.tiny_batch_norm(b.model, b.inputs),
            )

        def fp64():  # the contiguous model's call in float64
            p64 = copy.copy(b)
            p64.model, p64.inputs = copy.deepcopy(b.model).double(), pairs.in_fp64(b.inputs)
            return _callable(p64, "inference")()

        return answers.Pair(
            pairs.what(row),
            fp64=fp64,
            prepare=lambda: pairs.same_start(a.model, b.model),
            model=b.model,
            inputs=b.inputs,
        )

    return make


pairs.family(
    "models.channels_last",
    {
        (True, False): _pair_maker(
            "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous"
        )
    },
)
pairs.family(
    "models.cudnn_benchmark",
    {
        (True, False): _pair_maker(
            "models.CudnnBenchmarkOnOverOff.track_cudnn_benchmark_on_over_off"
        )
    },
)


def _callable(p: _Prepared, mode: str) -> Callable[[], object]:
    if mode == "inference":
        p.model.eval()

        def infer():
            with torch.inference_mode():
                return p.model(*p.inputs)

        return infer
    if mode == "training":
        p.model.train()
        opt = torch.optim.SGD(p.model.parameters(), lr=LEARNING_RATE)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = p.spec.loss(p.model(*p.inputs), p.targets)
            loss.backward()
            opt.step()
            return loss

        return step
    raise ValueError(f"unknown mode {mode!r}; use 'inference' or 'training'")


# ---- torch.compile against eager: CompiledOverEager, CompiledTrainingStepOverEager -----------

BACKEND = "inductor"  # torch.compile's backend for the compiled sides (tests use "eager")
INFERENCE_WHAT = (
    "torch.compile(model) vs eager: one inference call (eval, inference_mode), same weights and "
    "inputs"
)
TRAINING_WHAT = (
    "torch.compile(model) vs eager: one training step (forward, loss, backward, SGD step) from "
    "the same weights, inputs and seed: the loss, every gradient and every parameter after it"
)


def compile_opt_out(model_name: str, what: str) -> None:
    """A model registered with `compile="why"` is never compiled: its rows are n/a with the
    reason, its answer row too (recorded here, inside a run)."""
    from harness.core.zoo import get_model

    why = get_model(model_name).compile_opt_out()
    if why:
        reason = f"{model_name} is not compiled: {why} (register_model(compile=...))"
        answers.record(answerfacts.Answer(answerfacts.NOT_APPLICABLE, what, reason=reason))
        raise NotApplicable(reason)


def _compile(model: torch.nn.Module, fallback_random: bool = False):
    if BACKEND != "inductor":
        return torch.compile(model, backend=BACKEND)
    return torch.compile(model, options={"fallback_random": True} if fallback_random else None)


def build_compiled_pair(
    model_name: str, device: torch.device
) -> tuple[Callable[[], object], Callable[[], object]]:
    """(compiled, eager) inference calls of one model, declared as a pair (harness.measure.answers)
    that measure_paired checks before timing: the compiled side runs `torch.compile` of a deep
    copy of the eager model (one starting state, no shared parameters) on the same inputs, and
    compiles on its first call, the check's; the float64 referee is the eager model in float64."""
    check(model_name, False, False, device)
    compile_opt_out(model_name, INFERENCE_WHAT)
    eager = _Prepared(model_name, False, device)
    compiled = copy.copy(eager)
    compiled.model = _compile(copy.deepcopy(eager.model))
    pair = answers.Pair(
        what=INFERENCE_WHAT,
        compiled=True,
        model=eager.model,
        inputs=eager.inputs,
    )
    pair.fp64 = _float64_run(pair, answers.float64_forward(eager.model, *eager.inputs))
    new, reference = _callable(compiled, "inference"), _callable(eager, "inference")
    new.model, reference.model = compiled.model, eager.model  # what each side calls
    return answers.declare(new, reference, pair)


def build_compiled_training_pair(
    model_name: str, device: torch.device
) -> tuple[Callable[[], object], Callable[[], object]]:
    """(compiled, eager) training steps of one model, each side a deep copy of one starting
    state with its own SGD optimizer, declared as a pair checked by the loss, every gradient
    and every parameter after one step.

    Random ops in training mode (dropout): inductor draws its own random numbers, so a compiled
    step with dropout never matches eager's draw. Where the step draws any, the check calls
    another copy compiled with inductor's `fallback_random` (`Pair.new_call`: eager's random
    ops, so the same seed gives the same draws; PyTorch's accuracy runner does the same) and the
    timed calls run the plain `torch.compile`, which compiles at the first warm-up call: the
    check covers everything but inductor's own random kernels
    (docs/answers.md#in-a-project-of-your-own)."""
    from harness.core import determinism

    check(model_name, False, False, device)
    compile_opt_out(model_name, TRAINING_WHAT)
    eager = _Prepared(model_name, False, device)
    eager.model.train()
    start = copy.deepcopy(eager.model)  # the starting state, for the float64 referee
    probe = copy.deepcopy(eager.model)  # train-mode forwards move batch norm's running stats
    random = determinism.random_ops(probe, eager.inputs)
    del probe
    timed = copy.copy(eager)
    original = copy.deepcopy(eager.model)  # named as eager's: no `_orig_mod.` prefix
    timed.model = _compile(original)
    compiled = _callable(timed, "training")
    checked_model, check_call = original, None
    if random and BACKEND == "inductor":
        checked = copy.copy(eager)
        checked_model = copy.deepcopy(start)
        checked.model = _compile(checked_model, fallback_random=True)
        check_call = _callable(checked, "training")  # the check's own copy: not timed
    named = list(dict.fromkeys(map(str, random)))
    shown = "; ".join(named[:2]) + (f" and {len(named) - 2} more" if len(named) > 2 else "")
    pair = answers.Pair(
        what=TRAINING_WHAT
        + (f" (random ops drawn by eager's kernels in the check: {shown})" if random else ""),
        compiled=True,
        new_result=lambda loss: answers.training_result(checked_model, loss),
        reference_result=lambda loss: answers.training_result(eager.model, loss),
        new_call=check_call,
    )
    pair.fp64 = _float64_run(pair, lambda: _float64_step(eager, start))
    reference = _callable(eager, "training")
    compiled.model, reference.model = timed.model, eager.model  # what each side's timing calls
    return answers.declare(compiled, reference, pair)


def _float64_step(p: _Prepared, start: torch.nn.Module):
    model = copy.deepcopy(start).to(torch.float64).train()
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    opt.zero_grad(set_to_none=True)
    loss = p.spec.loss(model(*answers.float64(p.inputs)), p.targets)
    loss.backward()
    opt.step()
    return answers.training_result(model, loss)


def _float64_run(pair: answers.Pair, run: Callable[[], object]) -> Callable[[], object]:
    """`run` after the check's seed, as a pair's fp64: where the model has no float64 kernel
    the pair says so (no_fp64) and the outputs allclose failed on stay WRONG with that reason."""

    def fp64():
        seed_everything(pair.seed)  # dropout in a training step draws as both sides did
        try:
            return run()
        except Exception as exc:  # noqa: BLE001  (a model of any kind: its error is the reason)
            first = (str(exc).strip().splitlines() or [""])[0]
            pair.no_fp64 = f"its float64 run failed: {type(exc).__name__}: {first}"[:300]
            return None

    return fp64


def build_and_train_once(
    model_name: str, channels_last: bool, device: torch.device
) -> Callable[[], None]:
    """For peak memory: builds the model and inputs, runs one inference and one training step."""
    check(model_name, False, channels_last, device)

    def run():
        p = _Prepared(model_name, channels_last, device)
        _callable(p, "inference")()
        _callable(p, "training")()

    return run
