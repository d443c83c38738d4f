"""`harness store repair` (docs/trust.md#repairing-the-history): a history holding one hostile
entry of each kind at each level, listed with who added it, then removed in one commit that
leaves the good records and what the harness ignores as they were; retried like a push when
another runner pushed first."""

from __future__ import annotations

import subprocess

import pytest
from store_support import (
    MACHINE,
    REF,
    SUBMODULE_COMMIT,
    folder_tree,
    git,
    graft,
    graft_raw,
    history_entries,
    history_runs,
    linear,
    put_blob,
    raw_entries,
    raw_tree,
    url,
    write_record,
)
from test_store_hostile import harness, outside, project, store
from test_store_trees import OTHER, history

from harness.core import gitrepo

# git's processes started cheaply from this worker (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("light_git_spawns", "own_store_settings")

BAD = "20261107T000000Z-bad"  # the run ids of hostile records
LISTED = {  # an entry the harness refuses -> what repair says of it
    "a/b": "a name holding '/' (fsck: fullPathname)",
    "..": "a name '..' (fsck: hasDotdot)",
    "runs/..": "a name '..' (fsck: hasDotdot)",
    "runs/m\\nx": "machine name 'm\\nx' is not ASCII letters",
    "runs/m2-cpu": "is a file, not a folder",
    "runs/m8-cpu": "is held 2 times (one copy cannot be told from another)",
    f"runs/{MACHINE}/not-a-run": "run id 'not-a-run' is not YYYYmmddTHHMMSSZ-",
    f"runs/{MACHINE}/{BAD}-file": "is a file, not a run record",
    f"runs/{MACHINE}/{BAD}-twice": "is held 2 times",
    f"runs/{MACHINE}/{BAD}-dots": "holds an entry '..', not a name a record may hold",
    f"runs/{MACHINE}/{BAD}-link": "holds a symbolic link 'link'",
    f"runs/{MACHINE}/{BAD}-slash": "holds an entry 'asv/x/y', not a name a record may hold",
    f"runs/{MACHINE}/{BAD}-gitlink": "holds a gitlink (a submodule) 'sub'",
    f"pruned/{MACHINE}/not-json": "'not-json' is not <run id>.json",
    "pruned/..": "a name '..' (fsck: hasDotdot)",
    f"manifests/{MACHINE}/{BAD}.json": "is a symbolic link, not a file",
}


def hostile(tmp_path):
    """A history of good records and, added by hand, one entry of each kind the harness
    refuses at each level (and a root file it ignores, which repair keeps)."""
    bare, good = history(tmp_path)
    blob = put_blob(bare, b"by hand\n")
    rec = write_record(tmp_path / "made" / "results", 70)
    whole = folder_tree(bare, rec.path)
    one = raw_tree(bare, [("100644", "x.json", blob)])
    dots = folder_tree(bare, rec.path, [("040000", "..", one)])
    link = folder_tree(bare, rec.path, [("120000", "link", blob)])
    gitlink = folder_tree(bare, rec.path, [("160000", "sub", SUBMODULE_COMMIT)])
    graft(
        bare,
        (["notes"], "100644", blob),  # outside the layout, accepted by git: ignored, kept
        ([".."], "040000", one),
        (["runs", ".."], "040000", whole),
        (["runs", "m\nx"], "040000", raw_tree(bare, [("040000", rec.run_id, whole)])),
        (["runs", "m2-cpu"], "100644", blob),
        (["runs", MACHINE, "not-a-run"], "040000", whole),
        (["runs", MACHINE, f"{BAD}-file"], "100644", blob),
        (["runs", MACHINE, f"{BAD}-dots"], "040000", dots),
        (["runs", MACHINE, f"{BAD}-link"], "040000", link),
        (["runs", MACHINE, f"{BAD}-gitlink"], "040000", gitlink),
        (["pruned", MACHINE, "not-json"], "100644", blob),
        (["pruned", ".."], "040000", one),
        (["manifests", MACHINE, f"{BAD}.json"], "120000", blob),
    )  # fmt: skip
    graft_raw(bare, [], ("100644", "a/b", blob))
    asv = raw_tree(bare, [("100644", "x/y", blob)])
    slash = raw_tree(
        bare, [*[e for e in raw_entries(bare, whole) if e[1] != b"asv"], (b"40000", b"asv", asv)]
    )
    graft_raw(bare, ["runs", MACHINE], ("40000", f"{BAD}-slash", slash))
    graft_raw(
        bare, ["runs", MACHINE], ("40000", f"{BAD}-twice", whole), ("40000", f"{BAD}-twice", whole)
    )
    graft_raw(bare, ["runs"], ("40000", "m8-cpu", one), ("40000", "m8-cpu", one))
    return bare, good


