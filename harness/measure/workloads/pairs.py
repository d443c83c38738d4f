"""Which two timed callables of each paired row of the suites must agree, and by which rule.

The one check is harness.measure.answers; this module is where the suites' workloads declare
it, never in suites/benchmarks' hashed source: asv's version of a benchmark is the hash of its
track_, setup and setup_cache source, and a new line there would make every older baseline read
the row as "benchmark changed" (docs/answers.md#what-each-pair-compares).

- ROWS: every paired row of the suites, what its two sides compute, its rule and the reason for
  a subtle one. The Pairs take their `what` from it, docs/answers.md shows it with the values
  measured here, and tests/test_answers_suites.py checks it against the suites both ways.
- `offer`: most rows build their two sides with two calls of one builder (`build(model, "bf16")`,
  `build(model, "fp32")`). Each built side is offered with its family, a key (what two sides of
  one pair share: the model, the mode, the device) and its variant; once a family's table names
  two live variants of one key a pair, the pair is declared on them (`answers.declare`).
- one starting state: `same_start` copies the reference side's weights (and optimizer state) into
  the new side's in place, right before each check (`Pair.prepare`); `Start` keeps that state for
  the float64 run (`in_fp64`), which is computed only where allclose fails.
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from collections.abc import Callable, Mapping

import torch
from torch import nn

from harness.core.answerfacts import COSINE, EXACT, TOLERANCE
from harness.measure import answers


@dataclasses.dataclass(frozen=True)
class PairedRow:
    """One paired row's check, as docs/answers.md lists it."""

    what: str  # what the two sides compute (the Pair's `what`)
    rule: str  # exact / tolerance / cosine / n/a, or per device ("exact on CPU, tolerance ...")
    why: str = ""  # the reason, where the decision is subtle


_ON_CUDA = (
    "on CUDA, tolerance with the float64 rule: atomics in backward kernels (max-pool, "
    "index-add) make two runs of one step differ in the last bits"
)
_TRAINING = "the loss, every gradient and every parameter after one step"
_DATALOADER = (
    "what must agree: the labels of every batch of an epoch in order (each label is the sample's "
    "index mod 10), each batch's image shape and dtype, the sampler's indices. The pixels are "
    "not compared: each worker seeds its own augmentation (RandomResizedCrop, flip) by design"
)
_DDP = (
    "inside the torchrun workers, from one seeded model: the parameters after Plan.answer_steps "
    "(3) steps of each side, rank 0's answer brought back through the launch's result"
)

