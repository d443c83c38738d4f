"""What a run is asked to be: one value (RunSpec) handed to bench, ab and calibrate instead of
long parameter lists, and the one place that turns a mode word into sizes, asv's quick flag and
the thread count.

Modes: `quick` (asv --quick, fast sizes: CI and the gate), `fast` (fast sizes, asv's own
repeats) and `full` (full sizes and grids: nightly runs).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core import settings
from harness.core.exits import BadInput

if TYPE_CHECKING:
    from harness.runs.scratch import RunScratch

MODES = ("quick", "fast", "full")
# Python's hash seed for the suites' processes unless the caller's environment sets one: with a
# random seed the MLP step's compiled/eager ratio moved between processes (docs/measurements.md).
HASH_SEED = "0"


@dataclasses.dataclass(frozen=True)
class RunSpec:
    mode: str = "fast"
    threads: int | None = None  # None: the mode's default (1, all cores in full runs)
    suites: tuple[str, ...] = ()
    benches: tuple[str, ...] = ()  # asv --bench regexes selecting part of the suites
    machine: str = ""
    label: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # extra environment of every benchmark process

    def __post_init__(self):
        if self.mode not in MODES:
            raise BadInput(f"unknown run mode {self.mode!r}; choose {', '.join(MODES)}")

    @classmethod
    def from_flags(cls, *, quick: bool = False, full: bool = False, **kw) -> RunSpec:
        """A command's --quick / --full (`harness ab`: quick unless --full)."""
        if quick and full:
            raise BadInput("--quick and --full exclude each other")
        return cls(mode="quick" if quick else "full" if full else "fast", **kw)

    @property
    def quick(self) -> bool:
        return self.mode == "quick"

    @property
    def full(self) -> bool:
        return self.mode == "full"

    @property
    def size(self) -> str:
        """The zoo size the suites use: "full" in full runs, else "small"."""
        return "full" if self.full else "small"

    @property
    def run_threads(self) -> int:
        from harness.measure.threads import default_threads

        return self.threads or default_threads(self.full, self.quick)

    def with_env(self, **extra: str) -> RunSpec:
        return dataclasses.replace(self, env=tuple({**dict(self.env), **extra}.items()))

    def environment(self, scratch: RunScratch | None = None, *, record: Path | None = None) -> dict:
        """The environment asv runs the suites in: this interpreter behind asv's launcher, the
        mode (sizes and grids, quick), the run's fixed thread count, a fixed hash seed unless the
        caller set one, the run's scratch folders (harness.runs.scratch: TMPDIR, the compile
        caches, the harness's scratch) and where the run record is being written (instruction
        counts keep their tables there)."""
        from harness.runs import asv

        extra = {
            settings.FULL.name: settings.FULL.encode(self.full),
            settings.QUICK.name: settings.QUICK.encode(self.quick),
            settings.THREADS.name: str(self.run_threads),
            "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED") or HASH_SEED,
        }
        if scratch is not None:
            extra.update(scratch.environment())
        if record is not None:
            extra[settings.RUN_RECORD.name] = str(record)
        if self.benches:  # one valgrind process counts every instruction row: only the selected
            extra[settings.INSTRUCTION_BENCH.name] = settings.INSTRUCTION_BENCH.encode(
                list(self.benches)
            )
            from harness.measure.workloads import distributed

            extra[settings.DISTRIBUTED_SECTIONS.name] = ",".join(
                distributed.matching(list(self.benches))
            )
        return asv.environment({**extra, **dict(self.env)})
