"""What a loaded run is: one result set of entries, whichever runner wrote it (asv, or
pytest-benchmark: harness.verdict.results and .pytest_benchmark load them)."""

from __future__ import annotations

import dataclasses
import math
import pathlib

from harness.core.answerfacts import Answer


@dataclasses.dataclass
class Entry:
    """One benchmark (one parameter combination) of one result set."""

    name: str
    unit: str
    value: float | None  # None: failed; NaN: skipped (asv's markers)
    samples: list[float] | None
    version: str | None = None  # asv's benchmark version: a hash of the benchmark's code

    @property
    def failed(self) -> bool:
        return self.value is None

    @property
    def skipped(self) -> bool:
        return self.value is not None and math.isnan(self.value)


@dataclasses.dataclass
class ResultSet:
    path: pathlib.Path
    machine: str
    commit: str
    env_name: str
    date: int | None
    entries: dict[str, Entry]
    runner: str = "asv"  # or "pytest-benchmark" (harness.verdict.pytest_benchmark)
    fingerprint: dict | None = None  # saved inside the result file itself (pytest-benchmark)
    # instruction rows' per-function tables and fingerprints, from the run record
    # (records.read_instructions)
    instructions: dict[str, dict] = dataclasses.field(default_factory=dict)
    # instruction rows the run did not count, and why (records.read_not_counted)
    not_counted: dict[str, str] = dataclasses.field(default_factory=dict)
    # timing rows' device facts (GPU/host time, busy fraction, ATen share), from the run record
    # (records.read_row_facts)
    facts: dict[str, dict] = dataclasses.field(default_factory=dict)
    # the run measured a working tree that differed from its commit (run.json's "dirty",
    # harness.core.provenance); None: not recorded (an older run, a bare result file)
    dirty: bool | None = None
    # the suites the run held (run.json's "suites"); None: not recorded
    suites: tuple[str, ...] | None = None
    # the --bench patterns the run was restricted to (run.json's "benches"); None: all
    benches: tuple[str, ...] | None = None
    # failed cases' errors, the first line of each, from the run record's asv log
    # (harness.core.asvlog)
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    # answer row -> the answer check's verdict kept in the run record's row facts
    # (harness.verdict.answers.attach; each is also an entry of unit "error/tol")
    answers: dict[str, Answer] = dataclasses.field(default_factory=dict)
    # the folder of the run record (or asv results) the set was read from: where an answer's
    # reproduction file lies; None for a bare result file
    folder: pathlib.Path | None = None
    # the run's mode as `harness bench` flags (--quick, --full; --threads N where the run's
    # count is not its mode's default): what a rerun of a row needs
    mode_flags: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.commit[:8]}{' (dirty)' if self.dirty else ''} ({self.path})"
