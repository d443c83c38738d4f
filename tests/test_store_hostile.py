"""The results history as input (docs/history.md#what-a-pull-and-a-push-check): histories made
by hand with git's plumbing, as anyone who can push the ref could make them (entries named
'..' or '.git', links, gitlinks, files where folders belong, a store.json that is not the
harness's), and local records holding links. Each test asserts the exit code, the one line
naming the entry or record and why, that nothing outside the results root changed (a sentinel
tree: a project's README.md and conftest.py, a script in .venv/bin, a secret beside the
project) and that local records are left as they were; no traceback."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from store_support import (
    MACHINE,
    REF,
    SUBMODULE_COMMIT,
    bare_repo,
    files_of,
    folder_tree,
    git,
    graft,
    harness,
    history_entries,
    history_runs,
    put_blob,
    put_tree,
    spec_tree,
    state_of,
    url,
    write_record,
)

from harness.core import gitrepo, records, settings

# git's processes started cheaply from this worker (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("light_git_spawns", "own_store_settings")


def store(action: str, remote, root, *args: str) -> tuple[int, str, str]:
    return harness("store", action, "--remote", str(remote), "--results-dir", str(root), *args)


def project(tmp_path, name: str = "b"):
    """A project with a results root holding one local record of its own, and a sentinel
    tree around it: what a hostile pull must never touch."""
    base = tmp_path / name
    (base / ".venv" / "bin").mkdir(parents=True)
    (base / "README.md").write_text("# the project's own README\n")
    (base / "conftest.py").write_text("# runs in every pytest session\n")
    (base / ".venv" / "bin" / "activate").write_text("# sourced by CI\n")
    (tmp_path / "secret.txt").write_text("a token beside the project\n")
    root = base / "results"
    mine = write_record(root, 900, machine=MACHINE)
    return root, mine


def outside(tmp_path, *roots) -> dict:
    """Everything under tmp_path but these results roots (and the remotes, which the test
    itself writes): paths, modes, bytes, link targets."""
    return state_of(tmp_path, leave_out=[*roots, *tmp_path.glob("*.git")])


def kept_as_they_were(held: dict, after: dict, *added: str, left_out=()) -> bool:
    """Whether every entry of the history in `held` (history_entries before a commit) is
    still there `after` with its mode and oid, but the folders on the way to the paths
    `added`, and the entries `left_out` (and what lies below them), which must be gone."""
    on_the_way = {p.encode()[:i] for p in added for i, c in enumerate(p) if c == "/"}
    gone = [p.encode() if isinstance(p, str) else p for p in left_out]

    def below(k: bytes) -> bool:
        return any(k == g or k.startswith(g + b"/") for g in gone)

    assert all(p.encode() in after for p in added)
    assert not any(below(k) for k in after), [k for k in after if below(k)]
    return {k: after.get(k) for k in held if k not in on_the_way and not below(k)} == {
        k: v for k, v in held.items() if k not in on_the_way and not below(k)
    }


# ---- the "done when" case: one hostile record among eight good ones ----


@pytest.mark.slow  # the second tier: ~8 s of the default tier's budget under load
def test_one_hostile_record_among_eight_good_ones(tmp_path):
    bare = bare_repo(tmp_path / "history.git")
    fleet = tmp_path / "fleet" / "results"
    good = [write_record(fleet, i) for i in range(1, 9)]
    assert store("push", url(bare), fleet)[0] == 0
    root, mine = project(tmp_path)
    # a whole record, plus a folder named '..' that leads (from the staging folder a pull
    # writes into) to a local record's asv.log, the project's README.md and conftest.py, and
    # a file beside the project
    bad = write_record(tmp_path / "made" / "results", 50)
    x = b"written by a pull\n"
    beside = {"README.md": x, "conftest.py": x, "..": {"secret.txt": x}}
    dots = {mine.run_id: {records.ASV_LOG: x}, "..": {"..": {"..": beside}}}
    tree = folder_tree(bare, bad.path, extra=[("040000", "..", spec_tree(bare, dots))])
    graft(bare, (["runs", MACHINE, bad.run_id], "040000", tree))

    before, local = outside(tmp_path, root), files_of(root)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 3
    assert f"pulled 8 run(s) from {url(bare)}" in out
    assert err.count("\n") == 1 and err.startswith("harness store: error: refused: ")
    assert f"{MACHINE}/{bad.run_id} in the history holds an entry named '..'" in err
    assert err.endswith("; not pulled\n")
    assert outside(tmp_path, root) == before
    assert files_of(root) == {**local, **files_of(fleet)}  # the 8, byte for byte, and mine
    assert records.unfinished(root) == []  # no staging folder left behind

    # a push of good local records goes on whatever else the history holds
    held = history_entries(bare)
    new = write_record(root, 901)
    code, out, err = store("push", url(bare), root, new.run_id)
    assert (code, err) == (0, "") and "pushed 1 run(s)" in out
    assert kept_as_they_were(held, history_entries(bare), f"runs/{MACHINE}/{new.run_id}")

    # and so does prune (to it the hostile record is a run like another: the oldest go)
    code, out, err = harness(
        "prune", "--store", "--keep", "3", "--yes", "--remote", url(bare),
        "--results-dir", str(root),
    )  # fmt: skip
    assert code == 0 and err == "" and "prunes 7 run(s)" in out
    kept = [good[-1], bad, new]
    assert history_runs(bare) == sorted(f"{MACHINE}/{r.run_id}" for r in kept)
    assert outside(tmp_path, root) == before


# ---- hostile entries at every level of one history ----

OTHER = "m9-cpu"  # a machine of the zoo below with nothing hostile in its folder
TOMBSTONE = "20261101T000000Z-dead0000-000000"  # pruned; its tombstone is not JSON


def deep_run_json(rec):
    meta = (rec.path / records.RUN_JSON).read_text()
    deep = "[" * 5000 + "]" * 5000  # Python's own parser would run out of recursion
    (rec.path / records.RUN_JSON).write_text(meta.rstrip()[:-1] + f', "x": {deep}}}')


def big_file(rec):
    (rec.path / "big.log").write_bytes(b"x" * 100_001)  # the zoo pulls with a 100 kB limit


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """A history holding good records and one hostile entry of each kind at each level, and
    what the commands did with it: a pull of everything, one of a machine with nothing
    hostile, one by mode (which reads run.json first), a push, a push of a record whose
    place is taken, a prune."""
    tmp = tmp_path_factory.mktemp("zoo")
    with pytest.MonkeyPatch.context() as mp:
        for s in (settings.STORE_REMOTE, settings.STORE_REF, settings.RESULTS_DIR):
            mp.delenv(s.name, raising=False)
        mp.setenv(settings.PROJECT.name, "")
        mp.setenv(settings.STORE_RETRY_S.name, "20")
        mp.setenv(settings.MAX_FILE_BYTES.name, "100000")
        yield _zoo(tmp)


def _zoo(tmp):
    bare = bare_repo(tmp / "history.git")
    fleet = tmp / "fleet" / "results"
    good = [write_record(fleet, i) for i in (1, 2, 3)]
    good.append(write_record(fleet, 4, machine=OTHER))
    assert store("push", url(bare), fleet)[0] == 0
    one = folder_tree(bare, good[0].path)
    blob = put_blob(bare, b"not what the layout allows\n")
    ids = iter(f"20261102T{k:06d}Z-hostile-{k:02d}" for k in range(100))
    hostile: dict[str, str] = {}
    edits = []  # one commit makes them all

    def record(name, *extra, change=None, leave_out=()):
        """A hostile record: whole (its own manifest and ids), and `extra` entries."""
        rec = write_record(tmp / "made" / name, 60 + len(hostile))
        if change:
            change(rec)
            records.write_manifest(rec.path, rec.machine, rec.run_id)
        tree = folder_tree(bare, rec.path, extra=extra, leave_out=leave_out)
        edits.append((["runs", MACHINE, rec.run_id], "040000", tree))
        hostile[name] = rec.run_id

    # the machine folders
    for name in ("..", ".git", "m\nx", b"\xff\xfe"):
        edits.append((["runs", name], "040000", put_tree(bare, [("040000", good[0].run_id, one)])))
    edits.append((["runs", "m2-cpu"], "100644", blob))
    edits.append((["runs", "m3-cpu"], "120000", put_blob(bare, b"../../..")))
    edits.append((["runs", "m4-cpu"], "160000", SUBMODULE_COMMIT))
    # the run folders
    edits.append((["runs", MACHINE, ".."], "040000", one))
    edits.append((["runs", MACHINE, "not-a-run"], "040000", one))
    for name, mode, oid in (
        ("run: a file", "100644", blob),
        ("run: a link", "120000", put_blob(bare, b"/etc")),
        ("run: a gitlink", "160000", SUBMODULE_COMMIT),
    ):
        hostile[name] = next(ids)
        edits.append((["runs", MACHINE, hostile[name]], mode, oid))
    # the entries of a record
    record("'..'", ("040000", "..", put_tree(bare, [("100644", "README.md", blob)])))
    record("'.git'", ("040000", ".git", put_tree(bare, [("100644", "config", blob)])))
    record("'.GIT'", ("040000", ".GIT", put_tree(bare, [("100644", "config", blob)])))
    record("hidden", ("100644", ".hidden", blob))
    record("newline", ("100644", "a\nb", blob))
    record("link", ("120000", "link", put_blob(bare, b"../../../../secret.txt")))
    record("gitlink", ("160000", "sub", SUBMODULE_COMMIT))
    record("executable", ("100755", "run.sh", blob))
    record("twice", ("100644", records.RUN_JSON, blob))
    record("run.json a folder", ("040000", records.RUN_JSON, one), leave_out=[records.RUN_JSON])
    record("run.json a gitlink", ("160000", records.RUN_JSON, SUBMODULE_COMMIT),
           leave_out=[records.RUN_JSON])  # fmt: skip
    record("deep", change=deep_run_json)
    record("big", change=big_file)
    hostile["empty"] = next(ids)
    edits.append((["runs", MACHINE, hostile["empty"]], "040000", put_tree(bare, [])))
    # a record made before manifests, whose kept listing is not JSON
    record("listing", leave_out=[records.MANIFEST])
    edits.append((["manifests", MACHINE, f"{hostile['listing']}.json"], "100644", blob))
    # tombstones and kept listings
    edits.append((["pruned", ".."], "040000", put_tree(bare, [("100644", "x.json", blob)])))
    edits.append((["pruned", MACHINE, "not-json-named"], "100644", blob))
    hostile["tombstone a folder"] = next(ids)
    edits.append((["pruned", MACHINE, f"{hostile['tombstone a folder']}.json"], "040000", one))
    edits.append((["pruned", MACHINE, f"{TOMBSTONE}.json"], "100644", blob))
    edits.append((["manifests", ".."], "040000", put_tree(bare, [("100644", "x.json", blob)])))
    hostile["listing a link"] = next(ids)
    link = put_blob(bare, b"/etc/passwd")
    edits.append((["manifests", MACHINE, f"{hostile['listing a link']}.json"], "120000", link))
    # the root
    edits.append((["notes"], "100644", blob))
    edits.append(([".."], "040000", one))
    graft(bare, *edits)

    root, mine = project(tmp)
    done = {"bare": bare, "root": root, "mine": mine, "good": good, "hostile": hostile}
    other, by_mode = tmp / "other" / "results", tmp / "by-mode" / "results"
    other.mkdir(parents=True)
    by_mode.mkdir(parents=True)
    done["before"], done["local"] = outside(tmp, root, other, by_mode), files_of(root)
    done["pull"] = store("pull", url(bare), root, "--all-machines", "--all")
    done["after pull"] = outside(tmp, root, other, by_mode)
    done["pulled"] = files_of(root)
    done["runs after pull"] = {r.run_id for r in records.list_runs(root)}
    done["pull other"] = store("pull", url(bare), other, "--machine", OTHER, "--all")
    done["pulled other"] = [r.run_id for r in records.list_runs(other)]
    done["pull by mode"] = store("pull", url(bare), by_mode, "--all-machines", "--mode", "fast")
    done["pulled by mode"] = [r.run_id for r in records.list_runs(by_mode)]
    done["held"] = history_entries(bare)
    new = write_record(root, 901)
    done["new"] = new
    tomb = write_record(root, 903, run_id=TOMBSTONE)  # pruned by a tombstone that is no JSON
    done["push"] = store("push", url(bare), root, new.run_id, tomb.run_id)
    done["after push"] = history_entries(bare)
    # a local record whose place in the history holds a file: never written over
    taken = write_record(root, 902, run_id=hostile["run: a file"])
    done["push taken"] = store("push", url(bare), root, taken.run_id)
    done["before prune"] = history_entries(bare)
    done["prune"] = harness(
        "prune", "--store", "--keep", "2", "--yes", "--remote", url(bare),
        "--results-dir", str(root),
    )  # fmt: skip
    done["after prune"] = history_entries(bare)
    done["outside at the end"] = outside(tmp, root, other, by_mode)
    return done


FSCK = "a commit made here leaves it out; skipped"  # what git's fsck flags: never re-sent
SKIPPED = {  # a hostile entry of the history -> the line that names it
    "root '..'": f"'..' in the history: a name '..' (fsck: hasDotdot); {FSCK}",
    "machine '..'": f"'runs/..' in the history: a name '..' (fsck: hasDotdot); {FSCK}",
    "machine '.git'": "'runs/.git' in the history: a name a file system reads as '.git' "
    f"(fsck: hasDotgit); {FSCK}",
    "machine with a newline": "'runs/m\\nx' in the history: machine name 'm\\nx' is not",
    "machine not UTF-8": "'runs/\\udcff\\udcfe' in the history: machine name",
    "machine a file": "'runs/m2-cpu' in the history is a file, not a folder; skipped",
    "machine a link": "'runs/m3-cpu' in the history is a symbolic link, not a folder; skipped",
    "machine a gitlink": "'runs/m4-cpu' in the history is a gitlink (a submodule), not a folder",
    "run '..'": f"'runs/{MACHINE}/..' in the history: a name '..' (fsck: hasDotdot); {FSCK}",
    "run not a run id": f"'runs/{MACHINE}/not-a-run' in the history: run id 'not-a-run' is not",
    "run a file": "' in the history is a file, not a run record; skipped",
    "run a link": "' in the history is a symbolic link, not a run record; skipped",
    "run a gitlink": "' in the history is a gitlink (a submodule), not a run record; skipped",
    "pruned '..'": f"'pruned/..' in the history: a name '..' (fsck: hasDotdot); {FSCK}",
    "pruned not <run id>.json": f"'pruned/{MACHINE}/not-json-named' in the history: "
    "'not-json-named' is not <run id>.json; skipped",
    "pruned a folder": "' in the history is a folder, not a file; skipped",
    "manifests '..'": f"'manifests/..' in the history: a name '..' (fsck: hasDotdot); {FSCK}",
    "manifests a link": "' in the history is a symbolic link, not a file; skipped",
}
REFUSED = {  # a hostile record -> why the pull names it
    "'..'": " in the history holds an entry named '..' ('../README.md'); not pulled",
    "'.git'": " in the history holds an entry named '.git' ('.git/config'); not pulled",
    "'.GIT'": " in the history holds an entry named '.git' ('.GIT/config'); not pulled",
    "hidden": " in the history: entry '.hidden': '.hidden' is not ASCII letters",
    "newline": " in the history: entry 'a\\nb': 'a\\nb' is not ASCII letters",
    "link": " in the history holds a symbolic link 'link'; not pulled",
    "gitlink": " in the history holds a gitlink (a submodule) 'sub'; not pulled",
    "executable": " in the history holds an executable file 'run.sh'; not pulled",
    "twice": " in the history holds two entries named 'run.json'; not pulled",
    "run.json a folder": " in the history is not a whole record: run.json is listed but missing",
    "run.json a gitlink": " in the history holds a gitlink (a submodule) 'run.json'; not pulled",
    "deep": " in the history is not a whole record: run.json: JSON nests deeper than 64 levels",
    "big": " in the history holds big.log of more than 100,000 bytes, over the allowed 100,000 "
    "($HARNESS_MAX_FILE_BYTES; not fetched: the server filters blobs by size); not pulled",
    "empty": " in the history holds no files; not pulled",
    "listing": " in the history is not a whole record: manifest.json is unreadable or of an "
    "unknown schema; not pulled",
}


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
@pytest.mark.xdist_group("store-zoo")  # one worker builds the zoo once
@pytest.mark.parametrize("entry", sorted(SKIPPED))
def test_a_hostile_entry_of_the_history_is_skipped_with_one_line(zoo, entry):
    _, _, err = zoo["pull"]
    lines = [line for line in err.splitlines() if SKIPPED[entry] in line]
    assert len(lines) == 1 and lines[0].startswith("harness store: '")
    assert lines[0].endswith("; skipped")


@pytest.mark.xdist_group("store-zoo")  # one worker builds the zoo once
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_hostile_record_is_refused_by_name_and_why(zoo, name):
    _, _, err = zoo["pull"]
    last = err.splitlines()[-1]
    assert last.startswith("harness store: error: refused: ")
    assert f"{MACHINE}/{zoo['hostile'][name]}{REFUSED[name]}" in last
    assert not (zoo["root"] / "runs" / MACHINE / zoo["hostile"][name]).exists()


@pytest.mark.xdist_group("store-zoo")  # one worker builds the zoo once
def test_the_pull_brings_the_good_records_and_writes_nothing_else(zoo):
    code, out, err = zoo["pull"]
    assert code == 3
    assert "pulled 4 run(s)" in out
    assert len(err.splitlines()) == len(SKIPPED) + 1  # one line each, then the refusals
    in_runs = [e for e in SKIPPED if not e.startswith(("pruned", "manifests", "root"))]
    assert f"{len(in_runs)} entries of the history in the selection skipped" in err
    assert zoo["after pull"] == zoo["before"]
    fleet = {r.run_id for r in zoo["good"]}
    assert zoo["runs after pull"] == fleet | {zoo["mine"].run_id}
    assert {k: v for k, v in zoo["pulled"].items() if zoo["mine"].run_id in k} == zoo["local"]
    assert records.unfinished(zoo["root"]) == []


@pytest.mark.xdist_group("store-zoo")  # one worker builds the zoo once
def test_a_pull_of_a_machine_with_nothing_hostile_exits_0_and_still_names_the_rest(zoo):
    code, out, err = zoo["pull other"]
    assert code == 0 and "pulled 1 run(s)" in out
    assert zoo["pulled other"] == [zoo["good"][-1].run_id]
    assert len(err.splitlines()) == len(SKIPPED) and "error" not in err


@pytest.mark.xdist_group("store-zoo")  # one worker builds the zoo once
def test_a_pull_by_mode_reads_run_json_of_hostile_records_without_a_crash(zoo):
    code, out, err = zoo["pull by mode"]
    assert code == 3 and "pulled 4 run(s)" in out
    assert set(zoo["pulled by mode"]) == {r.run_id for r in zoo["good"]}
    assert "nests deeper" not in err  # its run.json was no mode: not selected


@pytest.mark.xdist_group("store-zoo")  # one worker builds the zoo once
def test_a_push_keeps_what_others_wrote_as_it_is(zoo):
    code, out, err = zoo["push"]
    assert code == 0 and "pushed 1 run(s)" in out
    assert f"pruned from the history, not pushed again: {MACHINE}/{TOMBSTONE}" in out
    assert len(err.splitlines()) == len(SKIPPED) and "error" not in err  # the skipped entries, said
    after = zoo["after push"]
    # the folders the push rewrote (the root, runs/, runs/<machine>) lose what git's fsck flags,
    # each named above; every other entry, hostile or not, is kept as it was, and the folders
    # the push did not touch (pruned/, manifests/) are carried by their ids, '..' and all
    fsck = ["..", "runs/..", "runs/.git", f"runs/{MACHINE}/.."]
    new = f"runs/{MACHINE}/{zoo['new'].run_id}"
    assert kept_as_they_were(zoo["held"], after, new, left_out=fsck)
    assert b"notes" in after and b"runs/m\nx" in after and b"runs/m3-cpu" in after
    assert after[b"pruned"] == zoo["held"][b"pruned"] and b"pruned/.." in after
    assert after[b"manifests"] == zoo["held"][b"manifests"]


@pytest.mark.xdist_group("store-zoo")  # one worker builds the zoo once
def test_a_push_never_writes_over_an_entry_it_did_not_write(zoo):
    code, out, err = zoo["push taken"]
    assert code == 3
    run_id = zoo["hostile"]["run: a file"]
    last = err.splitlines()[-1]
    assert f"{run_id}: the history holds a file at runs/{MACHINE}/{run_id}" in last
    assert last.endswith("not pushed (what others wrote in the history is never written over)")
    assert zoo["before prune"] == zoo["after push"]


@pytest.mark.xdist_group("store-zoo")  # one worker builds the zoo once
def test_prune_on_a_hostile_history_works_and_keeps_the_rest(zoo):
    code, out, err = zoo["prune"]
    assert code == 0, err
    left_by_the_push = ("root '..'", "machine '..'", "machine '.git'", "run '..'")
    assert "error" not in err and len(err.splitlines()) == len(SKIPPED) - len(left_by_the_push)
    before, after = zoo["before prune"], zoo["after prune"]
    gone = {k for k in before if k not in after}
    # the runs pruned, and pruned/.. (prune rewrote pruned/: what git's fsck flags is left out)
    dots = {k for k in gone if k == b"pruned/.." or k.startswith(b"pruned/../")}
    gone -= dots
    assert dots and gone and all(k.startswith(f"runs/{MACHINE}/".encode()) for k in gone)
    untouched = {k: v for k, v in before.items() if v[0] != "040000" and k not in gone | dots}
    assert {k: after[k] for k in untouched} == untouched
    tombstones = [k for k in after if k.startswith(f"pruned/{MACHINE}/".encode())]
    tombstones = [k for k in tombstones if k.count(b"/") == 2]
    assert len(tombstones) == len({k.split(b"/")[2] for k in gone}) + 3
    assert zoo["outside at the end"] == zoo["before"]


# ---- store.json: the history's own description ----

MARKERS = {
    "unknown schema": (b'{"schema": 2, "what": "a newer layout"}', "says schema 2: this harness"),
    "not JSON": (b"<html>\n", "its store.json: JSON does not parse"),
    "not UTF-8": (b'{"schema": 1, "x": "\xff"}', "its store.json: JSON is not UTF-8"),
    "not an object": (b"[1]", "its store.json is not a JSON object"),
    "deep": (b"[" * 100 + b"]" * 100, "its store.json: JSON nests deeper than 64 levels"),
    "too big": (b" " * 70_000 + b"{}", "its store.json is 70,002 bytes, not the file"),
    "a folder": ("040000", "its store.json is a folder, not the file a push writes"),
    "a link": ("120000", "its store.json is a symbolic link, not the file a push writes"),
    "a gitlink": ("160000", "its store.json is a gitlink (a submodule), not the file"),
}


# the default tier keeps one refused content and one refused entry kind; the rest (~2.5 s each
# under load) are the second tier's
DEFAULT_TIER_MARKERS = ("not JSON", "a link")


@pytest.mark.parametrize(
    "kind",
    [
        k if k in DEFAULT_TIER_MARKERS else pytest.param(k, marks=pytest.mark.slow)
        for k in sorted(MARKERS)
    ],
)
def test_a_store_json_not_the_harnesss_is_refused_on_pull_push_and_prune(tmp_path, kind):
    bare = bare_repo(tmp_path / "history.git")
    data, says = MARKERS[kind]
    rec = write_record(tmp_path / "made" / "results", 1)
    marker = {
        "040000": lambda: ("040000", folder_tree(bare, rec.path)),
        "120000": lambda: ("120000", put_blob(bare, b"../../../../etc/passwd")),
        "160000": lambda: ("160000", SUBMODULE_COMMIT),
    }.get(data, lambda: ("100644", put_blob(bare, data)))()
    graft(
        bare,
        (["store.json"], *marker),
        (["runs", MACHINE, rec.run_id], "040000", folder_tree(bare, rec.path)),
    )
    tip = git(bare, "rev-parse", REF)
    root, mine = project(tmp_path)
    before, local = outside(tmp_path, root), files_of(root)
    for argv in (
        ["store", "pull", "--all-machines", "--all"],
        ["store", "push", mine.run_id],
        ["prune", "--store", "--keep", "1", "--yes"],
    ):
        code, out, err = harness(*argv, "--remote", url(bare), "--results-dir", str(root))
        assert code == 3 and out == "", (argv, err)
        assert len(err.splitlines()) == 1 and says in err, err
        assert f"{REF} at {url(bare)}: its store.json" in err and "nothing pulled or pushed" in err
        assert git(bare, "rev-parse", REF) == tip
        assert files_of(root) == local and outside(tmp_path, root) == before


# ---- the folders of the layout themselves ----


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_runs_pruned_or_manifests_that_are_not_folders_block_only_what_goes_there(tmp_path):
    bare = bare_repo(tmp_path / "history.git")
    fleet = tmp_path / "fleet" / "results"
    first = write_record(fleet, 1)
    assert store("push", url(bare), fleet)[0] == 0
    blob = put_blob(bare, b"x\n")
    graft(bare, (["pruned"], "100644", blob), (["manifests"], "120000", blob))
    root, mine = project(tmp_path)
    (tmp_path / "c" / "results").mkdir(parents=True)
    before = outside(tmp_path, root, tmp_path / "c" / "results")
    # pull and push go on (a tombstone or kept listing is not needed for them)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 0 and "pulled 1 run(s)" in out
    assert err.splitlines() == [
        "harness store: 'pruned' in the history is a file, not a folder; skipped",
        "harness store: 'manifests' in the history is a symbolic link, not a folder; skipped",
    ]
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert code == 0 and "pushed 1 run(s)" in out
    # a record without a manifest of its own needs manifests/: refused by name, kept here
    old = write_record(root, 2)
    (old.path / records.MANIFEST).unlink()
    code, out, err = store("push", url(bare), root, old.run_id)
    assert code == 3
    assert f"{old.path}: the history holds a symbolic link at manifests, not what a push" in err
    # prune needs pruned/ for its tombstones: it prunes nothing and says why
    held = history_entries(bare)
    code, out, err = harness(
        "prune", "--store", "--keep", "1", "--yes", "--remote", url(bare),
        "--results-dir", str(root),
    )  # fmt: skip
    assert code == 3
    assert f"{first.run_id}: the history holds a file at pruned, where its tombstone goes" in err
    assert history_entries(bare) == held
    # and a `runs` that is a file: every record's place is taken
    graft(bare, (["runs"], "100644", blob))
    code, out, err = store("pull", url(bare), tmp_path / "c" / "results", "--all-machines", "--all")
    assert code == 3 and "'runs' in the history is a file, not a folder; skipped" in err
    assert "1 entry of the history in the selection skipped" in err
    code, out, err = store("push", url(bare), root, mine.run_id)
    assert code == 3 and "the history holds a file at runs, not what a push writes" in err
    assert outside(tmp_path, root, tmp_path / "c" / "results") == before


# ---- local records that a push refuses ----


def test_a_push_refuses_local_records_holding_links_or_names_outside_the_rules(tmp_path):
    bare = bare_repo(tmp_path / "history.git")
    root, good = project(tmp_path)
    secret = tmp_path / "secret.txt"
    made = {}

    def bad(name, i, change, machine=MACHINE):
        rec = write_record(root, i, machine=machine)
        change(rec)
        records.write_manifest(rec.path, rec.machine, rec.run_id)  # the manifest says all is well
        made[name] = rec

    bad("link to a secret", 1, lambda r: (r.path / "notes.txt").symlink_to(secret))
    bad("link to a folder", 2, lambda r: (r.path / "up").symlink_to(tmp_path))
    bad(
        ".git",
        3,
        lambda r: (r.path / ".git" / "hooks").mkdir(parents=True),
    )
    bad("hidden", 4, lambda r: (r.path / ".env").write_text("TOKEN=x\n"))
    bad("bad name", 5, lambda r: (r.path / "a b").write_text("x\n"))
    bad("a fifo", 6, lambda r: os.mkfifo(r.path / "pipe"))
    # a record folder that is a link, and a machine folder that is a link
    elsewhere = write_record(tmp_path / "elsewhere" / "results", 7)
    (records.runs_dir(root) / MACHINE / elsewhere.run_id).symlink_to(elsewhere.path)
    other = write_record(tmp_path / "elsewhere" / "results", 8, machine="m5-cpu")
    (records.runs_dir(root) / "m5-cpu").symlink_to(other.path.parent)
    before, local = outside(tmp_path, root), files_of(root)

    code, out, err = store("push", url(bare), root)
    assert code == 3 and f"pushed 1 run(s) to {url(bare)}" in out
    assert history_runs(bare) == [f"{MACHINE}/{good.run_id}"]
    said = err.splitlines()[-1].removeprefix("harness store: error: refused: ").split(" | ")
    assert len(said) == len(made)
    why = {
        "link to a secret": "holds a symbolic link 'notes.txt'",
        "link to a folder": "holds a symbolic link 'up'",
        ".git": "holds an entry named '.git' ('.git')",
        "hidden": "entry '.env': '.env' is not ASCII letters",
        "bad name": "entry 'a b': 'a b' is not ASCII letters",
        "a fifo": "holds 'pipe', which is not a plain file",
    }
    for name, rec in made.items():
        assert any(s.startswith(f"{rec.path}: {why[name]}") for s in said), (name, said)
    # links in runs/ are no records: the listing names them and never follows them
    linked = records.runs_dir(root) / MACHINE / elsewhere.run_id
    assert f"left out '{linked}': a symbolic link, not a run record (never followed)" in err
    machine = records.runs_dir(root) / "m5-cpu"
    assert f"left out '{machine}': a symbolic link in runs/, not followed" in err
    # nothing of what the links lead to travelled
    every = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=bare, capture_output=True
    ).stdout
    assert secret.read_bytes() not in every and b"TOKEN" not in every
    assert outside(tmp_path, root) == before and files_of(root) == local


def test_a_local_record_named_outside_the_rules_is_not_pushed(tmp_path):
    bare = bare_repo(tmp_path / "history.git")
    root = tmp_path / "results"
    good = write_record(root, 1)
    odd = write_record(root, 2, machine="m6-cpu")  # run.json's machine names the history's path
    meta = (odd.path / records.RUN_JSON).read_text().replace('"m6-cpu"', '"../../x"')
    (odd.path / records.RUN_JSON).write_text(meta)
    code, out, err = store("push", url(bare), root)
    # the listing of local records names it and leaves it out: it is offered to nobody
    assert code == 0 and "pushed 1 run(s)" in out
    assert f"left out '{odd.path}': run.json: 'machine' is not a machine name" in err
    assert history_runs(bare) == [f"{MACHINE}/{good.run_id}"]
    code, _, err = store("pull", url(bare), root, "--machine", "../x")
    assert code == 3 and "--machine: machine name '../x' is not ASCII" in err


# ---- a results root whose folders someone else placed ----


def test_a_pull_never_writes_through_a_link_in_the_results_root(tmp_path):
    bare = bare_repo(tmp_path / "history.git")
    fleet = tmp_path / "fleet" / "results"
    one, two = write_record(fleet, 1), write_record(fleet, 2, machine="m7-cpu")
    three = write_record(fleet, 3)
    assert store("push", url(bare), fleet)[0] == 0
    root = tmp_path / "b" / "results"
    target = tmp_path / "outside"
    target.mkdir()
    records.runs_dir(root).mkdir(parents=True)
    (records.runs_dir(root) / "m7-cpu").symlink_to(target)  # a machine folder that is a link
    (records.runs_dir(root) / MACHINE).mkdir()
    (records.runs_dir(root) / MACHINE / one.run_id).symlink_to(target / "gone")  # dangling
    (records.runs_dir(root) / MACHINE / three.run_id).write_text("a file, not a record\n")
    before = outside(tmp_path, root)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 3 and "pulled 0 run(s)" in out
    said = err.splitlines()[-1]
    link = records.runs_dir(root) / "m7-cpu"
    assert f"m7-cpu/{two.run_id} not pulled: {link} is a symbolic link, never followed" in said
    here = records.runs_dir(root) / MACHINE / one.run_id
    assert f"{MACHINE}/{one.run_id} not pulled: {here} is a symbolic link, never followed" in said
    assert f"{three.run_id}: a record of that id is here with other content; not" in said
    assert outside(tmp_path, root) == before and list(target.iterdir()) == []


# ---- the checks themselves, without git ----


def test_check_whole_and_listing_never_follow_a_link_and_never_crash_on_deep_json(tmp_path):
    rec = write_record(tmp_path / "results", 1)
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret\n")
    (rec.path / "notes.txt").symlink_to(secret)
    assert "notes.txt" not in records.listing(rec.path)  # its target is never read
    assert records.check_whole(rec.path, rec.machine, rec.run_id) == [
        "holds a symbolic link 'notes.txt'"
    ]
    (rec.path / "notes.txt").unlink()
    deep_run_json(rec)
    records.write_manifest(rec.path, rec.machine, rec.run_id)
    assert records.check_whole(rec.path, rec.machine, rec.run_id) == [
        "run.json: JSON nests deeper than 64 levels"
    ]


def test_git_tree_oid_counts_a_link_as_git_does_and_never_reads_through_it(tmp_path):
    rec = write_record(tmp_path / "results", 1)
    (rec.path / "up").symlink_to("../../..")
    os.mkfifo(rec.path / "pipe")  # never opened (reading it would wait forever)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    shutil.copytree(rec.path, repo / "rec", symlinks=True, ignore=shutil.ignore_patterns("pipe"))
    git(repo, "add", "--all")
    assert gitrepo.git_tree_oid(rec.path) == git(repo, "write-tree", "--prefix=rec/")
