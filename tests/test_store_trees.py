"""The history's trees as git stores them (docs/trust.md#the-historys-trees):
entries `git mktree` refuses (written with `hash-object -t tree --literally`), names held twice,
empty names, servers that check what they receive, a user's own git settings, folders of many
entries, and `harness store repair`. Each test asserts the exit code, the line naming the entry,
that nothing outside the results root changed and local records are left as they were, and no
traceback (harness() asserts that)."""

from __future__ import annotations

import subprocess

import pytest
from store_support import (
    MACHINE,
    REF,
    bare_repo,
    files_of,
    git,
    graft,
    graft_raw,
    history_runs,
    put_blob,
    raw_entries,
    raw_tree,
    url,
    write_record,
)
from test_store_hostile import harness, outside, project, store

from harness.core import gitrepo, gittree, records, settings

# git's processes started cheaply from this worker (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("light_git_spawns", "own_store_settings")

OTHER = "m9-cpu"


def history(tmp_path, n: int = 2) -> tuple:
    """A history with `n` good records of MACHINE and one of OTHER, pushed by the harness."""
    bare = bare_repo(tmp_path / "history.git")
    fleet = tmp_path / "fleet" / "results"
    good = [write_record(fleet, i) for i in range(1, n + 1)]
    good.append(write_record(fleet, 50, machine=OTHER))
    assert store("push", url(bare), fleet)[0] == 0
    return bare, good


def tip_tree(bare) -> str:
    return git(bare, "rev-parse", f"{REF}^{{tree}}")


def raw_names(bare, *path: str) -> list[bytes]:
    """The names of the tip's folder at `path`, as stored (copies of one name included)."""
    tree = tip_tree(bare)
    for name in path:
        tree = next(o for m, n, o in raw_entries(bare, tree) if n == name.encode())
    return [n for _, n, _ in raw_entries(bare, tree)]


def checking(bare):
    """From now on the server checks every object it receives, as git's fsck would."""
    git(bare, "config", "receive.fsckObjects", "true")


# ---- git's own rules for an entry ----

PLAIN = ["runs", "store.json", "20261201T000000Z-x", "a b", "m\nx", "git", "gitx", ".github"]
FLAGGED = [
    "a/b",
    ".",
    "..",
    ".git",
    ".GIT",
    ".git.",
    ".git ",
    "git~1",
    ".g\u200cit",
    "x\\.git",
    ".git:stream",
]


def test_the_entry_rules_flag_all_that_git_fsck_flags_and_nothing_plain(tmp_path):
    bare = bare_repo(tmp_path / "repo.git")
    blob = put_blob(bare, b"x\n")
    trees = {name: raw_tree(bare, [("100644", name, blob)]) for name in PLAIN + FLAGGED}
    trees["mode 100664"] = raw_tree(bare, [("100664", "f", blob)])
    trees["mode 100600"] = raw_tree(bare, [("100600", "f", blob)])
    trees["twice"] = raw_tree(bare, [("100644", "f", blob), ("100644", "f", blob)])
    trees["empty name"] = raw_tree(bare, [("100644", "", blob)])
    done = subprocess.run(
        ["git", "fsck", "--strict", "--no-dangling", "--no-progress"],
        cwd=bare, capture_output=True, text=True,
    )  # fmt: skip
    flagged = {name for name, tree in trees.items() if f"tree {tree}" in done.stderr}
    ours = set()
    for name, tree in trees.items():
        if name == "twice":
            continue  # a name held twice is found by comparing names (edit_tree), not here
        for mode, entry, oid in raw_entries(bare, tree):
            if gittree.entry_problem(int(mode, 8), entry, oid):
                ours.add(name)
    assert flagged - {"twice"} <= ours  # everything git's own fsck flags (its version here)
    assert set(FLAGGED) <= ours and not ours & set(PLAIN)  # and git's newer rules; no plain one
    assert "twice" in flagged


# ---- a push or prune over hostile entries: only the folders it changes are written ----


@pytest.mark.slow  # the second tier: ~8 s of the default tier's budget under load
def test_a_root_entry_holding_a_slash_no_longer_stops_a_push_or_prune(tmp_path):
    bare, good = history(tmp_path)
    blob = put_blob(bare, b"by hand\n")
    graft_raw(bare, [], ("100644", "a/b", blob))
    checking(bare)  # and the server checks what it receives
    root, mine = project(tmp_path)
    before, local = outside(tmp_path, root), files_of(root)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 0 and "pulled 3 run(s)" in out
    assert err == (
        "harness store: 'a/b' in the history: a name holding '/' (fsck: fullPathname); a "
        "commit made here leaves it out; skipped\n"
    )
    local = files_of(root)
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert (code, err.count("'a/b'")) == (0, 1) and "pushed 1 run(s)" in out
    assert b"a/b" not in raw_names(bare) and f"{MACHINE}/{mine.run_id}" in history_runs(bare)
    code, out, err = harness(
        "prune", "--store", "--keep", "1", "--yes", "--remote", url(bare),
        "--results-dir", str(root),
    )  # fmt: skip
    assert (code, err) == (0, "") and "prunes 2 run(s)" in out
    assert files_of(root) == local and outside(tmp_path, root) == before


