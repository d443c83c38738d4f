"""The results history as input (docs/history.md#what-a-pull-and-a-push-check): histories made
by hand with git's plumbing, as anyone who can push the ref could make them (entries named
'..' or '.git', links, gitlinks, files where folders belong, a store.json that is not the
harness's), and local records holding links. Each test asserts the exit code, the one line
naming the entry or record and why, that nothing outside the results root changed (a sentinel
tree: a project's README.md and conftest.py, a script in .venv/bin, a secret beside the
project) and that local records are left as they were; no traceback."""

from __future__ import annotations

import contextlib
import io
import os
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
    history_entries,
    history_runs,
    put_blob,
    put_tree,
    spec_tree,
    state_of,
    url,
    write_record,
)

from harness.cli import main
from harness.core import gitrepo, records, settings, trust


@pytest.fixture(autouse=True)
def _own_store_settings(monkeypatch):
    for s in (settings.STORE_REMOTE, settings.STORE_REF, settings.RESULTS_DIR):
        monkeypatch.delenv(s.name, raising=False)
    monkeypatch.setenv(settings.PROJECT.name, "")
    monkeypatch.setenv(settings.STORE_RETRY_S.name, "20")


def harness(*argv: str) -> tuple[int, str, str]:
    """`harness ARGV` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, out.getvalue(), err.getvalue()


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


def outside(tmp_path, root) -> dict:
    """Everything under tmp_path but the results root (and the remotes, which the test
    itself writes): paths, modes, bytes, link targets."""
    return state_of(tmp_path, leave_out=[root, *tmp_path.glob("*.git")])


def kept_as_they_were(bare, held: dict, *added: str) -> bool:
    """Whether every entry of the history in `held` (history_entries before a commit) is
    still there with its mode and oid, but the folders on the way to the paths `added`."""
    after = history_entries(bare)
    on_the_way = {p.encode()[: i] for p in added for i, c in enumerate(p) if c == "/"}
    assert all(p.encode() in after for p in added)
    return {k: after.get(k) for k in held if k not in on_the_way} == {
        k: v for k, v in held.items() if k not in on_the_way
    }


# ---- the "done when" case: one hostile record among eight good ones ----


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
    graft(bare, ["runs", MACHINE, bad.run_id], "040000", tree)

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
    assert kept_as_they_were(bare, held, f"runs/{MACHINE}/{new.run_id}")

    # and so does prune (to it the hostile record is a run like another: the oldest go)
    code, out, err = harness(
        "prune", "--store", "--keep", "3", "--yes", "--remote", url(bare),
        "--results-dir", str(root),
    )  # fmt: skip
    assert code == 0 and err == "" and "prunes 7 run(s)" in out
    kept = [good[-1], bad, new]
    assert history_runs(bare) == sorted(f"{MACHINE}/{r.run_id}" for r in kept)
    assert outside(tmp_path, root) == before
