"""Provenance of a run (harness.core.provenance): a run of a working tree that differs from its
commit is marked dirty in the bench header and run.json, and every comparison says so: the gate
(title, working-tree row, a note; it still judges), history, merged shards. HARNESS_REFUSE_DIRTY
turns the mark into a refusal."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
from test_gate_support import write_set
from test_history import write_runs

from harness.cli import main
from harness.core import exits, provenance, records, settings
from harness.runs import asv, bench
from harness.runs.spec import RunSpec

OPS = "canary.Canary.track_ops"


def git(repo, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path):
    """A repository with one commit: a tracked file, an ignored folder."""
    d = tmp_path / "repo"
    d.mkdir()
    git(d, "init", "-q")
    (d / "models.py").write_text("A = 1\n")
    (d / ".gitignore").write_text("ignored/\n")
    git(d, "add", "-A")
    git(d, "commit", "-qm", "first")
    return d


def test_untracked_files_are_listed_but_only_a_tracked_change_is_dirty(repo):
    assert provenance.tree_state(repo) == provenance.TreeState(False, None)
    # a CI checkout's .venv, a new file, an ignored one, an empty folder: not a change
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "python").write_text("")
    (repo / "notes.txt").write_text("x")
    (repo / "ignored").mkdir()
    (repo / "ignored" / "big.bin").write_text("x")
    (repo / "empty").mkdir()
    state = provenance.tree_state(repo)
    assert not state.dirty and state.diff_sha256 is None and state.mark == ""
    assert state.untracked == (".venv/", "notes.txt") and state.untracked_total == 2
    # an edit of a tracked file, staged or not, makes it dirty; the same edit the same hash
    (repo / "models.py").write_text("A = 2\n")
    edited = provenance.tree_state(repo)
    assert edited.dirty and edited.changed == ("models.py",) and edited.mark == " (dirty)"
    git(repo, "add", "models.py")
    assert provenance.tree_state(repo).diff_sha256 == edited.diff_sha256
    (repo / "models.py").write_text("A = 3\n")
    assert provenance.tree_state(repo).diff_sha256 != edited.diff_sha256
    meta = edited.as_meta()
    assert meta["dirty"] is True and meta["worktree"]["changed"] == ["models.py"]
    assert len(meta["worktree"]["diff_sha256"]) == 64
    # from a subfolder too: the whole repository is the commit
    (repo / "sub").mkdir()
    assert provenance.tree_state(repo / "sub").dirty


def test_refusal_is_a_setting(repo, monkeypatch):
    (repo / "models.py").write_text("A = 2\n")
    assert provenance.for_run(repo).dirty  # marked, not refused, by default
    monkeypatch.setenv(settings.REFUSE_DIRTY.name, "1")
    with pytest.raises(exits.BadInput, match=r"models\.py\).*HARNESS_REFUSE_DIRTY is set"):
        provenance.for_run(repo)
    git(repo, "commit", "-qam", "second")
    assert not provenance.for_run(repo).dirty  # a clean tree runs


def test_merged_shards_are_dirty_when_any_shard_was():
    clean, dirty = {"dirty": False}, provenance.TreeState(True, "a" * 64, ("m.py",), 1).as_meta()
    assert provenance.merged_meta([clean, clean]) == {"dirty": False}
    assert provenance.merged_meta([clean, {}]) == {}  # an older shard: unknown
    merged = provenance.merged_meta([clean, dirty])
    assert merged["dirty"] is True and merged["worktree"]["changed"] == ["m.py"]
    assert provenance.of_record({}) is None and provenance.of_record({"dirty": "yes"}) is None


def fake_asv(rows: dict):
    """asv.run's stand-in: announces the run, saves `rows` as asv would, says each is done."""

    def run(r: asv.AsvRun) -> asv.AsvResult:
        r.on_line(f"· Running {len(rows)} total benchmarks (1 commits * 1 environments)")
        file = write_set(r.results, r.commit, rows, machine=r.machine)
        for i, name in enumerate(rows):
            r.on_line(f"[{100 * (i + 1) / len(rows):5.2f}%] ··· {name}    ok")
        return asv.AsvResult(0, "", "", 0.1, [file])

    return run


