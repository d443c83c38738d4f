"""Files from other runners are input: hostile run records, result files, the asv view's own state
file and the per-row tables a record keeps. Each test builds records by hand (no asv run), feeds
one hostile input to the command that reads it (in process, --results-dir tmp_path) and asserts
the exit code, the one line naming the file or record, no traceback, and that nothing outside the
results root changed (a snapshot of a sentinel tree before and after: paths, bytes, modes, link
targets). docs/trust.md has the table."""

from __future__ import annotations

import datetime
import itertools
import json
import os
import pathlib

import pytest
from test_gate_support import draw, write_set

from harness.cli import main
from harness.core import env, records, trust

MACHINE = "m1-cpu"
C1, C2 = "a" * 40, "b" * 40
DEEP = "[" * 100_000 + "]" * 100_000  # RecursionError for json.loads
START, TICK = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc), itertools.count()


# ---- a world: a results root beside a sentinel tree that no command may touch ----


def snapshot(top: pathlib.Path) -> dict:
    """Every path under `top` (links not followed): its kind, mode and bytes or link target."""
    out = {}
    for folder, dirs, files in os.walk(top):
        for name in sorted(dirs + files):
            p = pathlib.Path(folder) / name
            st = p.lstat()
            rel = p.relative_to(top).as_posix()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", st.st_mode)
            elif st.st_size > 2**20:  # the sparse oversized files: size, not content
                out[rel] = ("file", st.st_mode, st.st_size)
            else:
                out[rel] = ("file", st.st_mode, p.read_bytes())
    return out


@pytest.fixture
def world(tmp_path):
    """(results root, sentinel folder); the sentinel must be the same after the test."""
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "victim.txt").write_text("victim\n")
    (outside / "secret.txt").write_text("secret\n")
    (outside / "dir" / "x.json").write_text('{"x": 1}')
    before = snapshot(outside)
    yield tmp_path / "results", outside
    assert snapshot(outside) == before, "a file outside the results root changed"


def record(
    root, commit=C1, benches=None, machine=MACHINE, label=None, date=1, **meta
) -> records.RunRecord:
    """A run record as `harness bench` writes it, with a real asv result set (asv's own saver);
    each started a second after the one before (run ids sort in the order they were made)."""
    run_id = records.new_run_id(commit, label, START + datetime.timedelta(seconds=next(TICK)))
    meta = {"commit": commit, "started": run_id[:16], "label": label or "", **meta}
    with records.writing(root, machine, run_id, meta) as staging:
        write_set(staging / "asv", commit, benches or {"a.time": draw(30), "a.k": 5}, machine, date)
    return records.load_record(records.runs_dir(root) / machine / run_id)


def run(capsys, *argv, root=None) -> tuple[int, str, str]:
    code = main([*map(str, argv), *(["--results-dir", str(root)] if root else [])])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err
    return code, out, err


