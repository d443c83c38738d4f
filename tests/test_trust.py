"""The one checker for names and files from elsewhere (harness.core.trust)."""

import json
import os

import pytest

from harness.core import trust
from harness.core.exits import BadInput


@pytest.mark.parametrize("name", ["vm-cpu", "ci-h100-NVIDIA-H100-80GB-HBM3", "a", "x_1.2"])
def test_machine_names_the_harness_writes_pass(name):
    assert trust.is_machine(name)


@pytest.mark.parametrize(
    "name",
    ["", "..", ".", "../x", "/abs", "a/b", "-x", ".hidden", "a..b", "a\nb", "é", "x" * 201, 3],
)
def test_hostile_machine_names_are_refused(name):
    assert not trust.is_machine(name)
    with pytest.raises(BadInput, match="refused"):
        trust.check_machine(name, "runs/")


@pytest.mark.parametrize(
    "name",
    [
        "20261130T174512Z-1a2b3c4d-5e6f70",
        "20261130T174512Z-1a2b3c4d-5e6f70-nightly",
        "20261130T174512Z-abc-imported_",
    ],
)
def test_run_ids_the_harness_writes_pass(name):
    assert trust.is_run_id(name)


@pytest.mark.parametrize(
    "name", ["..", "latest", "20261130T174512Z-..", "20261130T174512Z-a/b", "2026-x"]
)
def test_other_run_ids_are_refused(name):
    assert "run id" in trust.why_not_run_id(name)


@pytest.mark.parametrize(
    "rel",
    [
        "run.json",
        "asv/vm-cpu/1a2b3c4d-existing-py_work_.venv_bin_python.json",
        "row-facts/a_b-0123456789.json",
    ],
)
def test_record_paths_the_harness_writes_pass(rel):
    assert trust.why_not_record_path(rel) == ""


@pytest.mark.parametrize(
    "rel, says",
    [
        ("..", "'..'"),
        ("asv/../../x", "'..'"),
        ("a/./b", "'.'"),
        (".git/config", ".git"),
        ("asv/.GIT/hooks", ".git"),
        ("/etc/passwd", "''"),
        ("a//b", "''"),
        ("a\\b", "not"),
        ("a b", "not"),
        ("/".join(["d"] * 12), "deep"),
    ],
)
def test_hostile_record_paths_are_named(rel, says):
    assert says in trust.why_not_record_path(rel)


def test_inside_accepts_new_paths_below_and_refuses_escapes_and_links(tmp_path):
    own = tmp_path / "own"
    (own / "a").mkdir(parents=True)
    assert trust.inside(own, "a/b/c.json") == own.resolve() / "a/b/c.json"
    for bad in ("../x", "a/../../x", str(tmp_path / "x")):
        with pytest.raises(BadInput, match="outside"):
            trust.inside(own, bad)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", own / "link")
    with pytest.raises(BadInput, match="symbolic link"):
        trust.inside(own, "link/x.json")
    # a folder reached through a link is still the folder: only links below it are refused
    os.symlink(own, tmp_path / "alias")
    assert trust.inside(tmp_path / "alias", "a/x") == own.resolve() / "a/x"


def test_links_in_lists_every_link_without_following(tmp_path):
    (tmp_path / "r/asv").mkdir(parents=True)
    os.symlink("/etc/passwd", tmp_path / "r/asv/machine.json")
    os.symlink("/", tmp_path / "r/root")
    assert trust.links_in(tmp_path / "r") == [tmp_path / "r/asv/machine.json", tmp_path / "r/root"]
    assert trust.links_in(tmp_path / "r/asv/machine.json") == [tmp_path / "r/asv/machine.json"]


def test_deep_json_is_refused_without_recursion(tmp_path):
    deep = tmp_path / "run.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(BadInput, match="nests deeper"):
        trust.load(deep, "run.json")
    # brackets inside strings do not count
    assert trust.loads(json.dumps({"name": "[" * 500}), "x") == {"name": "[" * 500}


@pytest.mark.parametrize(
    "data, says", [(b"\xff\xfe", "UTF-8"), (b"{", "does not parse"), (b"", "does not parse")]
)
def test_malformed_json_names_the_file(data, says):
    with pytest.raises(BadInput, match=says):
        trust.loads(data, "runs/m/r/run.json")


def test_load_refuses_links_folders_and_oversized_files(tmp_path):
    (tmp_path / "big.json").write_bytes(b" " * 100)
    with pytest.raises(BadInput, match="over the"):
        trust.load(tmp_path / "big.json", max_bytes=10)
    os.symlink(tmp_path / "big.json", tmp_path / "link.json")
    with pytest.raises(BadInput, match="symbolic link"):
        trust.load(tmp_path / "link.json")
    with pytest.raises(BadInput, match="folder"):
        trust.load(tmp_path)
    with pytest.raises(FileNotFoundError):
        trust.load(tmp_path / "none.json")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(BadInput, match="not a JSON object"):
        trust.load_object(tmp_path / "list.json")
