"""`harness graph-diff`: the comparison (harness.golden.graphdiff), two interpreters end to end."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from harness.cli import main
from harness.core import exits
from harness.golden import graphdiff

DYNAMO_BASE = "graphs: 1\ngraph_breaks: 1\nbreak: RNN (x1)\n\ngraph 0:\ny = aten.view.default(x)\n"
DYNAMO_HEAD = (
    "graphs: 2\ngraph_breaks: 1\nbreak: call (x1)\n\ngraph 0:\ny = aten._unsafe_view.default(x)\n"
)


def _ok(text):
    return {"status": "ok", "text": text}


def _side(**cases):
    return {
        "torch": "x",
        "size": "small",
        "cases": {k.replace("_", "."): v for k, v in cases.items()},
    }


def test_each_verdict_and_what_changed():
    base = _side(
        a_jit=_ok("y = aten.relu.default(x)\n"),
        a_dynamo=_ok(DYNAMO_BASE),
        b_fx=_ok("y = aten.relu.default(x)\n"),
        c_fx=_ok("z = x\n"),
        d_aot={"status": "unsupported", "reason": "no backward"},
    )
    head = _side(
        a_jit=_ok("y = aten.relu.default(x)\n"),
        a_dynamo=_ok(DYNAMO_HEAD),
        b_fx={"status": "failed", "error": "model 'b': the fx front end failed: boom\nmore"},
        d_aot={"status": "unsupported", "reason": "no backward"},
        e_fx=_ok("z = x\n"),
    )
    rows = {r.case: r for r in graphdiff.compare(base, head)}
    assert rows["a.jit"].verdict == graphdiff.SAME
    assert rows["d.aot"].verdict == graphdiff.SAME
    changed = rows["a.dynamo"]
    assert changed.verdict == graphdiff.CHANGED
    assert changed.graphs == (1, 2) and changed.breaks == (1, 1)
    assert changed.reasons == {"RNN": (1, 0), "call": (0, 1)}
    assert ("aten._unsafe_view.default", 0, 1) in changed.ops
    assert "graphs 1 -> 2" in changed.summary() and "graph breaks" not in changed.summary()
    assert any(line.startswith("+y = aten._unsafe_view") for line in changed.diff)
    assert rows["b.fx"].verdict == graphdiff.FAILS and "head: model 'b'" in rows["b.fx"].note
    assert rows["c.fx"].verdict == graphdiff.ONE_SIDE and "only on base" in rows["c.fx"].note
    assert rows["e.fx"].verdict == graphdiff.ONE_SIDE
    assert graphdiff.exit_code(list(rows.values())) == exits.FAILED
    text = graphdiff.render(list(rows.values()), {"base": "b", "head": "h"})
    assert text.startswith("graph-diff: 6 cases; 2 same, 1 changed, 1 fail on one side, 2 on")
    assert "a.dynamo:" in text and "a.jit" not in text  # the same cases are counted, not listed
    md = graphdiff.render(list(rows.values()), {"base": "b", "head": "h"}, "markdown")
    assert "| a       | dynamo" in md and "```diff" in md


def test_exit_codes_same_and_changed():
    same = graphdiff.compare(_side(a_fx=_ok("y\n")), _side(a_fx=_ok("y\n")))
    assert graphdiff.exit_code(same) == exits.PASS
    changed = graphdiff.compare(_side(a_fx=_ok("y = a(x)\n")), _side(a_fx=_ok("y = b(x)\n")))
    assert graphdiff.exit_code(changed) == exits.REGRESSION
    both = graphdiff.compare(
        _side(a_fx={"status": "failed", "error": "e"}),
        _side(a_fx={"status": "failed", "error": "e"}),
    )
    assert both[0].verdict == graphdiff.BOTH_FAIL and graphdiff.exit_code(both) == exits.PASS


MODEL = """
import os, torch
from harness.zoo import register_model

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
    def forward(self, x):
        y = self.lin(x)
        return torch.nn.functional.gelu(y) if os.environ.get("TINY_GELU") else y.relu()

register_model(
    "tiny_gd",
    build=lambda cfg: Tiny(),
    inputs=lambda cfg, gen: (torch.randn(2, 4, generator=gen),),
    small={"batch": 2, "num_classes": 4},
    full={"batch": 2, "num_classes": 4},
)
"""


def _interpreter(path, extra_env: str) -> str:
    """A second interpreter as a venv would give one: here this Python with other settings."""
    path.write_text(f'#!/bin/sh\n{extra_env} exec "{sys.executable}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_two_interpreters_end_to_end(tmp_path, monkeypatch, capsys):
    models = tmp_path / "tiny_models.py"
    models.write_text(MODEL)
    monkeypatch.setenv("HARNESS_MODELS", str(models))
    monkeypatch.delenv("TINY_GELU", raising=False)
    base = _interpreter(tmp_path / "base-python", "")
    head = _interpreter(tmp_path / "head-python", "TINY_GELU=1")
    out_json, out_md = tmp_path / "gd.json", tmp_path / "gd.md"
    argv = ["graph-diff", base, head, "--model", "tiny_gd", "--frontend", "fx"]
    argv += ["--frontend", "export", "--json", str(out_json), "--markdown", str(out_md)]
    assert main(argv) == exits.REGRESSION
    printed = capsys.readouterr().out
    assert "2 cases; 0 same, 2 changed" in printed
    data = json.loads(out_json.read_text())
    by_case = {c["case"]: c for c in data["cases"]}
    ops = {o["op"]: (o["base"], o["head"]) for o in by_case["tiny_gd.export"]["ops"]}
    assert ops == {"aten.relu.default": (1, 0), "aten.gelu.default": (0, 1)}
    assert "tiny_gd" in out_md.read_text()
    # the same interpreter twice: nothing changed
    assert main(["graph-diff", base, base, "--model", "tiny_gd", "--frontend", "fx"]) == 0


def test_bad_sides_and_front_ends_are_bad_input(tmp_path, capsys):
    assert main(["graph-diff", "no-such-rev", "HEAD"]) == exits.BAD_INPUT
    assert "neither a git revision" in capsys.readouterr().err
    assert main(["graph-diff", "HEAD", "HEAD", "--frontend", "torchscript"]) == exits.BAD_INPUT


@pytest.mark.skipif(not os.access(sys.executable, os.X_OK), reason="needs an executable Python")
def test_an_unknown_model_is_bad_input(tmp_path, capsys):
    python = _interpreter(tmp_path / "py", "")
    assert main(["graph-diff", python, python, "--model", "nope"]) == exits.BAD_INPUT
    assert "unknown model 'nope'" in capsys.readouterr().err


@pytest.mark.slow  # the second tier: ~12 s of the default tier's budget under load
def test_git_revisions_as_sides(capsys):
    assert main(["graph-diff", "HEAD", "HEAD", "--model", "mlp", "--frontend", "fx"]) == 0
    out = capsys.readouterr().out
    assert "1 case; 1 same" in out and "commit " in out


def test_a_revision_older_than_graph_diff_is_bad_input_naming_where_to_start(capsys, in_history):
    base = in_history.before_graph_diff  # its harness has no graph-capture worker
    code = main(["graph-diff", base, "HEAD", "--model", "mlp", "--frontend", "fx"])
    assert code == exits.BAD_INPUT
    err = capsys.readouterr().err
    assert f"base {base!r} predates graph-diff" in err
    assert f"Compare revisions from {in_history.graph_diff_added[:7]}" in err  # where to start
