"""The one owner of a run's scratch folders: what asv and everything it starts write outside the
run record goes into one folder per run, which the harness creates and removes.

    with RunScratch() as scratch:               # $TMPDIR/harness-run-XXXX/
        env = spec.environment(scratch, record=staging)

The folder holds
- `tmp/`: TMPDIR, TEMP and TMP of asv and every process below it (asv's forkserver socket
  folder and temporary files, the benchmarks' own temporary folders, torch's defaults);
- `inductor/`: TORCHINDUCTOR_CACHE_DIR, inductor's compile cache, empty when the run starts;
- `triton/`: TRITON_CACHE_DIR, Triton's kernel cache (CUDA runs), empty when the run starts;
- `harness/`: HARNESS_SCRATCH_DIR, scratch of the benchmarks' own (the instruction counter);
- any folder the harness asks for (`folder(name)`: the benchmark subset asv imports, ab's asv
  results before they are merged);
and is removed when the block ends, whatever ended it (an exception, Ctrl-C, SIGTERM landing in
the cleanup itself: harness.core.processes.cleanup_despite_interrupts) and whatever asv managed
to remove in its own grace period. Nothing of the run's processes lands in the caller's TMPDIR.

Where: in the caller's TMPDIR, unless that path is too long for the Unix sockets the run's
processes make below their TMPDIR (asv's forkserver: `tmp/asv-forkserver-XXXXXXXX/socket`; a
socket path has at most 107 characters on Linux): then in /tmp (or /var/tmp), so that asv does
not fail with "Failed to start server thread".

`shared_cache=FOLDER` keeps the compile caches (FOLDER/inductor, FOLDER/triton) in a folder
the caller owns, to share them across several runs; the run neither empties nor removes it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from harness.core import settings
from harness.core.exits import BadInput
from harness.core.processes import cleanup_despite_interrupts

PREFIX = "harness-run-"
TEMP_VARS = ("TMPDIR", "TEMP", "TMP")
SUN_PATH_MAX = 107  # characters of a Unix socket's path on Linux (108 bytes with the NUL)
# what a runner adds below its TMPDIR for a socket: asv's forkserver 31 characters
# (/asv-forkserver-XXXXXXXX/socket), multiprocessing's forkserver 33 (/pymp-XXXXXXXX/listener-...)
SOCKET_ROOM = 40
SHORT_TEMP = ("/tmp", "/var/tmp")


def parent_folder() -> Path:
    """Where the run's folder is made: the caller's TMPDIR if a socket fits below the run's tmp/
    there, else the first short system folder that is writable (see the module docstring)."""
    caller = Path(tempfile.gettempdir())
    below = len(f"/{PREFIX}XXXXXXXX/tmp") + SOCKET_ROOM
    if len(str(caller)) + below <= SUN_PATH_MAX:
        return caller
    for short in map(Path, SHORT_TEMP):
        if short.is_dir() and os.access(short, os.W_OK | os.X_OK):
            return short
    raise BadInput(
        f"TMPDIR {caller} is {len(str(caller))} characters long: the sockets of the run's "
        f"processes below it would pass the {SUN_PATH_MAX}-character limit of a socket path, "
        f"and {' and '.join(SHORT_TEMP)} are not writable; set TMPDIR to a folder of at most "
        f"{SUN_PATH_MAX - below} characters"
    )


class RunScratch:
    """A context manager: the run's scratch folder (see the module docstring) while inside."""

    def __init__(self, shared_cache: Path | str | None = None):
        self.shared_cache = Path(shared_cache) if shared_cache is not None else None
        self.root: Path | None = None

    def __enter__(self) -> RunScratch:
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent_folder()))
        try:
            for folder in (self.tmp, self.inductor, self.triton, self.harness):
                folder.mkdir(parents=True, exist_ok=True)
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._remove()

    def _remove(self) -> None:
        root = self.root
        if root is not None:
            # the harness made it: all of it goes, also what a runner killed mid-write left
            self.root = None
            cleanup_despite_interrupts(lambda: shutil.rmtree(root, ignore_errors=True))

    def _inside(self, name: str) -> Path:
        if self.root is None:
            raise RuntimeError("RunScratch is used outside its `with` block")
        return self.root / name

    @property
    def tmp(self) -> Path:
        return self._inside("tmp")

    @property
    def harness(self) -> Path:
        return self._inside("harness")

    @property
    def inductor(self) -> Path:
        return (self.shared_cache or self._inside("")) / "inductor"

    @property
    def triton(self) -> Path:
        return (self.shared_cache or self._inside("")) / "triton"

    def folder(self, name: str) -> Path:
        """A new folder `name` for the harness's own files of the run, removed with the rest."""
        if name in ("tmp", "inductor", "triton", "harness"):
            raise ValueError(f"{name!r} is one of the run's fixed folders")
        path = self._inside(name)
        path.mkdir(parents=True)
        return path

    def environment(self) -> dict[str, str]:
        """The variables that send the run's processes' scratch here."""
        return {
            **{var: str(self.tmp) for var in TEMP_VARS},
            "TORCHINDUCTOR_CACHE_DIR": str(self.inductor),
            "TRITON_CACHE_DIR": str(self.triton),
            settings.SCRATCH_DIR.name: str(self.harness),
        }
