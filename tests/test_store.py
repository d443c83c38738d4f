"""The results history in git (`harness store push|pull`, `prune --store`, `--pull`), against
real bare repositories reached by file://: what is pushed by default, records arriving byte for
byte and checked whole, partial fetches, refusals, pruning as a new commit, remotes that fail,
and the project's own repository left alone. Many processes at once: test_store_fleet.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from store_support import (
    MACHINE,
    REF,
    added_once,
    bare_repo,
    files_of,
    git,
    history_runs,
    url,
    write_record,
)

from harness.cli import main
from harness.core import gitrepo, records, settings

# git's processes started cheaply from this worker (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("light_git_spawns", "own_store_settings")


def store(capsys, action: str, remote, root, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["store", action, "--remote", str(remote), "--results-dir", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_push_sends_clean_bench_and_nightly_runs_and_pull_brings_them_back_byte_for_byte(
    tmp_path, capsys
):
    bare = bare_repo(tmp_path / "history.git")
    a, b = tmp_path / "a" / "results", tmp_path / "b" / "results"
    bench = write_record(a, 1)
    nightly = write_record(a, 2, label="nightly")
    unknown = write_record(a, 3)  # no "dirty" key (older records): pushed as clean-unknown
    ab_side = write_record(a, 4, label="head", ab={"spec": "HEAD"})
    bisect = write_record(a, 5, label="bisect.aaaaaaaa.bbbbbbbb", ab={"spec": "x"})
    dirty = write_record(a, 6, dirty=True)
    clean = write_record(a, 7, dirty=False)

    code, out, _ = store(capsys, "push", url(bare), a)
    assert code == 0
    pushed = {f"{MACHINE}/{r.run_id}" for r in (bench, nightly, unknown, clean)}
    assert set(history_runs(bare)) == pushed
    assert "not pushed unless named: 1 ab runs" in out and "1 bisect runs" in out
    assert "1 runs of a dirty tree" in out
    assert git(bare, "log", "--format=%an <%ae>|%cn <%ce>", REF) == (
        "harness store <harness-store@localhost>|harness store <harness-store@localhost>"
    )

    code, out, _ = store(capsys, "push", url(bare), a, ab_side.run_id, str(dirty.path))
    assert code == 0 and "pushed 2 run(s)" in out
    assert git(bare, "rev-list", "--count", REF) == "2"  # one commit per push
    assert store(capsys, "push", url(bare), a)[1].startswith("harness store: nothing to push")

    code, out, _ = store(capsys, "pull", url(bare), b, "--all-machines", "--all")
    assert code == 0 and "pulled 6 run(s)" in out
    local = {k: v for k, v in files_of(a).items() if bisect.run_id not in k}
    assert files_of(b) == local  # exactly as pushed, nothing added to a record folder
    assert (b / "asv" / MACHINE).is_dir()  # the asv view is rebuilt from the records pulled
    assert all(records.check_whole(r.path, r.machine, r.run_id) == [] for r in records.list_runs(b))
    assert store(capsys, "pull", url(bare), b, "--all-machines", "--all")[1].endswith(
        "(6 already here)\n"
    )


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_the_projects_repository_is_left_alone_and_a_shallow_checkout_pushes_to_origin(
    tmp_path, capsys, checkout_clone
):
    bare = bare_repo(tmp_path / "history.git")
    project = tmp_path / "project"
    checkout_clone(project)  # a one-commit clone: `git clone --depth 1`, as CI checks out
    assert git(project, "rev-parse", "--is-shallow-repository") == "true"
    git(project, "remote", "add", "origin", url(bare))
    git(bare, "config", "receive.shallowUpdate", "true")  # main from a shallow clone
    git(project, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    root = project / "results"  # the project's own results folder: records are ignored there
    write_record(root, 1, label="nightly")

    def state():
        return {
            "status": git(project, "status", "--porcelain", "--untracked-files=all"),
            "head": git(project, "rev-parse", "HEAD"),
            "branch": git(project, "rev-parse", "--abbrev-ref", "HEAD"),
            "refs": git(project, "for-each-ref"),
            "config": (project / ".git" / "config").read_bytes(),
            "index": (project / ".git" / "index").read_bytes(),
            "shallow": (project / ".git" / "shallow").read_bytes(),
            "objects": git(project, "count-objects", "-v"),
        }

    before = state()
    args = ["--project", str(project)]
    assert main(["store", "push", *args]) == 0  # default remote: the project's origin
    assert main(["store", "pull", *args, "--all-machines"]) == 0
    assert (root / gitrepo.CACHE).is_dir() and state() == before  # its cache ignores itself
    assert history_runs(bare) == [f"{MACHINE}/{records.list_runs(root)[0].run_id}"]
    # a plain clone of the project does not download the history
    plain = tmp_path / "plain"
    subprocess.run(["git", "clone", "--quiet", url(bare), str(plain)], check=True)
    tip = git(bare, "rev-parse", REF)
    assert "harness" not in git(plain, "for-each-ref")
    assert subprocess.run(["git", "-C", str(plain), "cat-file", "-e", tip]).returncode != 0


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_pull_selects_and_downloads_only_the_records_asked_for(tmp_path, capsys):
    bare = bare_repo(tmp_path / "history.git")
    a = tmp_path / "a" / "results"
    runs = [write_record(a, i) for i in range(1, 5)]
    full = write_record(a, 5, label="nightly", mode="full")
    fast = write_record(a, 6, label="nightly")
    newer_full = write_record(a, 7, label="nightly", mode="full")
    other = write_record(a, 8, machine="m2-cpu")
    assert store(capsys, "push", url(bare), a)[0] == 0

    b = tmp_path / "b" / "results"
    code, out, _ = store(capsys, "pull", url(bare), b, "--machine", MACHINE, "--last", "2")
    assert code == 0 and "partial fetch" not in out
    assert [r.run_id for r in records.list_runs(b)] == [fast.run_id, newer_full.run_id]
    # no other record was downloaded: their trees (let alone their files) are not in the cache
    repo = next(p for p in (b / gitrepo.CACHE).glob("*.git-*") if p.is_dir())
    tip_tree = git(repo, "rev-parse", f"{gitrepo.TIP}^{{tree}}")
    walk = git(repo, "rev-list", "--objects", "--missing=print", tip_tree).split("\n")
    missing = {line[1:] for line in walk if line.startswith("?")}
    trees = {
        line.split()[3]: line.split()[2]
        for m in (MACHINE, "m2-cpu")
        for line in git(repo, "ls-tree", f"{gitrepo.TIP}:runs/{m}").splitlines()
    }
    assert {trees[r.run_id] for r in runs + [full, other]} <= missing
    assert not {trees[fast.run_id], trees[newer_full.run_id]} & missing

    c = tmp_path / "c" / "results"
    args = ["--machine", MACHINE, "--label", "nightly", "--mode", "full", "--last", "1"]
    assert store(capsys, "pull", url(bare), c, *args)[0] == 0
    assert [r.run_id for r in records.list_runs(c)] == [newer_full.run_id]
    assert store(capsys, "pull", url(bare), c, other.run_id[:20])[0] == 0  # any machine's id
    assert (
        store(capsys, "pull", url(bare), c, "--machine", MACHINE, "--since", "2026-12-01T00:03")[0]
        == 0
    )
    got = {r.run_id for r in records.list_runs(c)}
    assert got == {newer_full.run_id, other.run_id} | {r.run_id for r in runs[2:] + [full, fast]}
    code, _, err = store(capsys, "pull", url(bare), c, "20991231T")
    assert code == 3 and "names no run in the results history" in err


@pytest.mark.slow  # the second tier: ~3 s of the default tier's budget under load
def test_a_server_that_cannot_filter_is_said_in_one_line(tmp_path, capsys):
    bare = bare_repo(tmp_path / "history.git", allow_filter=False)
    a = tmp_path / "a" / "results"
    write_record(a, 1)
    assert store(capsys, "push", url(bare), a)[0] == 0
    code, out, _ = store(capsys, "pull", url(bare), tmp_path / "b", "--machine", MACHINE)
    assert code == 0
    notes = [line for line in out.splitlines() if "partial fetch" in line]
    assert notes == [
        f"harness store: {url(bare)} does not allow partial fetch (uploadpack.allowFilter): "
        "fetched every record of the history"
    ]


def _rewrite(rec: records.RunRecord, name: str, data: bytes) -> None:
    """Change a record's file and keep its manifest true (another record of the same id)."""
    (rec.path / name).write_bytes(data)
    records.write_manifest(rec.path, rec.machine, rec.run_id)


