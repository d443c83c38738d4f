"""Goldens per torch version: expect/torch-<major.minor>/ variants (store + plugin), and the
committed goldens' headers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.golden import store

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

TEST_FILE = """
import os, pytest

@pytest.mark.golden("alpha.aot")
def test_alpha(golden):
    text = os.environ.get("FAKE_GRAPH", "v: f32[2] = aten.view.default(x, [2])\\nreturn (v,)\\n")
    golden.check(text, frontend="aot", model="alpha (small)")

@pytest.mark.golden("beta.fx")
def test_beta(golden):
    golden.check("y: f32[2] = aten.relu.default(x)\\nreturn y\\n", frontend="fx", model="beta")
"""
NEXT_GRAPH = "v: f32[2] = aten._unsafe_view.default(x, [2])\nreturn (v,)\n"


@pytest.fixture
def project(golden_project):
    return golden_project("test_fake_lanes", TEST_FILE)


def _under_torch(monkeypatch, version: str) -> None:
    # pytester runs pytest in this process: the plugin reads the torch version through the store
    monkeypatch.setattr(store, "torch_version", lambda: version)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.expect"))


def test_lanes_are_major_minor():
    assert store.torch_lane("2.15.0+cu132") == "2.15"
    assert store.torch_lane("2.16.0.dev20261201+cpu") == "2.16"
    assert store.torch_lane("2.14.1") == store.REFERENCE_TORCH


def test_the_reference_lane_is_the_torch_the_test_extra_pins():
    (pin,) = re.findall(r'"torch==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert store.torch_lane(pin) == store.REFERENCE_TORCH


def test_lookup_order_is_most_specific_first(tmp_path):
    want = [
        tmp_path / "cuda" / "torch-2.15" / "m.fx.expect",
        tmp_path / "torch-2.15" / "m.fx.expect",
        tmp_path / "cuda" / "m.fx.expect",
        tmp_path / "m.fx.expect",
    ]
    assert store.candidates(tmp_path, "m.fx", "cuda", "2.15") == want
    assert store.candidates(tmp_path, "m.fx", "cpu", "2.15") == [want[1], want[3]]
    assert store.candidates(tmp_path, "m.fx", "cpu", store.REFERENCE_TORCH) == [want[3]]
    assert store.lookup(tmp_path, "m.fx", "cuda", "2.15") == want[3]  # nothing committed
    for path in reversed(want):  # each more specific variant, once there, wins
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        assert store.lookup(tmp_path, "m.fx", "cuda", "2.15") == path
    assert store.lookup(tmp_path, "m.fx", "cpu", store.REFERENCE_TORCH) == want[3]
    # the reference golden is a write target only for the reference torch on the CPU
    assert store.accept_target(tmp_path, "m.fx", "cpu", "2.15") == want[1]
    assert store.accept_target(tmp_path, "m.fx", "cpu", store.REFERENCE_TORCH) == want[3]


def test_accept_under_another_torch_writes_a_variant_and_never_the_reference(project, monkeypatch):
    project.runpytest("--accept").assert_outcomes(passed=2)
    expect = project.path / "expect"
    reference = {p: p.read_bytes() for p in expect.glob("*.expect")}

    _under_torch(monkeypatch, "2.15.0+cu132")
    monkeypatch.setenv("FAKE_GRAPH", NEXT_GRAPH)
    failed = project.runpytest()
    failed.assert_outcomes(passed=1, failed=1)
    failed.stdout.fnmatch_lines(
        [
            "*No golden variant for torch 2.15 exists (expect/torch-2.15/alpha.aot.expect)*",
            "*pytest --accept*test_alpha*",
        ]
    )
    project.runpytest("--accept").assert_outcomes(passed=2)
    # the one printout that differs got a variant; beta, unchanged, did not
    assert _files(expect) == ["alpha.aot.expect", "beta.fx.expect", "torch-2.15/alpha.aot.expect"]
    assert {p: p.read_bytes() for p in expect.glob("*.expect")} == reference
    variant = store.read(expect / "torch-2.15" / "alpha.aot.expect")
    assert variant.torch_version == "2.15.0+cu132" and "_unsafe_view" in variant.body
    project.runpytest().assert_outcomes(passed=2)  # the 2.15 lane passes on its variant

    # the reference torch, the reference printout: the variant is not used
    _under_torch(monkeypatch, "2.14.1+cu130")
    monkeypatch.delenv("FAKE_GRAPH")
    result = project.runpytest()
    result.assert_outcomes(passed=2)
    assert "orphan" not in result.stdout.str()


def test_a_variant_equal_to_the_golden_below_it_is_removed_by_accept(project, monkeypatch):
    project.runpytest("--accept").assert_outcomes(passed=2)
    _under_torch(monkeypatch, "2.15.0+cu132")
    monkeypatch.setenv("FAKE_GRAPH", NEXT_GRAPH)
    project.runpytest("--accept").assert_outcomes(passed=2)
    variant = project.path / "expect" / "torch-2.15" / "alpha.aot.expect"
    assert variant.is_file()
    monkeypatch.delenv("FAKE_GRAPH")  # torch 2.15 prints what the reference holds again
    result = project.runpytest("--accept")
    result.assert_outcomes(passed=2)
    assert not variant.exists()
    result.stdout.fnmatch_lines(["*removed variant *alpha.aot.expect: this run prints what*"])
    project.runpytest().assert_outcomes(passed=2)


def test_the_reference_is_never_written_from_another_torch_even_when_unreadable(
    project, monkeypatch
):
    project.runpytest("--accept").assert_outcomes(passed=2)
    golden = project.path / "expect" / "alpha.aot.expect"
    golden.write_bytes(b"\0damaged")
    _under_torch(monkeypatch, "2.15.0+cu132")
    project.runpytest("--accept").assert_outcomes(passed=2)
    assert golden.read_bytes() == b"\0damaged"
    assert (project.path / "expect" / "torch-2.15" / "alpha.aot.expect").is_file()


def test_an_orphan_variant_is_reported_and_removed_with_its_golden(project, monkeypatch):
    project.runpytest("--accept").assert_outcomes(passed=2)
    _under_torch(monkeypatch, "2.15.0+cu132")
    monkeypatch.setenv("FAKE_GRAPH", NEXT_GRAPH)
    project.runpytest("--accept").assert_outcomes(passed=2)
    # alpha's test is gone; beta's module still registers the `alpha` model name by id
    project.makepyfile(test_fake_lanes=TEST_FILE.replace('"alpha.aot"', '"alpha.fx"'))
    result = project.runpytest()
    result.stdout.fnmatch_lines(["*orphan golden *torch-2.15/alpha.aot.expect*"])
    project.runpytest("--accept").assert_outcomes(passed=2)
    assert not (project.path / "expect" / "torch-2.15" / "alpha.aot.expect").exists()


def _committed_goldens() -> list[Path]:
    return sorted((ROOT / "expect").rglob("*" + store.SUFFIX))


@pytest.mark.parametrize(
    "path", _committed_goldens(), ids=lambda p: str(p.relative_to(ROOT / "expect"))
)
def test_every_committed_header_is_what_a_reaccept_from_scratch_writes(path):
    golden = store.read(path)
    fields = {
        k: v for k, v in golden.header.items() if k not in ("torch", "normaliser", "body-lines")
    }
    assert not store.stale_header(golden, fields), (
        f"{path}: header {golden.header} is not what `pytest --accept` writes today "
        f"({store.header_of(golden.body, fields)}); re-accept it"
    )
    lane = path.parent.name.removeprefix(store.TORCH_VARIANT_PREFIX)
    expected_lane = lane if path.parent.name.startswith("torch-") else store.REFERENCE_TORCH
    assert store.torch_lane(golden.torch_version) == expected_lane, path
