"""Capture front ends on zoo models: changes show up as diffs with op counts, failures are named."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from harness.core.zoo import get_model, register_model
from harness.golden import store
from harness.golden.capture import FRONTENDS, CaptureError, capture, capture_model, cases

pytest_plugins = ["pytester"]


def _swap_relu_for_gelu(module: nn.Module) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.ReLU):
            setattr(module, name, nn.GELU())
        else:
            _swap_relu_for_gelu(child)


@pytest.mark.parametrize(
    "frontend,before,after",
    [
        ("jit", "aten::relu_", "aten::gelu"),
        ("export", "aten.relu_.default", "aten.gelu.default"),
    ],
)
def test_swapping_relu_for_gelu_changes_the_graph_and_the_op_counts(
    frontend, before, after, tmp_path
):
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
    register_model(
        "toy_no_fx",
        build=lambda cfg: nn.Linear(2, cfg["num_classes"]),
        inputs=lambda cfg, g: (torch.randn(cfg["batch"], 2, generator=g),),
        small={"batch": 1, "num_classes": 2},
        full={"batch": 1, "num_classes": 2},
        unsupported={"fx": "uses data-dependent control flow"},
        replace=True,
    )
    try:
        reasons = {(m, f): r for m, f, r in cases() if m == "toy_no_fx"}
        assert (
            reasons[("toy_no_fx", "fx")]
            == "toy_no_fx does not support fx: uses data-dependent control flow"
        )
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


# --------------------------------------------------------------------------------------------
# failures that read well


def _changed_lines(before: str, after: str) -> int:
    import difflib

    return sum(
        1
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


# Changed lines (removed + added) for swapping alexnet's first ReLU for a GELU. With per-op
# counters in value names (normaliser 1) export changed 28 lines and aot 99, past the diff cap
# on resnet18; local names keep it to the op, its users and, for aot, the saved activations.
SWAP_BOUND = {"jit": 4, "fx": 2, "export": 4, "dynamo": 4, "aot": 20}


@pytest.mark.parametrize(
    "frontend",
    # fx in the default tier; the other front ends (~3-4 s each under load) in the second
    [f if f == "fx" else pytest.param(f, marks=pytest.mark.slow) for f in FRONTENDS],
)
def test_one_layer_swap_is_a_few_line_diff(frontend):
    spec = get_model("alexnet")
    model = spec.build()
    model.features[1] = nn.GELU()
    changed = _changed_lines(
        capture_model("alexnet", frontend).text, capture(model, spec.inputs(), frontend).text
    )
    assert 0 < changed <= SWAP_BOUND[frontend], f"{frontend}: {changed} changed lines"


def test_random_op_in_eval_mode_is_named():
    from harness.core.determinism import nondeterminism

    class Noisy(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.Linear(4, 4))

        def forward(self, x):
            return torch.nn.functional.dropout(self.block(x), 0.5)  # training=True: the bug

    message = nondeterminism(Noisy().eval(), (torch.randn(3, 4),), label="model 'noisy'")
    assert message and "model 'noisy' is non-deterministic in eval mode" in message
    assert re.search(r"aten\.(bernoulli|native_dropout)\S* in the top-level forward", message), (
        message
    )
    assert "training=self.training" in message
    fixed = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).eval()
    assert nondeterminism(fixed, (torch.randn(3, 4),)) is None


def test_model_whose_backward_fails_is_told_so_before_unsupported():
    class NoBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            raise RuntimeError("backward not implemented for my op")

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return NoBackward.apply(self.fc(x))

    with pytest.raises(CaptureError) as info:
        capture(Model(), (torch.randn(2, 3),), "aot", label="model 'nobw'")
    message = str(info.value)
    assert message.index("backward itself fails in eager mode") < message.index("unsupported=")
    assert "backward not implemented for my op" in message


def test_capture_failure_output_has_no_trace_log_noise(pytester, monkeypatch):
    # pytest's log capture attaches to torch's structured-trace logger; a failing capture test
    # printed hundreds of empty `DEBUG torch.__trace` lines.
    monkeypatch.delenv("CI", raising=False)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_noise="""
import torch
from harness.golden.capture import capture

def test_fails_after_capture():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    for frontend in ("dynamo", "export", "aot"):
        captured = capture(model, (torch.randn(2, 3),), frontend)
        captured.program(torch.randn(2, 3)) if captured.program else None
    assert False, "fails on purpose"
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--log-level=DEBUG")
    result.assert_outcomes(failed=1)
    assert "torch.__trace" not in result.stdout.str()


# ---- the capture mode: aot on CUDA of a recurrent model runs with cuDNN off ----

RECURRENT = {"gru", "word_lm"}  # the zoo's models holding an nn.RNNBase


def test_only_aot_of_a_recurrent_model_on_cuda_switches_cudnn_off():
    from harness.core.zoo import model_names
    from harness.golden.capture import PLAIN, capture_mode

    assert RECURRENT < set(model_names())
    for name in model_names():
        model = get_model(name).build()
        holds_rnn = any(isinstance(m, nn.RNNBase) for m in model.modules())
        assert holds_rnn == (name in RECURRENT), name
        for frontend in FRONTENDS:
            for device in ("cuda", torch.device("cuda:0"), "cpu"):
                mode = capture_mode(model, frontend, device)
                off = name in RECURRENT and frontend == "aot" and device != "cpu"
                # conv and batch-norm models keep cuDNN: their CUDA differences are real
                assert mode.cudnn == (not off), (name, frontend, device)
                assert (mode == PLAIN) == (not off) and bool(mode.note) == off


def test_capture_mode_holds_for_the_capture_and_the_program_and_is_restored():
    from harness.golden.capture import PLAIN, RNN_WITHOUT_CUDNN

    before = torch.backends.cudnn.enabled
    with RNN_WITHOUT_CUDNN.applied():
        assert torch.backends.cudnn.enabled is False
    assert torch.backends.cudnn.enabled == before

    def program(fail=False):
        if fail:
            raise RuntimeError("boom")
        return torch.backends.cudnn.enabled

    assert RNN_WITHOUT_CUDNN.wrap(program)() is False
    with pytest.raises(RuntimeError, match="boom"):
        RNN_WITHOUT_CUDNN.wrap(program)(fail=True)
    assert torch.backends.cudnn.enabled == before
    assert PLAIN.wrap(program) is program and RNN_WITHOUT_CUDNN.wrap(None) is None


def test_a_recurrent_model_on_fake_cuda_tensors_gets_the_mode_that_keeps_cudnn_out():
    """No GPU here: a GRU on fake CUDA tensors stands for one on the GPU. capture() reads the
    device off the model, and under the mode nn.RNNBase.flatten_parameters stops before the
    data pointers AOTAutograd's tensors lack (it stops when cudnn.is_acceptable is False)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from harness.golden.capture import capture_mode, device_of

    with FakeTensorMode(), torch.device("cuda"):
        model = nn.GRU(8, 16, 2)
    weight = model.weight_ih_l0
    if not torch.backends.cudnn.is_acceptable(weight):
        pytest.skip("this torch has no cuDNN: nothing to switch off")
    device = device_of(model, ())
    assert device.type == "cuda"
    with capture_mode(model, "aot", device).applied():
        assert not torch.backends.cudnn.is_acceptable(weight)
    assert torch.backends.cudnn.is_acceptable(weight)
    assert device_of(get_model("gru").build(), ()) == torch.device("cpu")
