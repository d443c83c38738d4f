"""Runners the harness starts never outlive it (harness.core.processes): on an interrupt, a
timeout or SIGTERM the whole session is ended, also processes in process groups of their own
(as asv's forkserver is), and the command's scratch folders are removed."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from harness.core import processes

# A stand-in for asv: it starts a child in a process group of its own (asv's forkserver), writes
# that child's pid, and waits.
_RUNNER = r"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         preexec_fn=lambda: os.setpgid(0, 0))
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(120)
"""


def _wait_for(path: pathlib.Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written within {timeout} s")


@pytest.mark.skipif(
    not pathlib.Path("/proc").is_dir(), reason="reads process states from /proc (Linux)"
)
@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_a_timed_out_runner_is_ended_with_the_child_in_a_group_of_its_own(tmp_path):
    pid_file = tmp_path / "child.pid"
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run_in_session([sys.executable, "-c", _RUNNER, str(pid_file)], timeout=3)
    child = int(_wait_for(pid_file))
    deadline = time.monotonic() + 2
    while processes.alive(child) and time.monotonic() < deadline:  # SIGKILLed; init reaps it
        time.sleep(0.05)
    assert not processes.alive(child), "the child in a process group of its own outlived the runner"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_runner_gets_sigterm_when_the_harness_is_killed_outright(tmp_path):
    """SIGKILL (an OOM kill, a runner's hard timeout) leaves no handler to end the session; the
    runner's leader must still go (asv then ends its forkserver and benchmark itself)."""
    leader_file = tmp_path / "leader.pid"
    harness = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from harness.core import processes; processes.run_in_session("
            "[sys.executable, '-c', 'import os, sys, time; "
            'open(sys.argv[1], "w").write(str(os.getpid())); time.sleep(120)\', sys.argv[1]])',
            str(leader_file),
        ]
    )
    leader = int(_wait_for(leader_file))
    harness.kill()
    harness.wait()
    deadline = time.monotonic() + 10
    while processes.alive(leader) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes.alive(leader), "the runner outlived a harness killed with SIGKILL"


def test_sigterm_unwinds_as_an_interrupt_only_inside_the_block():
    with pytest.raises(processes.Terminated):
        with processes.terminate_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises at the next bytecode
    assert signal.getsignal(signal.SIGTERM) is not processes._raise_terminated


@pytest.mark.slow
@pytest.mark.xdist_group("canary-sigterm")
@pytest.mark.skipif(
    not pathlib.Path("/proc").is_dir(), reason="reads process states from /proc (Linux)"
)
def test_sigterm_to_harness_bench_ends_asv_and_removes_its_scratch_folders(tmp_path, short_tmp):
    """As a CI timeout does: SIGTERM to `harness bench` while asv runs a benchmark. Exit 143, no
    process of asv's session left running, no staging record left, and nothing new in the
    caller's TMPDIR: the run's folder there (harness.runs.scratch) held asv's TMPDIR, whatever
    asv left in it when its grace ran out, and the run's compile caches, and it is removed."""
    scratch = short_tmp  # a path short enough for asv's socket below the run's folder
    root = tmp_path / "results"
    env = dict(os.environ, TMPDIR=str(scratch))
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "bench",
        "--quick",
        "--suite",
        "canary",
        "--results-dir",
        str(root),
        "--machine",
        "sigterm-cpu",
    ]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    asv_sid, members, runs = None, [], set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        runs |= {str(p.relative_to(scratch)) for p in scratch.glob("*/tmp/*")}
        # asv leads a session of its own; once that holds a grandchild of asv (a benchmark forked
        # by the forkserver; asv's own children are git and the forkserver) a benchmark is running
        asv_sid = asv_sid or next((pid for pid in _children(proc.pid) if _leads_session(pid)), None)
        if asv_sid:
            members = [pid for pid, _ in processes.session_members(asv_sid)]
            if any(
                (st := processes.proc_stat(pid)) and st.ppid not in (asv_sid, proc.pid)
                for pid in members
            ):
                break
        time.sleep(0.1)
    assert proc.poll() is None and asv_sid and len(members) >= 3, (
        f"no benchmark was seen running (exit {proc.poll()}): "
        f"{proc.stderr.read() if proc.poll() is not None else ''}"
    )
    runs |= {str(p.relative_to(scratch)) for p in scratch.glob("*/tmp/*")}
    # asv's forkserver made its folder in the run's tmp/, the run's folder in the caller's TMPDIR
    assert any(re.match(r"harness-run-[^/]+/tmp/asv-forkserver-", name) for name in runs), runs
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err
    left = [
        (pid, pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()[:200])
        for pid, _ in processes.session_members(asv_sid)
    ]
    assert left == [], f"asv's processes outlived harness bench: {left}"
    assert list(scratch.iterdir()) == [], (
        f"scratch folders were left behind: {list(scratch.iterdir())}\n{err}"
    )
    machine_dir = root / "runs" / "sigterm-cpu"
    assert not machine_dir.is_dir() or not any(
        p.name.startswith(".staging") for p in machine_dir.iterdir()
    )


