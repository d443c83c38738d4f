"""The pytest plugin, driven through pytester: accept, CI refusal, orphans, xdist, bad ids."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# A golden test that needs no torch capture: the text comes from an env var, so one test file
# can be made to produce a changed graph without editing it.
TEST_FILE = """
import os, pytest

@pytest.mark.golden("alpha.jit")
def test_alpha(golden):
    text = os.environ.get("FAKE_GRAPH", "%0: f32[2] = aten::relu_(x)\\nreturn (%0)\\n")
    golden.check(text, frontend="jit", model="alpha (small)")

@pytest.mark.golden("beta.fx")
def test_beta(golden):
    golden.check("y: f32[2] = aten.relu.default(x)\\nreturn y\\n", frontend="fx", model="beta")
"""


@pytest.fixture
def project(golden_project):
    return golden_project("test_fake_graphs", TEST_FILE)


def expect_files(pytester):
    return sorted(p.name for p in (pytester.path / "expect").glob("*.expect"))


def test_missing_golden_fails_with_the_command_that_creates_it(project):
    result = project.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*no golden *alpha.jit.expect yet*", "*pytest --accept*test_alpha*"]
    )
    assert not (project.path / "expect").exists(), "a compare run must not write anything"


def test_accept_writes_goldens_then_plain_run_passes(project):
    project.runpytest("--accept").assert_outcomes(passed=2)
    assert expect_files(project) == ["alpha.jit.expect", "beta.fx.expect"]
    text = (project.path / "expect" / "alpha.jit.expect").read_text()
    assert "# frontend: jit" in text and "# model: alpha (small)" in text and "# torch: " in text
    project.runpytest().assert_outcomes(passed=2)


def test_accept_twice_is_byte_identical(project):
    project.runpytest("--accept").assert_outcomes(passed=2)
    first = (project.path / "expect" / "alpha.jit.expect").read_bytes()
    project.runpytest("--accept").assert_outcomes(passed=2)
    assert (project.path / "expect" / "alpha.jit.expect").read_bytes() == first


def test_changed_graph_fails_with_diff_and_op_counts(project, monkeypatch):
    project.runpytest("--accept").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_GRAPH", "%0: f32[2] = aten::gelu(x)\nreturn (%0)\n")
    result = project.runpytest()
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*does not match golden*alpha.jit.expect*",
            "*Op counts (expected -> actual):*",
            "*aten::gelu*0 -> 1*",
            "*aten::relu_*1 -> 0*",
            "*-%0: f32*= aten::relu_(x)*",
            "*+%0: f32*= aten::gelu(x)*",
            "*pytest --accept*",
        ]
    )


def test_expecttest_env_var_accepts(project, monkeypatch):
    monkeypatch.setenv("EXPECTTEST_ACCEPT", "1")
    project.runpytest().assert_outcomes(passed=2)
    assert expect_files(project) == ["alpha.jit.expect", "beta.fx.expect"]


@pytest.mark.parametrize("ci", ["true", "woodpecker", "1", "Yes"])
def test_accept_refused_under_ci_unless_forced(project, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    result = project.runpytest("--accept")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*refusing to accept goldens because CI is set*--force-accept*"])
    assert not (project.path / "expect").exists()
    project.runpytest("--accept", "--force-accept").assert_outcomes(passed=2)
    assert len(expect_files(project)) == 2


@pytest.mark.parametrize("ci", ["", "0", "false", "no", "OFF"])
def test_ci_switched_off_lets_accept_run(project, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    project.runpytest("--accept").assert_outcomes(passed=2)
    assert len(expect_files(project)) == 2


def test_crlf_golden_is_tolerated(project):
    project.runpytest("--accept").assert_outcomes(passed=2)
    path = project.path / "expect" / "alpha.jit.expect"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    project.runpytest().assert_outcomes(passed=2)


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda raw: raw[: len(raw) - 12], "*truncated*"),
        (lambda raw: b"\x00\x01\x02binary" + raw, "*binary*"),
        (lambda raw: b"%0 = something\n", "*does not start with the harness golden header*"),
    ],
)
def test_damaged_golden_is_a_clear_failure(project, damage, message):
    project.runpytest("--accept").assert_outcomes(passed=2)
    path = project.path / "expect" / "alpha.jit.expect"
    path.write_bytes(damage(path.read_bytes()))
    result = project.runpytest()
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([message + "git checkout*"])


def test_orphans_reported_then_removed_only_by_unfiltered_accept(project):
    project.runpytest("--accept").assert_outcomes(passed=2)
    # model 'alpha' is known to the run (a test declares alpha.jit): its other goldens are orphans
    orphan = project.path / "expect" / "alpha.dynamo.expect"
    orphan.write_text("left behind by a deleted test\n")

    result = project.runpytest()
    result.stdout.fnmatch_lines(["*orphan golden *alpha.dynamo.expect: no test produces it*"])
    assert orphan.exists(), "a compare run never deletes"

    for filtered in (["-k", "alpha"], ["test_fake_graphs.py"], ["test_fake_graphs.py::test_alpha"]):
        project.runpytest("--accept", *filtered)
        assert orphan.exists(), f"a filtered accept run ({filtered}) must not delete orphans"

    result = project.runpytest("--accept")
    result.stdout.fnmatch_lines(["*removed orphan golden *alpha.dynamo.expect*"])
    assert not orphan.exists()
    assert expect_files(project) == ["alpha.jit.expect", "beta.fx.expect"]


def test_golden_of_a_model_unknown_to_the_run_is_kept_not_an_orphan(project):
    project.runpytest("--accept").assert_outcomes(passed=2)
    theirs = project.path / "expect" / "tiny_cnn.jit.expect"
    theirs.write_text("a golden of a model registered by a suite outside this run\n")
    result = project.runpytest("--accept")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*kept golden *tiny_cnn.jit.expect: model 'tiny_cnn' not registered in this run*"]
    )
    result.stdout.no_fnmatch_line("*orphan golden*tiny_cnn*")
    assert theirs.exists(), (
        "an unfiltered accept run must not delete a golden whose model it does not know"
    )


@pytest.mark.slow  # the second tier: ~9 s of the default tier's budget under load
def test_xdist_accept_writes_every_golden_and_judges_orphans_once(project):
    pytest.importorskip("xdist")
    (project.path / "expect").mkdir()
    orphan = project.path / "expect" / "beta.jit.expect"  # model beta is known: an orphan
    orphan.write_text("stale\n")
    result = project.runpytest_subprocess("-n", "2", "--accept", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert expect_files(project) == ["alpha.jit.expect", "beta.fx.expect"]
    assert not list((project.path / "expect").glob(".*.tmp")), "no temporary files left behind"
    result = project.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    # what the workers wrote reaches the controller's summary
    (project.path / "expect" / "alpha.jit.expect").unlink()
    result = project.runpytest_subprocess("-n", "2", "--accept", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "pytest --accept: 1 golden(s) written (1 new, 0 updated), 0 removed:",
            "  new      expect/alpha.jit.expect",
        ]
    )


def test_accept_ends_with_what_it_wrote_updated_and_removed(project, monkeypatch):
    result = project.runpytest("--accept")
    result.stdout.fnmatch_lines(
        [
            "pytest --accept: 2 golden(s) written (2 new, 0 updated), 0 removed:",
            "  new      expect/alpha.jit.expect",
            "  new      expect/beta.fx.expect",
        ]
    )
    result = project.runpytest("--accept")
    result.stdout.fnmatch_lines(
        ["pytest --accept: no golden written, updated or removed (every one matched)"]
    )
    orphan = project.path / "expect" / "alpha.dynamo.expect"
    orphan.write_text("left behind by a deleted test\n")
    monkeypatch.setenv("FAKE_GRAPH", "%0: f32[2] = aten::gelu(x)\nreturn (%0)\n")
    result = project.runpytest("--accept")
    result.stdout.fnmatch_lines(
        [
            "pytest --accept: 1 golden(s) written (0 new, 1 updated), 1 removed:",
            "  updated  expect/alpha.jit.expect",
            "  removed  expect/alpha.dynamo.expect",
        ]
    )
    assert "pytest --accept" not in project.runpytest().stdout.str()  # a compare run: no summary


def test_accept_past_a_dozen_goldens_gives_the_counts_and_the_folder(golden_project):
    many = golden_project(
        "test_many",
        """
