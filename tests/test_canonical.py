"""The canonical printers and the normaliser. Printouts of tiny modules are pinned with
expecttest's inline expectations: `EXPECTTEST_ACCEPT=1 pytest tests/test_canonical.py`
rewrites them in place, together with any golden files the same run touches."""

from __future__ import annotations

import os
import subprocess
import sys

import expecttest
import pytest
import torch
from torch import nn

from harness.golden.capture import capture
from harness.golden.normalize import normalize, op_counts


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.register_buffer("scale", torch.ones(2))

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale


def tiny():
    torch.manual_seed(0)
    return TinyNet().eval(), (torch.randn(4, 3),)


class TestNormalize(expecttest.TestCase):
    def test_strips_paths_addresses_mangles_and_crlf(self):
        raw = (
            "%x : __torch__.Net___torch_mangle_15 = prim::GetAttr  # /home/me/src/net.py:50:0\r\n"
            "obj at 0x7f3a2b4c5d60   \r\n\r\n"
        )
        self.assertExpectedInline(
            normalize(raw),
            """\
%x : __torch__.Net = prim::GetAttr  # <path>
obj at 0x?
""",
        )

    def test_is_idempotent(self):
        text = normalize("a  \r\nb /x/y.py:3\n\n")
        self.assertEqual(normalize(text), text)

    def test_op_counts(self):
        text = (
            "%0: f32[2] = aten::relu_(x)\n%1: f32[2] = aten::relu_(%0)\n"
            "y: f32[2] = aten.add.Tensor(a, b)\n"
        )
        self.assertEqual(dict(op_counts(text)), {"aten::relu_": 2, "aten.add.Tensor": 1})


class TestPrinters(expecttest.TestCase):
    def test_jit_names_parameters_and_buffers_by_state_dict(self):
        model, inputs = tiny()
        self.assertExpectedInline(
            capture(model, inputs, "jit").text,
            """\
input x: f32[4, 3]
buffer scale: f32[2]
param fc.weight: f32[2, 3]
param fc.bias: f32[2]
%fc/linear: f32[4, 2] = aten::linear(x, fc.weight, fc.bias)
%fc/relu: f32[4, 2] = aten::relu(%fc/linear)
%mul: f32[4, 2] = aten::mul(%fc/relu, scale)
return (%mul)
""",
        )

    def test_export_has_dtype_and_shape_on_every_value(self):
        model, inputs = tiny()
        self.assertExpectedInline(
            capture(model, inputs, "export").text,
            """\
param fc.weight: f32[2, 3]
param fc.bias: f32[2]
buffer scale: f32[2]
input x: f32[4, 3]
fc/linear: f32[4, 2] = aten.linear.default(x, fc.weight, fc.bias)
fc/relu: f32[4, 2] = aten.relu.default(fc/linear)
mul: f32[4, 2] = aten.mul.Tensor(fc/relu, scale)
return (mul,)
""",
        )

    def test_fx_keeps_modules_and_gets_shapes_from_shape_prop(self):
        model, inputs = tiny()
        self.assertExpectedInline(
            capture(model, inputs, "fx").text,
            """\
input x: f32[4, 3]
fc: f32[4, 2] = fc<Linear>(x)
fc/relu: f32[4, 2] = torch.relu(fc)
scale: f32[2] = get_attr[scale]()
mul: f32[4, 2] = _operator.mul(fc/relu, scale)
return mul
""",
        )

    def test_dynamo_reports_graph_count_and_breaks(self):
        model, inputs = tiny()
        self.assertExpectedInline(
            capture(model, inputs, "dynamo").text,
            """\
graphs: 1
graph_breaks: 0

graph 0:
param fc.weight: f32[2, 3]
param fc.bias: f32[2]
input x: f32[4, 3]
buffer scale: f32[2]
fc/linear: f32[4, 2] = torch._C._nn.linear(x, fc.weight, fc.bias)
fc/relu: f32[4, 2] = torch.relu(fc/linear)
mul: f32[4, 2] = _operator.mul(fc/relu, scale)
return (mul,)
""",
        )

    def test_aot_names_primals_after_state_dict_and_labels_saved_values(self):
        model, inputs = tiny()
        text = capture(model, inputs, "aot").text
        self.assertNotIn("primals_", text)
        self.assertIn("param fc.weight: f32[2, 3]", text)
        self.assertIn("backward:", text)
        self.assertIn("tangent tangents_1: f32[4, 2]", text)


def test_graph_breaks_are_counted():
    class Breaks(nn.Module):
        def forward(self, x):
            y = x.sin()
            torch._dynamo.graph_break()
            return y.cos()

    text = capture(Breaks(), (torch.randn(3),), "dynamo").text
    assert text.startswith("graphs: 2\ngraph_breaks: 1\n"), text


@pytest.mark.slow
def test_printouts_are_byte_identical_across_processes_and_hash_seeds():
    # Two fresh interpreters with different hash seeds print the same graph, byte for byte.
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "graph", "mlp", "--frontend", "export"],
            stdout=subprocess.PIPE,
            env=dict(os.environ, PYTHONHASHSEED=seed),
        )
        for seed in ("1", "12345")
    ]  # started together: two torch imports overlap
    outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outputs[0] == outputs[1]
    assert b"param 0.weight: f32[32, 16]" in outputs[0]
