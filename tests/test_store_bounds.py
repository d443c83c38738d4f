"""What one pull may cost a runner, and what a push may upload (docs/trust.md, "Pulls: sizes,
memory and links"): JSON files counted before they are parsed and parsed one at a time, records
that name their own run id and machine, caps on the bytes one pull writes, files over the size
limit never fetched from a server that filters blobs (and removed from the store's cache where
one came anyway), a result file that names a benchmark its benchmarks.json lacks, hard links
and a record changed while a push reads it. The caps are set small through the settings
registry; the memory figures at the real limits are measured by tests/measure_store_bounds.py.
Each test asserts the exit code, the line that names the record, that nothing outside the
results root changed, that local records are as they were, and that the good records went."""

from __future__ import annotations

import json
import os
import subprocess
import tracemalloc

import pytest
from store_support import (
    MACHINE,
    bare_repo,
    files_of,
    folder_tree,
    git,
    graft,
    history_runs,
    put_blob,
    tree_entries,
    url,
    write_record,
)
from test_store_hostile import harness, outside, project, store

from harness.core import gitrepo, records, settings, trust
from harness.core.exits import BadInput

# git's processes started cheaply from this worker (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("light_git_spawns", "own_store_settings")


def fleet_history(tmp_path, n: int = 3):
    """A history of `n` good records, pushed by the harness."""
    bare = bare_repo(tmp_path / "history.git")
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    fleet = tmp_path / "fleet" / "results"
    good = [write_record(fleet, i) for i in range(1, n + 1)]
    assert store("push", url(bare), fleet)[0] == 0
    return bare, fleet, good


def made(tmp_path, i: int, change=None, run_id=None):
    """A whole record (its own manifest after `change`), made elsewhere to be grafted."""
    rec = write_record(tmp_path / "made" / str(i), i, run_id=run_id)
    if change:
        change(rec)
        records.write_manifest(rec.path, rec.machine, rec.run_id)
    return rec


def cache_objects(root) -> str:
    """Every object the store's cache under `root` holds (never fetched: only what is here)."""
    (cache,) = (root / gitrepo.CACHE).glob("*-*/")
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch-check"],
        capture_output=True, text=True, env={**os.environ, "GIT_DIR": str(cache)},
    )  # fmt: skip
    return done.stdout


# ---- JSON: counted before it is parsed, parsed one file at a time ----


def test_a_json_file_past_the_token_cap_is_refused_before_json_loads(monkeypatch):
    monkeypatch.setenv(settings.MAX_JSON_TOKENS.name, "100")
    calls = []
    real = trust.json.loads
    monkeypatch.setattr(trust.json, "loads", lambda text: calls.append(1) or real(text))
    assert trust.loads(b"[" + b"[]," * 49 + b"[]]", "ok.json") == [[]] * 50  # 100 tokens
    with pytest.raises(BadInput) as exc:
        trust.loads(b"[" + b"[]," * 50 + b"[]]", "big.json", "result file")
    assert str(exc.value) == (
        "big.json: result file holds 102 JSON tokens (brackets, commas, colons), over the 100 "
        "allowed ($HARNESS_MAX_JSON_TOKENS); refused"
    )
    assert calls == [1]  # the refused file never reached json.loads
    # what lies inside strings is text, not structure; escaped quotes stay inside
    text = json.dumps({"a": "[{,:}]" * 1000 + '\\"[[[', "b": [1, 2]}).encode()
    assert trust.loads(text, "strings.json")["b"] == [1, 2]


def test_a_json_text_held_four_bytes_a_character_is_refused_by_its_parse_cost(monkeypatch):
    monkeypatch.setattr(trust, "MAX_JSON_PARSE_BYTES", 2**20)
    ascii_text = json.dumps(["x" * 200_000, [1, 2]])
    assert trust.loads(ascii_text.encode(), "ascii.json")[1] == [1, 2]  # 2 x 200 kB: within
    wide = json.dumps(["x" * 200_000 + "\U0001f600", [1, 2]], ensure_ascii=False).encode()
    with pytest.raises(
        BadInput,
        match=r"wide.json: JSON would take about 1 MiB to parse \(its "
        r"200,013 characters, 4 bytes each as Python holds them, and 4 tokens\)",
    ):
        trust.loads(wide, "wide.json")


