"""A fleet pushing to one results history at once, pushes killed midway, and a read-only
remote, with real remotes (a bare repository by file://, and `git daemon` on localhost) and one
`harness store push` process per runner: the slow tier (many processes)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from store_support import (
    MACHINE,
    REF,
    added_once,
    bare_repo,
    git,
    git_daemon,
    graft_raw,
    history_runs,
    linear,
    put_blob,
    raw_entries,
    url,
    write_record,
)

from harness.core import records, settings

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("light_git_spawns")]
RUNNERS = 8
ROUNDS = 3
ALL = ("--machine", MACHINE, "--all")


def harness(*args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    given = env or {}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (settings.STORE_REMOTE.name, settings.STORE_REF.name)
    }
    env[settings.STORE_RETRY_S.name] = "120"
    env.update(given)
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def whole(root) -> bool:
    return all(
        records.check_whole(r.path, r.machine, r.run_id) == [] for r in records.list_runs(root)
    ) and not records.unfinished(root)


@pytest.mark.parametrize("transport", ["file", "daemon"])
def test_eight_runners_pushing_at_once_all_land_in_a_linear_history(tmp_path, transport):
    served = tmp_path / "served"
    served.mkdir()
    bare = bare_repo(served / "history.git")
    with git_daemon(served) as prefix:
        remote = url(bare) if transport == "file" else f"{prefix}history.git"
        expected = []
        for round_ in range(ROUNDS):
            roots = [tmp_path / f"round{round_}" / f"runner{k}" / "results" for k in range(RUNNERS)]
            for k, root in enumerate(roots):
                rec = write_record(root, 1 + round_ * RUNNERS + k)
                expected.append(f"{MACHINE}/{rec.run_id}")
            procs = [
                harness("store", "push", "--remote", remote, "--results-dir", str(root))
                for root in roots
            ]  # started together
            done = [(*p.communicate(timeout=300), p.returncode) for p in procs]
            done = [(code, out, err) for out, err, code in done]
            assert [code for code, _, _ in done] == [0] * RUNNERS, done
            assert all("pushed 1 run(s)" in out for _, out, _ in done)
            assert linear(bare)
            assert git(bare, "rev-list", "--count", REF) == str(len(expected))
            assert history_runs(bare) == sorted(expected)
            assert set(added_once(bare).values()) == {1}
        puller = tmp_path / "puller" / "results"
        pull = harness("store", "pull", "--remote", remote, "--results-dir", str(puller), *ALL)
        assert pull.wait(timeout=300) == 0, pull.communicate()
        assert [f"{r.machine}/{r.run_id}" for r in records.list_runs(puller)] == sorted(expected)
        assert whole(puller)
    # `harness history` over the pulled runs prints what it prints over the same runs kept here
    local = tmp_path / "local" / "results"
    for rec in (
        r for root in tmp_path.glob("round*/runner*/results") for r in records.list_runs(root)
    ):
        shutil.copytree(rec.path, records.runs_dir(local) / rec.machine / rec.run_id)
    seen = [
        subprocess.run(
            [sys.executable, "-m", "harness.cli", "history", "--results-dir", str(root)],
            capture_output=True,
            text=True,
        )
        for root in (local, puller)
    ]
    assert seen[0].returncode == seen[1].returncode and seen[0].returncode in (0, 1)
    assert seen[0].stdout == seen[1].stdout and f"{len(expected)} runs" in seen[0].stdout


def test_a_push_killed_midway_leaves_everything_valid_and_the_next_push_completes_it(tmp_path):
    bare = bare_repo(tmp_path / "history.git")
    # the server holds each push in its pre-receive hook while the flag file is there
    flag, seen = tmp_path / "hold", tmp_path / "seen"
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(
        f"#!/bin/sh\ncat >/dev/null\nif [ -e {flag} ]; then touch {seen}; sleep 3; fi\nexit 0\n"
    )
    hook.chmod(0o755)
    root = tmp_path / "runner" / "results"
    runs = [write_record(root, i) for i in range(1, 4)]
    push = ["store", "push", "--remote", url(bare), "--results-dir", str(root)]

    # 1. killed while the server receives the push
    flag.touch()
    proc = harness(*push)
    deadline = time.monotonic() + 120
    while not seen.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    flag.unlink()
    # 2. killed at random points from its start (fetching, writing blobs, committing, pushing)
    rng = random.Random(44)
    for i in range(4, 7):
        runs.append(write_record(root, i))
        proc = harness(*push)
        time.sleep(rng.uniform(0.2, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert whole(root)
    final = harness(*push)
    code = final.wait(timeout=300)
    assert code == 0, final.communicate()
    expected = sorted(f"{MACHINE}/{r.run_id}" for r in runs)
    git(bare, "fsck", "--no-progress", "--strict")  # exit 0: every object reachable is sound
    assert history_runs(bare) == expected and set(added_once(bare).values()) == {1}
    assert linear(bare)
    again = harness(*push)
    assert again.wait(timeout=300) == 0 and "nothing to push" in again.communicate()[0]
    assert whole(root) and len(records.list_runs(root)) == len(runs)
    puller = tmp_path / "puller" / "results"
    pull = harness("store", "pull", "--remote", url(bare), "--results-dir", str(puller), *ALL)
    assert pull.wait(timeout=300) == 0, pull.communicate()
    assert [f"{r.machine}/{r.run_id}" for r in records.list_runs(puller)] == expected
    assert whole(puller)


def test_a_read_only_remote_refuses_the_push_and_still_serves_pulls(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    bare = bare_repo(served / "history.git")
    writer = tmp_path / "writer" / "results"
    rec = write_record(writer, 1)
    first = harness("store", "push", "--remote", url(bare), "--results-dir", str(writer))
    assert first.wait(timeout=300) == 0
    tip = git(bare, "rev-parse", REF)
    root = tmp_path / "runner" / "results"
    mine = write_record(root, 2)
    before = {p: p.read_bytes() for p in records.runs_dir(root).rglob("*") if p.is_file()}
    with git_daemon(served, receive_pack=False) as prefix:  # git daemon's default: read only
        remote = f"{prefix}history.git"
        proc = harness("store", "push", "--remote", remote, "--results-dir", str(root))
        err = proc.communicate(timeout=300)[1]
        code = proc.returncode
        assert code == 5 and len(err.strip().splitlines()) == 1, err
        assert "git could not push to" in err and "nothing was pushed" in err
        assert mine.run_id in err and "another runner" not in err
        assert git(bare, "rev-parse", REF) == tip
        assert {p: p.read_bytes() for p in records.runs_dir(root).rglob("*") if p.is_file()} == (
            before
        )
        pull = harness("store", "pull", "--remote", remote, "--results-dir", str(root), *ALL)
        assert pull.wait(timeout=300) == 0, pull.communicate()
        assert [r.run_id for r in records.list_runs(root)] == [rec.run_id, mine.run_id]


# ---- one hostile entry already in the history ----


def own_project(path) -> os.PathLike:
    """A project as `harness init` writes it, committed (runs are filed by commit): its quick
    suites are the smallest a nightly runs."""
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "init", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    who = ["-c", "user.name=someone", "-c", "user.email=someone@example.com"]
    for args in (["init", "-q"], ["add", "-A"], [*who, "commit", "-qm", "a project"]):
        git(path, *args)
    return path


def hostile_history(tmp_path, served, hostile: str) -> tuple:
    """A history of one record with one hostile entry written by hand (a root entry named
    'a/b', or the record's run id held twice), served by a server that checks every object it
    receives from then on (receive.fsckObjects): a push that re-sent the entry would be
    refused. -> (the bare repository, the run ids the history holds that a reader can read)"""
    bare = bare_repo(served / "history.git")
    seed = write_record(tmp_path / "seed" / "results", 0)
    push = harness(
        "store", "push", "--remote", url(bare), "--results-dir", str(seed.path.parents[2])
    )
    assert push.wait(timeout=300) == 0, push.communicate()
    if hostile == "slash":
        graft_raw(bare, [], ("100644", "a/b", put_blob(bare, b"by hand\n")))
        readable = [f"{MACHINE}/{seed.run_id}"]
    else:
        tree = git(bare, "rev-parse", f"{REF}:runs/{MACHINE}/{seed.run_id}")
        graft_raw(bare, ["runs", MACHINE], ("40000", seed.run_id, tree))
        readable = []  # a run id held twice: no copy is read
    git(bare, "config", "receive.fsckObjects", "true")
    return bare, readable


@pytest.mark.parametrize(("hostile", "transport"), [("slash", "daemon"), ("twice", "file")])
def test_one_hostile_entry_never_stops_eight_runners_nor_the_nightly(tmp_path, hostile, transport):
    served = tmp_path / "served"
    served.mkdir()
    bare, expected = hostile_history(tmp_path, served, hostile)
    readable = list(expected)
    with git_daemon(served) as prefix:
        remote = url(bare) if transport == "file" else f"{prefix}history.git"
        for round_ in range(ROUNDS):
            roots = [tmp_path / f"round{round_}" / f"runner{k}" / "results" for k in range(RUNNERS)]
            for k, root in enumerate(roots):
                rec = write_record(root, 1 + round_ * RUNNERS + k)
                expected.append(f"{MACHINE}/{rec.run_id}")
            procs = [
                harness("store", "push", "--remote", remote, "--results-dir", str(root))
                for root in roots
            ]  # started together
            done = [(*p.communicate(timeout=300), p.returncode) for p in procs]
            assert [code for _, _, code in done] == [0] * RUNNERS, done
            assert all("pushed 1 run(s)" in out for out, _, _ in done)
            assert all("Traceback" not in err for _, err, _ in done)
            assert linear(bare) and history_runs(bare) == sorted(expected)
            # no record added twice (git's own diff cannot read the commit after the copy held
            # twice, so a record of that commit may go uncounted)
            counts = added_once(bare)
            assert all(counts.get(k, 1) == 1 for k in expected if k not in readable)
        # the entry was left out by the first push that wrote its folder (never re-sent: the
        # server checks every tree it receives)
        top = [n for _, n, _ in raw_entries(bare, git(bare, "rev-parse", f"{REF}^{{tree}}"))]
        assert b"a/b" not in top and top.count(b"runs") == 1
        if hostile == "slash":
            return
        # then a nightly that pulls first runs its benchmarks and exits on its own result
        # (once: the project's quick suites take minutes under load)
        project = own_project(tmp_path / "project")
        results = tmp_path / "nightly" / "results"
        night = harness(
            "nightly", "--fast", "--pull", "--project", str(project), "--results-dir",
            str(results), "--machine", MACHINE, env={settings.STORE_REMOTE.name: remote},
        )  # fmt: skip
        out, err = night.communicate(timeout=1800)
        # a --pull command that refused something exits 3 before its own work (making it go
        # on is the pull side's part of the same issue): here, its own result
        assert night.returncode in (0, 1), (night.returncode, out[-2000:], err[-2000:])
        assert "Traceback" not in err
        runs = records.list_runs(results, MACHINE)
        assert {f"{MACHINE}/{r.run_id}" for r in runs} >= set(expected[-30:])
        assert [r for r in runs if r.meta.get("label") == "nightly"]  # its own run
        assert whole(results)