ROWS: dict[str, PairedRow] = {
    "amp.AutocastOverFp32.track_autocast_over_fp32": PairedRow(
        "an autocast training step (bf16; fp16 with GradScaler on CUDA) vs the fp32 step, from "
        "one starting state",
        COSINE,
        "low precision: the loss within LOW_PRECISION_LOSS of the fp32 loss, every gradient's "
        "and parameter's cosine at least LOW_PRECISION_GRAD_COSINE, or within allclose at the "
        "dtype's tolerance (same()'s early exit: a gradient that is zero up to rounding, as a "
        "bias before a BatchNorm, has no direction); fp16 steps that GradScaler skipped "
        "(overflow at its current scale, its design) compare the loss and parameters only",
    ),
    "dataloader.WorkersOverNoWorkers.track_workers_over_no_workers": PairedRow(
        "an epoch of the loader with N workers vs with none", EXACT, _DATALOADER
    ),
    "dataloader.PersistentOverFreshWorkers.track_persistent_over_fresh_workers": PairedRow(
        "an epoch of the loader with persistent workers vs workers started afresh",
        EXACT,
        _DATALOADER,
    ),
    "distributed.DistributedStepOverSingleProcess.track_step_time_over_single_process": (
        PairedRow(
            "DDP training steps of every rank (each its own batch) vs one process stepping over "
            "all ranks' batches concatenated",
            TOLERANCE,
            _DDP + "; the float64 run is the one process's steps in float64",
        )
    ),
    "distributed.BucketCapOverDefault.track_step_time_over_default_bucket_cap": PairedRow(
        "DDP steps with bucket_cap_mb=N vs the default 25 MB",
        TOLERANCE,
        _DDP + "; buckets regroup the all-reduce's sums",
    ),
    "distributed.GradientAsBucketView.track_step_time_with_over_without_bucket_view": PairedRow(
        "DDP steps with gradient_as_bucket_view=True vs False", TOLERANCE, _DDP
    ),
    "distributed.NoSyncAccumulation.track_no_sync_over_sync_every_micro_batch": PairedRow(
        "K micro-batches accumulated under no_sync() vs synchronised every micro-batch",
        TOLERANCE,
        _DDP + "; one all-reduce of the sum vs the sum of K averages",
    ),
    "distributed.DataParallelOverDistributed.track_data_parallel_over_distributed": PairedRow(
        "nn.DataParallel over the global batch vs DDP (2+ GPUs)",
        TOLERANCE,
        _DDP + "; n/a without 2 CUDA GPUs, as the row",
    ),
    "fusion.PointwiseChain.track_compiled_over_eager": PairedRow(
        "torch.compile(x.cos().cos()) vs eager", TOLERANCE
    ),
    "fusion.NormActivationBlock.track_compiled_over_eager": PairedRow(
        "torch.compile(LayerNorm + GELU) vs eager, inference", TOLERANCE
    ),
    "fusion.SmallModelTrainingStep.track_compiled_over_eager": PairedRow(
        "a training step of torch.compile(MLP) vs the eager MLP: " + _TRAINING,
        TOLERANCE,
        "each side its own deep copy of the model and its own SGD; the MLP's dropout draws "
        "inductor's own random numbers when compiled, so the check compiles a copy of its own "
        "with fallback_random (eager's random ops, as PyTorch's accuracy runs do), the timed "
        "compiled side left as it is",
    ),
    "fusion.CompiledCrossEntropyLoss.track_compiled_over_eager": PairedRow(
        "torch.compile(nn.CrossEntropyLoss()) vs eager: the loss and the logits' gradient",
        TOLERANCE,
        "each side its own copy of the logits",
    ),
    "fusion.MemoryBandwidth.track_fused_over_eager": PairedRow(
        "the fused (compiled) workload's output vs eager's, at sizes beyond the cache",
        TOLERANCE,
        "checked where the timing loop runs (setup_cache), recorded by the row's teardown",
    ),
    "fusion.OptimizerStepOverForLoop.track_step_over_for_loop": PairedRow(
        "one foreach or fused optimizer step vs the for-loop step with the same gradients, "
        "from one state: every parameter and every optimizer state tensor",
        TOLERANCE,
    ),
    "fusion.AttentionOverHandWritten.track_sdpa_over_hand_written": PairedRow(
        "scaled_dot_product_attention with one backend vs the hand-written softmax(QK^T)V",
        TOLERANCE,
        "the float64 run is the hand-written attention in float64 (flash and efficient "
        "attention have no float64 kernel on CUDA)",
    ),
    "fusion.GradientCheckpointing.track_checkpointed_over_plain": PairedRow(
        "a training step with every encoder layer checkpointed vs plain: the loss, gradients",
        f"exact on CPU; {TOLERANCE} on CUDA",
        "measured bit-identical on CPU (the recomputation runs the same kernels on the same "
        "inputs, the dropout masks restored); " + _ON_CUDA,
    ),
    "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous": PairedRow(
        "the model in channels_last vs contiguous, inference output or " + _TRAINING,
        f"{TOLERANCE} (inference); {COSINE} (training step)",
        "convolution algorithms differ by memory format: inference by the float64 rule where "
        "allclose fails; a training step's gradients differ from float64 4-12x more in one "
        "format than the other (ResNet-18, full size), so by direction (KERNEL_CHOICE); a "
        "training step whose BatchNorm normalises over fewer than 4 values per channel is n/a "
        "(ResNet-18's small size: ill-conditioned in float32)",
    ),
    "models.CompiledOverEager.track_compiled_over_eager": PairedRow(
        "torch.compile(model) vs eager, inference",
        TOLERANCE,
        "declared by models.build_compiled_pair (a project's compiled models: docs/answers.md)",
    ),
    "models.CompiledTrainingStepOverEager.track_compiled_training_step_over_eager": PairedRow(
        "a training step of torch.compile(model) vs eager (full runs): " + _TRAINING,
        TOLERANCE,
        "declared by models.build_compiled_training_pair: each side a deep copy of one starting "
        "state; dropout drawn by eager's kernels in a fallback_random copy (docs/answers.md)",
    ),
    "models.CudnnBenchmarkOnOverOff.track_cudnn_benchmark_on_over_off": PairedRow(
        "the model with cudnn.benchmark on vs off (CUDA), inference output or " + _TRAINING,
        f"{TOLERANCE} (inference); {COSINE} (training step)",
        "the algorithms benchmark mode picks may differ in rounding and TF32 use: inference by "
        "the float64 rule where allclose fails, a training step by direction as channels_last's",
    ),
    "training_loop.EvalForward.track_no_grad_over_grad_enabled": PairedRow(
        "an eval forward under no_grad vs with autograd recording",
        f"exact on CPU; {TOLERANCE} on CUDA",
        "grad mode changes what is recorded, not the kernels: measured bit-identical on CPU; "
        "unmeasured on CUDA, so the tolerance there",
    ),
    "training_loop.EvalForward.track_inference_mode_over_grad_enabled": PairedRow(
        "an eval forward under inference_mode vs with autograd recording",
        f"exact on CPU; {TOLERANCE} on CUDA",
        "as no_grad",
    ),
    "training_loop.EvalForward.track_inference_mode_over_no_grad": PairedRow(
        "an eval forward under inference_mode vs under no_grad",
        f"exact on CPU; {TOLERANCE} on CUDA",
        "as no_grad",
    ),
    "training_loop.ZeroGrad.track_set_to_none_over_zero_fill": PairedRow(
        "a training step after zero_grad(set_to_none=True) vs zero-filled gradients: " + _TRAINING,
        f"exact on CPU; {TOLERANCE} on CUDA",
        "0 + g is g exactly, so the steps are bit-identical; " + _ON_CUDA,
    ),
    "training_loop.LossLogging.track_accumulated_over_item_each_step": PairedRow(
        "a loop of training steps summing the logged loss on the device vs .item() each step",
        f"{TOLERANCE} (the logged loss); exact on CPU (gradients, parameters)",
        "the logged sum is float32 on the device and a Python float (float64) of the item() "
        "calls: a tolerance; the steps themselves are the same: " + _ON_CUDA,
    ),
    "transfer.PinnedOverPageable.track_pinned_over_pageable": PairedRow(
        "a copy to the GPU from pinned vs pageable memory: the bytes on the device", EXACT
    ),
    "transfer.Uint8ThenConvertOverFloat32.track_uint8_over_float32": PairedRow(
        "uint8 sent and converted on the GPU vs float32 converted on the host",
        TOLERANCE,
        "not bit-identical by construction: CUDA divides by a scalar as a multiply by its "
        "reciprocal (half of the 256 values differ by one ulp), the CPU divides",
    ),
    "transfer.NonBlockingOverBlocking.track_non_blocking_over_blocking": PairedRow(
        "copies made non_blocking vs blocking, each batch used on the device: the result", EXACT
    ),
}


