"""`harness graph-diff BASE HEAD`: every registered model under every front end captured on both
sides, then compared (harness.golden.graphdiff).

A side is a Python interpreter (a venv with another torch: this checkout runs there) or a git
revision of this checkout (a temporary worktree, as `harness ab` makes, run with this
interpreter). Each side captures in a process of its own (harness.runs.worker graph-capture) with
the golden tests' seeds and settings, so "changed" means the graph changed.
"""

from __future__ import annotations

import json
import os
import pathlib
import time

from harness.core import settings
from harness.core.exits import BadInput, RunnerFailed
from harness.core.processes import run_in_session
from harness.golden import graphdiff
from harness.runs import ab
from harness.runs.scratch import RunScratch
from harness.runs.spec import HASH_SEED


def capture_side(
    side: ab.Side, size: str, models, frontends, cwd: pathlib.Path, project: pathlib.Path
) -> dict:
    """Run the capture worker in `side`'s interpreter over `side`'s checkout."""
    # the worker's scratch (TMPDIR, compile caches) and its answer live in the run's own folder
    with RunScratch() as scratch:
        out = scratch.folder("capture") / "capture.json"
        cmd = [side.python, "-m", "harness.runs.worker", "graph-capture", "--out", str(out)]
        cmd += ["--size", size]
        for model in models or ():
            cmd += ["--model", model]
        for frontend in frontends or ():
            cmd += ["--frontend", frontend]
        env = {**os.environ, **side.env, **scratch.environment()}
        env.pop("ASV_PYTHONPATH", None)  # the side's checkout goes on PYTHONPATH instead
        env["PYTHONPATH"] = os.pathsep.join(
            [str(side.project)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        )
        env["PYTHONHASHSEED"] = os.environ.get("PYTHONHASHSEED") or HASH_SEED
        env[settings.PROJECT.name] = str(side.project)
        proc = run_in_session(cmd, cwd=cwd, env=env, capture=True)
        if "invalid choice: 'graph-capture'" in proc.stderr:
            raise BadInput(
                f"{side.label} {side.spec!r} predates graph-diff: its harness has no graph-capture "
                f"worker. Compare revisions from {_first_commit(project)} on, or two interpreters."
            )
        if proc.returncode == 3:
            raise BadInput(f"{side.label} ({side.spec}): {proc.stderr.strip()[-1500:]}")
        if proc.returncode or not out.is_file():
            raise RunnerFailed(
                f"capturing the graphs of {side.label} ({side.spec}, {side.python}) failed "
                f"(exit {proc.returncode}); is this harness installed there (pip install -e "
                f"{side.project})? Its output: {proc.stderr.strip()[-1500:]}"
            )
        return json.loads(out.read_text())


def _first_commit(project: pathlib.Path) -> str:
    """The commit that added graph-diff's capture worker, for the message above."""
    import subprocess

    found = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%h", "-1", "--", "harness/golden/graphdiff.py"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() or "the commit that added harness/golden/graphdiff.py"


def run(project: pathlib.Path, specs: dict[str, str], size: str, models, frontends, log=print):
    """({label: capture}, {label: description}, rows, seconds)."""
    start = time.monotonic()
    captures, described = {}, {}
    with ab.sides(project, specs, {}) as sides:
        for label, side in sides.items():
            git_side = side.project != project
            cwd = side.project if git_side else pathlib.Path.cwd()
            log(f"graph-diff: capturing {label} ({side.spec}) ...")
            captures[label] = capture_side(side, size, models, frontends, cwd, project)
            where = f"commit {side.commit[:10]}" if git_side else side.python
            described[label] = f"{side.spec} (torch {captures[label]['torch']}, {where})"
    rows = graphdiff.compare(captures["base"], captures["head"])
    return captures, described, rows, time.monotonic() - start
