"""The public golden API for a test's own model, `golden.check_graph(model, inputs, frontend=...)`,
driven through pytester: compare, accept, CI refusal, orphans, the automatic golden ids; and the
packaged graph suite in a project of its own (only the project's models, --pyargs hints)."""

from __future__ import annotations

import sys

import pytest

pytest_plugins = ["pytester"]

# MODEL_ACT switches the activation, as an edit of the model would, without editing the file.
TEST_FILE = """
import os, pytest, torch

def mlp():
    act = torch.nn.GELU() if os.environ.get("MODEL_ACT") == "gelu" else torch.nn.ReLU()
    return torch.nn.Sequential(torch.nn.Linear(4, 8), act, torch.nn.Linear(8, 2))

@pytest.mark.parametrize("frontend", ["fx", "jit"])
def test_mlp(golden, frontend):
    golden.check_graph(mlp(), torch.randn(2, 4), frontend=frontend)

def test_skipped_here(golden):
    if os.environ.get("SKIP_ONE"):
        pytest.skip("not on this machine")
    golden.check_graph(mlp(), (torch.randn(3, 4),), frontend="fx")
"""
IDS = ["test_cg.test_mlp-fx", "test_cg.test_mlp-jit", "test_cg.test_skipped_here-fx"]


@pytest.fixture
def project(golden_project, monkeypatch):
    for var in ("MODEL_ACT", "SKIP_ONE"):
        monkeypatch.delenv(var, raising=False)
    return golden_project("test_cg", TEST_FILE)


def goldens(pytester) -> list[str]:
    return sorted(p.name[: -len(".expect")] for p in (pytester.path / "expect").glob("*.expect"))


def test_ids_are_declared_and_accepted_then_compared(project):
    result = project.runpytest()
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        ["*no golden *test_cg.test_mlp-fx.expect yet*", "*pytest --accept *test_mlp?fx?*"]
    )
    assert not (project.path / "expect").exists(), "a compare run writes nothing"
    project.runpytest("--accept").assert_outcomes(passed=3)
    assert goldens(project) == IDS
    text = (project.path / "expect" / "test_cg.test_mlp-jit.expect").read_text()
    assert "# frontend: jit" in text and "# model: Sequential" in text and "aten::relu" in text
    project.runpytest().assert_outcomes(passed=3)


def test_a_changed_model_fails_with_the_diff_op_counts_and_accept_command(project, monkeypatch):
    project.runpytest("--accept").assert_outcomes(passed=3)
    monkeypatch.setenv("MODEL_ACT", "gelu")
    result = project.runpytest("-k", "test_mlp")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*does not match golden expect/test_cg.test_mlp-jit.expect*",
            "*Op counts (expected -> actual):*",
            "*aten::gelu*0 -> 1*",
            "*-*aten::relu(*",
            "*+*aten::gelu(*",
            "*If the change is intended: pytest --accept 'test_cg.py::test_mlp[[]jit]'*",
        ]
    )
    project.runpytest("--accept", "test_cg.py::test_mlp[jit]").assert_outcomes(passed=1)
    project.runpytest("-k", "jit").assert_outcomes(passed=1)


def test_accept_is_refused_under_ci(project, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = project.runpytest("--accept")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*refusing to accept goldens because CI is set*"])
    assert not (project.path / "expect").exists()


def test_orphans_follow_the_suites_rules(project, monkeypatch):
    project.runpytest("--accept").assert_outcomes(passed=3)
    expect = project.path / "expect"
    gone = expect / "test_cg.test_deleted-fx.expect"  # a test of this module that is gone
    gone.write_text("left behind\n")
    theirs = expect / "test_other.test_x-fx.expect"  # a test module outside this run
    theirs.write_text("another module's\n")

    # a test that skips on this machine keeps its golden: its id is declared at collection
    monkeypatch.setenv("SKIP_ONE", "1")
    result = project.runpytest("--accept")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*kept golden *test_other.test_x-fx.expect: test module 'test_other' is not part*",
            "*removed orphan golden *test_cg.test_deleted-fx.expect*",
        ]
    )
    assert not gone.exists() and theirs.exists()
    assert (expect / "test_cg.test_skipped_here-fx.expect").exists()

    gone.write_text("left behind\n")
    project.runpytest("--accept", "-k", "mlp")  # a filtered run never removes
    assert gone.exists()


def test_one_golden_per_call_and_known_front_ends(project):
    project.makepyfile(
        test_bad="""
import torch

def test_twice(golden):
    golden.check_graph(torch.nn.ReLU(), torch.randn(2), frontend="fx")
    golden.check_graph(torch.nn.Tanh(), torch.randn(2), frontend="fx")

def test_named(golden):
    golden.check_graph(torch.nn.ReLU(), torch.randn(2), frontend="fx", name="relu.fx")
    golden.check_graph(torch.nn.Tanh(), torch.randn(2), frontend="fx", name="tanh.fx")

def test_unknown(golden):
    golden.check_graph(torch.nn.ReLU(), torch.randn(2), frontend="onnx")
"""
    )
    result = project.runpytest("--accept", "test_bad.py")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*checks the golden test_bad.test_twice-fx twice; pass name=*",
            "*unknown front end 'onnx'; choose from jit, fx, export, dynamo, aot*",
        ]
    )
    assert {"relu.fx", "tanh.fx"} <= set(goldens(project))