def what(paired_row: str) -> str:
    return ROWS[paired_row].what


def exact_on_cpu(device: torch.device | str) -> str:
    """EXACT on a CPU (measured bit-identical), TOLERANCE on CUDA (nondeterministic kernels)."""
    return EXACT if torch.device(device).type == "cpu" else TOLERANCE


# ---- offering built sides -----------------------------------------------------------------

_SIDE = "__harness_side__"  # on an offered callable: the state its family's pair maker reads
# family -> {(new variant, reference variant): make(new_state, reference_state, key) -> Pair}
_FAMILIES: dict[str, Mapping[tuple, Callable]] = {}
_LIVE: dict[tuple, dict] = {}  # (family, key) -> {variant: weakref to the latest offered side}


def family(name: str, pairs: Mapping[tuple, Callable]) -> None:
    """Register a family's pairs: (new variant, reference variant) -> the pair maker."""
    _FAMILIES[name] = pairs


def offer(fn, name: str, key, variant, state=None):
    """`fn`, a side a builder made, kept (weakly) as the latest of its variant for `key`; every
    pair of the family it completes with the latest live side of the other variant is declared.
    Returns the callable to time (`fn`, or a wrapper where `fn` takes no attributes). `fn` may
    be another object a benchmark times through (a DataLoader): its maker declares the check."""
    fn = _settable(fn)
    setattr(fn, _SIDE, state)
    live = _LIVE.setdefault((name, key), {})
    live[variant] = weakref.ref(fn)
    for (new_v, ref_v), make in _FAMILIES[name].items():
        if variant not in (new_v, ref_v):
            continue
        new, ref = (_alive(live.get(v)) for v in (new_v, ref_v))
        if new is not None and ref is not None and new is not ref:
            pair = make(_state(new), _state(ref), key)
            if pair is not None:  # None: the maker declared the check itself (declare_for_row)
                answers.declare(new, ref, pair)
    return fn


