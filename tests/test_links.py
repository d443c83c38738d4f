"""Links below the results root (docs/trust.md, "Pulls: sizes, memory and links"): the root a
user gives may itself be a link (runners link results/ to a persistent disk), resolved once and
said; nothing below it (runs/, .store/, machine and run folders) is written or deleted through
a link, and every message names the link and where it leads. Each test asserts the exit code,
that the folder a link leads to is left as it was, and no traceback."""

from __future__ import annotations

import pytest
from store_support import MACHINE, bare_repo, files_of, state_of, url, write_record
from test_store_hostile import harness, store

from harness.core import records
from harness.core.exits import BadInput

# git's processes started cheaply from this worker (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("light_git_spawns", "own_store_settings")


def pushed_history(tmp_path, n: int = 3):
    bare = bare_repo(tmp_path / "history.git")
    fleet = tmp_path / "fleet" / "results"
    good = [write_record(fleet, i) for i in range(1, n + 1)]
    assert store("push", url(bare), fleet)[0] == 0
    return bare, fleet, good


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_a_results_root_that_is_a_link_is_resolved_once_and_said(tmp_path):
    bare, fleet, good = pushed_history(tmp_path)
    disk = tmp_path / "disk" / "results"
    disk.mkdir(parents=True)
    link = tmp_path / "project" / "results"
    link.parent.mkdir()
    link.symlink_to(disk)
    code, out, err = store("pull", url(bare), link, "--all-machines", "--all")
    assert code == 0 and f"pulled 3 run(s) from {url(bare)}" in out
    assert f"into {disk / 'runs'}" in out  # every path said is the folder written
    assert err.count("is a symbolic link to") == 1
    assert f"harness: the results root '{link}' is a symbolic link to '{disk}'; using" in err
    assert files_of(disk) == files_of(fleet)
    # prune works through the root's link, and deletes only what it lists
    code, out, err = harness("prune", "--keep", "1", "--yes", "--results-dir", str(link))
    assert code == 0 and out.count(f"removing {disk / 'runs' / MACHINE}") == 2
    assert [r.run_id for r in records.list_runs(disk)] == [good[-1].run_id]


@pytest.fixture
def runs_elsewhere(tmp_path):
    """A results root whose runs/ is a link to a folder elsewhere holding records."""
    elsewhere = tmp_path / "elsewhere" / "results"
    for i in (1, 2, 3):
        write_record(elsewhere, 10 + i)
    root = tmp_path / "b" / "results"
    root.mkdir(parents=True)
    (root / "runs").symlink_to(records.runs_dir(elsewhere))
    return root, elsewhere, state_of(elsewhere)


def test_a_pull_never_writes_through_runs_that_is_a_link(tmp_path, runs_elsewhere):
    root, elsewhere, before = runs_elsewhere
    bare, _, _ = pushed_history(tmp_path)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 3 and out == ""
    assert err == (
        f"harness store: error: {root / 'runs'} is a symbolic link, never followed (it leads to "
        f"'{records.runs_dir(elsewhere)}') (a pull never writes through a link below the "
        "results root); make runs/ a folder, or give --results-dir the folder the link leads "
        "to\n"
    )
    assert state_of(elsewhere) == before


def test_prune_never_deletes_through_runs_that_is_a_link(runs_elsewhere):
    root, elsewhere, before = runs_elsewhere
    for yes in ([], ["--yes"]):
        code, out, err = harness("prune", "--keep", "1", *yes, "--results-dir", str(root))
        assert code == 3 and out == ""
        assert f"{root / 'runs'}: a symbolic link inside {root} (it leads to '" in err
        assert "refused (nothing is written or deleted through a link below the folder" in err
    assert state_of(elsewhere) == before
    rec = records.list_runs(elsewhere)[0]
    linked = records.RunRecord(root / "runs" / MACHINE / rec.run_id, rec.meta)
    with pytest.raises(BadInput, match="reached through a link"):
        records.remove(linked)
    assert state_of(elsewhere) == before


def test_a_push_never_reads_records_through_runs_that_is_a_link(tmp_path, runs_elsewhere):
    root, elsewhere, before = runs_elsewhere
    bare = bare_repo(tmp_path / "history.git")
    code, out, err = store("push", url(bare), root)
    assert code == 3 and "nothing to push" in out
    said = err.splitlines()[-1].removeprefix("harness store: error: refused: ").split(" | ")
    assert len(said) == 3
    assert all(f"{root / 'runs'} is a symbolic link, never followed" in s for s in said)
    assert state_of(elsewhere) == before


def test_a_run_is_never_written_through_runs_that_is_a_link(runs_elsewhere):
    root, elsewhere, before = runs_elsewhere
    with pytest.raises(BadInput, match="a symbolic link inside"):
        write_record(root, 30)
    assert state_of(elsewhere) == before


def test_a_pull_never_writes_through_a_store_cache_that_is_a_link(tmp_path):
    bare, _, _ = pushed_history(tmp_path)
    root = tmp_path / "b" / "results"
    root.mkdir(parents=True)
    cache = tmp_path / "cache"
    cache.mkdir()
    (root / ".store").symlink_to(cache)
    code, out, err = store("pull", url(bare), root, "--all-machines", "--all")
    assert code == 3
    assert f"{root / '.store'}: a symbolic link inside {root} (it leads to '{cache}')" in err
    assert list(cache.iterdir()) == [] and not records.runs_dir(root).exists()


def test_the_dashboard_is_never_published_through_html_that_is_a_link(tmp_path):
    from harness.runs import nightly

    root = tmp_path / "results"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "html").symlink_to(elsewhere)
    with pytest.raises(BadInput, match=r"html: a symbolic link inside .* \(it leads to '"):
        nightly.check_html_dir(root / "html", root)
    nightly.check_html_dir(tmp_path / "site", root)  # a folder given outside the root: its own
    assert list(elsewhere.iterdir()) == []


def test_the_asv_view_is_never_written_through_asv_that_is_a_link(tmp_path, capsys):
    root = tmp_path / "results"
    write_record(root, 1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "asv").symlink_to(elsewhere)
    with pytest.raises(BadInput, match=r"asv: a symbolic link inside .* \(it leads to '"):
        records.rebuild_view(root)
    assert list(elsewhere.iterdir()) == []
