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
