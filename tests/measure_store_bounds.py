"""What one `harness store pull` of a hostile history costs a runner (docs/trust.md, "Pulls:
sizes, memory and links"): peak memory (the pull's maximum resident set, `/usr/bin/time -v`,
which counts the largest of the process and the git processes it waited for), wall time, bytes
git received (GIT_TRACE_PACKFILE), bytes written under runs/, and whether a refused file's
bytes stay in the store's cache (results/.store). Histories are made with git's plumbing, as
anyone who can push the ref could make them; nothing here is a test.

    .venv/bin/python tests/measure_store_bounds.py /tmp/bounds                 # every case
    .venv/bin/python tests/measure_store_bounds.py /tmp/bounds json60 --against /tmp/before

`--against DIR`: also run the pulls with an older version's `harness` package in DIR
(`git archive main harness | tar -x -C DIR`), same histories, one after the other.
Cases: json60 (one 60 MB `[[],...]` file), json60x2, worst (4 files of 63 MiB, as costly as the
token cap lets through), wide (the same with one character beyond U+FFFF each), tree15 (15 ids
over one tree with a 60 MiB file of zeros), tree500, blob15 (15 records sharing one 60 MiB
file), big300 and big300-nofilter (a 300 MB file, a server that filters blobs or not).
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

sys.path.insert(0, str(Path(__file__).parent))

from store_support import (  # noqa: E402
    MACHINE,
    bare_repo,
    folder_tree,
    git,
    graft,
    put_blob,
    put_tree,
    url,
    write_record,
)

from harness.core import records  # noqa: E402

MiB = 2**20
CASES = (
    "json60",
    "json60x2",
    "worst",
    "wide",
    "tree15",
    "tree500",
    "blob15",
    "big300",
    "big300-nofilter",
)


def _big_blob(bare: Path, size: int, fill: bytes) -> str:
    """A blob of `size` bytes streamed into git (never held whole): `fill` repeated, or random
    bytes when fill is empty."""
    proc = subprocess.Popen(
        ["git", "hash-object", "-w", "--stdin"], cwd=bare, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )  # fmt: skip
    left = size
    while left:
        chunk = os.urandom(min(left, MiB)) if not fill else (fill * (MiB // len(fill) + 1))
        chunk = chunk[: min(left, MiB)]
        proc.stdin.write(chunk)
        left -= len(chunk)
    proc.stdin.close()
    oid = proc.stdout.read().decode().strip()
    proc.wait()
    return oid


def _json_file(path: Path, size: int, kind: str = "lists") -> None:
    """A JSON file of `size` bytes: `[[],[],...]` (lists) or, for `capped`, the costliest file
    the default token cap lets through: short strings (about 76 bytes of memory each once
    parsed, the most per token measured) up to the cap, and one long string to fill the rest."""
    with open(path, "w") as f:
        if kind == "lists":
            n = (size - 2) // 3
            f.write("[" + "[]," * (n - 1) + "[]]")
        else:  # (wide: one character beyond U+FFFF, so that Python holds 4 bytes a character)
            n = 2_000_000 - 10  # one ',' per string: just under the default token cap
            item = '"abcdefgh",'
            fill = "x" * (size - len(item) * n - 4 - (3 if kind == "wide" else 0))
            fill += "\U0001f600" if kind == "wide" else ""
            f.write('["' + fill + '",' + item * (n - 1) + '"ab"]')


def _record(work: Path, i: int, files: dict[str, Path] | None = None, anonymous=False):
    """A whole record (its own manifest) in a scratch root, with these extra files; anonymous:
    run.json, the manifest and the fingerprint name no run id and no machine (so that one tree
    may stand under any id)."""
    rec = write_record(work / f"made{i}", i)
    for rel, src in (files or {}).items():
        dest = rec.path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.link(src, dest) if src.stat().st_size > MiB else shutil.copy(src, dest)
    if anonymous:
        for name in (records.RUN_JSON, records.FINGERPRINT):
            data = json.loads((rec.path / name).read_text())
            data.pop("run_id", None)
            data.pop("machine", None)
            (rec.path / name).write_text(json.dumps(data))
    records.write_manifest(rec.path, rec.machine, rec.run_id)
    if anonymous:
        data = json.loads((rec.path / records.MANIFEST).read_text())
        data.pop("run_id", None)
        data.pop("machine", None)
        (rec.path / records.MANIFEST).write_text(json.dumps(data))
    return rec


def build(case: str, work: Path) -> tuple[Path, dict]:
    """The bare repository of one case, and what it holds."""
    bare = bare_repo(work / "history.git", allow_filter=case != "big300-nofilter")
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    graft(bare, (["store.json"], "100644", put_blob(bare, b'{"schema": 1}\n')))
    info: dict = {}
    if case in ("json60", "json60x2", "worst", "wide"):
        sizes = {"json60": [60_000_000], "json60x2": [60_000_000] * 2}
        sizes.update(worst=[63 * MiB] * 4, wide=[63 * MiB] * 4)
        files = {}
        kind = {"worst": "capped", "wide": "wide"}.get(case, "lists")
        for k, size in enumerate(sizes[case]):
            src = work / f"big{k}.json"
            _json_file(src, size, kind)
            files[f"extra/big{k}.json"] = src
        rec = _record(work, 1, files)
        graft(bare, (["runs", MACHINE, rec.run_id], "040000", folder_tree(bare, rec.path)))
        info["files"] = [f"{s:,} bytes" for s in sizes[case]]
    elif case in ("tree15", "tree500"):
        n = 15 if case == "tree15" else 500
        extra = {}
        if case == "tree15":  # 60 MiB of zeros beside the record's own files
            extra = {"asv.log": _big_blob(bare, 60 * MiB, b"\0")}
        rec = _record(work, 1, anonymous=True)
        if extra:  # listed in its manifest
            listing = json.loads((rec.path / records.MANIFEST).read_text())
            listing["files"]["asv.log"] = {"sha256": _sha256_of_zeros(60 * MiB), "bytes": 60 * MiB}
            (rec.path / records.MANIFEST).write_text(json.dumps(listing))
        tree = folder_tree(bare, rec.path, leave_out=["asv.log"] if extra else [])
        if extra:
            entries = [e for e in _tree_entries(bare, tree)]
            entries.append(("100644", "asv.log", extra["asv.log"]))
            tree = put_tree(bare, entries)
        ids = [f"20261201T{k // 60:02d}{k % 60:02d}00Z-{k:08x}" for k in range(n)]
        graft(bare, *[(["runs", MACHINE, i], "040000", tree) for i in ids])
        info["ids"] = n
    elif case == "blob15":
        zeros = _big_blob(bare, 60 * MiB, b"\0")
        edits = []
        for k in range(15):
            rec = _record(work, 100 + k)
            # the record's own files, and one 60 MiB file all 15 share, listed in its manifest
            listing = json.loads((rec.path / records.MANIFEST).read_text())
            listing["files"]["asv.log"] = {
                "sha256": _sha256_of_zeros(60 * MiB),
                "bytes": 60 * MiB,
            }
            (rec.path / records.MANIFEST).write_text(json.dumps(listing))
            (rec.path / "asv.log").unlink(missing_ok=True)
            tree = folder_tree(bare, rec.path)
            entries = [e for e in _tree_entries(bare, tree) if e[1] != "asv.log"]
            tree = put_tree(bare, entries + [("100644", "asv.log", zeros)])
            edits.append((["runs", MACHINE, rec.run_id], "040000", tree))
        graft(bare, *edits)
        info["ids"] = 15
    else:  # big300: one record holding a 300 MB file of random bytes
        rec = _record(work, 1)
        blob = _big_blob(bare, 300_000_000, b"")
        listing = json.loads((rec.path / records.MANIFEST).read_text())
        (rec.path / "asv.log").unlink(missing_ok=True)
        listing["files"].pop("asv.log", None)
        (rec.path / records.MANIFEST).write_text(json.dumps(listing))
        tree = folder_tree(bare, rec.path)
        tree = put_tree(bare, _tree_entries(bare, tree) + [("100644", "big.bin", blob)])
        graft(bare, (["runs", MACHINE, rec.run_id], "040000", tree))
        info["big_blob"] = blob
    return bare, info


def _tree_entries(bare: Path, tree: str) -> list[tuple[str, str, str]]:
    out = []
    for line in git(bare, "ls-tree", tree).splitlines():
        head, name = line.split("\t", 1)
        mode, _, oid = head.split()
        out.append((mode, name, oid))
    return out


def _sha256_of_zeros(n: int) -> str:
    import hashlib

    h = hashlib.sha256()
    block = b"\0" * MiB
    for _ in range(n // MiB):
        h.update(block)
    h.update(b"\0" * (n % MiB))
    return h.hexdigest()


def _du(path: Path) -> int:
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            p = Path(top) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def pull(case: str, bare: Path, root: Path, package: Path | None, info: dict) -> dict:
    """One pull of every run into a fresh root, measured."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    trace = root.parent / f"{root.name}.pack"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "HARNESS_"))}
    env.update(GIT_TRACE_PACKFILE=str(trace), HARNESS_PROJECT="")
    if package:
        env["PYTHONPATH"] = str(package)
    code = "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["/usr/bin/time", "-v", sys.executable, "-c", code, "store", "pull", "--remote"]
    argv += [url(bare), "--results-dir", str(root), "--all-machines", "--all"]
    t = time.perf_counter()
    # (run beside the root: the working directory comes first on a `python -c`'s path)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root.parent)
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    lines = [
        line
        for line in done.stderr.splitlines()
        if line.startswith("harness") or "Traceback" in line or "Error" in line
    ]
    cached = None
    if "big_blob" in info:
        store = next((root / ".store").glob("*-*/"), None) if (root / ".store").is_dir() else None
        held = subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch-check"],
            cwd=store, capture_output=True, text=True, env={**env, "GIT_DIR": str(store)},
        ).stdout if store else ""  # fmt: skip
        cached = info["big_blob"] in held
    out = {
        "exit": int(done.returncode),
        "wall_s": round(wall, 1),
        "max_rss_mb": round(int(rss.group(1)) / 1024) if rss else None,
        "received_bytes": trace.stat().st_size if trace.exists() else 0,
        "written_bytes": _du(records.runs_dir(root)),
        "cache_bytes": _du(root / ".store"),
        "pulled": done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else [],
        "said": [line[:400] for line in lines[-4:]],
    }
    if cached is not None:
        out["refused_file_in_cache"] = cached
    trace.unlink(missing_ok=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work", type=Path, help="a scratch folder (emptied)")
    ap.add_argument("cases", nargs="*", metavar="CASE", help=f"of {', '.join(CASES)} (default all)")
    ap.add_argument("--against", type=Path, help="an older version's harness package's folder")
    args = ap.parse_args()
    figures = {}
    for case in args.cases or CASES:
        if case not in CASES:
            sys.exit(f"{case}: not a case ({', '.join(CASES)})")
        work = args.work / case
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        bare, info = build(case, work / "src")
        shutil.rmtree(work / "src" / "made1", ignore_errors=True)
        for p in (work / "src").glob("big*.json"):
            p.unlink()
        figures[case] = {"holds": info}
        if args.against:
            figures[case]["before"] = pull(case, bare, work / "before", args.against, info)
            shutil.rmtree(work / "before", ignore_errors=True)
        figures[case]["this"] = pull(case, bare, work / "this", None, info)
        shutil.rmtree(work / "this", ignore_errors=True)
        print(json.dumps({case: figures[case]}, indent=1), flush=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