def test_a_run_of_an_edited_project_is_marked_dirty_in_its_header_and_record(
    tmp_path, monkeypatch, capsys, clean_registry
):
    proj = tmp_path / "proj"
    assert main(["init", str(proj)]) == exits.PASS
    git(proj, "init", "-q")
    git(proj, "add", "-A")
    git(proj, "commit", "-qm", "project")
    sha = git(proj, "rev-parse", "HEAD").strip()
    monkeypatch.setattr(asv, "run", fake_asv({OPS: 10}))
    spec = RunSpec(mode="quick", machine="m-cpu", suites=("tiny_cnn",))
    root = tmp_path / "results"

    clean = bench.run(proj, root, spec, sha=sha)
    assert clean.record.meta["dirty"] is False
    with open(proj / "models.py", "a") as f:  # an edit not committed
        f.write("\n# tuned\n")
    dirty = bench.run(proj, root, dataclasses.replace(spec, benches=("track_ops",)), sha=sha)
    out = capsys.readouterr().out
    assert f"commit {sha[:8]}, run {clean.record.run_id}" in out
    assert f"commit {sha[:8]} (dirty), run {dirty.record.run_id}" in out
    meta = json.loads((dirty.record.path / records.RUN_JSON).read_text())
    assert meta["dirty"] is True and meta["commit"] == sha
    assert meta["benches"] == ["track_ops"] and "benches" not in clean.record.meta
    assert meta["worktree"]["changed"] == ["models.py"] and meta["worktree"]["diff_sha256"]
    assert bench.report(dirty, root) == exits.PASS
    assert "the run is marked dirty" in capsys.readouterr().out

    # the gate still judges (the counter here), and says which side is dirty and why it matters
    gate_json = tmp_path / "g.json"
    code = main(
        ["gate", clean.record.run_id, dirty.record.run_id, "--results-dir", str(root)]
        + ["--json", str(gate_json)]
    )
    out = capsys.readouterr().out
    assert code == exits.PASS, out
    assert f"head {sha[:8]} (dirty) (" in out and f"base {sha[:8]} (" in out
    assert "working tree  clean   dirty (uncommitted changes)" in out
    assert "note: head measured a working tree that differed from its commit" in out
    assert "1 judged (1 ok)" in out
    data = json.loads(gate_json.read_text())
    assert (data["base_dirty"], data["head_dirty"]) == (False, True)
    # the report and the advice of that run say so too
    args = ["--results-dir", str(root), "--project", str(proj)]
    assert main(["report", dirty.record.run_id, "--out", str(tmp_path / "rep"), *args]) == 0
    report = (tmp_path / "rep" / "report.md").read_text()
    assert report.startswith(f"# Benchmark report: {sha[:8]} (dirty) on m-cpu")
    assert "differed from its commit (uncommitted changes)" in report
    capsys.readouterr()
    assert main(["advise", dirty.record.run_id, *args]) == 0
    assert f"run {dirty.record.run_id} of a dirty tree" in capsys.readouterr().out
    main(["advise", clean.record.run_id, *args])
    assert "dirty" not in capsys.readouterr().out
    # refused with the setting, before anything is compared
    monkeypatch.setenv(settings.REFUSE_DIRTY.name, "on")
    assert main(["gate", clean.record.run_id, dirty.record.run_id, "--results-dir", str(root)]) == 3
    captured = capsys.readouterr()
    assert captured.out == "" and "HARNESS_REFUSE_DIRTY is set" in captured.err
    with pytest.raises(exits.BadInput, match="HARNESS_REFUSE_DIRTY"):
        bench.run(proj, root, spec, sha=sha)
    assert len(records.list_runs(root, "m-cpu")) == 2  # nothing written


def test_history_marks_the_dirty_runs_and_a_step_next_to_one(tmp_path, capsys):
    root = tmp_path / "results"
    write_runs(root, [{OPS: 10}] * 5 + [{OPS: 11}] * 5)
    runs = records.list_runs(root, "m1-cpu")
    sixth = runs[5]
    meta = json.loads((sixth.path / records.RUN_JSON).read_text())
    (sixth.path / records.RUN_JSON).write_text(json.dumps({**meta, "dirty": True}))
    out_json = tmp_path / "h.json"
    assert main(["history", "--results-dir", str(root), "--json", str(out_json)]) == 1
    text = capsys.readouterr().out
    assert "1 of 10 runs measured a working tree that differed from its commit (dirty): " in text
    assert f"{sixth.run_id} (dirty) (#6)" in text
    assert f"{sixth.run_id} measured a working tree that differed from its commit" in text
    # the runs before it were made before the mark was kept: "not recorded", never "clean"
    assert "working tree not recorded -> dirty (uncommitted changes)" in text, text
    data = json.loads(out_json.read_text())
    assert data["machines"][0]["dirty_runs"] == [sixth.run_id]