def test_check_whole_keeps_one_parsed_file_at_a_time(tmp_path):
    def four_big(rec):
        for k in range(4):
            (rec.path / f"big{k}.json").write_text("[" + "[]," * 20_000 + "[]]")

    rec = made(tmp_path, 1, four_big)
    tracemalloc.start()
    try:
        trust.loads((rec.path / "big0.json").read_bytes(), "one")
        one = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        assert records.check_whole(rec.path, rec.machine, rec.run_id) == []
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert whole < 1.6 * one, (whole, one)  # all four kept would be over 4 times one


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_a_pulled_record_with_a_json_file_past_the_token_cap_is_refused_by_name(
    tmp_path, monkeypatch
):
    bare, fleet, good = fleet_history(tmp_path)
    bad = made(tmp_path, 50, lambda r: (r.path / "wide.json").write_text("[" + "0," * 5000 + "0]"))
    graft(bare, (["runs", MACHINE, bad.run_id], "040000", folder_tree(bare, bad.path)))
    root, _ = project(tmp_path)
    monkeypatch.setenv(settings.MAX_JSON_TOKENS.name, "4000")
    before, local = outside(tmp_path, root), files_of(root)
    code, out, err = store("pull", url(bare), root, "--all", "--machine", MACHINE)
    assert code == 3 and "pulled 3 run(s)" in out
    assert (
        f"{MACHINE}/{bad.run_id} in the history is not a whole record: wide.json: JSON holds "
        "5,001 JSON tokens (brackets, commas, colons), over the 4,000 allowed" in err
    )
    assert outside(tmp_path, root) == before
    assert files_of(root) == {**local, **files_of(fleet)}


# ---- a record names itself: one tree under many ids ----


def anonymous(rec):
    """run.json, the fingerprint and (after write_manifest) the manifest naming no run id and
    no machine: such a tree could stand under any id."""
    for name in (records.RUN_JSON, records.FINGERPRINT):
        data = json.loads((rec.path / name).read_text())
        data.pop("run_id", None)
        data.pop("machine", None)
        (rec.path / name).write_text(json.dumps(data))


@pytest.mark.slow  # the second tier: ~5 s of the default tier's budget under load
def test_one_tree_under_many_run_ids_is_pulled_once_under_its_own(tmp_path):
    bare, fleet, good = fleet_history(tmp_path, 1)
    own = made(tmp_path, 20)
    tree = folder_tree(bare, own.path)
    ids = [f"20261201T05{k:02d}00Z-{k:08x}" for k in range(12)]
    graft(bare, *[(["runs", MACHINE, i], "040000", tree) for i in [own.run_id, *ids]])
    nameless = made(tmp_path, 21, anonymous)
    listing = json.loads((nameless.path / records.MANIFEST).read_text())
    del listing["run_id"], listing["machine"]
    (nameless.path / records.MANIFEST).write_text(json.dumps(listing))
    graft(bare, (["runs", MACHINE, nameless.run_id], "040000", folder_tree(bare, nameless.path)))
    root, _ = project(tmp_path)
    local = files_of(root)
    code, out, err = store("pull", url(bare), root, "--all", "--machine", MACHINE)
    assert code == 3 and "pulled 2 run(s)" in out  # the good one and the tree under its own id
    pulled = {r.run_id for r in records.list_runs(root)} - {local_id(local)}
    assert pulled == {good[0].run_id, own.run_id}
    for i in ids:
        assert f"{MACHINE}/{i} in the history is not a whole record: manifest.json names " in err
        assert f"run.json names run_id {own.run_id!r}, not {i!r}" in err
    assert (
        f"{MACHINE}/{nameless.run_id} in the history is not a whole record: manifest.json names "
        "no run_id (a record names its own run id and machine)" in err
    )
    assert {k: v for k, v in files_of(root).items() if k in local} == local


# ---- caps on what one pull writes ----