def test_repair_lists_a_refused_record_with_who_added_it_then_removes_only_it(tmp_path):
    # the default tier's repair: one hostile record (every kind at every level: the slow test
    # below)
    bare, good = history(tmp_path, n=1)
    blob = put_blob(bare, b"by hand\n")
    rec = write_record(tmp_path / "made" / "results", 70)
    one = raw_tree(bare, [("100644", "x.json", blob)])
    dots = folder_tree(bare, rec.path, [("040000", "..", one)])
    graft(bare, (["notes"], "100644", blob), (["runs", MACHINE, f"{BAD}-dots"], "040000", dots))
    root, _ = project(tmp_path)
    held, commits = history_entries(bare), int(git(bare, "rev-list", "--count", REF))
    code, out, err = harness("store", "repair", "--remote", url(bare), "--results-dir", str(root))
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert len(lines) == 2, out
    path = f"runs/{MACHINE}/{BAD}-dots"
    assert lines[0].strip().startswith(f"'{path}': {LISTED[path]}"), out
    assert "(added by commit " in lines[0] and "'someone' <someone@example.com>)" in lines[0]
    assert lines[-1].startswith("dry run: 1 entry of the results")
    assert history_entries(bare) == held  # a dry run writes nothing
    code, out, err = harness(
        "store", "repair", "--yes", "--remote", url(bare), "--results-dir", str(root)
    )
    assert code == 0 and "removes 1 entry the harness refuses" in out, err
    assert int(git(bare, "rev-list", "--count", REF)) == commits + 1 and linear(bare)
    after = history_entries(bare)
    assert path.encode() not in after
    on_the_way = {b"runs", f"runs/{MACHINE}".encode()}  # folders written anew without it
    kept = {k: v for k, v in held.items() if not k.startswith(path.encode())}
    assert {k: v for k, v in kept.items() if k not in on_the_way} == {
        k: v for k, v in after.items() if k not in on_the_way
    }  # the good records, the root file it ignores (notes) and store.json, as they were
    assert set(after) == set(kept)


@pytest.mark.slow  # the second tier: ~20 s under load; the test above is the default tier's
def test_repair_lists_each_entry_the_harness_refuses_with_who_added_it_then_removes_them(tmp_path):
    bare, good = hostile(tmp_path)
    root, mine = project(tmp_path)
    fresh = tmp_path / "c" / "results"
    fresh.mkdir(parents=True)
    before, held = outside(tmp_path, root, fresh), history_entries(bare)
    commits = int(git(bare, "rev-list", "--count", REF))
    code, out, err = harness("store", "repair", "--remote", url(bare), "--results-dir", str(root))
    assert (code, err) == (0, ""), err
    lines = [line.strip() for line in out.splitlines()[:-1]]
    assert len(lines) == len(LISTED), out
    for path, why in LISTED.items():
        found = [line for line in lines if line.startswith(f"'{path}': {why}")]
        assert len(found) == 1, (path, out)
        assert "(added by commit " in found[0] and "'someone' <someone@example.com>)" in found[0]
    assert out.splitlines()[-1].startswith(f"dry run: {len(LISTED)} entries of the results")
    assert history_entries(bare) == held  # a dry run writes nothing
    code, out, err = harness(
        "store", "repair", "--yes", "--remote", url(bare), "--results-dir", str(root)
    )
    assert code == 0 and f"removes {len(LISTED)} entries the harness refuses" in out, err
    assert int(git(bare, "rev-list", "--count", REF)) == commits + 1 and linear(bare)
    after = history_entries(bare)
    assert after[b"notes"] == held[b"notes"] and after[b"store.json"] == held[b"store.json"]
    assert history_runs(bare) == sorted(f"{r.machine}/{r.run_id}" for r in good)
    for r in good:  # the good records, as they were
        path = f"runs/{r.machine}/{r.run_id}".encode()
        assert after[path] == held[path]
    # nothing left that the harness refuses: a pull names nothing, and a client that checks
    # every object it fetches takes the whole tip
    code, out, err = store("repair", url(bare), root)
    assert code == 0 and "nothing to repair" in out
    code, out, err = store("pull", url(bare), fresh, "--all-machines", "--all")
    assert (code, err) == (0, "") and "pulled 3 run(s)" in out
    assert outside(tmp_path, root, fresh) == before
    check = tmp_path / "check.git"
    subprocess.run(["git", "init", "-q", "--bare", str(check)], check=True)
    git(check, "-c", "fetch.fsckObjects=true", "fetch", "-q", "--depth=1", url(bare), REF)


@pytest.mark.slow  # the second tier: ~9 s of the default tier's budget under load
def test_repair_is_applied_again_on_top_when_another_runner_pushed_first(tmp_path, monkeypatch):
    bare, good = history(tmp_path)
    # in a folder the other runner's push does not write
    graft(
        bare, (["pruned", ".."], "040000", raw_tree(bare, [("100644", "x", put_blob(bare, b"x"))]))
    )
    root, mine = project(tmp_path)
    other = tmp_path / "other" / "results"
    theirs = write_record(other, 60, machine=OTHER)
    push = gitrepo.Repo.push
    raced = []

    def first_another_runner(self, commit):
        if not raced:  # between the repair's fetch and its push, another runner's push lands
            raced.append(None)
            raced[0] = store("push", url(bare), other, theirs.run_id)
        return push(self, commit)

    monkeypatch.setattr(gitrepo.Repo, "push", first_another_runner)
    code, out, err = harness(
        "store", "repair", "--yes", "--remote", url(bare), "--results-dir", str(root)
    )
    assert raced and raced[0][0] == 0
    assert code == 0 and "removes 1 entry the harness refuses" in out
    assert "push refused" in err and "another runner may have pushed first" in err
    assert f"{OTHER}/{theirs.run_id}" in history_runs(bare) and linear(bare)
    assert b"pruned/.." not in history_entries(bare)
