"""What "the same result" means, in one table for the whole package.

Four places compare two tensors that should agree, each for another reason, so each takes its
own row of this table (docs/answers.md#tolerances lists them with their sources):

- REPEAT: one program run twice on one input (harness.core.determinism, `harness check`): on a
  CPU the two agree bit for bit, so the band is tight; a random op moves values by O(1).
- CAPTURED: a captured graph (jit, fx, export, dynamo, AOT) run against eager on the same device
  (harness.golden.devicecheck): decomposed ops may pick other kernels than eager's.
- ANSWER: the two sides of a paired benchmark row (harness.measure.answers): a faster way of
  computing the same thing, judged per dtype of the reference side's result, PyTorch's dynamo
  benchmark runner's accuracy rule (`torch._dynamo.utils.same`) made explicit: allclose first,
  then, where that fails, each side's error against a float64 run of the same inputs.
- LOW_PRECISION: a side that computes in bf16/fp16 (autocast) against fp32: elementwise bands
  say nothing there, so the cosine similarity of each result and the loss's relative difference.

torch is not imported here: dtypes are named by their torch attribute ("float32").
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    source: str  # where the figure comes from, shown beside every verdict that used it


# Two runs of one program on one input.
REPEAT = Tolerance(
    1e-5, 1e-6, "two runs of one program: bit-identical on a CPU, last bits on a GPU"
)

# A captured program against eager, on each device type (TF32 is off while checking).
CAPTURED = {
    "cpu": Tolerance(1e-4, 1e-5, "captured vs eager on a CPU: decompositions reorder sums"),
    "cuda": Tolerance(1e-3, 1e-4, "captured vs eager on CUDA: other kernels than eager's"),
}

# The two sides of a paired row, by the reference side's dtype. fp32: `same()`'s default tol
# (allclose with rtol = atol = 1e-4); fp16/bf16: the dynamo benchmark runner's --float16 /
# --bfloat16 / --amp tol of 1e-3; fp64: its band scaled to float64's precision.
_SAME = "torch._dynamo.utils.same"
ANSWER = {
    "float64": Tolerance(1e-7, 1e-7, f"{_SAME}'s rule at float64 precision"),
    "float32": Tolerance(1e-4, 1e-4, f"{_SAME}'s default tol=1e-4"),
    "float16": Tolerance(1e-3, 1e-3, "the dynamo benchmark runner's fp16 tol=1e-3"),
    "bfloat16": Tolerance(1e-3, 1e-3, "the dynamo benchmark runner's bf16 tol=1e-3"),
}
ANSWER_DEFAULT = "float32"  # complex and other float dtypes take float32's row

# Where allclose fails, the faster side passes if its RMSE against the float64 run is at most
# MULTIPLIER x the reference side's RMSE + tol / 10 (`same()`'s rule): 3 for low-precision
# results and tensors of fewer than SMALL_TENSOR elements, where noise dominates the metric.
FP64_MULTIPLIER = 2.0
FP64_MULTIPLIER_LOOSE = 3.0
SMALL_TENSOR = 1000
# Where allclose failed and the reference side's own RMSE against float64 exceeds atol + this x
# rtol x the float64 result's RMS, its dtype cannot do the computation to within the tolerance
# (ill-conditioned: gradients through a BatchNorm over two samples on 1x1 maps, ResNet-18's small
# size in training, where float32 itself is 4.7% off float64 and the two memory formats 12%, and
# the error spreads downstream): such outputs are not judged, and a pair whose every differing
# output is one is not comparable there (n/a, named).
# Normal float32 outputs are 1e-7..1e-5 off float64 (TF32 convolutions ~1e-3), far below 1e-2.
ILL_CONDITIONED = 100.0

# Low precision (autocast) against fp32: cosine similarity of every result at least this
# (`same()`'s cos_similarity threshold), and the loss within this relative difference.
LOW_PRECISION_COSINE = 0.99
LOW_PRECISION_LOSS = {"bfloat16": 2e-2, "float16": 1e-2}
LOW_PRECISION_SOURCE = (
    f"{_SAME}'s cos_similarity threshold 0.99; loss within 2% (bf16) / 1% (fp16): 2-3 ulps of "
    "each format's 8 / 11-bit mantissa over a summed loss"
)
# An autocast training step against the fp32 step (amp.AutocastOverFp32): every gradient and
# parameter within allclose at LOW_PRECISION_LOSS's band (2-3 ulps of the low format), its
# absolute part that share of the fp32 step's largest gradient (rounding at the model's gradient
# scale: a gradient that is zero up to rounding, as a bias's before a BatchNorm, has no
# direction), or else its cosine at least this. same()'s 0.99 is for two results of one
# precision; a bf16 step's gradients against fp32's reach cosine 0.876 where no band holds
# (ResNet-18's first convolution, full size; the AMP suite's AlexNet 0.982, the MLP 0.969) on a
# CPU (tests/measure_amp_answers.py, docs/answers.md#what-each-pair-compares): 0.8 leaves 1.6x
# margin in 1 - cosine there, 5x or more on the suite's models.
LOW_PRECISION_GRAD_COSINE = 0.8
LOW_PRECISION_GRAD_SOURCE = (
    "an autocast step against fp32: the loss within 2% (bf16) / 1% (fp16); each gradient and "
    "parameter within that band (absolute: of the largest fp32 gradient) or cosine >= 0.8 "
    "(measured: bf16 gradients reach 0.876 on a CPU)"
)


# A training step whose two sides run other kernels (another memory format, autotuned cuDNN
# algorithms). Their gradients' errors against float64 differ by far more than the float64
# rule's 2x: ResNet-18's full-size step on a CPU, channels_last ~1% on every layer against
# contiguous's ~0.1% (4-12x; up to 2500x where contiguous is exact to 4e-6), though one conv or
# BatchNorm in either format is 1e-7..1e-6 off. So they are compared by direction: every gradient
# and parameter's cosine at least LOW_PRECISION_COSINE (a 1% error reads 0.99995; a wrong kernel
# far less), or within allclose at float32's ANSWER row, and the loss within this relative
# difference (the dynamo benchmark runner's training tolerance on CUDA).
KERNEL_CHOICE_LOSS = 1e-3
KERNEL_CHOICE_SOURCE = (
    "a training step on other kernels (memory format, algorithm): each gradient and parameter's "
    f"cosine >= {LOW_PRECISION_COSINE} or allclose at float32's tol; the loss within 1e-3 (the "
    "dynamo benchmark runner's training tol)"
)


def answer(dtype_name: str) -> Tolerance:
    """The ANSWER row for a result of this dtype (its torch attribute name, "float32")."""
    return ANSWER.get(dtype_name, ANSWER[ANSWER_DEFAULT])