@pytest.mark.slow  # the second tier: ~5 s of the default tier's budget under load
def test_a_record_of_the_same_id_with_other_content_is_refused_never_overwritten(tmp_path, capsys):
    bare = bare_repo(tmp_path / "history.git")
    a, b = tmp_path / "a" / "results", tmp_path / "b" / "results"
    one, two = write_record(a, 1), write_record(a, 2)
    assert store(capsys, "push", url(bare), a)[0] == 0

    shutil.copytree(one.path, records.runs_dir(b) / MACHINE / one.run_id)
    mine = records.load_record(records.runs_dir(b) / MACHINE / one.run_id)
    _rewrite(mine, records.FINGERPRINT, b'{"run_id": "%s", "torch": "9"}' % one.run_id.encode())
    kept = files_of(b)
    code, out, err = store(capsys, "pull", url(bare), b, "--machine", MACHINE)
    assert code == 3
    assert f"{mine.path}: a record of that id is here with other content; not overwritten" in err
    assert "pulled 1 run(s)" in out  # the other run came
    assert {k: v for k, v in files_of(b).items() if one.run_id in k} == kept
    assert [r.run_id for r in records.list_runs(b)] == [one.run_id, two.run_id]

    # the same on push: a local record that no longer is what the history holds
    _rewrite(one, records.FINGERPRINT, b"{}")
    three = write_record(a, 3)
    code, out, err = store(capsys, "push", url(bare), a)
    assert code == 3 and "the history holds run" in err and one.run_id in err
    assert history_runs(bare) == sorted(f"{MACHINE}/{r.run_id}" for r in (one, two, three))
    assert added_once(bare)[f"{MACHINE}/{one.run_id}"] == 1


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_records_that_are_not_whole_are_refused_by_name(tmp_path, capsys):
    bare = bare_repo(tmp_path / "history.git")
    a = tmp_path / "a" / "results"
    good, bad = write_record(a, 1), write_record(a, 2)
    (bad.path / records.FINGERPRINT).write_text('{"truncated')  # changed after it was written
    code, out, err = store(capsys, "push", url(bare), a)
    assert code == 3 and f"{bad.path}: fingerprint.json differs from its listed size" in err
    assert history_runs(bare) == [f"{MACHINE}/{good.run_id}"]

    # a corrupt record in the history (a hand-made commit) is refused by name on pull
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "--quiet", url(bare), str(work)], check=True)
    git(work, "fetch", "--quiet", "origin", f"{REF}:{REF}")
    git(work, "checkout", "--quiet", REF)
    broken = work / "runs" / MACHINE / bad.run_id
    shutil.copytree(bad.path, broken)
    git(work, "add", "--all")
    git(work, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "-m", "by hand")
    git(work, "push", "--quiet", "origin", f"HEAD:{REF}")
    b = tmp_path / "b" / "results"
    code, out, err = store(capsys, "pull", url(bare), b, "--machine", MACHINE)
    assert code == 3
    assert f"{MACHINE}/{bad.run_id} in the history is not a whole record: fingerprint.json" in err
    assert [r.run_id for r in records.list_runs(b)] == [good.run_id]
    assert records.unfinished(b) == []  # its staging folder is gone


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_records_from_before_manifests_travel_with_a_listing_kept_beside_them(tmp_path, capsys):
    bare = bare_repo(tmp_path / "history.git")
    a, b = tmp_path / "a" / "results", tmp_path / "b" / "results"
    old = write_record(a, 1)
    (old.path / records.MANIFEST).unlink()
    assert store(capsys, "push", url(bare), a)[0] == 0
    kept = json.loads(git(bare, "show", f"{REF}:manifests/{MACHINE}/{old.run_id}.json"))
    assert kept["run_id"] == old.run_id and set(kept["files"]) == set(records.listing(old.path))
    assert store(capsys, "pull", url(bare), b, "--machine", MACHINE)[0] == 0
    assert files_of(b) == files_of(a)  # no manifest.json added to the record
    assert not (records.runs_dir(b) / MACHINE / old.run_id / records.MANIFEST).exists()


