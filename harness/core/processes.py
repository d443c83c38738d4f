"""Child processes that never outlive the harness command that started them.

`harness bench`, `calibrate` and `ab` run asv, and asv runs a forkserver that forks one process
per benchmark. Killed alone, asv leaves those two running: they go on burning the shared
runner's CPU and writing into scratch folders (the run's private inductor cache) that the
harness is removing at that moment. So an external runner starts in a session of its own
(`run_in_session`; a session, not a process group, because asv gives its forkserver a group of
its own), and when the harness is interrupted while it waits (Ctrl-C, or SIGTERM, which
`terminate_as_interrupt` turns into an interrupt: what CI systems send on a timeout or a
cancelled job) the whole session is ended (`end_session`: SIGINT to the runner first, so that
asv cleans up after itself, then SIGTERM and SIGKILL to what is left) before the interrupt goes
on, so every `finally` and `with` block above it still cleans up what the harness made.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

GRACE_S = 5.0  # for the runner to stop by itself after SIGINT (end_session)
TERM_GRACE_S = 2.0  # then between SIGTERM and SIGKILL


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command was, so that it unwinds like Ctrl-C (exit 143)."""


def _raise_terminated(signum, frame):
    raise Terminated


@contextlib.contextmanager
def terminate_as_interrupt():
    """While inside, SIGTERM raises Terminated in the main thread (a no-op elsewhere: signal
    handlers can only be set from the main thread)."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def session_members(sid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every live process in session `sid` (Linux /proc; elsewhere just
    the group `sid` leads). asv puts its forkserver in a process group of its own, so the group
    asv leads does not hold it: the session does."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(sid, 0)  # does the group exist?
        except (ProcessLookupError, PermissionError):
            return []
        return [(sid, sid)]
    found = []
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        state, pgrp, session = fields[0], int(fields[2]), int(fields[3])
        if session == sid and state != "Z":
            found.append((int(d.name), pgrp))
    return found


def _signal_session(sid: int, sig: int) -> bool:
    """`sig` to every process group in session `sid`; False when none is left."""
    groups = {pgrp for _, pgrp in session_members(sid)}
    for pgrp in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgrp, sig)
    return bool(groups)


def end_session(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """End everything in the session `proc` leads (started with start_new_session: only what we
    started), politely first: SIGINT to `proc` alone, as Ctrl-C would (asv then stops its
    benchmark and forkserver and removes its own temporary files), then after `grace_s` SIGTERM
    to every process group of the session, then SIGKILL to what is left. `proc` is reaped."""
    sid = proc.pid
    steps = ((signal.SIGINT, grace_s), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, TERM_GRACE_S))
    for sig, wait_s in steps:
        if sig == signal.SIGINT:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(sid, sig)
        elif not _signal_session(sid, sig):
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader as soon as it exits: a zombie is not "left"
            if not session_members(sid):
                break
            time.sleep(0.05)
        else:
            continue
        break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=TERM_GRACE_S)


def run_in_session(cmd: list[str], *, cwd=None, env=None, capture: bool = False,
                   timeout: float | None = None) -> subprocess.CompletedProcess:
    """subprocess.run(cmd) in a session of its own that ends with it: on any exception while
    waiting (an interrupt, a timeout) the whole session is ended (end_session) and the exception
    goes on; what the command left running when it exited is ended too. `capture`: stdout and
    stderr as text, as capture_output=True, text=True."""
    pipe = subprocess.PIPE if capture else None
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=pipe, stderr=pipe, text=capture or None,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        end_session(proc)
        raise
    if session_members(proc.pid):
        end_session(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
