"""The expect store on its own: paths, header, atomic writes, damaged files, readable diffs."""

from __future__ import annotations

import os

import pytest

from harness.golden import store


def test_render_then_parse_round_trips_and_counts_lines(tmp_path):
    path = tmp_path / "m.jit.expect"
    store.save(
        path, store.render("a = op(x)\nreturn a\n", {"frontend": "jit", "model": "m (small)"})
    )
    golden = store.read(path)
    assert golden.body == "a = op(x)\nreturn a\n"
    assert golden.header["frontend"] == "jit" and golden.header["body-lines"] == "2"
    assert golden.torch_version == store.torch_version()


def test_missing_golden_reads_as_none(tmp_path):
    assert store.read(tmp_path / "absent.expect") is None


@pytest.mark.parametrize("bad", ["../x", "a/b", "a..b", "", ".hidden", "x\0y"])
def test_ids_that_could_escape_the_directory_are_refused(tmp_path, bad):
    with pytest.raises(store.GoldenError, match="not allowed"):
        store.golden_path(tmp_path, bad)


def test_atomic_write_leaves_old_file_and_no_temp_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "g.expect"
    path.write_text("old\n")

    def boom(src, dst):
        raise KeyboardInterrupt  # an interrupted run, between writing and renaming

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        store.save(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["g.expect"]


def test_huge_diffs_are_cut_with_a_note():
    a = "".join(f"v{i} = aten::relu(x)\n" for i in range(3000))
    b = "".join(f"v{i} = aten::gelu(x)\n" for i in range(3000))
    diff = store.unified_diff(a, b, "big")
    assert len(diff) == store.MAX_DIFF_LINES + 1
    assert diff[-1].startswith("... diff cut here:")


def test_pathological_sizes_skip_the_diff_instead_of_hanging(monkeypatch):
    monkeypatch.setattr(store, "MAX_DIFF_WORK", 100)
    assert "too large" in store.unified_diff("a\n" * 20, "b\n" * 20, "x")[0]


def test_message_names_another_torch_version(tmp_path):
    path = tmp_path / "g.expect"
    store.save(path, store.render("a = aten::relu(x)\n", {"torch": "1.0.0"}))
    message = store.mismatch_message(
        store.read(path), "a = aten::gelu(x)\n", "m", "pytest --accept"
    )
    assert "recorded with torch 1.0.0" in message
    assert "aten::relu  1 -> 0" in message and "aten::gelu  0 -> 1" in message
