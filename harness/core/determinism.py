"""Is a model's eager output a function of its input? Run it twice and see.

A model whose eval-mode output is random (classically `F.dropout(x, 0.5)` without
`training=self.training`) can never match a captured program, and a golden recorded from it
would pin one random draw. The graph suite runs this first: it names the random op and refuses
to accept goldens for such a model. `harness check` (harness.measure.checks) reuses it, and
`ops_called` to find batch norm running on batch statistics in eval mode.

torch is imported lazily: harness.core stays cheap to import for the pytest plugin.
"""

from __future__ import annotations

import dataclasses

from harness.core import tolerances

# Tight: two runs of the same program on the same input agree bit for bit on CPU; a GPU's
# atomics may move the last bits. A random op moves values by O(1). (harness.core.tolerances)
RTOL, ATOL = tolerances.REPEAT.rtol, tolerances.REPEAT.atol


@dataclasses.dataclass
class RandomOp:
    op: str  # e.g. aten.native_dropout.default
    module: str  # the module whose forward called it ("" for the top level)
    args: str  # the scalar arguments, e.g. "p=0.5, train=True"

    def __str__(self) -> str:
        where = f" in module {self.module!r}" if self.module else " in the top-level forward"
        return f"{self.op}({self.args}){where}" if self.args else f"{self.op}{where}"


def ops_called(model, inputs, wanted) -> list[RandomOp]:
    """The ATen ops one eager forward (under no_grad) runs for which `wanted(func, scalars)` is
    true, each with the module whose forward called it. `scalars` are the op's bool/int/float
    arguments in order, so a caller can ask e.g. for batch norm with training=True."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    stack: list[str] = []
    found: list[RandomOp] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            plain = [a for a in args if isinstance(a, (bool, int, float))]
            if wanted(func, plain):
                scalars = [repr(a) for a in plain]
                scalars += [
                    f"{k}={v!r}"
                    for k, v in (kwargs or {}).items()
                    if isinstance(v, (bool, int, float))
                ]
                found.append(RandomOp(str(func), stack[-1] if stack else "", ", ".join(scalars)))
            return func(*args, **(kwargs or {}))

    def enter(name):
        def hook(module, args):
            stack.append(name)

        return hook

    def leave(module, args, output):  # returns None: the output is left alone
        stack.pop()

    hooks = []
    for name, module in model.named_modules():
        hooks.append(module.register_forward_pre_hook(enter(name)))
        hooks.append(module.register_forward_hook(leave))
    try:
        with torch.no_grad(), Record():
            model(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return found


def random_ops(model, inputs) -> list[RandomOp]:
    """The random (seeded, nondeterministic) ATen ops one eager forward runs, with their module."""
    import torch

    return ops_called(
        model,
        inputs,
        lambda func, scalars: torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()),
    )


def eval_difference(model, inputs) -> float:
    """The largest difference between two eager forward passes on the same inputs: 0.0 when
    they agree within RTOL/ATOL, inf when a non-float output differs."""
    import torch
    import torch.utils._pytree as pytree

    with torch.no_grad():
        first = pytree.tree_leaves(model(*inputs))
        second = pytree.tree_leaves(model(*inputs))
    worst = 0.0
    for a, b in zip(first, second):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            if not torch.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
                worst = max(worst, (a.double() - b.double()).abs().nan_to_num(0.0).max().item())
        elif isinstance(a, torch.Tensor) and not torch.equal(a, b):
            worst = max(worst, float("inf"))
    return worst


def random_cause(model, inputs) -> str:
    """Why two eval passes differ, from the random ops the forward runs, and what to do."""
    ops = random_ops(model, inputs)
    if ops:
        return (
            "Likely cause: " + "; ".join(dict.fromkeys(map(str, ops))) + ". A random op runs "
            "in eval mode: dropout or bernoulli with training=True, e.g. `F.dropout(x, p)` without "
            "`training=self.training` (use nn.Dropout, or pass training=self.training)."
        )
    return (
        "No random ATen op was seen: look for Python-side randomness (random, numpy) "
        "or state the forward mutates."
    )


def nondeterminism(model, inputs, label: str = "model") -> str | None:
    """None if two eager forward passes on the same inputs agree; else a message naming the
    likely op and what to do."""
    worst = eval_difference(model, inputs)
    if not worst:
        return None
    return (
        f"{label} is non-deterministic in eval mode: two eager runs on the same input differ "
        f"(max abs difference {worst:.3g}). {random_cause(model, inputs)} Its goldens are not "
        f"accepted until it is deterministic: a golden would pin one random draw."
    )
