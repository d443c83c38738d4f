"""Which benchmarks' asv versions differ between two copies of the suites: asv keys a benchmark's
results by its version (a hash of its track_/time_ source, every setup and its setup_cache), so a
changed version makes every older baseline read the row as "benchmark changed" (docs/answers.md:
answers are declared outside that source for this reason).

    .venv/bin/python tests/measure_versions.py OLD_SUITES_DIR NEW_SUITES_DIR
    .venv/bin/python tests/measure_versions.py /work/main/suites suites

Each directory is a suites folder holding `benchmarks/` (or the benchmarks folder itself); each
is discovered by asv_runner's own discovery in a process of its own (both are a package named
`benchmarks`), with the harness of the checkout it belongs to where it is one. Printed: every
benchmark of the old suites whose version changed or that is gone, then the benchmarks that
are new (a new row is no change). Exit 1 where an old one changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_LIST = """
import io, json, sys
from asv_runner.discovery import list_benchmarks
out = io.StringIO()
list_benchmarks(sys.argv[1], out)
print(json.dumps({b["name"]: b["version"] for b in json.loads(out.getvalue())}))
"""


def versions(folder: Path) -> dict[str, str]:
    bench = folder / "benchmarks" if (folder / "benchmarks").is_dir() else folder
    # a checkout's suites import that checkout's harness (its root, first on the path)
    root = bench.resolve().parent.parent
    env, cwd = dict(os.environ), None
    if (root / "harness" / "__init__.py").is_file():  # `python -c` puts its cwd first
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        cwd = root
    done = subprocess.run(
        [sys.executable, "-c", _LIST, str(bench.resolve())],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=cwd,
    )
    if done.returncode != 0:
        raise SystemExit(f"discovering {bench} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = (versions(Path(a)) for a in argv)
    changed = sorted(n for n in old if n in new and old[n] != new[n])
    gone = sorted(n for n in old if n not in new)
    added = sorted(n for n in new if n not in old)
    print(f"{len(old)} benchmarks before, {len(new)} after")
    for name in changed:
        print(f"changed: {name}")
    for name in gone:
        print(f"gone: {name}")
    for name in added:
        print(f"new: {name}")
    if not changed and not gone:
        print("no benchmark's version changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
