"""Projects of their own: `harness init` (what it writes, what it refuses), how a project is
found, where its suites come from (harness.core.project.Suites) and which models the packaged
suites cover there. The end-to-end proof from a wheel in a fresh venv is
tests/test_own_project_e2e.py (slow tier)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.core import exits, project, scaffold, settings, user_models, zoo
from harness.runs import asv, bench

ROOT = Path(__file__).resolve().parents[1]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def made(tmp_path, capsys):
    """A project written by `harness init` into tmp_path/proj."""
    folder = tmp_path / "proj"
    assert main(["init", str(folder)]) == exits.PASS
    capsys.readouterr()
    return folder


# --------------------------------------------------------------------------------------------
# harness init


def test_init_writes_a_project_of_its_own(made):
    written = sorted(str(p.relative_to(made)) for p in made.rglob("*") if p.is_file())
    assert written == sorted(e.path for e in scaffold.plan(made))
    assert project.is_own_project(made) and not project.is_checkout(made)
    # asv reads the configuration as it is written (comments, the marker key it ignores)
    from asv import util

    conf = util.load_json(str(made / "asv.conf.json"), js_comments=True)
    assert conf["benchmark_dir"] == "benchmarks" and "branches" not in conf
    # the project's goldens are recorded with the installed torch, not the harness's pin
    ini = (made / "pytest.ini").read_text()
    assert f"harness_reference_torch = {scaffold.reference_torch()}" in ini
    assert user_models.find_ini(made) == (made / "pytest.ini", ["models.py"])
    assert "runs/" in (made / "results" / ".gitignore").read_text().split()
    assert "harness bench --quick" in (made / "README.md").read_text()


def test_a_second_init_changes_nothing_and_names_every_file(made, capsys):
    before = snapshot(made)
    assert main(["init", str(made)]) == exits.BAD_INPUT
    err = capsys.readouterr().err
    assert "wrote nothing" in err
    for entry in scaffold.plan(made):
        if not entry.optional:
            assert str(made / entry.path) in err, entry.path
    assert snapshot(made) == before


def test_one_existing_file_stops_init_before_anything_is_written(tmp_path, capsys):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "tiny_cnn.py").write_text("mine\n")
    assert main(["init", str(tmp_path)]) == exits.BAD_INPUT
    assert f"{tmp_path / 'benchmarks' / 'tiny_cnn.py'}" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["benchmarks", "tiny_cnn.py"]


def test_init_refuses_to_shadow_a_pytest_configuration(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-q"\n')
    assert main(["init", str(tmp_path)]) == exits.BAD_INPUT
    assert "pyproject.toml (a pytest configuration that pytest.ini would override)" in (
        capsys.readouterr().err
    )
    assert [p.name for p in tmp_path.iterdir()] == ["pyproject.toml"]


def test_init_adds_to_an_existing_folder_and_keeps_its_files(tmp_path):
    (tmp_path / "README.md").write_text("# mine\n\nSome text.\n")
    (tmp_path / ".gitignore").write_text("build/\n")
    assert main(["init", str(tmp_path)]) == exits.PASS
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("# mine\n\nSome text.\n") and scaffold.README_HEADING in readme
    assert (tmp_path / ".gitignore").read_text() == "build/\n"


def test_a_readme_init_cannot_read_or_that_is_a_link_stops_it_before_anything_is_written(
    tmp_path, capsys
):
    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "README.md").write_bytes("# caf\xe9\n".encode("latin-1"))
    assert main(["init", str(latin)]) == exits.BAD_INPUT
    assert f"cannot read {latin / 'README.md'} as UTF-8 text" in capsys.readouterr().err
    assert [p.name for p in latin.iterdir()] == ["README.md"]

    linked = tmp_path / "linked"
    linked.mkdir()
    (tmp_path / "elsewhere.md").write_text("# elsewhere\n")
    (linked / "README.md").symlink_to(tmp_path / "elsewhere.md")
    assert main(["init", str(linked)]) == exits.BAD_INPUT
    assert str(linked / "README.md") in capsys.readouterr().err
    assert [p.name for p in linked.iterdir()] == ["README.md"]
    assert (tmp_path / "elsewhere.md").read_text() == "# elsewhere\n"


def test_init_refuses_a_harness_checkout_and_a_file(tmp_path, capsys):
    assert main(["init", str(ROOT)]) == exits.BAD_INPUT
    assert "is a harness checkout" in capsys.readouterr().err
    (tmp_path / "f").write_text("")
    assert main(["init", str(tmp_path / "f")]) == exits.BAD_INPUT


# --------------------------------------------------------------------------------------------
# finding the project and its suites


def test_asv_conf_is_read_as_asv_reads_it(tmp_path):
    (tmp_path / "asv.conf.json").write_text(
        '{\n  "version": 1,  // asv allows this\n  "harness_project": true,\n}\n'
    )
    assert project.is_own_project(tmp_path)
    (tmp_path / "asv.conf.json").write_text('{"version": 1, oops')
    with pytest.raises(exits.BadInput, match=r"cannot read .*asv\.conf\.json"):
        project.asv_conf(tmp_path)


def test_a_project_is_found_from_a_subfolder(made, monkeypatch):
    monkeypatch.delenv(settings.PROJECT.name, raising=False)
    monkeypatch.chdir(made / "tests")
    assert project.project_root() == made
    monkeypatch.chdir(ROOT / "suites")
    assert project.project_root() == ROOT


def test_bench_without_a_commit_names_the_git_commands(made, capsys, monkeypatch, clean_registry):
    monkeypatch.delenv(settings.PROJECT.name, raising=False)
    monkeypatch.chdir(made)
    subprocess.run(["git", "init", "-q"], cwd=made, check=True)
    assert main(["bench", "--quick"]) == exits.BAD_INPUT
    err = capsys.readouterr().err
    assert "at least one commit" in err and "add -A" in err and "commit -m" in err
    assert not (made / "results" / "runs").exists()


def test_a_checkout_reads_its_own_suites_as_before():
    found = project.suites(ROOT)
    assert not found.own_project and found.builtin == ROOT / "suites" / "benchmarks"
    assert found.environment() == {}
    modules = sorted(p.stem for p in found.builtin.glob("*.py") if not p.stem.startswith("_"))
    assert list(found.modules()) == modules
    assert found.defaults(bench.ONLY_WHEN_NAMED) == [m for m in modules if m != "canary"]


def test_a_project_of_its_own_runs_its_modules_beside_the_packaged_suites(made, tmp_path):
    found = project.suites(made)
    assert found.own_project and found.own == made / "benchmarks"
    assert found.builtin == project.packaged_suites() / "benchmarks"
    assert bench.check_suites(made, None) == ["tiny_cnn", "models", "instructions"]
    assert bench.check_suites(made, ["fusion"]) == ["fusion"]
    with pytest.raises(exits.BadInput, match=r"'nope'.*tiny_cnn"):
        bench.check_suites(made, ["nope"])
    env = found.environment()
    assert env[settings.OWN_MODELS.name] == "1" and env[settings.PROJECT.name] == str(made)
    assert env["ASV_PYTHONPATH"] == str(made)  # its modules import its models module

    dest = asv.benchmark_subset(made, ["tiny_cnn", "models"], tmp_path / "b")
    assert sorted(p.name for p in dest.glob("*.py")) == ["__init__.py", "models.py", "tiny_cnn.py"]
    assert (dest / "tiny_cnn.py").read_text() == (made / "benchmarks" / "tiny_cnn.py").read_text()


def test_a_project_of_its_own_overlays_its_durations_on_the_packaged_ones(made, monkeypatch):
    from harness.runs import shard

    assert project.suites(ROOT).durations_files() == [ROOT / "suites" / "durations.json"]
    packaged, own = project.suites(made).durations_files()
    assert (
        packaged == project.packaged_suites() / "durations.json" and own == made / "durations.json"
    )
    # before the project measures any, the packaged suites' seconds (for --suite fusion) count
    builtin, source = shard.overlaid([packaged, own], "quick")
    assert builtin and source == packaged
    name = next(iter(builtin))
    shard.update_durations(own, "quick", {name: 123.0, "tiny_cnn.T.time_x": 2.0}, ["m/r"])
    mine, source = shard.overlaid([packaged, own], "quick")
    assert source == own and mine[name] == 123.0 and mine["tiny_cnn.T.time_x"] == 2.0
    assert len(mine) == len(builtin) + 1
    # `harness durations` refreshes the project's file, not one inside the package
    monkeypatch.chdir(made)
    assert project.suites(project.project_root()).durations_files()[-1] == own


def test_a_projects_models_suite_is_planned_with_its_own_durations_only(made):
    from harness.runs import shard

    # the packaged file timed the models suite over the built-in zoo: not this project's models
    packaged, own = project.suites(made).durations_files()
    zoo_timed = shard.load_durations(packaged, "quick")
    assert any(n.startswith("models.") for n in zoo_timed)
    planned, _ = shard.project_durations(project.suites(made), "quick")
    assert not any(n.startswith("models.") for n in planned)
    assert "fusion.PointwiseChain.track_compiled_over_eager" in planned  # --suite fusion's
    shard.update_durations(own, "quick", {"models.PeakMemory.track_peak_memory": 4.0}, ["m/r"])
    planned, _ = shard.project_durations(project.suites(made), "quick")
    assert planned["models.PeakMemory.track_peak_memory"] == 4.0  # once it measured its own
    # a checkout plans with its file as it is
    assert shard.project_durations(project.suites(ROOT), "quick")[0] == shard.load_durations(
        ROOT / "suites" / "durations.json", "quick"
    )


def test_a_module_may_not_take_a_built_in_suites_name(made):
    (made / "benchmarks" / "fusion.py").write_text("")
    with pytest.raises(exits.BadInput, match=r"benchmarks/fusion\.py has the name of a harness"):
        project.suites(made).modules()


def test_the_packaged_suites_cover_only_the_projects_models(made, monkeypatch, clean_registry):
    monkeypatch.setenv(settings.PROJECT.name, str(made))
    monkeypatch.chdir(made.parent)  # found from HARNESS_PROJECT, not the working directory
    monkeypatch.delenv(settings.OWN_MODELS.name, raising=False)
    assert "alexnet" in user_models.suite_models()  # a checkout: the whole zoo, as before
    monkeypatch.setenv(settings.OWN_MODELS.name, "1")
    assert user_models.suite_models() == ["tiny_cnn"]
    assert zoo.get_model("tiny_cnn").origin == str(made / "models.py")


def test_every_package_is_listed_and_the_suites_ship():
    """pyproject lists the packages (harness.suites maps to suites/): a new subpackage must be
    added there, or a wheel silently lacks it."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
        import tomli as tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "harness").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    on_disk |= {
        "harness." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "suites").rglob("__init__.py")
    }
    assert set(conf["packages"]) == on_disk
    assert conf["package-dir"] == {"harness.suites": "suites"}
    assert (project.packaged_suites() / "benchmarks" / "models.py").is_file()
    json.loads((ROOT / "suites" / "durations.json").read_text())  # shipped as package data


