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
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

PR_SET_PDEATHSIG = 1
GRACE_S = 5.0  # for the runner to stop by itself after SIGINT (end_session)
TERM_GRACE_S = 2.0  # then between SIGTERM and SIGKILL


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command was, so that it unwinds like Ctrl-C (exit 143)."""

    exit_code = 143  # harness.core.exits.TERMINATED


_terminated = False  # SIGTERM arrived (kept: the raise below can be swallowed, see check)


def _raise_terminated(signum, frame):
    global _terminated
    _terminated = True
    raise Terminated


def check_terminated() -> None:
    """Raise Terminated if SIGTERM arrived but its exception was swallowed: a signal that lands
    in a callback whose exceptions Python ignores (logging's after-fork hook, which every fork
    for a subprocess runs) is otherwise lost, and the command would carry on to exit 0. Not
    while an interrupt is unwinding (cleanup in `finally` blocks sees it in sys.exc_info)."""
    if _terminated and not isinstance(sys.exc_info()[1], KeyboardInterrupt):
        raise Terminated


@contextlib.contextmanager
def terminate_as_interrupt():
    """While inside, SIGTERM raises Terminated in the main thread (a no-op elsewhere: signal
    handlers can only be set from the main thread)."""
    global _terminated
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    _terminated = False
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _terminated = False  # what the block's SIGTERM meant has been acted on by now


def cleanup_despite_interrupts(*steps) -> None:
    """Run every cleanup step to its end even when Ctrl-C or SIGTERM arrives during one (the
    signal that unwinds a command can land in its `finally`): the interrupted step is run again,
    the rest go on, and the first interrupt is raised once all are done. Steps must be safe to
    run twice."""
    global _terminated
    pending = None
    for step in steps:
        for _ in range(3):  # a step interrupted again and again is given up, not looped on
            try:
                step()
                break
            except KeyboardInterrupt as exc:  # Terminated included
                pending = pending or exc
                _terminated = False  # taken in hand: raised again below, once all is done
    if pending is not None:
        raise pending


class ProcStat(NamedTuple):
    state: str  # R, S, D, Z (zombie: dead, only not reaped yet), ...
    ppid: int
    pgrp: int
    session: int
    start: int  # start time in clock ticks since boot: with the pid, names one process


def proc_stat(pid: int) -> ProcStat | None:
    """`pid`'s line of /proc/<pid>/stat (Linux), or None when it is gone or there is no /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parens
    return ProcStat(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def alive(pid: int, start: int | None = None) -> bool:
    """Whether `pid` runs (a zombie is dead, only not reaped yet); with `start` (ProcStat.start),
    whether it is still that process and not a later one given the same pid."""
    st = proc_stat(pid)
    return st is not None and st.state != "Z" and (start is None or st.start == start)


def all_pids() -> list[int]:
    """Every pid in /proc (empty where there is none)."""
    with contextlib.suppress(OSError):
        return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    return []


def session_members(sid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every live process in session `sid` (Linux /proc; elsewhere just
    the group `sid` leads). asv puts its forkserver in a process group of its own, so the group
    asv leads does not hold it: the session does."""
    if not Path("/proc").is_dir():
        try:
            os.killpg(sid, 0)  # does the group exist?
        except (ProcessLookupError, PermissionError):
            return []
        return [(sid, sid)]
    stats = ((pid, proc_stat(pid)) for pid in all_pids())
    return [(pid, st.pgrp) for pid, st in stats if st and st.session == sid and st.state != "Z"]


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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(sid, signal.SIGINT)
    if not _emptied(proc, grace_s):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not _signal_session(sid, sig) or _emptied(proc, TERM_GRACE_S):
                break
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=TERM_GRACE_S)


def _emptied(proc: subprocess.Popen, wait_s: float) -> bool:
    """Wait up to `wait_s` for the session `proc` leads to hold no live process; `proc` is
    reaped as soon as it exits (a zombie is not "left")."""
    deadline = time.monotonic() + wait_s
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0)
        if not session_members(proc.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def run_in_session(
    cmd: list[str],
    *,
    cwd=None,
    env=None,
    capture: bool = False,
    timeout: float | None = None,
    on_line=None,
) -> subprocess.CompletedProcess:
    """subprocess.run(cmd) in a session of its own that ends with it: on any exception while
    waiting (an interrupt, a timeout) the whole session is ended (end_session) and the exception
    goes on; what the command left running when it exited is ended too; if this process is
    killed outright, the leader gets SIGTERM (_preexec_end_with_parent). `capture`: stdout and
    stderr as text, as capture_output=True, text=True. `on_line`: stdout and stderr merged and
    handed over line by line as they come (also returned as stdout); `timeout` is then checked
    between lines."""
    pipe = subprocess.PIPE if capture or on_line else None
    check_terminated()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=pipe,
        stderr=subprocess.STDOUT if on_line else pipe,
        text=bool(capture or on_line) or None,
        bufsize=1 if on_line else -1,
        start_new_session=True,
        preexec_fn=_preexec_end_with_parent if _LIBC is not None else None,
    )
    try:
        check_terminated()  # a SIGTERM during the fork is swallowed by its after-fork hooks
        if on_line:
            out, err = _stream(proc, on_line, timeout), None
        else:
            out, err = proc.communicate(timeout=timeout)
    except BaseException:
        end_session(proc)
        raise
    if session_members(proc.pid):
        end_session(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def start_in_session(cmd: list[str], **popen) -> subprocess.Popen:
    """subprocess.Popen(cmd, **popen) in a session of its own that gets SIGTERM if this process
    is killed outright, for a process the caller talks to while it runs; the caller ends it with
    end_session."""
    check_terminated()
    return subprocess.Popen(
        cmd,
        start_new_session=True,
        preexec_fn=_preexec_end_with_parent if _LIBC is not None else None,
        **popen,
    )


def _stream(proc: subprocess.Popen, on_line, timeout: float | None) -> str:
    import time

    deadline = None if timeout is None else time.monotonic() + timeout
    lines = []
    for line in proc.stdout:
        lines.append(line)
        on_line(line.rstrip("\n"))
        if deadline is not None and time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout)
    proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
    return "".join(lines)


# ---- children tied to the process that starts them ----


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send `sig` to this process when its parent exits (no-op elsewhere).
    Harness workers call it first thing, so a killed parent (a torchrun agent, the valgrind
    process) takes them along."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))


def _preexec_die_with_parent():
    # runs in the forked child before exec; the libc handle is resolved in the parent
    libc = _LIBC
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))


def _preexec_end_with_parent():
    # A harness killed outright (SIGKILL: an OOM kill, a runner's hard timeout) cannot end the
    # session; SIGTERM still reaches its leader, and asv ends its forkserver and benchmark on it.
    libc = _LIBC
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


try:
    _LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
except OSError:
    _LIBC = None


def descendants(pid: int) -> dict[int, int]:
    """Every live descendant of `pid`: {pid: start time}. Linux /proc; empty elsewhere."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for other in all_pids():
        st = proc_stat(other)
        if st is not None:
            children.setdefault(st.ppid, []).append(other)
            starts[other] = st.start
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found[child] = starts[child]
                todo.append(child)
    return found


def run_tied(
    cmd: list[str], *, env=None, timeout: float | None = None, cwd=None, meanwhile=None, pass_fds=()
) -> subprocess.CompletedProcess:
    """subprocess.run(cmd), stdout and stderr captured as text, in this process's own session (so
    whatever ends that session ends it too) and dying with this process (PR_SET_PDEATHSIG): for a
    runner started from inside a benchmark, which asv may kill alone. `meanwhile()` runs here
    while the runner starts (its output goes to temporary files meanwhile). On a timeout or an
    interrupt the runner and every process below it are killed, and the exception goes on."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            text=True,
            pass_fds=pass_fds,
            preexec_fn=_preexec_die_with_parent if _LIBC is not None else None,
        )
        try:
            check_terminated()
            if meanwhile is not None:
                meanwhile()
            proc.wait(timeout=timeout)
        except BaseException:
            _kill_tree(proc)
            raise
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())


def _kill_tree(proc: subprocess.Popen) -> None:
    below = descendants(proc.pid)
    proc.kill()
    for pid, start in below.items():
        if alive(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    proc.wait()