def _leads_session(pid: int) -> bool:
    st = processes.proc_stat(pid)
    return st is not None and st.session == pid


def _children(pid: int) -> list[int]:
    return [p for p in processes.all_pids() if (st := processes.proc_stat(p)) and st.ppid == pid]


def test_cleanup_runs_to_its_end_when_an_interrupt_lands_in_it():
    ran = []
    hit = {"remove": 1}

    def remove():
        ran.append("remove")
        if hit["remove"]:
            hit["remove"] -= 1
            raise processes.Terminated  # SIGTERM landing in the command's `finally`

    with pytest.raises(processes.Terminated):
        processes.cleanup_despite_interrupts(remove, lambda: ran.append("prune"))
    assert ran == ["remove", "remove", "prune"]  # re-run, then the rest, then the interrupt


def test_ab_worktrees_and_scratch_are_removed_when_sigterm_lands_in_the_cleanup(
    monkeypatch, tmp_path
):
    import tempfile

    from harness.core.project import project_root
    from harness.runs import ab

    real_git = ab._git
    interrupted = []

    def git(root, *args):
        out = real_git(root, *args)
        if args[:2] == ("worktree", "remove") and not interrupted:
            interrupted.append(args)
            raise processes.Terminated  # after git removed it: the next steps must still run
        return out

    monkeypatch.setattr(ab, "_git", git)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this test's scratch alone
    project = project_root()
    with pytest.raises(processes.Terminated), ab.sides(project, {"base": "HEAD"}, {}) as sides:
        tree = sides["base"].project
        assert tree.is_dir()
    assert interrupted and not tree.exists()
    assert list(tmp_path.iterdir()) == []
    listed = real_git(project, "worktree", "list").stdout
    assert str(tree) not in listed


def test_a_sigterm_whose_exception_was_swallowed_still_ends_the_command_with_143():
    from harness.core import exits

    def command():
        try:  # where Python ignores a callback's exception (logging's after-fork hook)
            processes._raise_terminated(signal.SIGTERM, None)
        except KeyboardInterrupt:
            pass
        processes.run_in_session(["true"])  # the next runner is never started
        return 0

    with processes.terminate_as_interrupt():
        assert exits.guarded("test", command) == exits.TERMINATED
        with pytest.raises(processes.Terminated):
            processes.check_terminated()
    processes.check_terminated()  # outside the block: nothing pending any more

    def finishes():
        try:
            processes._raise_terminated(signal.SIGTERM, None)
        except KeyboardInterrupt:
            pass
        return 0

    with processes.terminate_as_interrupt():
        assert exits.guarded("test", finishes) == exits.TERMINATED  # never a silent 0


def test_after_a_real_sigterm_the_worktree_cleanup_still_runs_its_git_commands(
    tmp_path, monkeypatch
):
    import tempfile

    from harness.core.project import project_root
    from harness.runs import ab

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    project = project_root()
    with processes.terminate_as_interrupt():
        with pytest.raises(processes.Terminated), ab.sides(project, {"b": "HEAD"}, {}) as sides:
            tree = sides["b"].project
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here
    assert not tree.exists() and list(tmp_path.iterdir()) == []
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=project, capture_output=True, text=True
    )
    assert str(tree) not in listed.stdout
