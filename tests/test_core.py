"""The shared core: one settings registry and switch rule, one exit-code table, one project
resolver, one scale table."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness import cli
from harness.core import exits, settings, units
from harness.core.project import head_commit, project_root


@pytest.mark.parametrize(
    "value,on",
    [
        ("1", True),
        ("true", True),
        ("woodpecker", True),
        ("", False),
        ("0", False),
        ("false", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_one_switch_rule(monkeypatch, value, on):
    for flag in (s for s in settings.REGISTRY.values() if s.kind == settings.FLAG):
        monkeypatch.setenv(flag.name, value)
        assert flag.get() is on, flag.name


def test_harness_full_off_means_fast_for_goldens_and_workloads(monkeypatch):
    from harness.measure import timing
    from harness.measure.workloads import size

    monkeypatch.setenv("HARNESS_FULL", "off")
    assert size() == "small" and timing.loop_settings() == timing.FAST


def test_usage_error_is_bad_input(capsys):
    assert cli.main(["gate"]) == exits.BAD_INPUT  # missing BASE and HEAD
    assert cli.main(["no-such-command"]) == exits.BAD_INPUT
    assert cli.main(["graph", "no_such_model", "-f", "jit"]) == exits.BAD_INPUT
    assert "no_such_model" in capsys.readouterr().err


def test_internal_error_is_70_never_0_or_1(monkeypatch, capsys):
    from harness.commands import env

    def boom(args):
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(env, "run", boom)
    assert cli.main(["env"]) == exits.INTERNAL
    err = capsys.readouterr().err
    assert "ZeroDivisionError" in err and "internal error" in err


def test_a_reader_that_goes_away_ends_the_command_quietly_not_as_an_internal_error():
    # `harness advise latest | head -1`: the pipe closes while the command still prints
    flood = (
        "import sys\n"
        "from harness import cli\n"
        "from harness.commands import env\n"
        "env.run = lambda args: [print('x' * 80) for _ in range(100_000)]\n"
        "sys.exit(cli.main(['env']))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", flood], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == exits.PIPE_CLOSED
    assert "Traceback" not in err and "internal error" not in err


def test_project_is_found_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_PROJECT", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(exits.BadInput, match="not inside a harness checkout"):
        project_root()
    (tmp_path / "asv.conf.json").write_text("{}")
    (tmp_path / "suites" / "benchmarks").mkdir(parents=True)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert project_root() == tmp_path.resolve()


def test_head_commit_never_invents_a_hash(tmp_path):
    with pytest.raises(exits.BadInput, match="cannot read the current commit"):
        head_commit(tmp_path)  # not a git checkout
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with pytest.raises(exits.BadInput):
        head_commit(tmp_path)  # a repository without a commit


def test_one_scale_for_every_value():
    assert units.format_value(1.5e-3, "seconds") == "1.5 ms"
    assert units.scale("seconds", 1.5e-3) == (1e-3, "ms")
    assert units.format_value(3 * 2**20, "bytes") == "3 MiB"
    assert units.format_value(12, "ops") == "12 ops" and units.format_value(0.5, "ratio") == "0.5"
