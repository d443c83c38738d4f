"""Where the project is, and which commit it is at: one resolver for every command.

The project is the checkout found from the working directory (or `--project DIR`, or
$HARNESS_PROJECT): the nearest directory holding `asv.conf.json` and `suites/benchmarks/`. It is
never derived from the installed package's location, which for `pip install .` or tox lies in
site-packages.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness.core import settings
from harness.core.exits import BadInput


def _is_project(d: Path) -> bool:
    return (d / "asv.conf.json").is_file() and (d / "suites" / "benchmarks").is_dir()


def project_root(override: str | os.PathLike | None = None) -> Path:
    """The harness checkout: `override`, else $HARNESS_PROJECT, else the cwd or a parent of it."""
    given = override or settings.PROJECT.get()
    if given:
        root = Path(given).resolve()
        if not _is_project(root):
            raise BadInput(
                f"{root} is not a harness checkout (no asv.conf.json and suites/benchmarks/ "
                "there); pass the folder you cloned the harness into"
            )
        return root
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if _is_project(d):
            return d
    raise BadInput(
        f"not inside a harness checkout ({here} and its parents have no asv.conf.json "
        "with suites/benchmarks/): run this command from the folder you cloned the "
        "harness into, or pass --project DIR"
    )


def head_commit(root: Path) -> str:
    """The full commit hash the checkout is at (asv files results per commit)."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "HEAD"], cwd=root, capture_output=True, text=True
        )
    except FileNotFoundError:
        raise BadInput(
            "git is not installed; results are filed by commit, so git is needed"
        ) from None
    sha = proc.stdout.strip()
    if proc.returncode or len(sha) != 40:
        raise BadInput(
            f"cannot read the current commit of {root} ({proc.stderr.strip() or 'no commit'}); "
            "results are filed by commit: run from a git checkout with at least one commit"
        )
    return sha