def _settable(fn: Callable) -> Callable:
    try:
        setattr(fn, _SIDE, None)
        return fn
    except AttributeError:  # a bound method (opt.step)

        def call():
            return fn()

        return call


def side_state(fn: Callable):
    """The state `fn` was offered with."""
    return getattr(fn, _SIDE, None)


def _state(side):
    """What a pair maker gets of a side: its state, or the side itself where it has none."""
    state = getattr(side, _SIDE, None)
    return side if state is None else state


def _alive(ref):
    return ref() if ref is not None else None


# ---- one starting state --------------------------------------------------------------------


def same_start(new: nn.Module, reference: nn.Module, new_opt=None, reference_opt=None) -> None:
    """The reference side's parameters and buffers (and optimizer state) copied into the new
    side's, in place: one starting state, while each side keeps its own storage and memory
    format (channels_last)."""
    a, b = new.state_dict(keep_vars=True), reference.state_dict(keep_vars=True)
    if list(a) != list(b):
        raise ValueError("the two sides' models differ in their parameters' names")
    with torch.no_grad():
        for name in b:
            a[name].copy_(b[name])
        if new_opt is not None and reference_opt is not None:
            for pa, pb in zip(_params(new_opt), _params(reference_opt)):
                for k, v in reference_opt.state.get(pb, {}).items():
                    mine = new_opt.state[pa].get(k)
                    if isinstance(v, torch.Tensor) and isinstance(mine, torch.Tensor):
                        mine.copy_(v)
                    else:
                        new_opt.state[pa][k] = copy.deepcopy(v)


def _params(opt) -> list[torch.Tensor]:
    return [p for group in opt.param_groups for p in group["params"]]


def shares_storage(a: nn.Module, b: nn.Module) -> list[str]:
    """Names of `a`'s parameters whose storage is one of `b`'s (a bug: the check would compare a
    tensor with itself)."""
    theirs = {p.untyped_storage().data_ptr() for p in b.parameters()}
    return [n for n, p in a.named_parameters() if p.untyped_storage().data_ptr() in theirs]


