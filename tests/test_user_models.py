"""A user's own models: one loader (ini option `harness_models`, HARNESS_MODELS, entry points)
for pytest and the `harness` command alike; names that can never get a golden are refused."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.core import exits, names, user_models, zoo
from harness.golden import store

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

# A model of a user's own suite: tiny, so that capturing it takes well under a second.
TINY_MODELS = """
import torch
from torch import nn
from harness.zoo import register_model


class TinyCNN(nn.Module):
    def __init__(self, width, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3)
        self.act = nn.ReLU()
        self.head = nn.Linear(width * 6 * 6, num_classes)

    def forward(self, x):
        return self.head(self.act(self.conv(x)).flatten(1))


register_model("tiny_cnn", build=lambda cfg: TinyCNN(cfg["width"], cfg["num_classes"]),
               inputs=lambda cfg, g: (torch.randn(cfg["batch"], 3, 8, 8, generator=g),),
               small={"batch": 1, "width": 2, "num_classes": 3},
               full={"batch": 2, "width": 4, "num_classes": 3}, expect_dir="expect")
"""


@pytest.mark.parametrize("name", ["modèle", "模型", "x²", "tiny\n", "a.b", "a-b", "", "../x"])
def test_names_that_can_never_get_a_golden_are_refused_at_registration(
    name, tmp_path, clean_registry
):
    import torch

    with pytest.raises(ValueError, match="not allowed: use ASCII letters"):
        zoo.register_model(
            name,
            build=lambda cfg: torch.nn.Linear(2, 2),
            inputs=lambda cfg, g: (torch.randn(1, 2, generator=g),),
            small={"batch": 1, "num_classes": 2},
            full={"batch": 1, "num_classes": 2},
        )
    assert name not in zoo.model_names()
    if "." not in name and "-" not in name:  # one rule: the golden store refuses the same names
        with pytest.raises(store.GoldenError):
            store.golden_path(tmp_path, f"{name}.jit")


def test_model_names_and_golden_ids_share_one_rule():
    assert names.is_model_name("tiny_cnn2") and names.is_golden_id("tiny_cnn2.jit")
    assert not names.is_model_name("modèle") and not names.is_golden_id("modèle.jit")
    assert names.model_of("tiny_cnn.aot") == "tiny_cnn"


def test_harness_models_env_loads_paths_and_modules_for_the_cli(
    tmp_path, monkeypatch, capsys, clean_registry
):
    (tmp_path / "mine.py").write_text(TINY_MODELS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(user_models.ENV_VAR, "mine.py")
    assert main(["models"]) == exits.PASS
    # who registered each model: the user's file beside the built-in zoo (and the kind each
    # declares, "-" where none)
    rows = {ln.split()[0]: ln.split() for ln in capsys.readouterr().out.splitlines()[2:]}
    assert rows["tiny_cnn"][5:7] == ["-", "mine.py"]
    assert rows["alexnet"][5:7] == ["conv", "built-in"]
    assert main(["graph", "tiny_cnn", "--frontend", "export"]) == exits.PASS
    out = capsys.readouterr().out
    assert "conv/conv2d" in out and "head/linear" in out

    # the same file named as an importable module is loaded once, without a clash
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(user_models.ENV_VAR, "mine.py, mine")
    assert main(["models"]) == exits.PASS


def test_ini_option_is_read_by_the_cli(tmp_path, monkeypatch, capsys, clean_registry):
    (tmp_path / "mysuite").mkdir()
    (tmp_path / "mysuite" / "models.py").write_text(TINY_MODELS)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nharness_models = ["mysuite/models.py"]\n'
    )
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # found upward, as pytest finds its ini file
    assert main(["models"]) == exits.PASS
    assert "tiny_cnn" in capsys.readouterr().out


@pytest.mark.parametrize(
    "spec,message",
    [
        (
            "no_such_module_xyz",
            "cannot load models from module 'no_such_module_xyz' (named by HARNESS_MODELS)",
        ),
        (
            "missing.py",
            "cannot load models from 'missing.py' (named by HARNESS_MODELS): no such file",
        ),
        (
            "broken.py",
            "cannot load models from 'broken.py' (named by HARNESS_MODELS): ZeroDivisionError",
        ),
    ],
)
def test_a_module_that_fails_to_load_is_bad_input_naming_it(
    spec, message, tmp_path, monkeypatch, capsys, clean_registry
):
    (tmp_path / "broken.py").write_text("1 / 0\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(user_models.ENV_VAR, spec)
    for argv in (["models"], ["graph", "alexnet", "--frontend", "jit"]):
        assert main(argv) == exits.BAD_INPUT
        err = capsys.readouterr().err
        assert (
            message in err
            and f"remove {spec!r} from HARNESS_MODELS" in err
            or "no such file" in err
        )


def test_same_file_registering_twice_replaces_its_own_model(tmp_path, monkeypatch, clean_registry):
    # pytest imports a conftest, the loader imports the same file by path: no clash
    (tmp_path / "conftest.py").write_text(TINY_MODELS)
    monkeypatch.setenv(user_models.ENV_VAR, str(tmp_path / "conftest.py"))
    user_models.load_user_models([])
    import importlib.util

    spec = importlib.util.spec_from_file_location("as_conftest", tmp_path / "conftest.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert "tiny_cnn" in zoo.model_names()
    with pytest.raises(
        ValueError, match="already registered"
    ):  # another file may not take the name
        zoo.register_model(
            "tiny_cnn",
            build=None,
            inputs=None,
            small={"batch": 1, "num_classes": 2},
            full={"batch": 1, "num_classes": 2},
        )


# --------------------------------------------------------------------------------------------
# pytest: the graph suite parametrizes over the user's models


@pytest.fixture
def user_project(pytester, monkeypatch):
    for var in (
        "CI",
        "EXPECTTEST_ACCEPT",
        "HARNESS_EXPECT_DIR",
        "HARNESS_FULL",
        user_models.ENV_VAR,
    ):
        monkeypatch.delenv(var, raising=False)
    (pytester.path / "suites").mkdir()
    shutil.copy(REPO / "suites" / "test_graphs.py", pytester.path / "suites" / "test_graphs.py")
    (pytester.path / "mysuite").mkdir()
    (pytester.path / "mysuite" / "models.py").write_text(TINY_MODELS)
    return pytester


def _suggested_command(result) -> list[str]:
    lines = [
        line.strip()
        for line in result.stdout.lines
        if line.strip().startswith(("pytest --accept", "HARNESS_MODELS="))
    ]
    assert lines, result.stdout.str()
    return shlex.split(lines[0])


def _run_suggested(pytester, monkeypatch, command: list[str]):
    env = [c for c in command if "=" in c and not c.startswith("-") and command.index(c) == 0]
    for assignment in env:
        key, _, value = assignment.partition("=")
        monkeypatch.setenv(key, value)
    argv = command[len(env) :]
    assert argv[0] == "pytest"
    return pytester.runpytest_subprocess(*argv[1:], "-p", "no:cacheprovider")


@pytest.mark.slow
def test_model_named_in_ini_is_selected_by_k_and_its_hint_command_works(user_project, monkeypatch):
    user_project.makeini("[pytest]\nharness_models = mysuite/models.py\n")
    result = user_project.runpytest_subprocess(
        "suites", "-k", "tiny_cnn and jit", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1, passed=1)  # no golden yet; the program check passes
    result.stdout.fnmatch_lines(["*no golden *tiny_cnn.jit.expect yet*"])
    command = _suggested_command(result)

    _run_suggested(user_project, monkeypatch, command).assert_outcomes(passed=1)
    golden = user_project.path / "mysuite" / "expect" / "tiny_cnn.jit.expect"  # beside its suite
    assert golden.is_file() and "%conv/_convolution" in golden.read_text()
    assert not (user_project.path / "expect").exists()


@pytest.mark.slow
def test_model_registered_in_a_conftest_gets_a_hint_command_that_works(user_project, monkeypatch):
    # Registered the old way (a conftest of another suite): the suggested command must load it.
    (user_project.path / "mysuite" / "models.py").rename(
        user_project.path / "mysuite" / "conftest.py"
    )
    user_project.makeini("[pytest]\n")
    result = user_project.runpytest_subprocess(
        "suites", "mysuite", "-k", "tiny_cnn and fx and golden", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1)
    command = _suggested_command(result)
    assert command[0].startswith("HARNESS_MODELS="), command
    _run_suggested(user_project, monkeypatch, command).assert_outcomes(passed=1)


def test_bad_module_in_ini_is_a_usage_error_naming_it(user_project):
    user_project.makeini("[pytest]\nharness_models = mysuite/nope.py\n")
    result = user_project.runpytest("suites")  # refused at configure: nothing is imported
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*cannot load models from 'mysuite/nope.py' (named by harness_models in tox.ini)*"]
    )


def test_k_that_selects_nothing_says_how_to_register_a_model(pytester, monkeypatch):
    monkeypatch.delenv(user_models.ENV_VAR, raising=False)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest("-k", "tiny_cnn")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        ["*no test matched -k 'tiny_cnn'*", "*harness_models*HARNESS_MODELS*"]
    )


NOISY_MODEL = """
import torch
import torch.nn.functional as F
from torch import nn
from harness.zoo import register_model


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(F.dropout(x, 0.5))  # the classic bug: no training=self.training


register_model(
    "noisy",
    build=lambda cfg: Noisy(),
    inputs=lambda cfg, g: (torch.randn(cfg["batch"], 4, generator=g),),
    small={"batch": 2, "num_classes": 3},
    full={"batch": 2, "num_classes": 3},
)
"""


@pytest.mark.slow
def test_random_model_in_eval_mode_is_named_and_never_accepted(user_project):
    (user_project.path / "mysuite" / "noisy.py").write_text(NOISY_MODEL)
    user_project.makeini("[pytest]\nharness_models = mysuite/noisy.py\n")
    result = user_project.runpytest_subprocess(
        "suites", "--accept", "-k", "noisy and jit", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*model 'noisy' (small) is non-deterministic in eval mode*aten.bernoulli*"
            "training=self.training*not accepted*"
        ]
    )
    result.stdout.no_fnmatch_line("*differs from eager*")
    assert not list(user_project.path.rglob("noisy.*.expect")), "no golden of a random draw"
