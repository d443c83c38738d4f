"""Silent-bug checks on a model: the bugs that raise nothing and cost weeks (`harness check`).

Each check returns Findings: a status (pass, FAIL, n/a, or info for a setting recorded), the
reason in a sentence, and the fix when it failed. They run on the zoo's small configuration and
seeded inputs, so one model's checks take well under a second on two cores.

1. eval determinism: two eval forwards agree (harness.core.determinism, the detector the golden
   tests use; on failure it names the random op and its module);
2. train/eval differ where the model has dropout or batch norm, and batch norm in eval uses its
   running statistics (a sample's output does not depend on the rest of its batch);
3. no autograd graph in inference: an eval forward under no_grad / inference_mode holds no
   grad_fn (a forward that calls torch.enable_grad() is named by module);
4. reproducibility: seeded, with deterministic algorithms on, two training steps give bitwise
   identical parameters; an op without a deterministic implementation is named.
"""

from __future__ import annotations

import copy
import math
import re

import torch
import torch.utils._pytree as pytree
from torch import nn

from harness.core import determinism
from harness.core.env import seed_everything
from harness.core.findings import FAIL, INFO, NA, PASS, Finding  # noqa: F401 (the checks' vocabulary)


def _leaves(output) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(output) if isinstance(t, torch.Tensor)]


def same_outputs(a, b, exact: bool = False) -> bool:
    la, lb = _leaves(a), _leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if x.shape != y.shape:
            return False
        if exact or not x.is_floating_point():
            if not torch.equal(x, y):
                return False
        elif not torch.allclose(x, y, rtol=determinism.RTOL, atol=determinism.ATOL, equal_nan=True):
            return False
    return True


# ---- 1. eval determinism ---------------------------------------------------------------------


def eval_determinism(model: nn.Module, inputs: tuple) -> Finding:
    name = "eval determinism"
    worst = determinism.eval_difference(model.eval(), inputs)
    if not worst:
        return Finding(name, PASS, "two eval-mode forwards on the same input agree")
    cause = determinism.random_cause(model, inputs)
    return Finding(
        name,
        FAIL,
        f"two eval-mode forwards on the same input differ (max abs difference "
        f"{worst:.3g}). {cause}",
        "pass training=self.training to functional dropout (or use nn.Dropout), "
        "so that model.eval() turns it off",
        {"max_abs_difference": worst if math.isfinite(worst) else "inf"},
    )


# ---- 2. train/eval differ; batch norm on running statistics -------------------------------

_DROPOUT = (nn.modules.dropout._DropoutNd,)
_BATCHNORM = (nn.modules.batchnorm._BatchNorm,)


def _mode_modules(model: nn.Module) -> tuple[list[str], list[str]]:
    """(dropout-like modules with p > 0, batch norm modules), by name."""
    dropout, batchnorm = [], []
    for name, m in model.named_modules():
        if isinstance(m, _DROPOUT) and m.p > 0:
            dropout.append(name)
        elif isinstance(m, nn.RNNBase) and m.dropout > 0 and m.num_layers > 1:
            dropout.append(name)
        elif isinstance(m, _BATCHNORM):
            batchnorm.append(name)
    return dropout, batchnorm


def train_eval_differ(model: nn.Module, inputs: tuple, seed: int = 0) -> Finding:
    name = "train/eval differ"
    dropout, batchnorm = _mode_modules(model)
    if not dropout and not batchnorm:
        return Finding(
            name,
            NA,
            "the model has no dropout or batch norm module: train and eval "
            "mode may rightly compute the same thing",
        )
    has = ", ".join(
        filter(
            None,
            [
                f"dropout in {dropout[:3]}" if dropout else "",
                f"batch norm in {batchnorm[:3]}" if batchnorm else "",
            ],
        )
    )
    trained = copy.deepcopy(model).train()  # a copy: train mode updates running statistics
    with torch.no_grad():
        seed_everything(seed)
        out_train = trained(*inputs)
        out_eval = model.eval()(*inputs)
    if same_outputs(out_train, out_eval):
        return Finding(
            name,
            FAIL,
            f"the model has {has}, yet its train-mode and eval-mode outputs "
            "are the same: its forward ignores self.training (e.g. "
            "F.dropout(x, p, training=False) or F.batch_norm(..., training=False) "
            "hard-coded, or a submodule kept in eval mode)",
            "pass training=self.training to functional dropout/batch norm, and do not "
            "override train()/eval() on submodules",
        )
    return Finding(name, PASS, f"train and eval outputs differ ({has})")