def test_two_tests_never_share_a_golden_and_a_module_named_golden_is_declared(project):
    for folder in ("a", "b"):
        project.mkdir(folder)
        (project.path / folder / "__init__.py").write_text("")
        (project.path / folder / "test_same.py").write_text(
            "import torch\n\ndef test_x(golden):\n"
            "    golden.check_graph(torch.nn.ReLU(), torch.randn(2), frontend='fx')\n"
        )
    project.makepyfile(
        test_named="""
import pytest, torch

def test_undeclared(golden):
    golden.check_graph(torch.nn.ReLU(), torch.randn(2), frontend="fx", name="test_named.relu")

@pytest.mark.golden("test_named.tanh")
def test_declared(golden):
    golden.check_graph(torch.nn.Tanh(), torch.randn(2), frontend="fx", name="test_named.tanh")
"""
    )
    result = project.runpytest("--accept", "a", "b", "test_named.py")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*b/test_same.py::test_x and a/test_same.py::test_x both check the golden "
            "test_same.test_x-fx: rename one test or its module, or pass name=*",
            "*declare the golden test_named.relu with @pytest.mark.golden('test_named.relu')*",
        ]
    )
    assert "test_named.tanh" in goldens(project) and "test_named.relu" not in goldens(project)


def test_a_random_model_is_named_and_never_accepted(project):
    project.makepyfile(
        test_noisy="""
import torch
import torch.nn.functional as F

class Noisy(torch.nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5)  # no training=self.training: random in eval mode

def test_noisy(golden):
    golden.check_graph(Noisy(), torch.randn(4, 4), frontend="fx")
"""
    )
    result = project.runpytest("--accept", "test_noisy.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Noisy in test_noisy is non-deterministic in eval mode*"])
    assert "test_noisy.test_noisy-fx" not in goldens(project)


def test_the_reference_torch_is_the_projects_own(golden_project, monkeypatch):
    """Under `harness_reference_torch = 2.13`, this torch (2.14) is another lane: what it
    accepts goes to expect/torch-2.14/, never to the project's reference goldens."""
    from harness.golden import store

    pytester = golden_project(
        "test_lane",
        "def test_a(golden):\n"
        "    golden.check('x: f32[2] = aten.relu.default(y)\\n', name='a.fx', frontend='fx')\n",
    )
    monkeypatch.setattr(store, "torch_version", lambda: "2.14.1")
    pytester.makeini("[pytest]\nharness_reference_torch = 2.13\n")
    pytester.runpytest("--accept").assert_outcomes(passed=1)
    assert (pytester.path / "expect" / "torch-2.14" / "a.fx.expect").is_file()
    assert not (pytester.path / "expect" / "a.fx.expect").exists()
    pytester.makeini("[pytest]\nharness_reference_torch = 2.14\n")
    (pytester.path / "expect" / "torch-2.14").rename(pytester.path / "other")
    pytester.runpytest("--accept").assert_outcomes(passed=1)
    assert (pytester.path / "expect" / "a.fx.expect").is_file()


# --------------------------------------------------------------------------------------------
# the packaged graph suite in a project of its own

MODELS = """
import torch
from harness.zoo import register_model

register_model(
    "own_mlp",
    build=lambda cfg: torch.nn.Sequential(torch.nn.Linear(4, cfg["num_classes"])),
    inputs=lambda cfg, g: (torch.randn(cfg["batch"], 4, generator=g),),
    small={"batch": 2, "num_classes": 3},
    full={"batch": 2, "num_classes": 3},
)
"""


@pytest.fixture
def own(golden_project, monkeypatch, clean_registry):
    monkeypatch.delenv("HARNESS_OWN_MODELS", raising=False)
    pytester = golden_project(
        "test_zoo_graphs", "from harness.suites.test_graphs import *  # noqa: F403\n"
    )
    pytester.makepyfile(own_models=MODELS)
    pytester.makeini("[pytest]\nharness_models = own_models.py\n")
    return pytester


def test_the_graph_suite_covers_only_the_projects_models(own):
    result = own.runpytest("--collect-only", "-q", "-m", "not slow")
    result.stdout.fnmatch_lines(["*test_graph_matches_golden[[]own_mlp-jit]*"])
    result.stdout.no_fnmatch_line("*alexnet*")
    assert "HARNESS_OWN_MODELS" not in __import__("os").environ, "set for the run only"


def test_a_packaged_suite_run_by_module_name_gets_a_pyargs_hint(own, monkeypatch):
    # In an editable install the file is this checkout's suites/test_graphs.py, which a session
    # that also collects suites/ has imported as `suites.test_graphs` over the whole zoo: the
    # inner run must import it afresh, as a project's own pytest does.
    monkeypatch.delitem(sys.modules, "suites.test_graphs", raising=False)
    result = own.runpytest("--pyargs", "harness.suites.test_graphs", "-k", "own_mlp and jit")
    result.assert_outcomes(failed=1, passed=1)  # no golden yet; the program check passes
    result.stdout.fnmatch_lines(
        [
            "*no golden *own_mlp.jit.expect yet*",
            "*pytest --accept --pyargs "
            "'harness.suites.test_graphs::test_graph_matches_golden[[]own_mlp-jit]'*",
        ]
    )
    own.runpytest(
        "--accept", "--pyargs", "harness.suites.test_graphs::test_graph_matches_golden[own_mlp-jit]"
    ).assert_outcomes(passed=1)
    assert (own.path / "expect" / "own_mlp.jit.expect").is_file()
