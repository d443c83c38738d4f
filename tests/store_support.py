"""What the results-history tests share: real git remotes (a bare repository reached by file://
and one served by `git daemon` on localhost) and cheap run records made the way
harness.core.records writes them, with a result file the gate and history can read."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import shutil
import socket
import stat
import subprocess
import time

from test_gate_support import write_set

from harness.core import records

MACHINE = "m1-cpu"
REF = "refs/harness/results"


def harness(*argv: str) -> tuple[int, str, str]:
    """`harness ARGV` in this process: exit code, stdout, stderr (never a traceback)."""
    from harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, out.getvalue(), err.getvalue()


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
    run_id: str | None = None,
    **meta,
) -> records.RunRecord:
    """Run record number `i` (its own commit and start time): one exact counter row."""
    commit = f"{i:040x}"
    # a start time of its own (minute i of a day), so that run ids sort in i's order
    run_id = run_id or f"20261201T{i // 60:02d}{i % 60:02d}00Z-{commit[:8]}-{i:06x}" + (
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


# ---- hostile histories, made with git's plumbing (which writes what no harness would) ----

MODES = {"file": "100644", "exe": "100755", "link": "120000", "gitlink": "160000", "dir": "040000"}
KINDS = {"100644": "blob", "100755": "blob", "120000": "blob", "160000": "commit", "040000": "tree"}
# a commit that exists nowhere: what a gitlink (a submodule's entry) points at
SUBMODULE_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _git_bytes(repo, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr.decode()}")
    return done.stdout


def put_blob(bare: pathlib.Path, data: bytes) -> str:
    return _git_bytes(bare, "hash-object", "-w", "--stdin", data=data).decode().strip()


def put_tree(bare: pathlib.Path, entries) -> str:
    """A tree of (mode, name, oid) entries, names as given (str or bytes: '..', '.git', a
    newline, bytes that are not UTF-8 all go in), made by `git mktree --missing`."""
    body = b"".join(
        f"{mode} {KINDS[mode]} {oid}\t".encode()
        + (name if isinstance(name, bytes) else name.encode())
        + b"\0"
        for mode, name, oid in entries
    )
    return _git_bytes(bare, "mktree", "-z", "--missing", data=body).decode().strip()


def tree_entries(bare: pathlib.Path, tree: str) -> list[tuple[str, bytes, str]]:
    out = []
    for item in _git_bytes(bare, "ls-tree", "-z", tree).split(b"\0"):
        if item:
            head, name = item.split(b"\t", 1)
            mode, _, oid = head.decode().split()
            out.append((mode, name, oid))
    return out


def spec_tree(bare: pathlib.Path, spec: dict) -> str:
    """A tree from {name: bytes (a file) | dict (a folder) | (mode, oid)}: any name goes."""
    entries = []
    for name, what in spec.items():
        if isinstance(what, dict):
            entries.append(("040000", name, spec_tree(bare, what)))
        elif isinstance(what, tuple):
            entries.append((what[0], name, what[1]))
        else:
            entries.append(("100644", name, put_blob(bare, what)))
    return put_tree(bare, entries)


def folder_tree(bare: pathlib.Path, folder: pathlib.Path, extra=(), leave_out=()) -> str:
    """The tree of a local folder (every file a 100644 blob, as a push stores a record), with
    `extra` (mode, name, oid) entries added at its top and the names in `leave_out` left out."""
    paths = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.relative_to(folder).parts[0] not in leave_out
    )
    data = "".join(f"{p}\n" for p in paths).encode()
    oids = _git_bytes(bare, "hash-object", "-w", "--stdin-paths", data=data).decode().split()
    spec: dict = {}
    for p, oid in zip(paths, oids):
        *folders, name = p.relative_to(folder).parts
        here = spec
        for f in folders:
            here = here.setdefault(f, {})
        here[name] = ("100644", oid)
    top = put_tree(bare, [e for e in _spec_entries(bare, spec)] + list(extra))
    return top


def _spec_entries(bare, spec: dict):
    for name, what in spec.items():
        if isinstance(what, dict):
            yield ("040000", name, put_tree(bare, list(_spec_entries(bare, what))))
        else:
            yield (what[0], name, what[1])


def graft(bare: pathlib.Path, *edits, message: str = "by hand") -> str:
    """One commit on top of the history's tip that puts each (path, mode, oid) of `edits` at
    its path (a list of names; the folders on the way made, or replaced when they are not
    folders), as anyone who can push the ref could."""
    tip = git(bare, "rev-parse", "--verify", "--quiet", REF, check=False) or None
    plan: dict = {}
    for path, mode, oid in edits:
        here = plan
        names = [n if isinstance(n, bytes) else n.encode() for n in path]
        for name in names[:-1]:
            here = here.setdefault(name, {})
        here[names[-1]] = (mode, oid)

    def put(tree: str | None, plan: dict) -> str:
        entries = [e for e in tree_entries(bare, tree) if e[1] not in plan] if tree else []
        old = {e[1]: e for e in tree_entries(bare, tree)} if tree else {}
        for name, what in plan.items():
            if isinstance(what, dict):
                below = old.get(name)
                sub = below[2] if below and below[0] == "040000" else None
                entries.append(("040000", name, put(sub, what)))
            else:
                entries.append((what[0], name, what[1]))
        return put_tree(bare, entries)

    root = put(git(bare, "rev-parse", f"{tip}^{{tree}}") if tip else None, plan)
    args = ["commit-tree", root, "-m", message] + (["-p", tip] if tip else [])
    who = ["-c", "user.name=someone", "-c", "user.email=someone@example.com"]
    commit = git(bare, *who, *args)
    git(bare, "update-ref", REF, commit)
    return commit


def history_entries(bare: pathlib.Path) -> dict[bytes, tuple[str, str]]:
    """Every entry of the history's tip, at any depth (gitlinks and links as entries):
    path -> (mode, oid)."""
    out = {}
    raw = _git_bytes(bare, "ls-tree", "-r", "-t", "-z", "--full-tree", REF)
    for item in raw.split(b"\0"):
        if item:
            head, path = item.split(b"\t", 1)
            mode, _, oid = head.decode().split()
            out[path] = (mode, oid)
    return out


def state_of(base: pathlib.Path, leave_out=()) -> dict[str, tuple]:
    """Everything under `base` but the folders in `leave_out`: relative path -> (what, mode,
    bytes or a link's target), nothing followed. Compared before and after a command."""
    base = pathlib.Path(base)
    left = {pathlib.Path(p).resolve() for p in leave_out}
    out = {}
    for top, dirs, files in os.walk(base):
        for name in sorted(dirs + files):
            p = pathlib.Path(top) / name
            rel = p.relative_to(base).as_posix()
            info = os.lstat(p)
            if stat.S_ISLNK(info.st_mode):
                out[rel] = ("link", info.st_mode, os.readlink(p))
            elif stat.S_ISDIR(info.st_mode):
                out[rel] = ("folder", info.st_mode, None)
            else:
                out[rel] = ("file", info.st_mode, p.read_bytes())
        dirs[:] = [
            d
            for d in dirs
            if not (pathlib.Path(top) / d).is_symlink()
            and (pathlib.Path(top) / d).resolve() not in left
        ]
    return out


# ---- trees git's own tools refuse to write (`hash-object -t tree --literally`) ----


def raw_tree(bare: pathlib.Path, entries) -> str:
    """A tree of (mode, name, oid) entries written as given, in the order given: names
    holding '/', empty names, two entries of one name, any mode."""
    body = b"".join(
        (mode.encode() if isinstance(mode, str) else mode)
        + b" "
        + (name if isinstance(name, bytes) else name.encode())
        + b"\0"
        + bytes.fromhex(oid)
        for mode, name, oid in entries
    )
    made = _git_bytes(bare, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", data=body)
    return made.decode().strip()


def raw_entries(bare: pathlib.Path, tree: str) -> list[tuple[bytes, bytes, str]]:
    """The entries of a tree as stored (what `git ls-tree` hides or dies on included)."""
    data = _git_bytes(bare, "cat-file", "tree", tree)
    out, pos = [], 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        out.append((data[pos:space], data[space + 1 : nul], data[nul + 1 : nul + 21].hex()))
        pos = nul + 21
    return out


def _order(entry) -> bytes:
    mode, name, _ = entry
    return name + (b"/" if mode in (b"40000", b"040000") else b"")


def graft_raw(bare: pathlib.Path, folder, *entries, message: str = "by hand") -> str:
    """One commit on top of the history's tip that adds these (mode, name, oid) entries to
    the folder at `folder` (a list of names; made where missing), each where git's order puts
    it, after any entry of the same name; every folder on the way is written as it was
    stored but for that one entry: what others wrote there, hostile or not, stays."""
    tip = git(bare, "rev-parse", "--verify", "--quiet", REF, check=False) or None
    names = [n if isinstance(n, bytes) else n.encode() for n in folder]
    new = [
        (m.encode() if isinstance(m, str) else m, n if isinstance(n, bytes) else n.encode(), o)
        for m, n, o in entries
    ]

    def put(tree: str | None, depth: int) -> str:
        old = raw_entries(bare, tree) if tree else []
        if depth == len(names):
            out = list(old)
            for e in new:
                at = len([x for x in out if _order(x) <= _order(e)])
                out.insert(at, e)
            return raw_tree(bare, out)
        name = names[depth]
        below = [e for e in old if e[1] == name and e[0] in (b"40000", b"040000")]
        sub = put(below[0][2] if below else None, depth + 1)
        if below:
            return raw_tree(bare, [(m, n, sub if (m, n, o) == below[0] else o) for m, n, o in old])
        out = list(old)
        e = (b"40000", name, sub)
        out.insert(len([x for x in out if _order(x) <= _order(e)]), e)
        return raw_tree(bare, out)

    root = put(git(bare, "rev-parse", f"{tip}^{{tree}}") if tip else None, 0)
    args = ["commit-tree", root, "-m", message] + (["-p", tip] if tip else [])
    who = ["-c", "user.name=someone", "-c", "user.email=someone@example.com"]
    commit = git(bare, *who, *args)
    git(bare, "update-ref", REF, commit)
    return commit