def _batch_dim_inputs(inputs: tuple, batch: int, rows: slice) -> tuple | None:
    """The inputs cut to `rows` of dim 0 where a tensor's dim 0 is the batch; None if none is."""
    found = False

    def cut(t):
        nonlocal found
        if isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape[0] == batch:
            found = True
            return t[rows]
        return t

    cut_inputs = pytree.tree_map(cut, inputs)
    return cut_inputs if found else None


def batchnorm_running_stats(model: nn.Module, inputs: tuple, batch: int) -> Finding:
    name = "batch norm in eval"
    _, batchnorm = _mode_modules(model)
    if not batchnorm:
        return Finding(name, NA, "the model has no batch norm module")
    model = model.eval()
    on_batch_stats = determinism.ops_called(
        model,
        inputs,
        lambda func, scalars: (
            "batch_norm" in str(func)
            and "no_training" not in str(func)
            and bool(scalars)
            and scalars[0] is True
        ),
    )
    if on_batch_stats:  # seen in the graph: enough, and a lone sample might not even run
        return _bn_fail(name, on_batch_stats, "")
    # Not seen as an op (a norm of the model's own making?): test what it means directly.
    alone = _batch_dim_inputs(inputs, batch, slice(0, 1))
    if batch < 2 or alone is None:
        return Finding(
            name,
            NA,
            f"no input has the batch ({batch}) as dim 0 to cut one sample from; "
            "no batch norm op ran on batch statistics",
        )
    with torch.no_grad():
        in_batch = pytree.tree_map(
            lambda t: (
                t[:1] if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == batch else t
            ),
            model(*inputs),
        )
        try:
            single = model(*alone)
        except Exception as exc:
            return Finding(
                name,
                NA,
                f"the model does not run on one sample ({type(exc).__name__}: {exc}); "
                "no batch norm op ran on batch statistics",
            )
    if same_outputs(in_batch, single):
        return Finding(
            name,
            PASS,
            f"a sample's eval output is the same alone and in a batch of {batch}: "
            f"batch norm uses its running statistics ({len(batchnorm)} modules)",
        )
    return _bn_fail(
        name, [], f"a sample's eval output changes with the other samples in its batch of {batch}. "
    )


def _bn_fail(name, ops, prefix) -> Finding:
    where = (
        "; ".join(dict.fromkeys(map(str, ops))) or "no batch norm op with training=True was seen"
    )
    return Finding(
        name,
        FAIL,
        f"{prefix}Batch norm normalises with the batch's own statistics in eval mode: {where}",
        "keep track_running_stats=True and call model.eval() (it must reach every "
        "BatchNorm); pass training=self.training to F.batch_norm",
        {"ops": [str(o) for o in ops]},
    )


# ---- 3. no autograd graph in inference ------------------------------------------------------


def _grad_modules(model: nn.Module, inputs: tuple, context) -> list[str]:
    """Modules whose output holds a grad_fn under `context` (innermost first)."""
    found: list[str] = []

    def hook(name):
        def record(module, args, output):
            if any(t.grad_fn is not None for t in _leaves(output)):
                found.append(name or "the top-level forward")

        return record

    hooks = [m.register_forward_hook(hook(n)) for n, m in model.named_modules()]
    try:
        with context():
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return found