def test_the_models_suite_needs_a_model_of_the_project(made):
    (made / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    with pytest.raises(exits.BadInput, match=r"names none: name the module .*harness_models"):
        bench.check_suites(made, None)
    assert bench.check_suites(made, ["tiny_cnn"]) == ["tiny_cnn"]


# --------------------------------------------------------------------------------------------
# every command knows the project's models


OWN_MODEL = """

class PatchMixer(nn.Module):
    def __init__(self, hidden: int, num_classes: int):
        super().__init__()
        self.mix = nn.Linear(3 * 8 * 8, hidden)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x):
        patches = x.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).flatten(3)
        return self.head(self.mix(patches.flatten(1, 2)).mean(dim=1))


register_model(
    "patch_mixer",
    build=lambda cfg: PatchMixer(cfg["hidden"], cfg["num_classes"]),
    inputs=lambda cfg, gen: (torch.randn(cfg["batch"], 3, 32, 32, generator=gen),),
    small={"batch": 2, "hidden": 16, "num_classes": 10},
    full={"batch": 8, "hidden": 64, "num_classes": 10},
    image_model=True,
    kind="mlp",
)
"""

CL_ROW = "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous"


def test_report_and_advise_know_the_projects_models(made, monkeypatch, capsys, clean_registry):
    from test_advise import write_run
    from test_gate_support import draw

    with open(made / "models.py", "a") as f:  # a model of one's own, beside the example
        f.write(OWN_MODEL)
    cases = {
        (f"'{model}'", f"'{mode}'"): draw(12, mean=0.7, seed=i)
        for i, (model, mode) in enumerate(
            (m, mode) for m in ("patch_mixer", "tiny_cnn") for mode in ("inference", "training")
        )
    }
    own = "tiny_cnn.Inference.track_inference_mode_over_no_grad"
    write_run(made / "results", {CL_ROW: (["model", "mode"], cases), own: ([], {(): draw(12)})})
    monkeypatch.delenv(settings.PROJECT.name, raising=False)
    monkeypatch.chdir(made)

    assert main(["models"]) == exits.PASS
    kinds = {line.split()[0]: line.split()[5] for line in capsys.readouterr().out.splitlines()[2:]}
    assert kinds["patch_mixer"] == "mlp" and kinds["tiny_cnn"] == "conv"
    assert kinds["alexnet"] == "conv" and kinds["word_lm"] == "recurrent"

    assert main(["advise"]) == exits.PASS
    out = capsys.readouterr().out
    assert "unknown" not in out, out
    assert "tiny_cnn small (batch=2, width=8, image=32, num_classes=10)" in out
    assert "patch_mixer small (batch=2, hidden=16, num_classes=10)" in out

    assert main(["report"]) == exits.PASS
    capsys.readouterr()
    report = made / "results" / "report"
    md = (report / "report.md").read_text()
    assert "unknown" not in md
    # the sanity band for conv nets holds the conv net the project declares, not its MLP
    bands = [line for line in md.splitlines() if line.startswith("| channels_last / contiguous")]
    assert len(bands) == 4
    for line in bands:
        if "patch_mixer" in line:
            assert "not judged: the published range is about models of kind 'conv'" in line
        else:
            assert "published range: check the set-up" in line or "within the published" in line
    # the suites this run holds, plotted; none of the suites it does not hold
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert [h.split(":")[0] for h in headings[:2]] == ["## models", "## tiny_cnn"]
    assert not any(h.startswith(("## fusion", "## transfer", "## amp")) for h in headings)
    for png in ("speedups-models.png", "speedups-tiny_cnn.png"):
        assert (report / png).read_bytes()[:4] == b"\x89PNG" and f"]({png})" in md
    assert "Not in this run: torch.compile" in md and "| torch.compile " not in md


def test_a_models_module_that_does_not_import_stops_bench_before_asv(
    made, monkeypatch, capsys, clean_registry
):
    line = len((made / "models.py").read_text().splitlines()) + 2
    with open(made / "models.py", "a") as f:
        f.write("\ndef broken(:\n")

    def asv_started(*_a, **_k):
        raise AssertionError("asv must not start")

    monkeypatch.setattr(asv, "run", asv_started)
    monkeypatch.delenv(settings.PROJECT.name, raising=False)
    monkeypatch.chdir(made)
    assert main(["bench", "--quick"]) == exits.BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "harness bench: error: cannot load models from 'models.py' (named by harness_models in "
        f"pytest.ini): SyntaxError: invalid syntax (models.py, line {line}). Fix the module, or "
        "remove 'models.py' from harness_models in pytest.ini."
    ]
    assert not (made / "results" / "runs").exists()
