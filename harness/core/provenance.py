"""Provenance of a run: whether the working tree it measured is the commit it is filed under.

A run is filed under the commit HEAD points at (harness.core.project.head_commit), but what runs
is the working tree. The tree is *dirty* when a tracked file differs from that commit, staged or
not (`git diff HEAD`, over the whole repository). Untracked files (not ignored) are listed in the
record but never make it dirty: a `.venv` or a build folder in a CI checkout is not a change to
the code, and a new module that matters is imported by a tracked file, which then differs.

What a run record keeps (run.json, harness.core.records): `"dirty": true|false` (missing in
records made before: unknown, read as clean) and `"worktree"`: the sha256 of the difference
(`git diff --binary HEAD`: two dirty runs of the same edit share it), the changed tracked paths
and the untracked ones (untracked folders as one `folder/` entry), each list cut at LIST_MAX with
its full count beside it. The state is read once, when the run starts.

HARNESS_REFUSE_DIRTY (harness.core.settings) turns the mark into a refusal: a run of a dirty
tree is bad input before anything runs, and so is a comparison with a dirty run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
from pathlib import Path

from harness.core import settings
from harness.core.exits import BadInput, RunnerFailed

LIST_MAX = 50  # paths kept per list in run.json; the count says how many there were
TIMEOUT_S = 120
DIRTY = "dirty"  # the run.json key (other tools read exactly this one)
WORKTREE = "worktree"


@dataclasses.dataclass(frozen=True)
class TreeState:
    dirty: bool
    diff_sha256: str | None  # of `git diff --binary HEAD`; None when clean
    changed: tuple[str, ...] = ()  # tracked paths that differ from the commit (<= LIST_MAX)
    changed_total: int = 0
    untracked: tuple[str, ...] = ()  # untracked, not ignored; folders collapsed (<= LIST_MAX)
    untracked_total: int = 0

    def as_meta(self) -> dict:
        """The run.json keys."""
        return {
            DIRTY: self.dirty,
            WORKTREE: {
                "diff_sha256": self.diff_sha256,
                "changed": list(self.changed),
                "changed_total": self.changed_total,
                "untracked": list(self.untracked),
                "untracked_total": self.untracked_total,
            },
        }

    @property
    def mark(self) -> str:
        """ " (dirty)" after a commit's short hash where the tree differs, else nothing."""
        return " (dirty)" if self.dirty else ""

    def describe(self) -> str:
        """What differs, in one line: `2 changed files (models.py, tests/x.py)`."""
        shown = ", ".join(self.changed[:5]) + (" ..." if self.changed_total > 5 else "")
        return f"{self.changed_total} changed tracked file(s) ({shown})"


CLEAN = TreeState(False, None)


def _git(top: Path, *args: str) -> bytes:
    # no optional locks: two runs starting at once must not fight over .git/index.lock
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        proc = subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=top,
            env=env,
            capture_output=True,
            timeout=TIMEOUT_S,
        )
    except FileNotFoundError:
        raise BadInput(
            "git is not installed; results are filed by commit, so git is needed"
        ) from None
    except subprocess.TimeoutExpired:
        raise RunnerFailed(f"git {args[0]} in {top} gave no answer within {TIMEOUT_S} s") from None
    if proc.returncode:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        why = err[-1] if err else f"exit {proc.returncode}"
        raise RunnerFailed(f"git {' '.join(args)} in {top} failed: {why}")
    return proc.stdout


def _paths(raw: bytes) -> list[str]:
    return [p for p in raw.decode(errors="replace").split("\0") if p]


def tree_state(root: Path) -> TreeState:
    """The working tree of the repository holding `root`, against its HEAD commit."""
    top = Path(_git(Path(root), "rev-parse", "--show-toplevel").decode().strip() or root)
    diff = _git(top, "diff", "HEAD", "--binary", "--no-ext-diff", "--no-textconv", "--no-color")
    changed = _paths(_git(top, "diff", "HEAD", "--name-only", "--no-ext-diff", "-z"))
    untracked = _paths(
        _git(
            top,
            "ls-files",
            "--others",
            "--exclude-standard",
            "--directory",
            "--no-empty-directory",
            "-z",
        )
    )
    dirty = bool(diff.strip()) or bool(changed)
    return TreeState(
        dirty,
        hashlib.sha256(diff).hexdigest() if dirty else None,
        tuple(changed[:LIST_MAX]),
        len(changed),
        tuple(untracked[:LIST_MAX]),
        len(untracked),
    )


def for_run(root: Path) -> TreeState:
    """The state a new run records; with HARNESS_REFUSE_DIRTY a dirty tree is bad input here,
    before anything runs."""
    state = tree_state(root)
    if state.dirty and settings.REFUSE_DIRTY.get():
        raise BadInput(
            f"{root}: the working tree differs from its commit ({state.describe()}) and "
            f"{settings.REFUSE_DIRTY.name} is set: commit (or stash) the changes, or unset it "
            "to measure the tree as it is (the run is then marked dirty)"
        )
    return state


def of_record(meta: dict) -> bool | None:
    """A run record's mark: True or False, None for records made before it was kept."""
    value = meta.get(DIRTY)
    return value if isinstance(value, bool) else None


def merged_meta(metas: list[dict]) -> dict:
    """The run.json keys of a record merged from several (shards): dirty when any source was,
    clean when every source says clean, left out (unknown) otherwise; the sources' differences
    by their hashes."""
    marks = [of_record(m) for m in metas]
    if any(marks):
        # what run.json says is input (records.check_meta checked its types): strings only
        trees = [m.get(WORKTREE) for m, mark in zip(metas, marks) if mark]
        trees = [t for t in trees if isinstance(t, dict)]
        hashes = sorted({h for t in trees if isinstance(h := t.get("diff_sha256"), str) and h})
        changed = sorted(
            {
                p
                for t in trees
                if isinstance(t.get("changed"), list)
                for p in t["changed"]
                if isinstance(p, str)
            }
        )
        return {
            DIRTY: True,
            WORKTREE: {
                "diff_sha256": hashes[0] if len(hashes) == 1 else None,
                "diff_sha256_of_sources": hashes,
                "changed": changed[:LIST_MAX],
                "changed_total": len(changed),
            },
        }
    return {DIRTY: False} if marks and all(m is False for m in marks) else {}


def refuse_dirty_sides(sides: list[tuple[str, bool | None, str]]) -> None:
    """With HARNESS_REFUSE_DIRTY, a comparison naming a dirty run is bad input.
    `sides`: (which side, its mark, the run's name)."""
    if not settings.REFUSE_DIRTY.get():
        return
    dirty = [f"{which} {name}" for which, mark, name in sides if mark]
    if dirty:
        raise BadInput(
            f"{' and '.join(dirty)} measured a working tree that differs from its commit "
            f"(dirty) and {settings.REFUSE_DIRTY.name} is set: compare runs of committed code, "
            "or unset it to judge them (the table then marks the dirty side)"
        )