def no_autograd_in_inference(model: nn.Module, inputs: tuple) -> Finding:
    name = "no autograd in inference"
    model = model.eval()
    held = {}
    for label, context in (
        ("torch.no_grad()", torch.no_grad),
        ("torch.inference_mode()", torch.inference_mode),
    ):
        with context():
            out = model(*inputs)
        if any(t.grad_fn is not None or t.requires_grad for t in _leaves(out)):
            held[label] = _grad_modules(model, inputs, context)
    if not held:
        return Finding(
            name,
            PASS,
            "an eval forward under torch.no_grad() and torch.inference_mode() holds no grad_fn",
        )
    label, modules = next(iter(held.items()))
    where = f"first in module {modules[0]!r}" if modules else "in the model's output"
    return Finding(
        name,
        FAIL,
        f"an eval forward under {label} builds an autograd graph ({where}): the "
        "forward forces grad (torch.enable_grad() or torch.set_grad_enabled(True) "
        "inside forward), so inference keeps every activation alive",
        "remove enable_grad/set_grad_enabled(True) from forward, or guard it with "
        "`if self.training`",
        {"under": list(held), "modules": modules},
    )


# ---- 4. reproducibility ---------------------------------------------------------------------

_NO_DETERMINISTIC = re.compile(r"^(\S+) does not have a deterministic implementation")


def _train_step(
    model: nn.Module, inputs: tuple, targets, loss_fn, seed: int
) -> dict[str, torch.Tensor]:
    """One SGD step from a copy of `model`'s state, seeded: the parameters after it."""
    model = copy.deepcopy(model).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seed_everything(seed)
    loss_fn(model(*inputs), targets).backward()
    opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def reproducibility(model: nn.Module, inputs: tuple, targets, loss_fn, seed: int = 0) -> Finding:
    """Two seeded training steps from the same weights, deterministic algorithms on. (Seeded
    weight initialisation is the zoo's job: ModelSpec.build seeds before building.)"""
    name = "reproducibility"
    was = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        first = _train_step(model, inputs, targets, loss_fn, seed)
        second = _train_step(model, inputs, targets, loss_fn, seed)
    except RuntimeError as exc:
        m = _NO_DETERMINISTIC.search(str(exc))
        if not m:
            raise
        return Finding(
            name,
            FAIL,
            f"op {m.group(1)} has no deterministic implementation: with "
            "torch.use_deterministic_algorithms(True) the training step raises",
            f"replace {m.group(1)} (e.g. put_ -> index_put_ / scatter with a deterministic "
            "path), or accept run-to-run differences and say so",
            {"op": m.group(1)},
        )
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)
    differ = [k for k in first if not torch.equal(first[k], second[k])]
    if differ:
        return Finding(
            name,
            FAIL,
            f"two seeded training steps with deterministic algorithms give "
            f"different parameters ({len(differ)} tensors, first {differ[0]!r}): "
            "randomness outside torch's seeded generators (an unseeded "
            "torch.Generator, time or os entropy, state kept between calls)",
            "draw randomness from torch's global generator or one seeded from "
            "torch.initial_seed(); keep no state across steps outside the module",
            {"tensors": differ},
        )
    return Finding(
        name,
        PASS,
        f"two seeded training steps (SGD, deterministic algorithms on) give "
        f"bitwise-identical parameters ({len(first)} tensors)",
    )


# ---- all of them ----------------------------------------------------------------------------


def check_model(spec, size: str = "small", seed: int = 0) -> list[Finding]:
    """Every model check on one registered model (a harness.core.zoo.ModelSpec)."""
    model = spec.build(size, seed)
    inputs = spec.inputs(size, seed)
    batch = spec.config(size)["batch"]
    return [
        eval_determinism(model, inputs),
        train_eval_differ(model, inputs, seed),
        batchnorm_running_stats(model, inputs, batch),
        no_autograd_in_inference(model, inputs),
        reproducibility(model, inputs, spec.targets(size, seed), spec.loss, seed),
    ]
