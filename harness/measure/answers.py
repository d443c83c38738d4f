"""Do the two sides of a paired row compute the same thing? The one answer check.

A paired row times two ways of computing one result (compiled vs eager, autocast vs fp32,
channels_last vs contiguous, fused vs for-loop optimizers, ...). A faster side that computes
something else is not a speed-up, so before the timing (harness.measure.timing.measure_paired),
in the same process, on the same inputs and weights, each side is called once after the same
seed, and this module decides (rules and figures: harness.core.tolerances, docs/answers.md):

- `exact`: bit-identical results (a copy; `set_to_none` vs zero fill after the same steps);
  integer and bool results are always compared exactly;
- `tolerance`: allclose at the reference side's dtype's tolerance; only where that fails, both
  sides against a float64 run of the same computation (`Pair.fp64`, computed only then): the
  faster side's RMSE may be at most 2 (3 for low precision and small tensors) x the reference
  side's + tol/10, as `torch._dynamo.utils.same` does;
- `cosine`: low precision (autocast) against fp32: every result's cosine similarity, and the
  loss's relative difference.

The verdict (harness.core.answerfacts.Answer: same / WRONG / fail_to_run / n/a, the error over
the tolerance, the first differing output by name, both sides' float64 errors) goes into the run
record as the row facts of the row's answer row; for the first WRONG of a run the record also
keeps the inputs and the differing results (REPRODUCE_FILE, at most ANSWER_KEEP_BYTES), so the
difference can be reproduced without the harness.

How a pair is declared: library code tags the two timed callables (`declare`); a project's own
benchmark passes `answer=Pair(...)` to measure_paired (docs/answers.md#declaring-a-pair). A
paired row that declares nothing gets an n/a answer saying so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import time
from collections.abc import Callable, Mapping

import torch

from harness.core import answerfacts, records, settings, tolerances
from harness.core.answerfacts import (
    COSINE,
    EXACT,
    FAIL_TO_RUN,
    NOT_APPLICABLE,
    SAME,
    TOLERANCE,
    WRONG,
    Answer,
)
from harness.core.env import DEFAULT_SEED, seed_everything, synchronize
from harness.core.files import write_json_atomic

_TAG = "__harness_answers__"  # on a timed callable: {id(partner): (pair, role)} (`declare`)
REPRODUCE_DIR = "answers"
REPRODUCE_FILE = "first-wrong.pt"  # inside REPRODUCE_DIR of the record
_CLAIM = "first-wrong.json"  # taken with O_EXCL: one run's first WRONG only
_LOW = (torch.float16, torch.bfloat16)

# what every check of this process decided, by row (harness ab's row worker ships them back)
LAST: dict[str, Answer] = {}


class Results(dict):
    """Named results of one call, in order (`training_result`): flatten() keeps the names."""


@dataclasses.dataclass
class Pair:
    """How the two sides of one paired row are checked. The *new* side is the one the row's
    ratio puts on top (compiled in compiled/eager), the *reference* side the one below.

    `new_result` / `reference_result` map a side's call output to what is compared (default:
    the output itself; `training_result` for a step: loss, gradients, parameters after it).
    `fp64()` runs the reference computation in float64 from the same starting state and inputs
    and returns what is compared, as `reference_result` would give it (names alike); None with
    `no_fp64` saying why (too big; no fp64 kernel: a float64 run of another backend instead).
    `compiled`: the new side is torch.compile'd; one that compiled no graph is fail_to_run.
    `model` / `inputs`: an eval-mode model and its inputs, used to name a random op when the two
    sides disagree, and kept (inputs) in the reproduction file of a WRONG.
    `prepare()`: called once before the sides' calls of every check: brings the two sides to one
    starting state (a training pair copies the reference side's weights into the new side's,
    which the steps before may have moved apart) and keeps what `fp64()` starts from.
    `exact`: outputs (names, or name prefixes such as "param ") compared bit for bit whatever
    the rule (the logged loss of two training loops is a tolerance, their parameters are not).
    Under the cosine rule, `tolerance` is `same()`'s early exit: an output within allclose at it
    is the same whatever its cosine (a gradient that is zero up to rounding has no direction).
    `new_call`: what the check calls for the new side instead of the timed callable, a copy made
    for the check alone (a compiled training step compiled with inductor's fallback_random, so
    that dropout draws eager's random numbers, as PyTorch's accuracy runs do); the timed side
    then compiles at its warm-up call.
    """

    what: str
    rule: str = TOLERANCE
    new_result: Callable[[object], object] | None = None
    reference_result: Callable[[object], object] | None = None
    fp64: Callable[[], object] | None = None
    no_fp64: str = ""
    compiled: bool = False
    loss: str = "loss"  # the output the cosine rule also compares by relative difference
    min_cosine: float = tolerances.LOW_PRECISION_COSINE
    max_loss_rel: float | None = None  # default: tolerances.LOW_PRECISION_LOSS by dtype
    tolerance: tolerances.Tolerance | None = None  # a stated band instead of the dtype table
    model: torch.nn.Module | None = None
    inputs: object = None
    not_applicable: str = ""  # the pair cannot be compared: why (the answer is n/a)
    seed: int = DEFAULT_SEED
    prepare: Callable[[], None] | None = None
    exact: tuple[str, ...] = ()
    new_call: Callable[[], object] | None = None
    source: str = ""  # where the cosine rule's stated bounds come from (default: same()'s)

    def __post_init__(self):
        if self.rule not in answerfacts.RULES:
            raise ValueError(f"answer rule {self.rule!r}: use one of {answerfacts.RULES}")


def not_applicable(what: str, why: str) -> Pair:
    """A pair whose two sides cannot be compared, with the reason the answer row shows."""
    return Pair(what=what, not_applicable=why)


def exact(what: str, **options) -> Pair:
    """A pair whose two sides must be bit-identical (the same kernels in another context: a
    copy, inference_mode vs no_grad)."""
    return Pair(what=what, rule=EXACT, **options)


def allclose(
    what: str, fp64: Callable[[], object] | None = None, *, no_fp64: str = "", **options
) -> Pair:
    """A pair whose float results must agree within the reference side's dtype tolerance, and
    where they do not, the faster side must be about as near a float64 run as the reference
    side (`fp64`: a callable returning that run's results; `float64_forward` makes one for a
    module's forward; without one, say why in `no_fp64`)."""
    return Pair(what=what, rule=TOLERANCE, fp64=fp64, no_fp64=no_fp64, **options)


def float64(obj):
    """Floating tensors (also in tuples, lists and dicts) as float64; anything else as it is."""
    if isinstance(obj, torch.Tensor):
        return obj.to(torch.float64) if obj.is_floating_point() else obj
    if isinstance(obj, (tuple, list)):
        return type(obj)(float64(o) for o in obj)
    if isinstance(obj, Mapping):
        return {k: float64(v) for k, v in obj.items()}
    return obj


def float64_forward(model: torch.nn.Module, *inputs) -> Callable[[], object]:
    """An `fp64` for a module's forward: when called (only where allclose failed), a float64
    copy of `model` as it is then, on float64 copies of `inputs`, without autograd."""

    def run():
        import copy

        with torch.no_grad():
            return copy.deepcopy(model).to(torch.float64)(*float64(inputs))

    return run


UNDECLARED = (
    "no answer check declared for this pair: pass answer=answers.Pair(...) to measure_paired "
    "(docs/answers.md#declaring-a-pair)"
)


# ---- declaring ---------------------------------------------------------------------------


def declare(new: Callable, reference: Callable, pair: Pair) -> tuple[Callable, Callable]:
    """Tag the two timed callables of a paired row with their check; measure_paired finds it.
    One callable may be a side of several pairs (inference_mode against no_grad and against
    grad enabled). A callable that takes no attributes (a bound method) is wrapped in one that
    does."""
    new, reference = _taggable(new), _taggable(reference)
    getattr(new, _TAG)[id(reference)] = (pair, "new")
    getattr(reference, _TAG)[id(new)] = (pair, "reference")
    return new, reference


def _taggable(fn: Callable) -> Callable:
    if isinstance(getattr(fn, _TAG, None), dict):
        return fn
    try:
        setattr(fn, _TAG, {})
        return fn
    except AttributeError:

        def call():
            return fn()

        setattr(call, _TAG, {})
        return call


# pairs declared for a row whose timed callables no declaration reaches (`declare_for_row`)
_FOR_ROW: dict[str, tuple[Pair, Callable, Callable]] = {}


def declare_for_row(pair: Pair, new: Callable, reference: Callable, row: str | None = None) -> None:
    """Declare the check of the row running now (rowfacts.current_row(), e.g. from a builder its
    setup calls) where its timed callables are made beyond any declaration's reach (lambdas in
    the benchmark's own track_ method): measure_paired, finding them undeclared, checks by
    calling `new` and `reference` instead, at every call for that row (harness ab times a row in
    several blocks; a later setup of the row replaces them). Outside a row: nothing. They should
    hold what they call weakly, as the row's own attributes hold it (a DataLoader's workers end
    when the benchmark drops it)."""
    from harness.measure import rowfacts

    row = row or rowfacts.current_row()
    if row is not None:
        _FOR_ROW[row] = (pair, new, reference)


def declared(new: Callable, reference: Callable) -> Pair | None:
    """The pair the two callables were declared with (`declare`), in this order, else None."""
    a = getattr(new, _TAG, {}).get(id(reference))
    b = getattr(reference, _TAG, {}).get(id(new))
    if a and b and a[0] is b[0] and (a[1], b[1]) == ("new", "reference"):
        return a[0]
    return None


def training_result(model: torch.nn.Module, loss) -> Results:
    """What a training step is checked by: the loss, every parameter's gradient (by parameter
    name) and the parameters after the step. Call it right after the step."""
    out = Results(loss=loss)
    params = list(model.named_parameters())
    out.update((f"grad {n}", p.grad) for n, p in params if p.grad is not None)
    out.update((f"param {n}", p) for n, p in params)
    return out


# ---- running the two sides ------------------------------------------------------------------


def flatten(obj, name: str = "output") -> dict[str, object]:
    """Every leaf of a call's result by name: `output`, `output[0]`, `output['logits']`, or the
    names of a Results."""
    if isinstance(obj, Results):
        out: dict[str, object] = {}
        for k, v in obj.items():
            out.update(flatten(v, k))
        return out
    if isinstance(obj, torch.Tensor) or obj is None or isinstance(obj, (int, float, bool, str)):
        return {name: obj}
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{name}[{k!r}]"))
        return out
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        out = {}
        for k in obj._fields:
            out.update(flatten(getattr(obj, k), f"{name}.{k}"))
        return out
    if isinstance(obj, (list, tuple)):
        out = {}
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{name}[{i}]"))
        return out
    return {name: repr(obj)}


def _kept(results: dict[str, object]) -> dict[str, object]:
    """The results as they are now: later calls may update tensors in place."""
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in results.items()}