import pytest

@pytest.mark.parametrize("i", range(13))
def test_g(golden, i):
    golden.check(f"y{i}: f32[2] = aten.relu.default(x)\\nreturn y{i}\\n", name=f"m{i}.fx")
""",
    )
    result = many.runpytest("--accept")
    result.assert_outcomes(passed=13)
    result.stdout.fnmatch_lines(
        [
            "pytest --accept: 13 golden(s) written (13 new, 0 updated), 0 removed, in expect/; "
            "review them with `git status expect/` and `git diff expect/`"
        ]
    )
    assert "  new " not in result.stdout.str()


def test_the_graph_suites_xdist_group_mark_is_known_without_pytest_xdist(golden_project):
    # the graph suite marks each case with xdist_group; pytest-xdist is not a dependency
    marked = golden_project(
        "test_grouped",
        """
import pytest

@pytest.mark.xdist_group("alexnet")
def test_grouped():
    pass
""",
    )
    result = marked.runpytest_subprocess(
        "-p", "no:xdist", "-p", "no:cacheprovider", "-W", "error::pytest.PytestUnknownMarkWarning"
    )
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("bad_id", ["../escape", "sub/dir", "a..b", ""])
def test_golden_id_that_could_escape_is_refused(project, bad_id):
    project.makepyfile(
        test_bad=f"""