@pytest.mark.slow  # the second tier: ~6 s of the default tier's budget under load
def test_an_old_hostile_entry_is_carried_where_untouched_and_left_out_where_rewritten(tmp_path):
    bare, good = history(tmp_path)
    blob = put_blob(bare, b"by hand\n")
    dots = raw_tree(bare, [("100644", "x.json", blob)])
    graft(bare, (["pruned", ".."], "040000", dots), (["runs", OTHER, ".."], "040000", dots))
    checking(bare)
    held_pruned = git(bare, "rev-parse", f"{REF}:pruned")
    root, mine = project(tmp_path)
    code, out, err = store("push", url(bare), root, mine.run_id)
    # runs/m1-cpu and runs/ were written anew; pruned/ and runs/m9-cpu were not (carried by
    # their ids: the server never sees their '..' again)
    assert code == 0 and "pushed 1 run(s)" in out, err
    assert git(bare, "rev-parse", f"{REF}:pruned") == held_pruned
    assert b".." in raw_names(bare, "runs", OTHER)
    # a push that writes runs/m9-cpu leaves its '..' out, once named, and lands
    other = write_record(root, 51, machine=OTHER)
    code, out, err = store("push", url(bare), root, other.run_id)
    assert code == 0 and "pushed 1 run(s)" in out
    assert err.count(f"'runs/{OTHER}/..'") == 1 and "(fsck: hasDotdot)" in err
    assert b".." not in raw_names(bare, "runs", OTHER)


@pytest.mark.slow  # the second tier: ~6 s of the default tier's budget under load
def test_a_machine_folder_held_twice_is_read_by_no_one_and_left_out_by_a_push(tmp_path):
    bare, good = history(tmp_path)
    copy = git(bare, "rev-parse", f"{REF}:runs/{MACHINE}")
    graft_raw(bare, ["runs"], ("40000", MACHINE, copy))  # a second runs/m1-cpu
    root, mine = project(tmp_path)
    before = outside(tmp_path, root)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 3 and "pulled 1 run(s)" in out  # OTHER's; neither copy of MACHINE's
    said = f"'runs/{MACHINE}' in the history is held 2 times"
    assert err.count(said) == 1 and "1 entry of the history in the selection skipped" in err
    assert [r.run_id for r in records.list_runs(root, MACHINE)] == [mine.run_id]
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert code == 0 and "pushed 1 run(s)" in out and err.count(said) == 1
    assert raw_names(bare, "runs").count(MACHINE.encode()) == 1
    assert history_runs(bare) == sorted([f"{OTHER}/{good[-1].run_id}", f"{MACHINE}/{mine.run_id}"])
    assert outside(tmp_path, root) == before


@pytest.mark.slow  # the second tier: ~6 s of the default tier's budget under load
def test_store_json_held_twice_with_one_schema_reads_as_one_and_is_written_once(tmp_path):
    bare, good = history(tmp_path)
    marker = git(bare, "rev-parse", f"{REF}:store.json")
    graft_raw(bare, [], ("100644", "store.json", marker))
    root, mine = project(tmp_path)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 0 and "pulled 3 run(s)" in out and "store.json' in the history is held 2" in err
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert code == 0 and raw_names(bare).count(b"store.json") == 1


@pytest.mark.slow  # the second tier: ~11 s of the default tier's budget under load
def test_store_json_held_twice_with_two_schemas_stops_everyone_until_repaired(tmp_path):
    bare, good = history(tmp_path)
    ours = git(bare, "rev-parse", f"{REF}:store.json")
    newer = put_blob(bare, b'{"schema": 99}\n')
    tree = tip_tree(bare)
    entries = [e for e in raw_entries(bare, tree) if e[1] != b"store.json"]
    # schema 99 first, then schema 1: a rewrite that sorted them would let either win
    top = raw_tree(
        bare, [(b"100644", b"store.json", newer), (b"100644", b"store.json", ours)] + entries
    )
    tip = git(bare, "rev-parse", REF)
    git(bare, "update-ref", REF, git(bare, "commit-tree", top, "-p", tip, "-m", "by hand"))
    held = git(bare, "rev-parse", REF)
    root, mine = project(tmp_path)
    before, local = outside(tmp_path, root), files_of(root)
    for argv in (
        ["store", "pull", "--all-machines", "--all"],
        ["store", "push", mine.run_id],
        ["prune", "--store", "--keep", "1", "--yes"],
        ["store", "repair", "--yes"],
    ):
        code, out, err = harness(*argv, "--remote", url(bare), "--results-dir", str(root))
        assert code == 3 and out == "" and len(err.splitlines()) == 1, (argv, err)
        assert "its store.json is held 2 times (schema 99, schema 1, in the tree's order)" in err
        assert git(bare, "rev-parse", REF) == held
    assert files_of(root) == local and outside(tmp_path, root) == before
    code, out, err = harness(
        "store", "repair", "--yes", "--marker", "--remote", url(bare), "--results-dir", str(root)
    )
    assert code == 0 and "removes 1 entry" in out, err
    assert raw_names(bare).count(b"store.json") == 1
    assert git(bare, "rev-parse", f"{REF}:store.json") == ours
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert code == 0 and "pushed 1 run(s)" in out


