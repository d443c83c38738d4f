"""Run records: written once, old results imported never dropped, runs named by
id/commit/latest/path, and `harness prune` the only deletion (dry run unless --yes)."""

from __future__ import annotations

import json
import pathlib

import pytest
from test_gate_support import draw, write_set

from harness.cli import main
from harness.core import records
from harness.verdict.results import resolve


def old_layout(root: pathlib.Path) -> list[pathlib.Path]:
    """Two commits in the old layout: plain asv files in results/asv/<machine>/."""
    # the exact counter a.k grows by one: a regression whatever the machine's noise
    return [
        write_set(root / "asv", "aaaaaaaa11", {"a.time": draw(30, seed=1), "a.k": 5}, date=1),
        write_set(
            root / "asv", "bbbbbbbb22", {"a.time": draw(30, seed=2, scale=1.3), "a.k": 6}, date=2
        ),
    ]


def test_old_layout_is_read_in_place_then_imported_once_and_never_dropped(tmp_path, capsys):
    root = tmp_path / "results"
    files = old_layout(root)
    before = {f: f.read_bytes() for f in files}
    assert main(["gate", "aaaa", "latest", "--results-dir", str(root)]) == 1
    assert records.list_runs(root) == [] and not (root / "runs").exists(), "resolving never writes"
    records.rebuild_view(root)  # what every command that writes results does
    runs = records.list_runs(root)
    assert sorted(r.commit for r in runs) == ["aaaaaaaa11", "bbbbbbbb22"]
    assert all(r.meta["label"] == "imported" for r in runs)
    assert {f: f.read_bytes() for f in files} == before, "the old files stay as they were"
    records.rebuild_view(root)
    assert len(records.list_runs(root)) == 2, "importing is idempotent"


def test_a_view_file_maps_back_to_its_run(tmp_path):
    root = tmp_path / "results"
    old_layout(root)
    records.rebuild_view(root)
    view_file = next((root / "asv" / "m1-cpu").glob("aaaaaaaa-*.json"))
    resolved = resolve(str(view_file), root)
    assert records.record_of(resolved).commit == "aaaaaaaa11"
    assert "runs" in resolved.parts


