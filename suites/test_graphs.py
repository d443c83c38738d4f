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
from harness.golden.capture import capture_model, cases
from harness.core.zoo import get_model

# Captured programs run the same float32 ops in a possibly different order (AOT decomposes
# LSTMs, for instance); anything past this is a wrong program, not rounding.
RTOL, ATOL = 1e-4, 1e-5


# Under `pytest -n 2 --dist loadgroup` a model's cases share a worker, so one capture serves its
# golden test and its semantic test.
CASES = [pytest.param(model, frontend, id=f"{model}-{frontend}",
                      marks=[pytest.mark.skip(reason=skip) if skip else pytest.mark.golden(f"{model}.{frontend}"),
                             pytest.mark.xdist_group(model)])
         for model, frontend, skip in cases()]
RUNNABLE = [pytest.param(model, frontend, id=f"{model}-{frontend}", marks=pytest.mark.xdist_group(model))
            for model, frontend, skip in cases() if not skip]


@functools.lru_cache(maxsize=None)
def _captured(model: str, frontend: str, size: str):
    # One capture per process serves both the golden and the semantic test of a case.
    return capture_model(model, frontend, size)


@functools.lru_cache(maxsize=None)
def _nondeterministic(model: str, size: str) -> str | None:
    spec = get_model(model)
    return nondeterminism(spec.build(size), spec.inputs(size), label=f"model {model!r} ({size})")


def _require_deterministic_eager(model: str, size: str) -> None:
    problem = _nondeterministic(model, size)
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.mark.parametrize("model,frontend", CASES)
def test_graph_matches_golden(model, frontend, model_size, golden):
    _require_deterministic_eager(model, model_size)  # before golden.check: never accept a random draw
    captured = _captured(model, frontend, model_size)
    golden.check(captured.text, frontend=frontend, model=f"{model} ({model_size})")


@pytest.mark.parametrize("model,frontend", RUNNABLE)
def test_program_matches_eager_and_capture_repeats(model, frontend, model_size):
    _require_deterministic_eager(model, model_size)
    captured = _captured(model, frontend, model_size)
    spec = get_model(model)
    eager = spec.build(model_size)
    check_inputs = spec.inputs(model_size, check=True)
    with torch.no_grad():
        expected = pytree.tree_leaves(eager(*check_inputs))
    got = pytree.tree_leaves(captured.program(*check_inputs))
    assert len(got) == len(expected), f"{model}/{frontend}: {len(got)} outputs, eager gives {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        torch.testing.assert_close(g.detach(), e, rtol=RTOL, atol=ATOL,
                                   msg=lambda m: f"{model}/{frontend} output {i} differs from eager: {m}")

    again = capture_model(model, frontend, model_size)
    assert again.text == captured.text, f"{model}/{frontend}: capturing twice gave different graphs"
