"""Zoo models: inference and training-step callables, with cudnn.benchmark and channels_last
where they apply, and a build-and-run callable for peak memory."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch

from harness.core import tolerances
from harness.measure import answers
from harness.measure.workloads import NotApplicable, model_config, pairs, to_device


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
        opt = torch.optim.SGD(p.model.parameters(), lr=0.01)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = p.spec.loss(p.model(*p.inputs), p.targets)
            loss.backward()
            opt.step()
            return loss

        return step
    raise ValueError(f"unknown mode {mode!r}; use 'inference' or 'training'")


def build_compiled_pair(
    model_name: str, device: torch.device
) -> tuple[Callable[[], object], Callable[[], object]]:
    """(compiled, eager) inference calls of one model with the same weights and inputs: the
    compiled one runs `torch.compile(model)` (the usual advice) and compiles on its first call."""
    import copy

    check(model_name, False, False, device)
    eager = _Prepared(model_name, False, device)
    compiled = copy.copy(eager)
    compiled.model = torch.compile(eager.model)
    return _callable(compiled, "inference"), _callable(eager, "inference")


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
