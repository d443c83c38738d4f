"""The checkouts and installs CI systems make: a detached HEAD without a local `main` (how
actions/checkout leaves a pull request), a shallow clone, another default branch, a run from
outside the checkout (a non-editable install must never write into site-packages)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from harness.core import records
from harness.runs.asv import branches

ROOT = pathlib.Path(__file__).resolve().parents[1]


def git(cwd, *args):
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def repo(tmp_path, branch="main") -> pathlib.Path:
    r = tmp_path / "origin"
    r.mkdir()
    git(r, "init", "-q", "-b", branch)
    git(
        r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one"
    )
    git(
        r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "two"
    )
    return r


def test_branches_on_main_are_as_configured(tmp_path):
    assert branches(repo(tmp_path), ["main"]) == ["main"]


def test_detached_head_without_main(tmp_path):
    r = repo(tmp_path)
    git(r, "checkout", "-q", "--detach")
    git(r, "branch", "-D", "main")
    assert branches(r, ["main"]) == ["HEAD"]


def test_pull_request_commit_beside_main(tmp_path):
    r = repo(tmp_path)
    git(r, "checkout", "-q", "--detach", "HEAD~1")
    assert branches(r, ["main"]) == ["main", "HEAD"]


def test_shallow_clone_and_other_default_branch(tmp_path):
    origin = repo(tmp_path, branch="trunk")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(clone))
    assert branches(clone, ["main"]) == ["HEAD"]
    assert branches(clone, ["trunk"]) == ["trunk"]


def _harness(args, cwd, **env):
    # -P: the harness under test (PYTHONPATH), not a copy that happens to lie in the cwd
    return subprocess.run(
        [sys.executable, "-P", "-m", "harness.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def test_outside_a_checkout_is_a_clear_error_and_writes_nothing(tmp_path):
    proc = _harness(["bench", "--quick", "--suite", "transfer"], cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "not inside a harness checkout" in proc.stderr and "--project" in proc.stderr
    assert not any(tmp_path.iterdir())
    proc = _harness(
        ["prune", "--keep", "1", "--project", str(ROOT), "--results-dir", str(tmp_path / "r")],
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and "nothing to prune" in proc.stdout, proc.stderr


@pytest.mark.slow
@pytest.mark.xdist_group("detached-bench")
@pytest.mark.parametrize("keep_main", [False, True], ids=["without-main", "commit-beside-main"])
def test_bench_in_a_detached_pull_request_checkout(tmp_path, keep_main):
    """End to end: the user's reproduction, `asv run` used to fail with 'Unknown branch main'
    (no local main); and with main present, HEAD beside it used to be benchmarked together with
    main's tip (asv runs every configured branch: two commits, twice the time)."""
    clone = tmp_path / "pr"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{ROOT}", str(clone))
    git(clone, "checkout", "-q", "--detach")
    if keep_main:
        git(clone, "branch", "-f", "main", "HEAD")
        git(
            clone,
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "pr",
        )
    elif "main" in git(clone, "branch", "--list", "main"):
        git(clone, "branch", "-D", "main")
    results = tmp_path / "results"
    (clone / "ci-scratch").mkdir()  # what a CI job leaves beside the checkout: not a change
    (clone / "ci-scratch" / "log.txt").write_text("x")
    proc = _harness(
        [
            "bench",
            "--quick",
            "--suite",
            "transfer",
            "--results-dir",
            str(results),
            "--machine",
            "pr-cpu",
        ],
        cwd=clone,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = (results / "runs" / "pr-cpu").iterdir()
    # asv's own output (which says how many commits it benchmarks) is kept in the run record
    asv_log = (run / records.ASV_LOG).read_text()
    assert "(1 commits" in asv_log and "(2 commits" not in asv_log, asv_log[-2000:]
    meta = json.loads((run / "run.json").read_text())
    assert meta["commit"] == git(clone, "rev-parse", "HEAD")
    # a clean CI checkout is never marked dirty; what it adds untracked is listed, not a change
    assert meta["dirty"] is False and "(dirty)" not in proc.stdout
    assert "ci-scratch/" in meta["worktree"]["untracked"]