def _graphs() -> int:
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def _call(fn: Callable, extract, seed: int, device) -> dict[str, object]:
    seed_everything(seed)
    out = fn()
    synchronize(device)
    return _kept(flatten(extract(out) if extract else out))


@dataclasses.dataclass
class _Ran:
    new: dict
    reference: dict
    graphs: int  # graphs compiled during the new side's call
    graphs_before: int
    first_call_s: float = 0.0  # the new side's call (for a compiled pair: its compile)


def _run_sides(pair: Pair, new: Callable, reference: Callable, device) -> _Ran:
    before = _graphs() if pair.compiled else 0  # dynamo is imported only where it compiles
    t0 = time.perf_counter()
    a = _call(new, pair.new_result, pair.seed, device)
    first = time.perf_counter() - t0
    compiled = _graphs() - before if pair.compiled else 0
    b = _call(reference, pair.reference_result, pair.seed, device)
    return _Ran(a, b, compiled, before, first)


# ---- comparing ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Output:
    """What one output's comparison saw."""

    name: str
    value: float  # error over tolerance
    max_abs: float | None = None
    max_rel: float | None = None
    cosine: float | None = None
    loss_rel: float | None = None
    fp64_error: float | None = None
    fp64_error_reference: float | None = None
    why: str = ""  # where it is not a number's story (shape, dtype, a value)
    needs_fp64: bool = False
    tol: tolerances.Tolerance | None = None
    ill: float | None = None  # ill-conditioned: the reference side's RMSE over float64's RMS