# ---- what the server cannot send, what it refuses, and the user's own git settings ----


@pytest.mark.slow  # the second tier: ~11 s of the default tier's budget under load
def test_an_empty_name_the_server_cannot_read_is_exit_5_with_the_fix_on_the_server(tmp_path):
    bare, good = history(tmp_path)
    good_tip = git(bare, "rev-parse", REF)
    blob = put_blob(bare, b"x\n")
    record = git(bare, "rev-parse", f"{REF}:runs/{MACHINE}/{good[0].run_id}")
    bad = raw_tree(bare, [*raw_entries(bare, record), ("100644", "", blob)])
    graft_raw(bare, ["runs", MACHINE], ("40000", "20261105T000000Z-empty-name", bad))
    root, mine = project(tmp_path)
    elsewhere = tmp_path / "c" / "results"
    elsewhere.mkdir(parents=True)
    before, local = outside(tmp_path, root, elsewhere), files_of(root)
    fix = f"Fix it on the server: move {REF} back to the commit before the one that added"
    # a push: the server's git reads its tip before it accepts anything, and stops on the tree
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert code == 5 and "the server said: 'fatal: empty filename in tree entry'" in err
    assert fix in err and len(err.splitlines()) == 1
    # a pull of that record: the server's git dies sending it
    code, out, err = store("pull", url(bare), elsewhere, "--all-machines", "--all")
    assert code == 5 and "the server could not send it" in err and fix in err
    # repair finds the record by halving the fetch, and names who added it
    code, out, err = harness("store", "repair", "--remote", url(bare), "--results-dir", str(root))
    assert code == 5 and fix in err
    assert "20261105T000000Z-empty-name': cannot be fetched: the server's git dies" in err
    assert "(added by commit " in err and "'someone' <someone@example.com>)" in err
    assert files_of(root) == local and outside(tmp_path, root, elsewhere) == before
    # the fix on the server, as docs/trust.md says it; then the push lands
    git(bare, "update-ref", REF, good_tip)
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert code == 0 and "pushed 1 run(s)" in out


def test_an_empty_name_at_the_root_is_exit_5_over_git_daemon_with_the_fix(tmp_path):
    from store_support import git_daemon

    served = tmp_path / "served"
    served.mkdir()
    bare = bare_repo(served / "history.git")
    fleet = tmp_path / "fleet" / "results"
    write_record(fleet, 1)
    assert store("push", url(bare), fleet)[0] == 0
    graft_raw(bare, [], ("100644", "", put_blob(bare, b"x\n")))
    root, mine = project(tmp_path)
    before, local = outside(tmp_path, root, served), files_of(root)
    with git_daemon(served) as prefix:
        for action in ("push", "pull"):
            code, out, err = store(action, f"{prefix}history.git", root)
            assert code == 5 and len(err.splitlines()) == 1, err
            assert "bad pack header" in err and f"Fix it on the server: move {REF}" in err
    assert outside(tmp_path, root, served) == before and files_of(root) == local


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_a_users_own_fsck_settings_no_longer_refuse_the_history(tmp_path, monkeypatch):
    bare, good = history(tmp_path)
    dots = raw_tree(bare, [("100644", "x", put_blob(bare, b"x\n"))])
    graft(
        bare,
        (
            ["runs", OTHER, "20261106T000000Z-dots"],
            "040000",
            raw_tree(bare, [("040000", "..", dots)]),
        ),
    )
    config = tmp_path / "gitconfig"
    # fsck on everything fetched; and the remote reached through an insteadOf of the user's
    config.write_text(
        f'[transfer]\n\tfsckObjects = true\n[url "{url(bare)}"]\n\tinsteadOf = results:\n'
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    root, mine = project(tmp_path)
    code, out, err = store("pull", "results:", root, "--all-machines", "--all")
    assert code == 3 and "pulled 3 run(s)" in out
    assert f"{OTHER}/20261106T000000Z-dots in the history holds an entry named '..'" in err
    assert [line for line in gitrepo._CONFIG if "fsck" in line] == [
        "transfer.fsckObjects=false",
        "fetch.fsckObjects=false",
        "receive.fsckObjects=false",
    ]


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_a_rejected_push_says_the_servers_reason_escaped(tmp_path):
    bare, good = history(tmp_path)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\ncat >/dev/null\necho 'error: the ref is protected'\necho '::error::x'\nexit 1\n"
    )
    hook.chmod(0o755)
    root, mine = project(tmp_path)
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert code == 5 and len(err.splitlines()) == 1
    assert "the server said: 'error: the ref is protected'" in err and "nothing was pushed" in err
    assert not any(line.lstrip().startswith("::") for line in err.splitlines())


