"""Atomic file writes: the one way the harness writes a golden, a result or a report.

A temporary file in the same directory, flushed and fsynced, then renamed over the target: a
reader (another xdist worker, a crashed run's successor) sees the old file or the new one,
never half of one, and an interrupted write leaves no temporary file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; goldens and results are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | os.PathLike, data) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def check_own_folder(
    path: str | os.PathLike, mark: str, what: str, *, protect: tuple[Path, ...] = ()
) -> Path:
    """A folder a command fills and may empty or overwrite must be new, empty, or one that
    command made before (it holds `mark`); anything else is bad input, so that no command
    overwrites or deletes files it did not create. `protect`: folders it must not hold or
    replace (e.g. the results root). Returns the resolved folder; call `mark_own_folder` after
    filling it."""
    from harness.core.exits import BadInput

    folder = Path(path).resolve()
    for keep in protect:
        keep = Path(keep).resolve()
        if folder == keep or folder in keep.parents:
            raise BadInput(
                f"{what} {path} would hold or replace {keep}; choose a separate folder, "
                f"e.g. {keep / 'html'}"
            )
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"{what} {path} is a file; choose a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / mark).is_file():
        raise BadInput(
            f"{what} {path} is not empty and was not made by the harness (no {mark} in "
            "it); its files could be overwritten or deleted. Choose a new or empty folder; "
            "nothing was changed"
        )
    return folder


def mark_own_folder(path: str | os.PathLike, mark: str, who: str) -> None:
    write_atomic(Path(path) / mark, f"made by `{who}`; it may refill this folder\n")