@pytest.mark.slow  # the second tier: ~8 s of the default tier's budget under load
def test_prune_on_the_history_is_a_new_commit_and_pruned_runs_are_not_pushed_again(
    tmp_path, capsys, monkeypatch
):
    bare = bare_repo(tmp_path / "history.git")
    a = tmp_path / "a" / "results"
    runs = [write_record(a, i) for i in range(1, 5)]
    assert store(capsys, "push", url(bare), a)[0] == 0
    tip = git(bare, "rev-parse", REF)
    # where the history is: named as store push and pull name it, or by the settings
    named = ["prune", "--store", "--keep", "2", "--remote", url(bare), "--ref", REF]
    capsys.readouterr()
    assert main([*named, "--results-dir", str(a)]) == 0
    assert "dry run: 2 run(s) would be pruned" in capsys.readouterr().out
    assert main(["prune", "--remote", url(bare), "--results-dir", str(a)]) == 3  # not --store
    monkeypatch.setenv(settings.STORE_REMOTE.name, url(bare))
    prune = ["prune", "--store", "--keep", "2", "--results-dir", str(a)]
    capsys.readouterr()
    assert main(prune) == 0
    out = capsys.readouterr().out
    assert "dry run: 2 run(s) would be pruned from the results history" in out
    assert git(bare, "rev-parse", REF) == tip
    assert main([*prune, "--yes"]) == 0
    assert git(bare, "rev-parse", f"{REF}~1") == tip  # a new commit on top, nothing rewritten
    assert history_runs(bare) == [f"{MACHINE}/{r.run_id}" for r in runs[2:]]
    assert git(bare, "ls-tree", "--name-only", f"{REF}:pruned/{MACHINE}").split() == [
        f"{r.run_id}.json" for r in runs[:2]
    ]
    assert len(records.list_runs(a)) == 4  # local records are not the history's to prune
    capsys.readouterr()
    assert main(["store", "push", "--results-dir", str(a)]) == 0
    out = capsys.readouterr().out
    assert "nothing to push" in out and "pruned from the history, not pushed again" in out
    assert runs[0].run_id in out and git(bare, "rev-list", "--count", REF) == "2"
    b = tmp_path / "b" / "results"
    assert main(["store", "pull", "--results-dir", str(b), "--all-machines", "--all"]) == 0
    assert [r.run_id for r in records.list_runs(b)] == [r.run_id for r in runs[2:]]


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_remotes_that_fail_exit_5_in_one_line_with_nothing_local_changed(tmp_path, capsys):
    a = tmp_path / "a" / "results"
    write_record(a, 1)
    before = files_of(a)
    missing = tmp_path / "no-such.git"
    code, out, err = store(capsys, "push", url(missing), a)
    assert code == 5 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "git could not push to" in err and "nothing was pushed (1 run(s) kept here only" in err
    assert "does not appear to be a git repository" in err
    code, _, err = store(capsys, "pull", url(missing), tmp_path / "b", "--machine", MACHINE)
    assert code == 5 and "git could not fetch from" in err
    code, _, err = store(capsys, "push", "git://127.0.0.1:9/nothing.git", a)  # nobody listens
    assert code == 5 and len(err.strip().splitlines()) == 1

    # a rejection that is not a race (a hook, a protected ref) is reported, not retried
    bare = bare_repo(tmp_path / "history.git")
    hook = bare / "hooks" / "pre-receive"
    # (its message may say anything, a race's words included: only git's own status counts)
    hook.write_text(
        '#!/bin/sh\necho tried >> "$GIT_DIR/tries"\n'
        "echo 'protected: no non-fast-forward updates here' >&2\nexit 1\n"
    )
    hook.chmod(0o755)
    code, out, err = store(capsys, "push", url(bare), a)
    assert code == 5 and "pre-receive hook declined" in err and "another runner" not in err
    assert (bare / "tries").read_text() == "tried\n"
    assert git(bare, "for-each-ref") == ""
    assert files_of(a) == before


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_a_server_that_cannot_write_the_ref_is_not_taken_for_a_race(tmp_path, capsys):
    # git says "failed to update ref" both when two pushes meet at the ref's lock and when the
    # server cannot write it at all (permissions, a lock file left behind): only the first moves
    # the tip, so a push stops after a few refusals instead of retrying for the whole window
    bare = bare_repo(tmp_path / "history.git")
    a = tmp_path / "a" / "results"
    write_record(a, 1)
    assert store(capsys, "push", url(bare), a)[0] == 0
    tip = git(bare, "rev-parse", REF)
    write_record(a, 2)
    (bare / (REF + ".lock")).write_text("")  # a server-side git killed mid-update left it
    started = time.monotonic()
    code, out, err = store(capsys, "push", url(bare), a)
    assert code == 5 and time.monotonic() - started < 15  # the retry window here is 20 s
    last = err.strip().splitlines()[-1]
    assert "failed to update ref" in last and "not another runner's push" in last
    assert f"stayed at {tip[:8]}" in last and "nothing was pushed" in last
    assert git(bare, "rev-parse", REF) == tip and len(history_runs(bare)) == 1