def test_bad(golden):
    golden.check("x\\n", name={bad_id!r})
"""
    )
    result = project.runpytest("--accept", "test_bad.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*is not allowed*Nothing was written*" if bad_id else "*declare the golden*"]
    )
    assert not list(project.path.parent.glob("escape*"))


def test_unwritable_expect_dir_is_a_clear_error(project, monkeypatch):
    import os

    if os.geteuid() == 0:
        # root ignores directory permissions: point the store at a path below a regular file.
        blocker = project.path / "blocker"
        blocker.write_text("a file, not a directory\n")
        monkeypatch.setenv("HARNESS_EXPECT_DIR", str(blocker / "expect"))
    else:
        (project.path / "expect").mkdir(mode=0o500)
    result = project.runpytest("--accept")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*cannot write golden*HARNESS_EXPECT_DIR*"])


def test_full_mode_uses_its_own_directory(project):
    project.runpytest("--accept", "--full").assert_outcomes(passed=2)
    assert sorted(p.name for p in (project.path / "expect" / "full").glob("*.expect")) == [
        "alpha.jit.expect",
        "beta.fx.expect",
    ]
    assert expect_files(project) == []


@pytest.mark.parametrize("cwd", [".", "sub"])
def test_suggested_accept_command_works_from_where_pytest_ran(project, monkeypatch, cwd):
    import shlex

    (project.path / "sub").mkdir()
    monkeypatch.chdir(project.path / cwd)
    args = [] if cwd == "." else [".."]
    result = project.runpytest(*args)
    result.assert_outcomes(failed=2)
    command = next(
        line.strip() for line in result.stdout.lines if line.strip().startswith("pytest --accept")
    )
    argv = shlex.split(command)
    assert argv[:2] == ["pytest", "--accept"]
    project.runpytest(*argv[1:]).assert_outcomes(passed=1)
    project.runpytest(*args).assert_outcomes(passed=1, failed=1)  # that one golden now exists


def test_suggested_accept_command_leaves_out_the_loadgroup_suffix(golden_project):
    # under `--dist loadgroup` a grouped test's node id ends in `@<group>` (set on each worker,
    # as the root conftest.py does it), which pytest cannot select
    import shlex
    from pathlib import Path

    project = golden_project(
        "test_grouped_golden",
        """
import pytest

@pytest.mark.xdist_group("alpha")
@pytest.mark.golden("alpha.fx")
def test_alpha(golden):
    golden.check("y: f32[2] = aten.relu.default(x)\\nreturn y\\n", frontend="fx", model="alpha")
""",
    )
    root_conftest = (Path(__file__).parents[1] / "conftest.py").read_text()
    project.makeconftest(
        root_conftest + "\n\ndef pytest_configure(config):\n    config.option.loadgroup = True\n"
    )
    result = project.runpytest("-p", "no:xdist")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_alpha@alpha*"])  # the suffix is there to leave out
    command = next(
        line.strip() for line in result.stdout.lines if line.strip().startswith("pytest --accept")
    )
    assert "@" not in command
    project.runpytest("-p", "no:xdist", *shlex.split(command)[1:]).assert_outcomes(passed=1)
    project.runpytest("-p", "no:xdist").assert_outcomes(passed=1)