def shared_blob_history(tmp_path, n: int, size: int):
    """`n` whole records, each its own run.json, all holding one `size`-byte file (one blob)."""
    bare = bare_repo(tmp_path / "history.git")
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    graft(bare, (["store.json"], "100644", put_blob(bare, b'{"schema": 1}\n')))
    data = os.urandom(size)
    blob = put_blob(bare, data)
    recs = []
    for k in range(n):
        rec = made(tmp_path, 30 + k, lambda r: (r.path / "shared.bin").write_bytes(data))
        tree = folder_tree(bare, rec.path)
        assert ("100644", b"shared.bin", blob) in tree_entries(bare, tree)  # one blob for all
        graft(bare, (["runs", MACHINE, rec.run_id], "040000", tree))
        recs.append(rec)
    return bare, recs


def test_many_ids_over_one_shared_file_stop_at_the_cap_on_repeated_bytes(tmp_path, monkeypatch):
    bare, recs = shared_blob_history(tmp_path, 6, 200_000)
    root, _ = project(tmp_path)
    monkeypatch.setenv(settings.STORE_PULL_MAX_REPEATED_BYTES.name, "500000")
    before, local = outside(tmp_path, root), files_of(root)
    code, out, err = store("pull", url(bare), root, "--all", "--machine", MACHINE)
    assert code == 3 and "pulled 3 run(s)" in out  # one copy, then two more within 500 kB
    newest = {r.run_id for r in recs[-3:]}
    assert {r.run_id for r in records.list_runs(root)} - {local_id(local)} == newest
    said = err.splitlines()[-1]
    assert "3 run(s) not pulled: past what one pull may write ($HARNESS_STORE_PULL_MAX_" in said
    assert "REPEATED_BYTES = 500,000 bytes of content it already wrote for other records" in said
    assert all(f"{MACHINE}/{r.run_id}" in said for r in recs[:3])
    assert outside(tmp_path, root) == before
    assert {k: v for k, v in files_of(root).items() if k in local} == local


def local_id(local: dict) -> str:
    (run,) = {k.split("/")[1] for k in local}
    return run


@pytest.mark.slow  # the second tier: ~5 s of the default tier's budget under load
def test_a_pull_stops_at_the_cap_on_bytes_written_newest_first(tmp_path, monkeypatch):
    bare, fleet, good = fleet_history(tmp_path, 4)
    root, _ = project(tmp_path)
    size = sum(len(v) for k, v in files_of(fleet).items() if good[0].run_id in k)
    monkeypatch.setenv(settings.STORE_PULL_MAX_BYTES.name, str(int(size * 2.5)))
    code, out, err = store("pull", url(bare), root, "--all", "--machine", MACHINE)
    assert code == 3 and "pulled 2 run(s)" in out
    held = {r.run_id for r in records.list_runs(root)}
    assert {good[2].run_id, good[3].run_id} <= held and good[0].run_id not in held
    assert "2 run(s) not pulled: past what one pull may write ($HARNESS_STORE_PULL_MAX_" in err
    # pulled again with room: the rest comes, the first two already here
    monkeypatch.delenv(settings.STORE_PULL_MAX_BYTES.name)
    code, out, _ = store("pull", url(bare), root, "--all", "--machine", MACHINE)
    assert code == 0 and "pulled 2 run(s)" in out and "(2 already here)" in out


# ---- a file over the size limit: not fetched where the server filters blobs ----


def big_file_history(tmp_path, allow_filter: bool):
    bare = bare_repo(tmp_path / "history.git", allow_filter=allow_filter)
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    fleet = tmp_path / "fleet" / "results"
    for i in (1, 2):
        write_record(fleet, i)
    assert store("push", url(bare), fleet)[0] == 0
    data = os.urandom(300_000)  # incompressible: what is fetched is what the file is
    bad = made(tmp_path, 40, lambda r: (r.path / "big.bin").write_bytes(data))
    graft(bare, (["runs", MACHINE, bad.run_id], "040000", folder_tree(bare, bad.path)))
    return bare, fleet, bad, put_blob(bare, data)


