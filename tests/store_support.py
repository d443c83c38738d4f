"""What the results-history tests share: real git remotes (a bare repository reached by file://
and one served by `git daemon` on localhost) and cheap run records made the way
harness.core.records writes them, with a result file the gate and history can read."""

from __future__ import annotations

import contextlib
import json
import pathlib
import shutil
import socket
import subprocess
import time

from test_gate_support import write_set

from harness.core import records

MACHINE = "m1-cpu"
REF = "refs/harness/results"


def git(repo, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def bare_repo(path: pathlib.Path, allow_filter: bool = True) -> pathlib.Path:
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    git(path, "config", "uploadpack.allowFilter", "true" if allow_filter else "false")
    return path


def url(path: pathlib.Path) -> str:
    return f"file://{path}"


def write_record(
    root: pathlib.Path,
    i: int,
    machine: str = MACHINE,
    label: str | None = None,
    ops: int = 10,
    **meta,
) -> records.RunRecord:
    """Run record number `i` (its own commit and start time): one exact counter row."""
    commit = f"{i:040x}"
    # a start time of its own (minute i of a day), so that run ids sort in i's order
    run_id = f"20261201T{i // 60:02d}{i % 60:02d}00Z-{commit[:8]}-{i:06x}" + (
        f"-{label}" if label else ""
    )
    meta = {"commit": commit, "machine": machine, "mode": "fast", "label": label or "", **meta}
    with records.writing(root, machine, run_id, meta) as d:
        write_set(d / "asv", commit, {"canary.Canary.track_ops": ops}, machine=machine)
        fp = {"run_id": run_id, "commit": commit, "torch": "2.14.1", "torch_threads": 1}
        (d / records.FINGERPRINT).write_text(json.dumps(fp))
    return records.load_record(records.runs_dir(root) / machine / run_id)


def files_of(root: pathlib.Path) -> dict[str, bytes]:
    """Every file under ROOT/runs (relative path -> bytes)."""
    base = records.runs_dir(root)
    return {
        p.relative_to(base).as_posix(): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def history_runs(bare: pathlib.Path) -> list[str]:
    """machine/run-id of every record at the history's tip."""
    out = git(bare, "ls-tree", "-d", "--name-only", f"{REF}:runs")
    return sorted(
        f"{m}/{r}"
        for m in out.split()
        for r in git(bare, "ls-tree", "--name-only", f"{REF}:runs/{m}").split()
    )


def added_once(bare: pathlib.Path) -> dict[str, int]:
    """How many commits of the history added each record's run.json."""
    log = git(bare, "log", "--format=", "--name-only", "--diff-filter=A", REF)
    counts: dict[str, int] = {}
    for path in log.split():
        if path.startswith("runs/") and path.endswith("/run.json"):
            key = "/".join(path.split("/")[1:3])
            counts[key] = counts.get(key, 0) + 1
    return counts


def linear(bare: pathlib.Path) -> bool:
    return all(
        len(line.split()) <= 2 for line in git(bare, "rev-list", "--parents", REF).splitlines()
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def git_daemon(base: pathlib.Path, receive_pack: bool = True):
    """`git daemon` serving the repositories under `base` on localhost; yields the URL prefix
    (git://127.0.0.1:PORT/). Ended (the process this started) afterwards."""
    if not shutil.which("git"):
        raise RuntimeError("git is not installed")
    port = free_port()
    cmd = ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={base}"]
    cmd += ["--listen=127.0.0.1", f"--port={port}"]
    cmd += (["--enable=receive-pack"] if receive_pack else []) + [str(base)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    prefix = f"git://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"git daemon did not start: {proc.stderr.read().decode()} (it ships with "
                    "Debian's git package; elsewhere install git's daemon, e.g. git-daemon)"
                )
            time.sleep(0.05)
        yield prefix
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
