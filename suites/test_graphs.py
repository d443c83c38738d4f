"""Graph goldens: every zoo model under every capture front end.

For each (model, front end):
- the canonical printout equals expect/<model>.<frontend>.expect (`pytest --accept` updates it);
- the captured program, run on a *different* seeded input, matches eager output: a trace that
  baked a value in as a constant (the old in-place ReLU bug) fails here, not only in the text;
- capturing a second time gives the same text.
First of all, eager itself must repeat: a model whose eval-mode output is random fails both tests
with the op to blame, and its goldens are never accepted (harness.core.determinism).
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.utils._pytree as pytree

from harness.core.determinism import nondeterminism
from harness.core.zoo import BUILTIN_ORIGIN, get_model
from harness.golden.capture import capture_model, cases, on_device

# What a project of its own takes with `from harness.suites.test_graphs import *` (a test module
# of its own that runs this suite over its models; the autouse fixture is private, so named here).
__all__ = [
    "_full_float32_on_gpu",
    "test_graph_matches_golden",
    "test_program_matches_eager_and_capture_repeats",
]

# Captured programs run the same float32 ops in a possibly different order (AOT decomposes
# LSTMs, for instance); anything past this is a wrong program, not rounding. GPU kernels may
# pick other algorithms for the decomposed ops (TF32 is switched off, see below).
RTOL, ATOL = 1e-4, 1e-5
TOLERANCE = {"cpu": (RTOL, ATOL), "cuda": (1e-3, 1e-4)}


@pytest.fixture(autouse=True)
def _full_float32_on_gpu(golden_device):
    """cuDNN convolutions default to TF32 (10-bit mantissa): keep float32 float32 on the GPU."""
    if golden_device == "cpu":
        yield
        return
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


# The zoo's golden checks of 7-10 s each on two busy cores (resnet18 under aot, dynamo and jit;
# the recurrent models under aot) are in the second tier; every model and every front end keeps
# cases in the default tier (resnet18-fx/-export, gru and word_lm under the others; aot on mlp,
# alexnet, transformer).
SLOW_CASES = frozenset(
    {
        ("resnet18", "aot"),
        ("resnet18", "dynamo"),
        ("resnet18", "jit"),
        ("gru", "aot"),
        ("word_lm", "aot"),
    }
)


def _tier(model: str, frontend: str) -> list:
    builtin = get_model(model).origin == BUILTIN_ORIGIN
    return [pytest.mark.slow] if builtin and (model, frontend) in SLOW_CASES else []


# Under `pytest -n 2 --dist loadgroup` a model's cases share a worker, so one capture serves its
# golden test and its semantic test.
CASES = [
    pytest.param(
        model,
        frontend,
        id=f"{model}-{frontend}",
        marks=[
            pytest.mark.skip(reason=skip) if skip else pytest.mark.golden(f"{model}.{frontend}"),
            pytest.mark.xdist_group(model),
            *_tier(model, frontend),
        ],
    )
    for model, frontend, skip in cases()
]
RUNNABLE = [
    pytest.param(model, frontend, id=f"{model}-{frontend}", marks=pytest.mark.xdist_group(model))
    for model, frontend, skip in cases()
    if not skip
]


@functools.cache
def _captured(model: str, frontend: str, size: str, device: str):
    # One capture per process serves both the golden and the semantic test of a case.
    return capture_model(model, frontend, size, device)


@functools.cache
def _nondeterministic(model: str, size: str) -> str | None:
    spec = get_model(model)
    return nondeterminism(spec.build(size), spec.inputs(size), label=f"model {model!r} ({size})")


def _require_deterministic_eager(model: str, size: str) -> None:
    problem = _nondeterministic(model, size)
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.mark.parametrize("model,frontend", CASES)
def test_graph_matches_golden(model, frontend, model_size, golden, golden_device):
    _require_deterministic_eager(
        model, model_size
    )  # before golden.check: never accept a random draw
    captured = _captured(model, frontend, model_size, golden_device)
    where = {} if golden_device == "cpu" else {"device": golden_device}
    golden.check(captured.text, frontend=frontend, model=f"{model} ({model_size})", **where)


@pytest.mark.slow  # captures twice and runs the program: seconds each
@pytest.mark.parametrize("model,frontend", RUNNABLE)
def test_program_matches_eager_and_capture_repeats(model, frontend, model_size, golden_device):
    _require_deterministic_eager(model, model_size)
    captured = _captured(model, frontend, model_size, golden_device)
    spec = get_model(model)
    eager = on_device(spec.build(model_size), golden_device)
    check_inputs = on_device(spec.inputs(model_size, check=True), golden_device)
    with torch.no_grad():
        expected = pytree.tree_leaves(eager(*check_inputs))
    got = pytree.tree_leaves(captured.program(*check_inputs))
    assert len(got) == len(expected), (
        f"{model}/{frontend}: {len(got)} outputs, eager gives {len(expected)}"
    )
    rtol, atol = TOLERANCE[torch.device(golden_device).type]
    for i, (g, e) in enumerate(zip(got, expected)):
        torch.testing.assert_close(
            g.detach(),
            e,
            rtol=rtol,
            atol=atol,
            msg=lambda m, i=i: f"{model}/{frontend} output {i} differs from eager: {m}",
        )

    again = capture_model(model, frontend, model_size, golden_device)
    assert again.text == captured.text, f"{model}/{frontend}: capturing twice gave different graphs"
