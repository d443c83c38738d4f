"""Capture front ends on zoo models: changes show up as diffs with op counts, failures are named."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from harness.golden import store
from harness.golden.capture import FRONTENDS, CaptureError, capture, capture_model, cases
from harness.core.zoo import get_model, register_model


def _swap_relu_for_gelu(module: nn.Module) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.ReLU):
            setattr(module, name, nn.GELU())
        else:
            _swap_relu_for_gelu(child)


@pytest.mark.parametrize("frontend,before,after", [
    ("jit", "aten::relu_", "aten::gelu"),
    ("export", "aten.relu_.default", "aten.gelu.default"),
])
def test_swapping_relu_for_gelu_changes_the_graph_and_the_op_counts(frontend, before, after, tmp_path):
    spec = get_model("alexnet")
    original = capture_model("alexnet", frontend).text
    model = spec.build()
    _swap_relu_for_gelu(model)
    changed = capture(model, spec.inputs(), frontend).text

    path = tmp_path / f"alexnet.{frontend}.expect"
    store.save(path, store.render(original, {"frontend": frontend, "model": "alexnet (small)"}))
    message = store.mismatch_message(store.read(path), changed, "alexnet", "pytest --accept")
    assert re.search(rf"^\s+{re.escape(before)}\s+7 -> 0$", message, re.M), message
    assert re.search(rf"^\s+{re.escape(after)}\s+0 -> 7$", message, re.M), message
    assert "\n-" in message and "\n+" in message  # a unified diff follows


def test_a_model_that_raises_during_capture_is_named():
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("shape mismatch in my layer")

    with pytest.raises(CaptureError, match=r"model 'broken'.*jit front end failed.*shape mismatch"):
        capture(Broken(), (torch.randn(2),), "jit", label="model 'broken'")


def test_unknown_front_end_lists_the_valid_ones():
    with pytest.raises(ValueError, match="choose from jit, fx, export, dynamo, aot"):
        capture(nn.Linear(2, 2), (torch.randn(1, 2),), "torchscript")


def test_declared_unsupported_front_end_becomes_a_skip_with_its_reason():
    register_model("toy_no_fx", build=lambda cfg: nn.Linear(2, cfg["num_classes"]),
                   inputs=lambda cfg, g: (torch.randn(cfg["batch"], 2, generator=g),),
                   small={"batch": 1, "num_classes": 2}, full={"batch": 1, "num_classes": 2},
                   unsupported={"fx": "uses data-dependent control flow"}, replace=True)
    try:
        reasons = {(m, f): r for m, f, r in cases() if m == "toy_no_fx"}
        assert reasons[("toy_no_fx", "fx")] == "toy_no_fx does not support fx: uses data-dependent control flow"
        assert all(reasons[("toy_no_fx", f)] is None for f in FRONTENDS if f != "fx")
        with pytest.raises(NotImplementedError, match="data-dependent control flow"):
            capture_model("toy_no_fx", "fx")
    finally:
        from harness.core import zoo

        zoo._REGISTRY.pop("toy_no_fx", None)


def test_jit_program_catches_a_value_baked_in_as_a_constant():
    # The historical bug class: tracing records a data-dependent value as a constant. Running the
    # captured program on a *different* input (what the suites do) exposes it.
    class DataDependent(nn.Module):
        def forward(self, x):
            return x * int(x.sum() > 0)

    model = DataDependent()
    captured = capture(model, (torch.ones(3),), "jit")
    other = -torch.ones(3)
    assert not torch.equal(captured.program(other), model(other))