class Start:
    """A model's state when a check starts (taken by `take`, in the Pair's prepare), for the
    float64 run: only a copy of the tensors; the model is copied only when fp64 is run."""

    def __init__(self, model: nn.Module, opt=None):
        self.model, self.opt = model, opt
        self.state: dict | None = None
        self.opt_state: dict | None = None

    def take(self) -> None:
        self.state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        if self.opt is not None:
            self.opt_state = copy.deepcopy(self.opt.state_dict())

    def model_fp64(self) -> nn.Module:
        """A float64 copy of the model as it was at `take()`."""
        if self.state is None:
            raise RuntimeError("Start.take() was not called before the float64 run")
        m = copy.deepcopy(self.model)
        m.load_state_dict(self.state)
        return m.double()


# A BatchNorm in training mode over this few values per channel makes a training step
# ill-conditioned in float32 (docs/answers.md): over two values its output is about +-1 whatever
# the input, and its gradient amplifies rounding where the two nearly agree. ResNet-18's small
# size (32 px, batch 2) has two values per channel in layer4 (1x1 maps): float32 itself is 4.7%
# off float64 on its gradients, channels_last 12%, and which of the two is nearer float64
# changes from step to step.
MIN_BATCH_NORM_VALUES = 4


def tiny_batch_norm(model: nn.Module, inputs: tuple) -> str:
    """Why a training step of `model` on `inputs` is not comparable in float32, or "": a
    BatchNorm in training mode normalising over fewer than MIN_BATCH_NORM_VALUES values per
    channel (one forward pass of a copy, hooked)."""
    norms = [
        name
        for name, m in model.named_modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training
    ]
    if not norms:
        return ""
    probe = copy.deepcopy(model)
    seen: dict[str, int] = {}
    modules = dict(probe.named_modules())
    for name in norms:

        def count(module, args, name=name):
            x = args[0]
            seen.setdefault(name, x.numel() // x.shape[1])

        modules[name].register_forward_pre_hook(count)
    with torch.no_grad():
        probe(*inputs)
    few = {n: k for n, k in seen.items() if k < MIN_BATCH_NORM_VALUES}
    if not few:
        return ""
    name, k = next(iter(few.items()))
    return (
        f"not comparable at this size: {len(few)} BatchNorm layer(s) in training normalise over "
        f"fewer than {MIN_BATCH_NORM_VALUES} values per channel ({name}: {k}), which makes the "
        "training step ill-conditioned in float32 (ResNet-18's small size: float32 itself 4.7% "
        "off float64 on its gradients); its full size is checked"
    )


def in_fp64(obj):
    """Floating tensors (in tuples, lists, dicts) as float64; the rest as is."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().double() if obj.is_floating_point() else obj
    if isinstance(obj, (tuple, list)):
        return type(obj)(in_fp64(o) for o in obj)
    if isinstance(obj, dict):
        return {k: in_fp64(v) for k, v in obj.items()}
    return obj


def training_pair(
    row: str,
    new: nn.Module,
    reference: nn.Module,
    *,
    rule: str = TOLERANCE,
    fp64_step: Callable[[nn.Module], object] | None = None,
    new_opt=None,
    reference_opt=None,
    **kw,
) -> answers.Pair:
    """The Pair of two training steps (each returning its loss): the loss, every gradient and
    every parameter after the step, from one starting state (the reference's, copied into the
    new side before each check). `fp64_step(model64)` runs the reference's step on a float64
    copy of the starting state and returns its loss."""
    start = Start(reference, reference_opt)
    bad = shares_storage(new, reference)
    if bad:
        raise ValueError(f"{row}: the two sides share parameters ({', '.join(bad[:3])})")

    def prepare():
        same_start(new, reference, new_opt, reference_opt)
        start.take()

    fp64 = None
    if fp64_step is not None:

        def fp64():
            model = start.model_fp64()
            loss = fp64_step(model)
            return answers.training_result(model, loss)

    return answers.Pair(
        what(row),
        rule=rule,
        new_result=lambda loss: answers.training_result(new, loss),
        reference_result=lambda loss: answers.training_result(reference, loss),
        fp64=fp64,
        no_fp64="" if fp64 is not None else "the pair declares no float64 run",
        prepare=prepare,
        **kw,
    )