@pytest.mark.parametrize("content", ["null", "[]", "7"])
def test_non_object_json_in_results_is_bad_input_not_a_crash(tmp_path, capsys, content):
    root = tmp_path / "results"
    old_layout(root)
    (root / "asv" / "m1-cpu" / "ffffffff-existing-py.json").write_text(content)
    code = main(["gate", "latest", "latest", "--results-dir", str(root)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "Traceback" not in err


def test_commit_prefix_matches_its_whole_length(tmp_path, capsys):
    root = tmp_path / "results"
    old_layout(root)
    code = main(["gate", "aaaaaaaa11deadbeef", "latest", "--results-dir", str(root)])
    assert code == 3 and "aaaaaaaa11deadbeef" in capsys.readouterr().err
    assert main(["gate", "commit:aaaaaaaa11", "latest", "--results-dir", str(root)]) == 1
    assert main(["gate", "aaaaaaaa1", "latest", "--results-dir", str(root)]) == 1


def test_runs_are_named_by_run_id_prefix(tmp_path, capsys):
    root = tmp_path / "results"
    old_layout(root)
    records.rebuild_view(root)
    first, second = records.list_runs(root)
    assert resolve(first.run_id, root) == first.result_file()
    assert resolve(str(second.path), root) == second.result_file()
    code = main(["gate", "1999", "latest", "--results-dir", str(root)])
    assert code == 3 and "no run" in capsys.readouterr().err


def test_a_run_record_is_never_overwritten(tmp_path):
    root = tmp_path / "results"
    run_id = records.new_run_id("c" * 40, "x")
    with records.writing(root, "m", run_id, {"commit": "c" * 40}) as staging:
        (staging / "asv" / "m").mkdir(parents=True)
        (staging / "asv" / "m" / "cccccccc-env.json").write_text("{}")
    with pytest.raises(Exception, match="never overwritten"):
        with records.writing(root, "m", run_id, {}):
            pass
    assert (root / "runs" / "m" / run_id / "asv" / "m" / "cccccccc-env.json").read_text() == "{}"


def test_prune_is_a_dry_run_unless_asked_and_never_touches_baselines(tmp_path, capsys):
    root = tmp_path / "results"
    old_layout(root)
    records.rebuild_view(root)
    oldest, newest = records.list_runs(root)
    baseline = records.copy_record(oldest, root / "baselines" / "m1-cpu")
    assert main(["prune", "--results-dir", str(root)]) == 3  # nothing said: nothing guessed
    assert main(["prune", "--keep", "1", "--results-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "would remove" in out and oldest.run_id in out and newest.run_id not in out
    assert oldest.path.is_dir(), "a dry run removes nothing"
    assert main(["prune", "--keep", "1", "--yes", "--results-dir", str(root)]) == 0
    assert not oldest.path.exists() and newest.path.is_dir() and baseline.is_dir()
    view = json.loads((root / "asv" / ".harness-view.json").read_text())["files"]
    assert all(v["run"] != oldest.run_id for v in view.values())
    # the old-layout file the view adopted is not the view's to delete, even after its run went
    assert next((root / "asv" / "m1-cpu").glob("aaaaaaaa-*.json")).is_file()
    records.rebuild_view(root)
    assert len(records.list_runs(root)) == 1, "an adopted file is not imported again after a prune"


def test_prune_removes_the_view_copy_the_view_made(tmp_path, capsys):
    root = tmp_path / "results"
    for commit in ("c" * 40, "d" * 40):
        run_id = records.new_run_id(commit)
        with records.writing(root, "m", run_id, {"commit": commit}) as staging:
            write_set(staging / "asv", commit, {"a.k": 1}, machine="m")
    records.rebuild_view(root)
    (made,) = (root / "asv" / "m").glob("cccccccc-*.json")
    assert main(["prune", "--keep", "1", "--yes", "--results-dir", str(root)]) == 0
    assert not made.exists() and next((root / "asv" / "m").glob("dddddddd-*.json")).is_file()


def test_two_runs_of_one_commit_in_one_second_get_two_records(tmp_path):
    import datetime

    now = datetime.datetime(2026, 12, 2, tzinfo=datetime.timezone.utc)
    ids = {records.new_run_id("c" * 40, "x", now) for _ in range(50)}
    assert len(ids) == 50 and all(
        i.startswith("20261202T000000Z-cccccccc-") and i.endswith("-x") for i in ids
    )


def test_prune_lists_an_interrupted_run_and_removes_it_only_when_its_writer_is_gone(
    tmp_path, capsys
):
    import os
    import subprocess

    root = tmp_path / "results"
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = root / "runs" / "m" / f".staging-20261202T000000Z-cccccccc-abcdef-{dead.pid}"
    live = root / "runs" / "m" / f".staging-20261202T000001Z-cccccccc-abcdef-{os.getpid()}"
    for d in (gone, live):
        (d / "asv").mkdir(parents=True)
    assert main(["prune", "--results-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"unfinished run {gone}: interrupted" in out and "would remove" in out
    assert f"being written by process {os.getpid()}: kept" in out and gone.is_dir()
    assert resolve_fails_on(root) and records.list_runs(root) == [], "never read as a run"
    assert main(["prune", "--results-dir", str(root), "--yes"]) == 0
    assert not gone.exists() and live.is_dir()


def resolve_fails_on(root) -> bool:
    try:
        resolve("latest", root)
    except Exception as exc:  # BadInput: no runs
        return "no runs" in str(exc)
    return False


def test_per_row_tables_beside_old_layout_machine_folders_are_not_results(tmp_path):
    """`harness calibrate` keeps its runs' instruction and row-fact tables in its results folder,
    beside the machine folders: they are not a machine's result files to import."""
    root = tmp_path / "results"
    files = old_layout(root)
    records.write_row_facts(root / "asv", "a.time", {"device": "cpu", "aten_share": 0.5})
    (root / "asv" / records.INSTRUCTIONS).mkdir()
    (root / "asv" / records.INSTRUCTIONS / "a.B.json").write_text('{"rows": {}}')
    found = records.foreign_files(root)
    assert sorted(f for f, _, _ in found) == sorted(files)
    assert {machine for _, machine, _ in found} == {files[0].parent.name}