# ---- a folder of too many entries ----


@pytest.mark.slow  # the second tier: ~6 s of the default tier's budget under load
def test_a_folder_over_the_entry_cap_is_skipped_by_name_and_blocks_only_what_goes_there(
    tmp_path, monkeypatch
):
    bare, good = history(tmp_path, n=4)
    monkeypatch.setenv(settings.STORE_MAX_ENTRIES.name, "3")
    root, mine = project(tmp_path)
    other = write_record(root, 51, machine=OTHER)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 3 and "pulled 1 run(s)" in out
    cap = "holds more than 3 entries ($HARNESS_STORE_MAX_ENTRIES): not read"
    assert f"'runs/{MACHINE}' in the history {cap}" in err
    code, out, err = store("push", url(bare), root, mine.run_id, other.run_id)
    assert code == 3 and "pushed 1 run(s)" in out
    assert f"the history holds a folder of more than 3 entries at runs/{MACHINE}" in err


@pytest.mark.slow  # the second tier: ~7 s of the default tier's budget under load
def test_one_prune_commit_prunes_at_most_its_cap_and_says_how_many_are_left(tmp_path, monkeypatch):
    from harness.core import store as store_module

    bare, good = history(tmp_path, n=5)
    monkeypatch.setattr(store_module, "MAX_PRUNED", 2)
    root, mine = project(tmp_path)
    prune = ["prune", "--store", "--keep", "1", "--remote", url(bare), "--results-dir", str(root)]
    code, out, err = harness(*prune)
    assert code == 0 and "dry run: 4 run(s) would be pruned" in out and "(2 listed;" in out
    code, out, err = harness(*prune, "--yes")
    assert code == 0 and "prunes 2 run(s)" in out and "2 more run(s) to prune" in out
    assert history_runs(bare) == sorted(f"{r.machine}/{r.run_id}" for r in good[2:])
    code, out, err = harness(*prune, "--yes")
    assert code == 0 and "prunes 2 run(s)" in out and "more run(s) to prune" not in out
    assert history_runs(bare) == sorted(f"{r.machine}/{r.run_id}" for r in good[4:])


def test_a_folder_written_anew_loses_exactly_the_names_held_twice_however_many_it_holds(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(gittree.Seen, "SMALL", 100)  # past it: the bitmap, with candidates
    monkeypatch.setattr(gittree.Seen, "BITS", 1 << 12)  # many, compared by name after
    repo = gitrepo.Repo(tmp_path / "results", gitrepo.Remote("x", "/nowhere", "/nowhere"), REF)
    with repo.locked():
        blob = put_blob(repo.path, b"x\n")
        names = [f"n{k:05d}" for k in range(3000)]
        twice = {"n00007", "n01500", "n02999"}
        entries = [("100644", n, blob) for n in names] + [("100644", n, blob) for n in twice]
        tree = raw_tree(repo.path, entries)
        left = gittree.LeftOut()
        made = repo.edit_tree(tree, {"new": ("blob", blob)}, left)
        kept = [n.decode() for _, n, _ in raw_entries(repo.path, made)]
    assert kept == sorted(set(names) - twice | {"new"})
    assert sorted(path for path, _ in left.items) == sorted(twice) and left.count == 3
    assert all("2 entries of that name" in line for _, line in left.items)


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_a_folder_entry_naming_a_file_is_a_tree_the_server_cannot_send(tmp_path):
    bare, good = history(tmp_path)
    graft_raw(bare, ["runs"], ("40000", "m5-cpu", put_blob(bare, b"x\n")))
    root, mine = project(tmp_path)
    before, local = outside(tmp_path, root), files_of(root)
    for action, args in (("pull", ("--all-machines", "--all")), ("push", (mine.run_id,))):
        code, out, err = store(action, url(bare), root, *args)
        assert code == 5 and len(err.splitlines()) == 1, err
        assert "not a tree" in err and f"Fix it on the server: move {REF}" in err
    assert files_of(root) == local and outside(tmp_path, root) == before
