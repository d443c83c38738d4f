"""One folder of the results history holding N entries, measured (docs/trust.md, "What the checks
cost"): a history with one real-looking record, then N names written into one folder with git's
plumbing, and every store command over it timed with `/usr/bin/time -v` (peak RSS, wall time),
each from a fresh results root (its cache fetched anew).

    .venv/bin/python tests/measure_store_entries.py /tmp/million --entries 1000000 --kind skipped
    .venv/bin/python tests/measure_store_entries.py /tmp/million-runs --kind runs

Kinds: `skipped` (N names in runs/<machine>/ that are no run id: each one skipped), `runs` (N
run ids in runs/<machine>/, all one record's tree), `machines` (N machine folders in runs/, all
the same folder). The folder holds N entries in all, the real record's (or machine's) among
them. Wall time (`s`) and the CPU time of the command and its git processes (`cpu_s`).
`--against DIR`: also run another version's `harness` package (a folder holding it), under
the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from store_support import MACHINE, REF, bare_repo, git, put_blob, url, write_record


def raw_tree(bare: Path, entries) -> str:
    """A tree from (mode, name bytes, oid) in the order given, written by hash-object (mktree
    would take minutes to sort a million names it is given sorted)."""
    body = b"".join(m + b" " + n + b"\0" + bytes.fromhex(o) for m, n, o in entries)
    done = subprocess.run(
        ["git", "hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
        cwd=bare, input=body, capture_output=True, check=True,
    )  # fmt: skip
    return done.stdout.decode().strip()


def ls(bare: Path, tree: str) -> list[tuple[bytes, bytes, str]]:
    out = subprocess.run(["git", "ls-tree", "-z", tree], cwd=bare, capture_output=True).stdout
    items = []
    for item in out.split(b"\0"):
        if item:
            head, name = item.split(b"\t", 1)
            mode, _, oid = head.split()
            items.append((mode.lstrip(b"0") or b"0", name, oid.decode()))
    return items


def tree_key(entry) -> bytes:
    mode, name, _ = entry
    return name + (b"/" if mode == b"40000" else b"")


def build(work: Path, n: int, kind: str) -> Path:
    bare = bare_repo(work / "history.git")
    git(bare, "config", "gc.autoDetach", "false")
    fleet = work / "fleet" / "results"
    rec = write_record(fleet, 1)
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "store", "push", "--remote", url(bare),
         "--results-dir", str(fleet)], capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    root = git(bare, "rev-parse", f"{REF}^{{tree}}")
    runs = git(bare, "rev-parse", f"{REF}:runs")
    machine = git(bare, "rev-parse", f"{REF}:runs/{MACHINE}")
    record = git(bare, "rev-parse", f"{REF}:runs/{MACHINE}/{rec.run_id}")
    n -= 1  # the folder holds n entries: the record's (or its machine's) and n - 1 more
    if kind == "machines":
        extra = [(b"40000", b"m%07d-cpu" % k, machine) for k in range(n)]
        runs = raw_tree(bare, sorted(ls(bare, runs) + extra, key=tree_key))
    else:
        if kind == "skipped":
            blob = put_blob(bare, b"not a run record\n")
            extra = [(b"100644", b"not-a-run-%07d" % k, blob) for k in range(n)]
        else:
            extra = [(b"40000", b"20250101T000000Z-%07d" % k, record) for k in range(n)]
        folder = raw_tree(bare, sorted(ls(bare, machine) + extra, key=tree_key))
        runs = raw_tree(
            bare, [e if e[1] != MACHINE.encode() else (e[0], e[1], folder) for e in ls(bare, runs)]
        )
    top = raw_tree(bare, [e if e[1] != b"runs" else (e[0], e[1], runs) for e in ls(bare, root)])
    tip = git(bare, "rev-parse", REF)
    commit = git(bare, "commit-tree", top, "-p", tip, "-m", f"{n} {kind} entries")
    git(bare, "update-ref", REF, commit)
    return bare


def timed(argv: list[str], env: dict, cwd: Path) -> dict:
    t = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-v", *argv], capture_output=True, text=True, env=env, cwd=cwd
    )
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    lines = [
        line
        for line in done.stderr.splitlines()
        if not line.startswith(("\t", "Command exited with"))
    ]
    cpu = sum(
        float(m.group(1))
        for m in re.finditer(r"(?:User|System) time \(seconds\): ([0-9.]+)", done.stderr)
    )
    return {
        "exit": done.returncode,
        "s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None,
        "stderr_lines": len(lines),
        "last_line": (lines[-1] if lines else "")[:300],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="a new folder for everything made here")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--kind", choices=("skipped", "runs", "machines"), default="skipped")
    parser.add_argument("--against", type=Path, metavar="DIR")
    args = parser.parse_args()
    work = args.work.resolve()
    if work.exists():
        sys.exit(f"{work} exists; name a new folder")
    work.mkdir(parents=True)
    t = time.perf_counter()
    bare = build(work, args.entries, args.kind)
    print(f"built in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    here = str(Path(__file__).resolve().parents[1])
    versions = {"this": here} | ({"against": str(args.against.resolve())} if args.against else {})
    out: dict = {}
    commands = {  # each on a copy of the history as built (those that write change it)
        "store pull (newest 30)": ["store", "pull", "--machine", MACHINE],
        "prune --store --keep 1 (dry run)": ["prune", "--store", "--keep", "1"],
        "store repair (dry run)": ["store", "repair"],
        "store push (one run into that folder)": ["store", "push"],
        "prune --store --keep 1 --yes": ["prune", "--store", "--keep", "1", "--yes"],
        "store repair --yes": ["store", "repair", "--yes"],
    }
    for step, (label, argv) in enumerate(commands.items()):
        for name, code in versions.items():
            if "repair" in label and name != "this":
                continue  # the command is new
            env = dict(os.environ, PYTHONPATH=code)
            env.pop("HARNESS_STORE_REMOTE", None)
            base = work / name / f"step{step}"
            copy = base / "history.git"
            shutil.copytree(bare, copy)
            results = base / "results"
            write_record(results, 2)  # what a push offers
            cli = [sys.executable, "-m", "harness.cli", *argv, "--remote", url(copy)]
            figures = out.setdefault(name, {})
            figures[label] = timed([*cli, "--results-dir", str(results)], env, work)
            print(name, label, figures[label], file=sys.stderr)
            shutil.rmtree(base)
    print(json.dumps({"entries": args.entries, "kind": args.kind, **out}, indent=1))


if __name__ == "__main__":
    main()