@pytest.mark.parametrize("allow_filter", [True, False], ids=["filtering", "not-filtering"])
@pytest.mark.slow  # the second tier: ~10 s of the default tier's budget under load
def test_a_file_over_the_size_limit_is_refused_and_never_stays_in_the_cache(
    tmp_path, monkeypatch, allow_filter
):
    bare, fleet, bad, blob = big_file_history(tmp_path, allow_filter)
    root, _ = project(tmp_path)
    monkeypatch.setenv(settings.MAX_FILE_BYTES.name, "100000")
    (tmp_path / "trace").mkdir()
    trace = tmp_path / "trace" / "received.pack"
    monkeypatch.setenv("GIT_TRACE_PACKFILE", str(trace))
    before, local = outside(tmp_path, root, trace.parent), files_of(root)
    code, out, err = store("pull", url(bare), root, "--all", "--machine", MACHINE)
    monkeypatch.delenv("GIT_TRACE_PACKFILE")
    assert code == 3 and "pulled 2 run(s)" in out
    said = f"{MACHINE}/{bad.run_id} in the history holds "
    if allow_filter:
        assert said + "big.bin of more than 100,000 bytes, over the allowed 100,000" in err
        assert "not fetched: the server filters blobs by size); not pulled" in err
        assert trace.stat().st_size < 100_000  # the 300 kB file never came
    else:
        assert said + "big.bin of 300,000 bytes, over the allowed 100,000" in err
        assert "fetched: the server does not filter blobs; removed from the store's cache" in err
        assert trace.stat().st_size > 300_000
    assert blob not in cache_objects(root)
    assert outside(tmp_path, root, trace.parent) == before
    assert files_of(root) == {**local, **files_of(fleet)}
    # the cache still serves: a second pull fetches what it lacks and refuses the same way
    code, out, err = store("pull", url(bare), root, "--all", "--machine", MACHINE)
    assert code == 3 and "(2 already here)" in out and said in err
    assert blob not in cache_objects(root)


@pytest.mark.slow  # the second tier: ~5 s of the default tier's budget under load
def test_a_run_json_over_the_size_limit_read_for_a_mode_is_not_kept(tmp_path, monkeypatch):
    bare, fleet, bad, blob = big_file_history(tmp_path, True)
    huge = made(tmp_path, 41)
    meta = json.loads((huge.path / records.RUN_JSON).read_text())
    meta["notes"] = "x" * 200_000
    (huge.path / records.RUN_JSON).write_text(json.dumps(meta))
    records.write_manifest(huge.path, huge.machine, huge.run_id)
    tree = folder_tree(bare, huge.path)
    graft(bare, (["runs", MACHINE, huge.run_id], "040000", tree))
    run_json = dict((e[1], e[2]) for e in tree_entries(bare, tree))[b"run.json"]
    root, _ = project(tmp_path)
    monkeypatch.setenv(settings.MAX_FILE_BYTES.name, "100000")
    code, out, err = store("pull", url(bare), root, "--all", "--machine", MACHINE, "--mode", "fast")
    assert code == 3 and "pulled 2 run(s)" in out  # the big run.json reads as no mode
    assert run_json not in cache_objects(root) and blob not in cache_objects(root)
    assert "harness store: removed 1 file(s) over the 100,000 bytes allowed from the store's" in err


# ---- a result file naming a benchmark its benchmarks.json lacks ----


def stray_benchmark(rec):
    result = rec.result_file()
    data = json.loads(result.read_text())
    data["results"]["canary.Canary.track_gone"] = data["results"]["canary.Canary.track_ops"]
    result.write_text(json.dumps(data))


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_a_record_naming_a_benchmark_its_benchmarks_json_lacks_is_refused_at_pull(tmp_path):
    bare, fleet, good = fleet_history(tmp_path)
    bad = made(tmp_path, 60, stray_benchmark)
    graft(bare, (["runs", MACHINE, bad.run_id], "040000", folder_tree(bare, bad.path)))
    root, _ = project(tmp_path)
    before, local = outside(tmp_path, root), files_of(root)
    code, out, err = store("pull", url(bare), root, "--all", "--machine", MACHINE)
    assert code == 3 and "pulled 3 run(s)" in out
    rel = bad.result_file().relative_to(bad.path).as_posix()
    assert (
        f"{MACHINE}/{bad.run_id} in the history is not a whole record: {rel} names benchmark "
        "'canary.Canary.track_gone', which its benchmarks.json lacks; not pulled" in err
    )
    assert outside(tmp_path, root) == before
    assert files_of(root) == {**local, **files_of(fleet)}


