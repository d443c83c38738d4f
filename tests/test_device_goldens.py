"""Goldens on a device: committed variants under expect/<device>/ (store + plugin), and the GPU
proof kit's comparison of device printouts with CPU ones (harness.golden.devicecheck)."""

from __future__ import annotations

import pytest
import torch

from harness.golden import devicecheck, store

pytest_plugins = ["pytester"]

TEST_FILE = """
import os, pytest

@pytest.mark.golden("alpha.export")
def test_alpha(golden):
    text = os.environ.get(
        "FAKE_GRAPH", "zeros: f32[2] = aten.zeros.default([2], device=device('cpu'))\\n"
    )
    golden.check(text, frontend="export", model="alpha (small)")

@pytest.mark.golden("beta.fx")
def test_beta(golden):
    golden.check("y: f32[2] = aten.relu.default(x)\\nreturn y\\n", frontend="fx", model="beta")
"""
DEVICE_GRAPH = "zeros: f32[2] = aten.zeros.default([2], device=device('cuda:0'))\n"


@pytest.fixture
def project(golden_project):
    return golden_project("test_fake_device_graphs", TEST_FILE)


def test_variant_is_written_only_where_the_device_printout_differs_and_then_used(
    project, monkeypatch
):
    # "meta" stands in for "cuda" on a machine without a GPU: any device but the CPU uses variants.
    project.runpytest("--accept").assert_outcomes(passed=2)
    cpu_golden = (project.path / "expect" / "alpha.export.expect").read_bytes()
    monkeypatch.setenv("HARNESS_GOLDEN_DEVICE", "meta")
    monkeypatch.setenv("FAKE_GRAPH", DEVICE_GRAPH)
    project.runpytest().assert_outcomes(
        passed=1, failed=1
    )  # no variant yet: the CPU golden differs
    project.runpytest("--accept").assert_outcomes(passed=2)
    assert sorted(p.name for p in (project.path / "expect" / "meta").iterdir()) == [
        "alpha.export.expect"
    ]
    assert (project.path / "expect" / "alpha.export.expect").read_bytes() == cpu_golden
    project.runpytest().assert_outcomes(
        passed=2
    )  # the variant on the device, the CPU golden for beta
    monkeypatch.delenv("HARNESS_GOLDEN_DEVICE")
    result = project.runpytest()  # on the CPU the variant is never used
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*does not match golden*expect/alpha.export.expect*"])
    assert "orphan" not in result.stdout.str()  # variants are not orphans of the CPU goldens


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_cuda_device_without_a_gpu_is_a_usage_error(project, monkeypatch):
    monkeypatch.setenv("HARNESS_GOLDEN_DEVICE", "cuda")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HARNESS_GOLDEN_DEVICE=cuda but torch sees no CUDA GPU*"])


def test_lookup_prefers_a_committed_variant(tmp_path):
    assert store.lookup(tmp_path, "m.fx", "cuda") == tmp_path / "m.fx.expect"
    assert store.variant_path(tmp_path, "m.fx", "cpu") is None
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "m.fx.expect").write_text("x")
    assert store.lookup(tmp_path, "m.fx", "cuda") == tmp_path / "cuda" / "m.fx.expect"
    assert store.lookup(tmp_path, "m.fx", None) == tmp_path / "m.fx.expect"
    with pytest.raises(store.GoldenError):
        store.variant_path(tmp_path, "../m.fx", "cuda")


def test_classify_tells_device_names_from_graph_changes():
    cpu = "zeros = aten.zeros.default([2], device=device('cpu'))\n"
    assert devicecheck.classify(cpu, cpu) == "same"
    assert devicecheck.classify(cpu, cpu.replace("'cpu'", "'cuda:0'")) == "device names only"
    assert (
        devicecheck.classify(cpu, cpu.replace("zeros.default", "empty.memory_format")) == "differs"
    )


def test_committed_golden_of_another_torch_is_not_compared(tmp_path):
    path = tmp_path / "m.fx.expect"
    store.save(path, store.render("y = x\n", {"frontend": "fx", "torch": "2.11.0+cu130"}))
    golden = store.read(path)
    assert (
        devicecheck.against_committed(golden, "z = x\n", "2.14.1+cu130")
        == "not compared: torch 2.11.0+cu130 vs 2.14.1+cu130"
    )
    assert (
        devicecheck.against_committed(golden, "z = x\n", "2.11.0+cu130") == "differs from committed"
    )
    assert devicecheck.against_committed(golden, "y = x\n", "2.11.0+cu130") == "matches"
    assert devicecheck.against_committed(None, "y = x\n", "2.11.0+cu130") == "no committed golden"


def test_device_run_on_cpu_matches_the_committed_goldens_and_writes_the_runner_tree(tmp_path):
    results = devicecheck.run(
        "cpu",
        "small",
        store.Path("expect").resolve(),
        tmp_path,
        models=["mlp"],
        log=lambda line: None,
    )
    assert [r.frontend for r in results] == ["jit", "fx", "export", "dynamo", "aot"]
    for r in results:
        assert (r.status, r.semantic, r.capture) == ("same", "ok", ""), r  # plain on a CPU
        committed = store.read(store.Path("expect") / (r.golden_id + ".expect"))
        assert r.committed in (
            "matches",
            f"not compared: torch {committed.torch_version} vs {store.torch_version()}",
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"mlp.{f}.expect" for f in ("aot", "dynamo", "export", "fx", "jit")
    ]