def _as_tensor(x) -> torch.Tensor | None:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, bool):
        return torch.tensor(x)
    if isinstance(x, int):
        return torch.tensor(x, dtype=torch.int64)
    if isinstance(x, float):
        return torch.tensor(x, dtype=torch.float64)
    return None


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


# Comparisons run over slices of this many elements: their float64 temporaries stay ~0.2 GB
# whatever the tensor (the compiled cross-entropy's full-size logits' gradient is 131 M floats:
# whole-tensor float64 temporaries took a CPU run past 16 GB)
_CHUNK = 1 << 22


def _slices(*tensors: torch.Tensor):
    flat = [t.reshape(-1) for t in tensors]
    n = flat[0].numel()
    for i in range(0, n, _CHUNK):
        yield [f[i : i + _CHUNK] for f in flat]


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.is_floating_point() or a.is_complex():
        return all(bool(((x == y) | (x.isnan() & y.isnan())).all()) for x, y in _slices(a, b))
    return torch.equal(a, b)


def _differences(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """(max |a - b| over finite places, that over max |b|)."""
    worst = top = 0.0
    for x, y in _slices(a, b):
        d = (x.double() - y.double()).abs()
        d = d[torch.isfinite(d)]
        worst = max(worst, float(d.max()) if d.numel() else 0.0)
        scale = y.double().abs()
        scale = scale[torch.isfinite(scale)]
        top = max(top, float(scale.max()) if scale.numel() else 0.0)
    return worst, (worst / top if top > 0 else (0.0 if worst == 0 else math.inf))


def _allclose_ratio(a: torch.Tensor, b: torch.Tensor, tol: tolerances.Tolerance) -> float:
    """max |a - b| / (atol + rtol |b|): at most 1 where allclose holds. NaN in the same places
    and equal infinities agree; a NaN or infinity on one side only is inf."""
    worst = 0.0
    for x, y in _slices(a, b):
        a64, b64 = x.double(), y.double()
        both_nan = a64.isnan() & b64.isnan()
        equal = (a64 == b64) | both_nan
        bad = ~equal & (~torch.isfinite(a64) | ~torch.isfinite(b64))
        if bool(bad.any()):
            return math.inf
        ratio = (a64 - b64).abs() / (tol.atol + tol.rtol * b64.abs())
        ratio = ratio.masked_fill(equal, 0.0)
        worst = max(worst, float(ratio.max()) if ratio.numel() else 0.0)
    return worst


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    dot = xx = yy = 0.0
    for x, y in _slices(a, b):
        x, y = x.double(), y.double()
        dot, xx, yy = dot + float(x @ y), xx + float(x @ x), yy + float(y @ y)
    nx, ny = math.sqrt(xx), math.sqrt(yy)
    if nx == 0 and ny == 0:
        return 1.0
    if nx == 0 or ny == 0 or not (math.isfinite(nx) and math.isfinite(ny)):
        return -1.0 if not (math.isfinite(nx) and math.isfinite(ny)) else 0.0
    return max(-1.0, min(1.0, dot / (nx * ny)))


def _rms(x: torch.Tensor) -> float:
    if not x.numel():
        return 0.0
    return math.sqrt(sum(float((p.double() ** 2).sum()) for (p,) in _slices(x)) / x.numel())


def _rmse(x: torch.Tensor, y: torch.Tensor) -> float:
    if not x.numel():
        return 0.0
    total = sum(float(((p.double() - q.double()) ** 2).sum()) for p, q in _slices(x, y))
    return math.sqrt(total / x.numel())


def _compare_one(pair: Pair, name: str, a, b) -> _Output:
    ta, tb = _as_tensor(a), _as_tensor(b)
    if ta is None or tb is None:
        same = a == b
        return _Output(name, 0.0 if same else math.inf, why="" if same else f"{a!r} vs {b!r}")
    if ta.shape != tb.shape:
        return _Output(name, math.inf, why=f"shape {tuple(ta.shape)} vs {tuple(tb.shape)}")
    if ta.device != tb.device:
        ta = ta.to(tb.device)
    floats = tb.is_floating_point() or tb.is_complex()
    exact = pair.rule == EXACT or _exact_output(pair, name)
    if exact or not floats:
        if ta.dtype != tb.dtype and exact:
            return _Output(name, math.inf, why=f"dtype {_dtype_name(ta)} vs {_dtype_name(tb)}")
        same = _same_bits(ta.to(tb.dtype) if ta.dtype != tb.dtype else ta, tb)
        worst, rel = _differences(ta, tb) if floats else (0.0 if same else math.inf, 0.0)
        return _Output(name, 0.0 if same else math.inf, max_abs=worst, max_rel=rel)
    worst, rel = _differences(ta, tb)
    cos = _cosine(ta, tb)
    if pair.rule == COSINE:
        value = (1.0 - cos) / (1.0 - pair.min_cosine)
        if pair.tolerance is not None and ta.dtype == tb.dtype:  # same()'s early exit
            value = min(value, _allclose_ratio(ta, tb, pair.tolerance))
        out = _Output(name, value, worst, rel, cos)
        if name == pair.loss and tb.numel() == 1:
            limit = _loss_limit(pair, a)
            top = abs(float(tb.double()))
            out.loss_rel = worst / top if top > 0 else (0.0 if worst == 0 else math.inf)
            out.value = max(out.value, out.loss_rel / limit)
        return out
    if ta.dtype != tb.dtype:
        return _Output(
            name, math.inf, worst, rel, cos, why=f"dtype {_dtype_name(ta)} vs {_dtype_name(tb)}"
        )
    tol = pair.tolerance or tolerances.answer(_dtype_name(tb))
    ratio = _allclose_ratio(ta, tb, tol)
    return _Output(name, ratio, worst, rel, cos, needs_fp64=ratio > 1, tol=tol)


def _exact_output(pair: Pair, name: str) -> bool:
    return any(name == e or (e.endswith(" ") and name.startswith(e)) for e in pair.exact)


def _loss_limit(pair: Pair, new_value) -> float:
    if pair.max_loss_rel is not None:
        return pair.max_loss_rel
    dtype = _dtype_name(new_value) if isinstance(new_value, torch.Tensor) else ""
    return tolerances.LOW_PRECISION_LOSS.get(dtype, min(tolerances.LOW_PRECISION_LOSS.values()))


def _fp64_rule(out: _Output, a: torch.Tensor, b: torch.Tensor, ref64: torch.Tensor) -> None:
    """`same()`'s rule where allclose failed: the new side's RMSE against float64 at most
    MULTIPLIER x the reference side's + tol / 10."""
    ref64 = ref64.to(b.device)
    out.fp64_error, out.fp64_error_reference = _rmse(ref64, a), _rmse(ref64, b)
    loose = a.dtype in _LOW or ref64.numel() < tolerances.SMALL_TENSOR
    m = tolerances.FP64_MULTIPLIER_LOOSE if loose else tolerances.FP64_MULTIPLIER
    limit = m * out.fp64_error_reference + out.tol.rtol / 10.0
    if math.isnan(out.fp64_error_reference) and math.isnan(out.fp64_error):
        out.value = 0.0 if bool((a.isnan() == b.isnan()).all()) else math.inf
    else:
        out.value = out.fp64_error / limit if limit > 0 else math.inf
        if math.isnan(out.value):
            out.value = math.inf
    out.needs_fp64 = False
    # the reference side itself far off float64: its dtype cannot compute this output to within
    # the tolerance, which then cannot tell a right answer from a wrong one (not judged)
    scale = _rms(ref64)
    ceiling = out.tol.atol + tolerances.ILL_CONDITIONED * out.tol.rtol * scale
    if out.fp64_error_reference > ceiling:
        out.ill = out.fp64_error_reference / scale if scale > 0 else math.inf


def compare(pair: Pair, new: dict, reference: dict, fp64: dict | None = None) -> Answer:
    """The verdict on two sides' flattened results (`flatten`): `fp64` is the float64 run's,
    computed by the caller only where `needs_fp64(...)` says so (or passed to force it)."""
    outs, why = _outputs(pair, new, reference)
    if why:
        return _answer(pair, WRONG, why, [], value=math.inf)
    pending = [o for o in outs if o.needs_fp64]
    if pending and fp64 is not None:
        for o in pending:
            if o.name in fp64 and isinstance(fp64[o.name], torch.Tensor):
                _fp64_rule(o, new[o.name], reference[o.name], fp64[o.name])
    return _decide(pair, outs, fp64 is not None)


def _outputs(pair: Pair, new: dict, reference: dict) -> tuple[list[_Output], str]:
    if list(new) != list(reference):
        only_new = [k for k in new if k not in reference]
        only_ref = [k for k in reference if k not in new]
        if only_new or only_ref:
            return [], (
                f"the sides return other outputs: {_few(only_new) or 'none'} only on the new "
                f"side, {_few(only_ref) or 'none'} only on the reference side"
            )
    return [_compare_one(pair, k, new[k], reference[k]) for k in reference], ""


def _few(names: list[str], n: int = 3) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def _decide(pair: Pair, outs: list[_Output], had_fp64: bool) -> Answer:
    if not outs:
        return _answer(pair, NOT_APPLICABLE, "the sides returned nothing to compare", [])
    wrong = [o for o in outs if o.value > 1.0]
    worst = max(outs, key=lambda o: o.value)
    ill = [o for o in wrong if o.ill is not None]
    if wrong and len(ill) == len(wrong):  # float64 shows the reference dtype cannot do these
        first = max(ill, key=lambda o: o.ill)
        note = _answer(pair, NOT_APPLICABLE, _ill_note(first, len(ill)), outs, first)
        return dataclasses.replace(note, value=None)
    wrong = [o for o in wrong if o.ill is None]  # a well-conditioned one that differs: WRONG
    if not wrong:
        used = any(o.fp64_error is not None for o in outs)
        how = {
            EXACT: "bit-identical",
            COSINE: "cosine and loss within bounds",
            TOLERANCE: "within tolerance" + (" (the float64 rule where allclose failed)" * used),
        }[pair.rule]
        return _answer(pair, SAME, f"{len(outs)} output(s) {how}", outs, worst)
    first = wrong[0]
    if first.why:
        reason = f"{first.name}: {first.why}"
    elif first.needs_fp64:
        reason = (
            f"{first.name}: allclose fails (max |diff| {first.max_abs:.3g}, "
            f"{first.value:.3g} x tolerance) and there is no float64 run to judge it: "
            f"{pair.no_fp64 or 'the pair declares none'}"
        )
    elif first.fp64_error is not None:
        reason = (
            f"{first.name}: RMSE against float64 {first.fp64_error:.3g}, the reference side's "
            f"{first.fp64_error_reference:.3g} (max |diff| {first.max_abs:.3g})"
        )
    elif pair.rule == COSINE:
        loss = f", loss off by {first.loss_rel:.3g}" if first.loss_rel is not None else ""
        reason = f"{first.name}: cosine {first.cosine:.6f}{loss}"
    elif pair.rule == EXACT or first.value == math.inf:
        reason = f"{first.name}: not bit-identical (max |diff| {first.max_abs:.3g})"
    else:
        reason = f"{first.name}: max |diff| {first.max_abs:.3g}"
    more = f"; {len(wrong) - 1} more output(s) differ" if len(wrong) > 1 else ""
    return _answer(pair, WRONG, reason + more, outs, first)


def _ill_note(first: _Output, differing: int) -> str:
    return (
        f"not comparable here: ill-conditioned in {_dtype_name_of(first)} (the reference side "
        f"itself is {first.ill:.2g} of the RMS off float64 on {first.name}, past "
        f"{tolerances.ILL_CONDITIONED:g} x rtol), so its tolerance cannot tell a right answer "
        f"from a wrong one; the {differing} output(s) past the tolerance are all such"
    )


def _dtype_name_of(out: _Output) -> str:
    return next((k for k, v in tolerances.ANSWER.items() if v == out.tol), "its dtype")


def _answer(
    pair: Pair,
    status: str,
    reason: str,
    outs,
    shown: _Output | None = None,
    value: float | None = None,
) -> Answer:
    tol = shown.tol if shown and shown.tol else None
    if pair.rule == TOLERANCE and tol is None:
        tol = pair.tolerance or next((o.tol for o in outs if o.tol), None)
    source = ""
    if pair.rule == TOLERANCE and tol:
        source = tol.source
    elif pair.rule == COSINE:
        source = pair.source or tolerances.LOW_PRECISION_SOURCE
    elif pair.rule == EXACT:
        source = "the two sides must be bit-identical"
    return Answer(
        status=status,
        what=pair.what,
        rule=pair.rule,
        reason=reason,
        value=shown.value if shown else value,
        output=shown.name if shown else None,
        outputs=len(outs),
        max_abs=shown.max_abs if shown else None,
        max_rel=shown.max_rel if shown else None,
        cosine=shown.cosine if shown else None,
        loss_rel=shown.loss_rel if shown else None,
        fp64_error=shown.fp64_error if shown else None,
        fp64_error_reference=shown.fp64_error_reference if shown else None,
        rtol=tol.rtol if tol and pair.rule == TOLERANCE else None,
        atol=tol.atol if tol and pair.rule == TOLERANCE else None,
        min_cosine=pair.min_cosine if pair.rule == COSINE else None,
        max_loss_rel=pair.max_loss_rel if pair.rule == COSINE else None,
        tolerance_source=source,
    )


# ---- the check ---------------------------------------------------------------------------


class CheckFailed(RuntimeError):
    """A side raised during the answer check (the row's answer is fail_to_run)."""


def check(
    pair: Pair | None,
    new: Callable,
    reference: Callable,
    device: torch.device | str = "cpu",
    *,
    row: str | None = None,
) -> tuple[Answer, BaseException | None]:
    """Call each side once after the same seed and decide; returns the answer and, where a side
    raised, the exception (the caller fails the row with it after recording the answer). The
    answer says what the check cost (`seconds`; for a compiled pair `first_call_seconds`, the
    compile that the first warm-up call would pay without it)."""
    t0 = time.perf_counter()
    answer, error, first = _check(pair, new, reference, device, row)
    if pair is None or pair.not_applicable:
        return answer, error
    seconds = time.perf_counter() - t0
    first = first if pair.compiled else None
    return dataclasses.replace(answer, seconds=seconds, first_call_seconds=first), error


def _check(pair, new, reference, device, row) -> tuple[Answer, BaseException | None, float | None]:
    """check()'s work; also the new side's first call in seconds (None where it did not run)."""
    if pair is None:
        return Answer(NOT_APPLICABLE, "", reason=UNDECLARED), None, None
    if pair.not_applicable:
        return Answer(NOT_APPLICABLE, pair.what, pair.rule, pair.not_applicable), None, None
    try:
        if pair.prepare is not None:
            pair.prepare()
        ran = _run_sides(pair, pair.new_call or new, reference, device)
    except Exception as exc:  # a side that cannot run: the answer says so, the row fails
        reason = f"{type(exc).__name__}: {_first_line(exc)}"[:500]
        return Answer(FAIL_TO_RUN, pair.what, pair.rule, reason), exc, None
    if pair.compiled and ran.graphs == 0 and ran.graphs_before == 0:
        return (
            Answer(
                FAIL_TO_RUN,
                pair.what,
                pair.rule,
                "the compiled side compiled no graph: dynamo ran all of it eagerly (graph "
                "breaks or skipped frames), so there is no compiled answer to check",
            ),
            None,
            ran.first_call_s,
        )
    new_results = _with_test_noise(pair, ran.new, ran.reference, row)
    answer = compare(pair, new_results, ran.reference)
    if answer.status == WRONG and _any_pending(pair, new_results, ran.reference):
        if pair.fp64 is not None:
            answer = compare(pair, new_results, ran.reference, _fp64_results(pair, device))
    if answer.status == WRONG and pair.model is not None and pair.inputs is not None:
        cause = _random_cause(pair)
        if cause:
            answer = dataclasses.replace(answer, status=NOT_APPLICABLE, reason=cause)
    if answer.status == WRONG and row is not None:
        kept = keep_first_wrong(row, pair, answer, new_results, ran.reference)
        if kept:
            answer = dataclasses.replace(answer, reproduce=kept)
    return answer, None, ran.first_call_s


def _first_line(exc: BaseException) -> str:
    """The error's first line, and the next one where it only announces it (dynamo's
    BackendCompilerFailed: "backend='inductor' raised:", then the compiler's error)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"
    return lines[0] if lines else ""


def _any_pending(pair: Pair, new: dict, reference: dict) -> bool:
    outs, why = _outputs(pair, new, reference)
    return not why and any(o.needs_fp64 for o in outs)


def _fp64_results(pair: Pair, device) -> dict:
    seed_everything(pair.seed)  # the sides' seed: dropout draws the same masks in float64
    out = pair.fp64()
    synchronize(device)
    return _kept(flatten(out))


def _random_cause(pair: Pair) -> str:
    from harness.core import determinism

    model = pair.model
    if model.training:
        return ""
    inputs = pair.inputs if isinstance(pair.inputs, tuple) else (pair.inputs,)
    ops = determinism.random_ops(model, inputs)
    if not ops:
        return ""
    named = "; ".join(dict.fromkeys(map(str, ops)))
    return (
        f"not comparable: the model draws random numbers in eval mode ({named}), so its two "
        "sides differ by the draw; `harness check` names the fix"
    )


def before_timing(
    fn: Callable,
    base: Callable,
    device: torch.device | str = "cpu",
    pair: Pair | None = None,
    row: str | None = None,
) -> Answer | None:
    """measure_paired's hook, before any timed call: check the pair (declared on the callables
    or passed), record the answer, and raise what a side raised. None for a row over the
    reference workload (not a pair)."""
    from harness.measure import rowfacts

    if getattr(base, "is_reference", False):
        if _ONLY:  # no pair, and nothing to time either
            raise _Checked(None)
        return None
    row = row or rowfacts.current_row()
    pair = pair or declared(fn, base)
    if pair is None and row in _FOR_ROW:
        pair, fn, base = _FOR_ROW[row]
    answer, error = check(pair, fn, base, device, row=row)
    record(answer, row)
    if _ONLY:
        raise _Checked(answer) from error
    if error is not None:
        raise error
    return answer


# ---- the check alone, without the timing (`harness answers --rerun ROW`) ---------------------


class _Checked(BaseException):
    """Raised by before_timing inside only_the_check(), right after the check was recorded, so
    that nothing is timed. A BaseException: a benchmark's own `except Exception` must not
    swallow it and go on to time the row."""

    def __init__(self, answer: Answer | None):
        super().__init__("the answer check ran; the timing is skipped (answers.only_the_check)")
        self.answer = answer


@dataclasses.dataclass
class Caught:
    """What only_the_check() saw: whether measure_paired's check ran, its answer (None for a
    row over the reference workload: no pair) and what a side raised (fail_to_run)."""

    reached: bool = False
    answer: Answer | None = None
    error: BaseException | None = None


_ONLY: list[Caught] = []


@contextlib.contextmanager
def only_the_check():
    """Inside this block, measure_paired stops right after its answer check: the check runs and
    is recorded as in a run (LAST, the run record's facts where HARNESS_RUN_RECORD is set, the
    first WRONG's reproduction file), then the call that reached it ends, without warm-up or
    timing, and the block ends quietly. The block's value (Caught) says whether a check ran and
    what it decided. Outside such a block nothing changes."""
    caught = Caught()
    _ONLY.append(caught)
    try:
        yield caught
    except _Checked as stop:
        caught.reached, caught.answer = True, stop.answer
        caught.error = stop.__cause__
    finally:
        _ONLY.remove(caught)


def record(answer: Answer, row: str | None = None) -> None:
    """The answer into the run record as its answer row's facts (inside `harness bench`), and
    into LAST for this process's other readers."""
    from harness.measure import rowfacts

    row = row or rowfacts.current_row()
    if row is None:
        return
    LAST[row] = answer
    folder = settings.RUN_RECORD.get()
    if folder is not None and not rowfacts.is_suppressed():
        records.write_row_facts(
            folder, answerfacts.answer_row(row), {answerfacts.FACTS_KEY: answer.to_facts()}
        )


# ---- the first WRONG, kept for reproducing it ------------------------------------------------


def keep_first_wrong(row: str, pair: Pair, answer: Answer, new: dict, reference: dict) -> str:
    """Inside `harness bench`, the first WRONG of the run keeps its inputs and the differing
    results (torch.save; load with `torch.load(path, weights_only=True)`), largest tensors left
    out past ANSWER_KEEP_BYTES. Returns the file's path in the record, or "" where none."""
    folder = settings.RUN_RECORD.get()
    if folder is None:
        return ""
    where = os.path.join(folder, REPRODUCE_DIR)
    os.makedirs(where, exist_ok=True)
    try:
        fd = os.open(os.path.join(where, _CLAIM), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return ""  # an earlier WRONG of this run has it
    os.close(fd)
    write_json_atomic(os.path.join(where, _CLAIM), {"row": row, "answer": answer.to_facts()})
    differing = [k for k in reference if _differs(pair, new.get(k), reference[k])]
    budget = settings.ANSWER_KEEP_BYTES.get()
    kept: dict[str, dict] = {"inputs": {}, "new": {}, "reference": {}}
    left_out: list[str] = []
    items = [("inputs", k, v) for k, v in flatten(pair.inputs, "input").items()]
    items += [
        (side, k, res[k])
        for k in differing
        for side, res in (("new", new), ("reference", reference))
    ]
    for part, name, value in items:
        size = value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 0
        if size > budget:
            left_out.append(f"{part} {name} ({size:,} bytes)")
            continue
        budget -= size
        kept[part][name] = value.detach().cpu() if isinstance(value, torch.Tensor) else value
    payload = {
        "row": row,
        "what": pair.what,
        "rule": pair.rule,
        "answer": answer.to_facts(),
        **kept,
        "left_out": left_out,
    }
    path = os.path.join(where, REPRODUCE_FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return f"{REPRODUCE_DIR}/{REPRODUCE_FILE}"


def _differs(pair: Pair, a, b) -> bool:
    out = _compare_one(pair, "", a, b)
    return out.value > 1.0 or out.needs_fp64


# ---- the test-only switch: noise sized against each rule's tolerance -------------------------


def noise_for(row: str | None, spec: str | None = None) -> float:
    """The noise factor the test switch names this row with (0: not named)."""
    spec = settings.TEST_ANSWER_NOISE.get() if spec is None else spec
    if not spec or not row:
        return 0.0
    for part in spec.split(";"):
        pattern, _, value = part.rpartition("=")
        if pattern and re.search(pattern, row):
            return float(value)
    return 0.0


def _with_test_noise(pair: Pair, new: dict, reference: dict, row: str | None) -> dict:
    """With HARNESS_TEST_ANSWER_NOISE naming the row at factor F, the new side's float results
    get seeded per-element noise of F times each rule's tolerance (harness.core.tolerances):
    |noise| in [F/2, F] x (atol + rtol |reference|) per element for `tolerance`; white noise
    bringing the cosine to about 1 - F (1 - min_cosine), and the loss F/2..F x its bound, for
    `cosine`. So F = 2 must be caught and F = 0.1 must not (docs/answers.md#the-proof)."""
    factor = noise_for(row)
    if factor <= 0:
        return new
    gen = torch.Generator().manual_seed(settings.TEST_ANSWER_SEED.get())
    out = {}
    for name, value in new.items():
        ref = reference.get(name)
        if not (isinstance(value, torch.Tensor) and value.is_floating_point()) or not (
            isinstance(ref, torch.Tensor) and ref.shape == value.shape
        ):
            out[name] = value
            continue
        out[name] = value + _noise(pair, name, value, ref, factor, gen).to(value.dtype)
    return out


def _noise(pair: Pair, name, value, ref, factor: float, gen) -> torch.Tensor:
    shape = value.shape
    sign = torch.randint(0, 2, shape, generator=gen).double() * 2 - 1
    size = (0.5 + 0.5 * torch.rand(shape, generator=gen, dtype=torch.float64)) * factor
    r = ref.detach().double().cpu()
    if pair.rule == COSINE:
        if name == pair.loss and value.numel() == 1:
            return (sign * size * _loss_limit(pair, value) * r.abs()).to(value.device)
        rms = float(r.pow(2).mean().sqrt()) if r.numel() else 0.0
        sigma = rms * math.sqrt(2.0 * factor * (1.0 - pair.min_cosine))
        noise = torch.randn(shape, generator=gen, dtype=torch.float64) * sigma
        if pair.tolerance is not None:  # past the early exit's band too: F x allclose's
            band = sign * size * (pair.tolerance.atol + pair.tolerance.rtol * r.abs())
            noise = torch.where(noise.abs() > band.abs(), noise, band)
        return noise.to(value.device)
    tol = pair.tolerance or tolerances.answer(_dtype_name(ref))
    return (sign * size * (tol.atol + tol.rtol * r.abs())).to(value.device)