def test_a_ref_that_is_not_a_results_history_is_refused(tmp_path, capsys):
    bare = bare_repo(tmp_path / "history.git")
    work = tmp_path / "work"
    subprocess.run(["git", "init", "--quiet", str(work)], check=True)
    (work / "code.py").write_text("x = 1\n")
    git(work, "add", "code.py")
    git(work, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "-m", "code")
    git(work, "push", "--quiet", url(bare), "HEAD:refs/heads/main")
    a = tmp_path / "a" / "results"
    write_record(a, 1)
    code, _, err = store(capsys, "push", url(bare), a, "--ref", "refs/heads/main")
    assert code == 3 and "is not a results history (no store.json" in err
    assert git(bare, "rev-list", "--count", "refs/heads/main") == "1"


def test_git_tree_oid_is_gits_own(tmp_path):
    rec = write_record(tmp_path / "results", 1)
    (rec.path / "empty").mkdir()  # git keeps no empty folder
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    shutil.copytree(rec.path, repo / "rec")
    git(repo, "add", "--all")
    assert gitrepo.git_tree_oid(rec.path) == git(repo, "write-tree", "--prefix=rec/")


def test_check_whole_names_what_is_wrong(tmp_path):
    rec = write_record(tmp_path / "results", 1)
    assert records.check_whole(rec.path, rec.machine, rec.run_id) == []
    assert records.check_whole(rec.path, rec.machine, "another-id") == [
        f"manifest.json names run_id {rec.run_id!r}, not 'another-id'",
        f"run.json names run_id {rec.run_id!r}, not 'another-id'",
    ]
    (rec.path / "extra.txt").write_text("x")
    result = rec.result_file()
    result.unlink()
    problems = records.check_whole(rec.path, rec.machine, rec.run_id)
    assert f"{result.relative_to(rec.path).as_posix()} is listed but missing" in problems
    assert "extra.txt is there but not listed" in problems
    (rec.path / records.MANIFEST).unlink()
    assert records.check_whole(rec.path, rec.machine, rec.run_id) == [
        "lists no files (no manifest.json in it, none kept for it)"
    ]