@pytest.mark.parametrize("command", ["history", "report"])
def test_a_local_record_naming_a_stray_benchmark_is_left_out_by_the_readers(tmp_path, command):
    root = tmp_path / "results"
    good = [write_record(root, i) for i in range(1, 7)]
    bad = write_record(root, 7)
    stray_benchmark(bad)
    records.write_manifest(bad.path, bad.machine, bad.run_id)
    argv = [command, "--results-dir", str(root), "--machine", MACHINE]
    if command == "report":  # of a good run, with the history plot that reads every run
        argv += [good[-1].run_id, "--out", str(tmp_path / "report")]
        argv += ["--history", "canary.Canary.track_ops"]
    code, out, err = harness(*argv)
    assert code in (0, 1), (code, err)
    assert f"harness: left out '{bad.path}': benchmark 'canary.Canary.track_gone' is not in" in err
    assert err.count("left out") == 1


# ---- what a push uploads: never a hard-linked file, never a file changed meanwhile ----


@pytest.mark.parametrize("manifest", [True, False], ids=["manifest", "older-layout"])
def test_a_push_refuses_a_file_with_more_than_one_hard_link(tmp_path, manifest):
    bare = bare_repo(tmp_path / "history.git")
    root, good = project(tmp_path)
    secret = tmp_path / "secret.txt"
    bad = write_record(root, 2)
    os.link(secret, bad.path / "notes.txt")
    if manifest:
        records.write_manifest(bad.path, bad.machine, bad.run_id)
    else:  # a record written before records carried their own manifest
        (bad.path / records.MANIFEST).unlink()
    before, local = outside(tmp_path, root), files_of(root)
    code, out, err = store("push", url(bare), root)
    assert code == 3 and "pushed 1 run(s)" in out
    assert history_runs(bare) == [f"{MACHINE}/{good.run_id}"]
    assert (
        f"{bad.path}: its file 'notes.txt' has 2 hard links (another name for the same file "
        "lies elsewhere; its content is never pushed): give it a copy of its own "
        "(cp -p F F.new && mv F.new F) if it is the record's, else remove it; not pushed" in err
    )
    every = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=bare, capture_output=True
    ).stdout
    assert secret.read_bytes() not in every
    assert outside(tmp_path, root) == before and files_of(root) == local


@pytest.mark.parametrize("swap", ["link", "dangling link", "hard link"])
def test_a_record_file_swapped_while_a_push_reads_it_is_refused_by_name(
    tmp_path, monkeypatch, swap
):
    bare = bare_repo(tmp_path / "history.git")
    root, good = project(tmp_path)
    secret = tmp_path / "secret.txt"
    victim = write_record(root, 3)
    target = victim.path / records.FINGERPRINT
    real = gitrepo.Repo.hash_objects

    def swapped(self, paths):  # between the checks and git reading the files
        if target.exists() and not target.is_symlink() and target.stat().st_nlink == 1:
            target.unlink()
            if swap == "link":
                target.symlink_to(secret)
            elif swap == "dangling link":
                target.symlink_to(tmp_path / "nothing")
            else:
                os.link(secret, target)
        return real(self, paths)

    monkeypatch.setattr(gitrepo.Repo, "hash_objects", swapped)
    code, out, err = store("push", url(bare), root)
    assert code == 3, err
    assert f"{victim.path}: its files changed while it was pushed; not pushed" in err or (
        swap == "hard link" and f"{victim.path}: its file 'fingerprint.json' has 2 hard" in err
    )
    assert history_runs(bare) == [f"{MACHINE}/{good.run_id}"]
    every = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=bare, capture_output=True
    ).stdout
    assert secret.read_bytes() not in every