def edit_json(path: pathlib.Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# ---- merge: the output goes under a checked name, never a path from a result file ----


def shards(root, **meta):
    one = record(root, benches={"a.time": draw(30), "a.k": 5}, shard="1/2", **meta)
    two = record(root, benches={"b.time": draw(30, seed=3), "b.k": 2}, shard="2/2", **meta)
    return one, two


def test_merge_of_good_shards_still_makes_one_record(world, capsys):
    root, _ = world
    one, two = shards(root)
    code, out, err = run(capsys, "merge", one.path, two.path, root=root)
    assert code == 0, err
    merged = [r for r in records.list_runs(root) if r.meta.get("merged_from")]
    assert len(merged) == 1 and merged[0].machine == MACHINE
    assert {"a.time", "b.time"} <= set(json.loads(merged[0].result_file().read_text())["results"])


@pytest.mark.parametrize("where", ["abs", "../../../outside/evil", "../../.."])
def test_merge_takes_no_path_from_the_result_files_machine(world, capsys, where):
    root, outside = world
    one, two = shards(root)
    hostile = str(outside / "evil") if where == "abs" else where
    for rec in (one, two):
        edit_json(rec.result_file(), lambda d: d["params"].update(machine=hostile))
    before = snapshot(root)
    code, _, err = run(capsys, "merge", one.path, two.path, root=root)
    assert code == 3 and "names machine" in err and str(one.result_file()) in err
    assert snapshot(root) == before and not (outside / "evil").exists()
    assert not list(root.parent.glob("*.json")) and not (root.parent.parent / "evil").exists()


def test_merge_refuses_a_source_holding_a_link_by_name(world, capsys):
    root, outside = world
    one, two = shards(root)
    mj = two.asv_dir / MACHINE / "machine.json"
    mj.unlink()
    mj.symlink_to(outside / "secret.txt")
    before = snapshot(root)
    code, _, err = run(capsys, "merge", one.path, two.path, root=root)
    assert code == 3 and str(two.path) in err and "symbolic link" in err
    assert snapshot(root) == before  # no merged record (nor the secret in one)


OPERATOR_DAMAGE = {
    "instructions, fingerprint a list": (
        "instructions/canary.Canary.json",
        {"schema": 1, "fingerprint": ["valgrind"], "rows": {}},
    ),
    "instructions, fingerprint a string": (
        "instructions/canary.Canary.json",
        {"schema": 1, "rows": {"canary.Canary.track_instructions": {"fingerprint": "x"}}},
    ),
    "instructions, too deep": ("instructions/canary.Canary.json", DEEP),
    "instructions, not an object": ("instructions/canary.Canary.json", [1, 2]),
    "op counts, not numbers": (
        "op-counts.json",
        {"schema": 1, "rows": {"a.k": {"unit": "ops", "total": 5, "counts": {"aten::add": "5"}}}},
    ),
    "op counts, rows a list": ("op-counts.json", {"schema": 1, "rows": []}),
    "profiles, ops not objects": (
        "profiles.json",
        {"schema": 1, "workloads": {"a.A": {"call": {"ops": [1]}}}},
    ),
    "profiles, too deep": ("profiles.json", DEEP),
}


@pytest.mark.parametrize("case", sorted(OPERATOR_DAMAGE))
def test_merge_names_a_damaged_per_row_file_of_a_shard(world, capsys, case):
    root, _ = world
    one, two = shards(root)
    rel, content = OPERATOR_DAMAGE[case]
    path = two.path / rel
    path.parent.mkdir(exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    before = snapshot(root)
    code, _, err = run(capsys, "merge", one.path, two.path, root=root)
    assert code == 3 and str(path) in err, err
    assert snapshot(root) == before


@pytest.mark.parametrize(
    "damage",
    [
        {"durations": {"b.time": "1 s"}},
        {"durations": ["b.time"]},
        {"result_columns": "result"},
    ],
)
def test_merge_names_a_result_file_of_the_wrong_shape(world, capsys, damage):
    root, _ = world
    one, two = shards(root)
    edit_json(two.result_file(), lambda d: d.update(damage))
    before = snapshot(root)
    code, _, err = run(capsys, "merge", one.path, two.path, root=root)
    assert code == 3 and str(two.result_file()) in err, err
    assert snapshot(root) == before


# ---- the asv view: its own state file is input, destinations come from checked names ----


def view_state(root) -> pathlib.Path:
    return root / "asv" / records.VIEW_MANIFEST


@pytest.mark.parametrize(
    "rel",
    [
        "../../outside/victim.txt",
        "{outside}/victim.txt",
        f"{MACHINE}/../../../outside/victim.txt",
        "..",
        "m1-cpu/link.json",  # a link in the view to a file outside
        "linked-machine/x.json",  # a machine folder of the view that is a link
    ],
)
def test_the_view_state_file_never_names_a_file_to_delete_outside(world, capsys, rel):
    root, outside = world
    rec = record(root)
    records.rebuild_view(root)
    view = root / "asv"
    (view / MACHINE / "link.json").symlink_to(outside / "victim.txt")
    (view / "linked-machine").symlink_to(outside / "dir")
    rel = rel.format(outside=outside)
    edit_json(view_state(root), lambda d: d["files"].update({rel: {"run": None, "sha256": "0"}}))
    runs_before = snapshot(root / "runs")
    records.rebuild_view(root)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert snapshot(root / "runs") == runs_before, "local records unchanged"
    assert (view / MACHINE / "link.json").is_symlink() and (view / "linked-machine").is_symlink()
    built = json.loads(view_state(root).read_text())["files"]
    assert f"{MACHINE}/{rec.result_file().name}" in built, "the rest is built"


@pytest.mark.parametrize(
    "content",
    [DEEP, "[1]", '{"files": []}', '{"files": {"m1-cpu/x.json": {"run": "../../../outside"}}}'],
)
def test_a_damaged_view_state_file_is_read_as_empty_with_a_line(world, capsys, content):
    root, _ = world
    rec = record(root)
    root.joinpath("asv").mkdir(parents=True)
    view_state(root).write_text(content)
    records.rebuild_view(root)
    err = capsys.readouterr().err
    assert records.VIEW_MANIFEST in err and "Traceback" not in err, err
    assert (root / "asv" / MACHINE / rec.result_file().name).is_file()
    assert records.record_for_view_file(root, root / "asv" / MACHINE / "x.json") is None


@pytest.mark.parametrize(
    "machine, says",
    [
        ("../../..", "is not a machine name"),
        (["m1-cpu"], "is not a machine name"),
        ("other-cpu", "names machine 'other-cpu' but the record lies in 'm1-cpu'/"),
    ],
)
def test_a_record_whose_run_json_names_another_machine_is_left_out_of_the_view(
    world, capsys, machine, says
):
    root, outside = world
    good = record(root, commit=C1)
    bad = record(root, commit=C2)
    edit_json(bad.path / records.RUN_JSON, lambda d: d.update(machine=machine))
    records.rebuild_view(root)
    err = capsys.readouterr().err
    assert str(bad.path) in err and says in err, err
    view = root / "asv"
    assert (view / MACHINE / good.result_file().name).is_file(), "the rest is built"
    assert not (view / MACHINE / bad.result_file().name).exists()
    assert not (root.parent / "asv").exists() and not (view / "other-cpu").exists()


def test_a_record_holding_a_link_is_left_out_of_the_view(world, capsys):
    root, outside = world
    good = record(root, commit=C1)
    bad = record(root, commit=C2)
    (bad.asv_dir / MACHINE / "machine.json").unlink()
    (bad.asv_dir / MACHINE / "machine.json").symlink_to(outside / "secret.txt")
    records.rebuild_view(root)
    err = capsys.readouterr().err
    assert str(bad.path) in err and "symbolic link" in err
    assert b"secret" not in (root / "asv" / MACHINE / "machine.json").read_bytes()
    assert (root / "asv" / MACHINE / good.result_file().name).is_file()


def test_an_asv_commit_hash_with_a_slash_makes_a_run_id_inside_runs(world, capsys):
    root, outside = world
    legacy = write_set(root / "asv", C1, {"a.time": draw(30)})
    edit_json(legacy, lambda d: d.update(commit_hash="../../../outside/x"))
    records.rebuild_view(root)
    (rec,) = records.list_runs(root)
    assert trust.is_run_id(rec.run_id) and rec.path.parent == records.runs_dir(root) / MACHINE
    assert rec.commit == "../../../outside/x"  # kept as it was, never a path


def test_a_view_machine_folder_that_is_a_link_is_not_imported_from(world, capsys):
    root, outside = world
    (root / "asv").mkdir(parents=True)  # outside/dir holds x.json, a result file's name
    (root / "asv" / "linked").symlink_to(outside / "dir")
    records.rebuild_view(root)
    assert "symbolic link" in capsys.readouterr().err
    assert records.list_runs(root) == []


# ---- prune: never through a link ----


def test_prune_does_not_descend_a_machine_folder_that_is_a_link(world, capsys):
    root, _ = world
    for commit in (C1, C2):
        record(root, commit=commit, machine="real-cpu")
    kept = records.copy_record(records.list_runs(root)[0], root / "baselines" / "real-cpu")
    (records.runs_dir(root) / "linked-cpu").symlink_to(root / "baselines" / "real-cpu")
    before = snapshot(root / "baselines")
    code, out, err = run(capsys, "prune", "--keep", "1", "--yes", root=root)
    assert code == 0 and "linked-cpu" in err and "symbolic link" in err
    assert snapshot(root / "baselines") == before and kept.is_dir()
    assert [r.machine for r in records.list_runs(root)] == ["real-cpu"]
    assert records.machines(root) == ["real-cpu"]


def test_a_record_folder_that_is_a_link_is_refused_never_removed_through(world, capsys):
    root, outside = world
    elsewhere = record(outside.parent / "other-results", commit=C1)
    record(root, commit=C2)
    link = records.runs_dir(root) / MACHINE / "20200101T000000Z-cccccccc-000000"
    link.symlink_to(elsewhere.path)
    target = snapshot(elsewhere.path.parent)
    code, out, err = run(capsys, "prune", "--keep", "1", "--yes", root=root)
    assert code == 0 and str(link) in err and "symbolic link" in err, err
    assert link.is_symlink() and snapshot(elsewhere.path.parent) == target
    assert all(r.path != link for r in records.list_runs(root))
    code, _, err = run(capsys, "gate", link, "latest", root=root)
    assert code == 3 and str(link) in err and "symbolic link" in err


def test_a_staging_folder_that_is_a_link_is_not_removed_through(world, capsys):
    root, outside = world
    record(root)
    staging = records.runs_dir(root) / MACHINE / f"{records.STAGING}20200101T000000Z-x-1"
    staging.symlink_to(outside / "dir")
    code, out, err = run(capsys, "prune", "--keep", "5", "--yes", root=root)
    assert code == 0 and str(staging) in err and staging.is_symlink()


# ---- readers: malformed input is exit 3 naming the file ----


def damage_file(rel: str, content):
    """A damage: write `content` (a string, or JSON) at `rel` in the head record."""

    def apply(rec):
        path = rec.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    return apply


def damage_meta(**change):
    def apply(rec):
        edit_json(rec.path / records.RUN_JSON, lambda d: d.update(change))
        return rec.path / records.RUN_JSON

    return apply


def oversized(rec):
    path = rec.result_file()
    with open(path, "r+b") as f:
        f.truncate(trust.MAX_FILE_BYTES + 1)  # sparse: the size is checked before reading
    return path


def deep_result(rec):
    path = rec.result_file()
    edit_json(path, lambda d: d.update(extra="@"))
    path.write_text(path.read_text().replace('"@"', DEEP))
    return path


FACTS = records.row_facts_file(pathlib.Path("."), "a.time").as_posix()
INSTR = "instructions/a.A.json"
READER_DAMAGE = {
    "run.json too deep": damage_file(records.RUN_JSON, DEEP),
    "run.json not an object": damage_file(records.RUN_JSON, [1]),
    "run.json machine a list": damage_meta(machine=["m1-cpu"]),
    "run.json merged_from a string": damage_meta(merged_from="x"),
    "run.json merged_from run ids a path": damage_meta(merged_from=[{"run_id": "../../x"}]),
    "run.json shard a list": damage_meta(shard=[1, 2]),
    "run.json suites a string": damage_meta(suites="canary"),
    "run.json benches an object": damage_meta(benches={"a": 1}),
    "run.json commit a number": damage_meta(commit=7),
    "run.json worktree changed not strings": damage_meta(dirty=True, worktree={"changed": [1]}),
    "result file too deep": deep_result,
    "result file over the size limit": oversized,
    "fingerprint too deep": damage_file(records.FINGERPRINT, DEEP),
    "fingerprint not an object": damage_file(records.FINGERPRINT, "[]"),
    "fingerprint gpu_uuid a number": damage_file(records.FINGERPRINT, {"gpu_uuid": 7}),
    "row facts too deep": damage_file(FACTS, DEEP),
    "row facts not an object": damage_file(FACTS, "[]"),
    "row facts row a list": damage_file(FACTS, {"schema": 1, "row": ["a.time"]}),
    "row facts busy a string": damage_file(
        FACTS, {"schema": 1, "row": "a.time", "device": "cuda", "busy": "high"}
    ),
    "row facts sides not a list": damage_file(FACTS, {"schema": 1, "row": "a.time", "sides": 3}),
    "instructions fingerprint a list": damage_file(
        INSTR, {"schema": 1, "fingerprint": [], "rows": {}}
    ),
    "instructions fingerprint a string": damage_file(
        INSTR, {"schema": 1, "rows": {"a.k": {"per_call": 1, "fingerprint": "v"}}}
    ),
    "instructions rows a list": damage_file(INSTR, {"schema": 1, "rows": []}),
    "instructions function self a string": damage_file(
        INSTR, {"schema": 1, "rows": {"a.k": {"functions": [{"function": "f", "self": "9"}]}}}
    ),
    "instructions too deep": damage_file(INSTR, DEEP),
    "ab pairs too deep": damage_file(records.AB_PAIRS, DEEP),
    "ab pairs not numbers": damage_file(
        records.AB_PAIRS, {"schema": 1, "base_run": None, "pairs": {"a.time": [["x", 1]]}}
    ),
}


@pytest.mark.parametrize("case", sorted(READER_DAMAGE))
def test_the_gate_names_a_damaged_file_of_a_record(world, capsys, case):
    root, _ = world
    base = record(root, commit=C1)
    head = record(root, commit=C2)
    path = READER_DAMAGE[case](head)
    before = snapshot(root)
    code, _, err = run(capsys, "gate", base.path, head.path, root=root)
    assert code == 3, err
    assert str(path) in err or str(head.path) in err, err
    assert snapshot(root) == before


def test_a_damaged_record_in_runs_is_left_out_of_latest_with_a_line(world, capsys):
    root, _ = world
    base = record(root, commit=C1)
    record(root, commit=C1)
    bad = record(root, commit=C2)
    (bad.path / records.RUN_JSON).write_text(DEEP)
    code, out, err = run(capsys, "gate", base.path, "latest", root=root)
    assert code in (0, 1, 6) and str(bad.path) in err and "nests deeper" in err


@pytest.mark.parametrize("content", [DEEP, '{"benchmarks": []}', '{"benchmarks": {"a.time": 1}}'])
def test_a_damaged_noise_file_is_named(world, capsys, content):
    root, _ = world
    base, head = record(root, commit=C1), record(root, commit=C2)
    noise = root / "noise" / f"{MACHINE}.json"
    noise.parent.mkdir()
    noise.write_text(content)
    code, _, err = run(capsys, "gate", base.path, head.path, root=root)
    assert code == 3 and str(noise) in err


def test_a_damaged_baseline_is_named(world, capsys):
    root, _ = world
    head = record(root, commit=C2)
    copy = records.copy_record(head, root / "baselines" / MACHINE)
    (copy / records.RUN_JSON).write_text(DEEP)
    code, _, err = run(capsys, "gate", "baseline", "latest", root=root)
    assert code == 3 and str(copy) in err
    code, _, err = run(capsys, "gate", "baseline:..", "latest", root=root)
    assert code == 3 and "machine name" in err


@pytest.mark.parametrize("content", [DEEP, '{"modes": []}', '{"modes": {"fast": []}}', "[1]"])
def test_a_damaged_durations_file_is_named(world, capsys, content):
    root, outside = world
    rec = record(root, quick=False, mode="fast")
    out = root / "durations.json"
    out.write_text(content)
    code, _, err = run(capsys, "durations", rec.path, "--out", out, root=root)
    assert code == 3 and str(out) in err
    assert out.read_text() == content, "a damaged file is never written over"


def test_a_damaged_result_file_is_named_by_durations(world, capsys):
    root, _ = world
    rec = record(root, quick=False, mode="fast")
    path = deep_result(rec)
    code, _, err = run(capsys, "durations", rec.path, "--out", root / "d.json", root=root)
    assert code == 3 and str(path) in err


# ---- machine names: the harness's own, and --machine ----


@pytest.mark.parametrize(
    "argv",
    [
        ["gate", "latest", "latest"],
        ["prune", "--keep", "1"],
        ["merge", "x"],
        ["history"],
        ["report"],
        ["advise"],
        ["durations", "latest"],
        ["store", "pull"],
        ["bench", "--list"],
        ["calibrate"],
        ["report", "--machines", "a-cpu,../b"],
    ],
)
def test_machine_option_is_a_checked_name(world, capsys, argv):
    root, _ = world
    machine = [] if "--machines" in argv else ["--machine", "../../outside"]
    code, _, err = run(capsys, *argv, *machine, root=root)
    assert code == 3 and "is not ASCII letters" in err, err
    assert not root.exists()


@pytest.mark.parametrize(
    "host, gpu, want",
    [
        ("ci-runner", None, "ci-runner-cpu"),
        ("box", "NVIDIA H100 80GB HBM3", "box-NVIDIA-H100-80GB-HBM3"),
        ("box", "NVIDIA GeForce RTX 4090 (laptop)/x", "box-NVIDIA-GeForce-RTX-4090--laptop--x"),
        ("..host", "A..B", "machine-A.B"),
        ("", None, "machine-cpu"),
        ("hôte", None, "h-te-cpu"),
    ],
)
def test_the_machine_name_the_harness_writes_is_a_machine_name(monkeypatch, host, gpu, want):
    monkeypatch.setattr(env.platform, "node", lambda: host)
    monkeypatch.setattr(env, "gpu_name", lambda: gpu)
    assert env.machine_name() == want and trust.is_machine(want)