@pytest.mark.slow  # the second tier: ~5 s of the default tier's budget under load
def test_history_over_pulled_runs_prints_what_it_prints_over_the_same_runs_kept_locally(
    tmp_path, capsys, monkeypatch
):
    from test_history import canary_like, write_runs

    a = tmp_path / "a" / "results"
    write_runs(a, canary_like(8, 8), torch={8: "2.15.0"})
    bare = bare_repo(tmp_path / "history.git")
    assert store(capsys, "push", url(bare), a)[0] == 0
    assert main(["history", "--results-dir", str(a)]) == 1
    local = capsys.readouterr().out
    monkeypatch.setenv(settings.STORE_REMOTE.name, url(bare))
    b = tmp_path / "b" / "results"
    assert main(["history", "--results-dir", str(b), "--pull", "--machine", MACHINE]) == 1
    out = capsys.readouterr().out
    pulled_line, rest = out.split("\n", 1)
    assert pulled_line.startswith("harness store: pulled 16 run(s)")
    assert rest == local and "torch 2.14.1 -> 2.15.0" in rest


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_gate_pull_takes_the_newest_clean_nightly_of_the_machine_in_heads_mode(
    tmp_path, capsys, monkeypatch
):
    bare = bare_repo(tmp_path / "history.git")
    fleet = tmp_path / "fleet" / "results"
    fast = write_record(fleet, 1, label="nightly")
    write_record(fleet, 2, label="nightly", mode="full")
    dirty = write_record(fleet, 3, label="nightly", dirty=True)
    assert store(capsys, "push", url(bare), fleet, dirty.run_id)[0] == 0
    assert store(capsys, "push", url(bare), fleet)[0] == 0
    pr = tmp_path / "pr" / "results"
    write_record(pr, 9, ops=11)  # the pull request's run: one op more
    monkeypatch.setenv(settings.STORE_REMOTE.name, url(bare))
    args = ["--results-dir", str(pr), "--machine", MACHINE]
    code = main(["gate", "nightly", "latest", "--pull", *args])
    out = capsys.readouterr().out
    assert code == 1 and "+1 kernels" in out
    assert [r.run_id for r in records.list_runs(pr) if r.label == "nightly"] == [fast.run_id]
    # without --pull, `nightly` names the newest nightly run kept here
    assert main(["gate", "nightly", "latest", *args]) == 1
    # a history with no clean nightly is said, never stood in for by a nightly run kept here
    only_dirty = bare_repo(tmp_path / "dirty-only.git")
    assert store(capsys, "push", url(only_dirty), fleet, dirty.run_id)[0] == 0
    monkeypatch.setenv(settings.STORE_REMOTE.name, url(only_dirty))
    assert main(["gate", "nightly", "latest", "--pull", *args]) == 3
    err = capsys.readouterr().err
    assert f"holds no clean nightly run of {MACHINE} in fast mode" in err
    assert [r.run_id for r in records.list_runs(pr) if r.label == "nightly"] == [fast.run_id]


