"""Start distributed workers through torchrun (`python -m torch.distributed.run`) and make sure
none outlives the launch.

The benchmark process calls `launch(...)`; torchrun's agent starts one worker per rank, the
workers write their measurements to a JSON file (atomically, rank 0), and `launch` returns what
it read. What this module adds around torchrun:

- a free TCP port per launch (`--master-port`), so two launches (two runs on one machine, a
  test beside a benchmark) never meet in one rendezvous; one retry on another port if the
  chosen one was taken between choosing and binding;
- its own timeout. asv's benchmark timeout kills only the benchmark process: torchrun and its
  workers would live on, holding cores and ports. torchrun is started in a new session
  (`start_new_session=True`), so `os.killpg` reaches the agent; but the agent starts every
  worker in a session of its own (torch.distributed.elastic's SubprocessHandler), where the
  agent's group signal does not reach. So on timeout the launcher first notes every
  descendant of the agent (from /proc, with its start time against pid reuse), sends SIGTERM
  to the agent's group (torchrun then closes its workers), and after a short grace SIGKILLs the
  agent's group and the process group of every descendant still there. Then it raises
  LaunchTimedOut: the benchmark fails with that message;
- PR_SET_PDEATHSIG on the agent (and, in harness workers, on each worker): if the benchmark
  process itself is killed (asv's timeout), the agent and then its workers die with it;
- torchrun failing (a worker raised, the rendezvous failed) raises LaunchFailed (exit 5, an
  external runner failed) with the tail of torchrun's output, which holds the worker's traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core.exits import BadInput, RunnerFailed
from harness.core.processes import (
    _LIBC,
    _preexec_die_with_parent,
    alive,
    descendants,  # noqa: F401
)

GRACE_S = 3.0  # SIGTERM -> SIGKILL: torchrun closes its workers within this when it can
TAIL_LINES = 40  # of torchrun's output in an error message


class LaunchFailed(RunnerFailed):
    """torchrun exited non-zero, or the workers wrote no result."""


class LaunchTimedOut(LaunchFailed):
    """The launch ran past its timeout; every process it started has been killed."""


def free_port() -> int:
    """A TCP port free on the loopback interface now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(
    target: str,
    args: list[str],
    nproc: int,
    port: int,
    *,
    module: bool,
    log_dir: Path | None = None,
) -> list[str]:
    """The torchrun command line: one node, `nproc` workers, no restarts (a failed worker is a
    failed benchmark, not something to retry), static rendezvous on 127.0.0.1:`port`; with
    `log_dir`, each worker's stdout and stderr go to files there (`--redirects 3`), so that an
    error message can show the worker's own last lines instead of torchrun's report."""
    logs = ["--log-dir", str(log_dir), "--redirects", "3"] if log_dir is not None else []
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.5",
        *logs,
        *(["-m", target] if module else [target]),
        *args,
    ]


def launch(
    target: str,
    args: list[str] = (),
    *,
    nproc: int,
    timeout_s: float,
    module: bool = True,
    result: Path | None = None,
    env: dict | None = None,
    what: str = "distributed workers",
) -> dict:
    """Run `target` (a module with `module=True`, else a script path) under torchrun with `nproc`
    workers and return the JSON the workers wrote to `result` (passed to them as `--out PATH`
    after `args`; a temporary file when None). Raises BadInput for unusable arguments,
    LaunchTimedOut after `timeout_s` (nothing left running), LaunchFailed when torchrun fails or
    no result was written."""
    if not isinstance(nproc, int) or nproc < 1:
        raise BadInput(f"{what}: the number of workers must be a whole number >= 1, got {nproc!r}")
    if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
        raise BadInput(
            f"{what}: the launch timeout must be a positive number of seconds, got {timeout_s!r}"
        )
    if not module and not Path(target).is_file():
        raise BadInput(f"{what}: worker script {target} not found")
    with tempfile.TemporaryDirectory(prefix="harness-torchrun-") as scratch:
        out = Path(result) if result is not None else Path(scratch) / "result.json"
        for attempt in range(2):
            port = free_port()
            log = Path(scratch) / f"torchrun-{attempt}.log"
            workers = Path(scratch) / f"workers-{attempt}"
            cmd = command(
                target, [*args, "--out", str(out)], nproc, port, module=module, log_dir=workers
            )
            rc = _run(cmd, log, timeout_s, env, what, workers)
            if rc == 0:
                break
            text = log.read_text(errors="replace")
            if attempt == 0 and "address already in use" in text.lower():
                continue  # the port was taken between free_port() and torchrun binding it
            raise LaunchFailed(
                f"{what}: torchrun exited with {rc} ({' '.join(cmd[1:])})\n{_output(log, workers)}"
            )
        try:
            return json.loads(out.read_text())
        except FileNotFoundError:
            raise LaunchFailed(
                f"{what}: torchrun exited 0 but the workers wrote no result to {out}\n"
                f"{_output(log, workers)}"
            ) from None
        except json.JSONDecodeError as exc:
            raise LaunchFailed(f"{what}: the workers' result {out} is not JSON ({exc})") from None


def _run(
    cmd: list[str], log: Path, timeout_s: float, env: dict | None, what: str, workers: Path
) -> int:
    full_env = dict(os.environ if env is None else env)
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
            preexec_fn=_preexec_die_with_parent if _LIBC is not None else None,
        )
        try:
            return proc.wait(timeout=timeout_s)
        except BaseException as exc:  # the timeout, or Ctrl-C / asv interrupting the benchmark
            left = kill_launch(proc)
            if isinstance(exc, subprocess.TimeoutExpired):
                raise LaunchTimedOut(
                    f"{what}: torchrun ran past its {timeout_s:g} s timeout and was killed with "
                    f"its workers ({len(left)} processes still alive after the kill: "
                    f"{left or 'none'})\n"
                    f"{_output(log, workers)}"
                ) from None
            raise


# --------------------------------------------------------------------------------------------
# Killing the agent and its workers


def kill_launch(proc: subprocess.Popen, grace_s: float = GRACE_S) -> list[int]:
    """Kill the torchrun agent `proc` (a session leader) and every process below it, also those
    in sessions of their own. Returns the pids still alive afterwards (normally none)."""
    seen = descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)  # torchrun's handler closes its workers
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (
        proc.poll() is None or any(alive(p, s) for p, s in seen.items())
    ):
        time.sleep(0.05)
    seen.update(descendants(proc.pid))
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid, start in seen.items():
        if alive(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:  # a worker leading its own group: its children too
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(p, s) for p, s in seen.items()):
        time.sleep(0.05)
    return sorted(p for p, s in seen.items() if alive(p, s))


def _output(log: Path, workers: Path) -> str:
    """The last lines each worker wrote (stderr, else stdout), then torchrun's own: what an error
    message shows. Workers' files are under `workers`/<run id>/attempt_0/<rank>/."""
    parts = []
    for rank_dir in sorted(workers.glob("*/attempt_*/*"), key=lambda p: (len(p.name), p.name)):
        for name in ("stderr.log", "stdout.log"):
            text = (
                (rank_dir / name).read_text(errors="replace") if (rank_dir / name).is_file() else ""
            )
            if text.strip():
                parts.append(
                    f"  worker rank {rank_dir.name} ({name}), last lines:\n{_tail(text, 15)}"
                )
                break
    torchrun_text = log.read_text(errors="replace") if log.is_file() else ""
    parts.append(f"  torchrun, last lines:\n{_tail(torchrun_text, 15 if parts else TAIL_LINES)}")
    return "\n".join(parts)


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join("    " + line for line in kept) or "    (no output)"