@pytest.mark.slow  # the second tier: ~3 s of the default tier's budget under load
def test_a_pull_that_matches_nothing_says_what_the_history_holds(tmp_path, capsys):
    bare = bare_repo(tmp_path / "history.git")
    a = tmp_path / "a" / "results"
    write_record(a, 1)
    write_record(a, 2)
    assert store(capsys, "push", url(bare), a)[0] == 0
    code, out, _ = store(capsys, "pull", url(bare), tmp_path / "b", "--machine", "typo-cpu")
    assert code == 0
    assert out == (
        f"harness store: no run in {REF} at {url(bare)} matches the selection (--machine "
        f"typo-cpu); it holds {MACHINE} (2 runs)\n"
    )


@pytest.mark.slow  # the second tier: ~5 s of the default tier's budget under load
def test_nightly_pull_brings_the_nights_before_so_that_history_sees_a_step(
    tmp_path, capsys, monkeypatch
):
    from test_history import OPS, write_runs

    from harness.runs import nightly

    fleet = tmp_path / "fleet" / "results"
    write_runs(fleet, [{OPS: 10}] * 6 + [{OPS: 11}] * 4)
    bare = bare_repo(tmp_path / "history.git")
    assert store(capsys, "push", url(bare), fleet)[0] == 0
    monkeypatch.setattr(nightly, "publish", lambda root, html_dir: 0)
    monkeypatch.setattr(nightly, "vendor_dashboard", lambda html: [])
    monkeypatch.setenv(settings.STORE_REMOTE.name, url(bare))
    runner = tmp_path / "runner" / "results"  # a fresh CI runner: no results of its own
    argv = ["nightly", "--skip-bench", "--results-dir", str(runner), "--machine", MACHINE]
    assert main([*argv, "--pull"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("harness store: pulled 10 run(s)") and "nightly: to find the" in out


def test_a_git_command_that_hangs_is_ended_after_its_timeout(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GIT_SSH_COMMAND", "sleep 30; true")  # a server that never answers
    monkeypatch.setenv(settings.STORE_TIMEOUT_S.name, "1")
    a = tmp_path / "a" / "results"
    write_record(a, 1)
    code, _, err = store(capsys, "push", "ssh://example.invalid/history.git", a)
    assert code == 5 and "git fetch did not finish within 1 s" in err
