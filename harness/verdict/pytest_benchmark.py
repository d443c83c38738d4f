"""pytest-benchmark's saved runs (`.benchmarks/<machine-id>/0001_*.json`) as gate result sets.

The same `ResultSet`/`Entry` objects harness.verdict.results builds for asv files, so compare and
gate judge them by the same rules (which runs compare, which rows are judged). Each saved
benchmark gives:

- `<name>`: unit "seconds", its per-call samples (`stats.data`; suites/conftest.py always saves
  them) or, from a run saved without data, the median alone (shown, never judged: a bare number
  cannot be tested);
- `<name>.<counter>`: one exact row per counter in `extra_info` (`ops`, `kernels`, ...; units
  from harness.verdict.metrics).

The run's machine name and fingerprint are the ones harness.measure.pytest_bench saved into
`machine_info`; without them (a file from another project) the machine is pytest-benchmark's
`node` and the fingerprint is missing, which the gate lists.
"""

from __future__ import annotations

import datetime
import math
import pathlib

from harness.core.exits import BadInput
from harness.core.records import PYTEST_BENCHMARK_KEY as MACHINE_INFO_KEY
from harness.verdict.metrics import COUNTER, UNITS

RUNNER = "pytest-benchmark"


def looks_like(data: dict) -> bool:
    """A pytest-benchmark save: top-level `benchmarks` list and `machine_info` (asv result files
    have `results` and `params` instead)."""
    return isinstance(data.get("benchmarks"), list) and "machine_info" in data


def _number(x, where: str) -> float:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        raise BadInput(f"{where}: {x!r} is not a finite number; rerun the benchmark that saved it")
    return float(x)


def _date_ms(value) -> int | None:
    try:
        return int(datetime.datetime.fromisoformat(str(value)).timestamp() * 1000)
    except ValueError:
        return None


def load(path: pathlib.Path, data: dict):
    """The ResultSet of one pytest-benchmark JSON file (already parsed as `data`)."""
    from harness.verdict.resultset import Entry, ResultSet

    info = data.get("machine_info") if isinstance(data.get("machine_info"), dict) else {}
    ours = info.get(MACHINE_INFO_KEY) if isinstance(info.get(MACHINE_INFO_KEY), dict) else {}
    machine = ours.get("machine") or info.get("node")
    commit = (
        (data.get("commit_info") or {}).get("id")
        if isinstance(data.get("commit_info"), dict)
        else None
    )
    if not isinstance(machine, str) or not isinstance(commit, str) or not commit:
        raise BadInput(
            f"{path}: no machine name or commit id in this pytest-benchmark file "
            "(machine_info, commit_info.id); save it again from a git checkout"
        )
    entries: dict[str, Entry] = {}
    for i, bench in enumerate(data["benchmarks"]):
        name = bench.get("fullname") if isinstance(bench, dict) else None
        if not isinstance(name, str):
            raise BadInput(
                f"{path}: benchmarks[{i}] has no fullname; the file is damaged — "
                "rerun pytest-benchmark"
            )
        where = f"{path}: benchmark {name!r}"
        stats = bench.get("stats")
        if not isinstance(stats, dict):
            raise BadInput(f"{where}: no stats; the file is damaged — rerun pytest-benchmark")
        samples = stats.get("data")
        if samples is not None:
            if not isinstance(samples, list) or not samples:
                raise BadInput(f"{where}: empty or malformed sample list (stats.data); rerun it")
            samples = [_number(x, where) for x in samples]
        value = _number(stats.get("median"), where + " median")
        entries[name] = Entry(name, "seconds", value, samples)
        extra = bench.get("extra_info") or {}
        if not isinstance(extra, dict):
            raise BadInput(f"{where}: extra_info is not an object; the file is damaged")
        for counter in sorted(extra):
            if UNITS.get(counter) is None or UNITS[counter].kind != COUNTER:
                continue  # other extra_info (labels, notes) is shown by pytest-benchmark only
            entries[f"{name}.{counter}"] = Entry(
                f"{name}.{counter}", counter, _number(extra[counter], f"{where} {counter}"), None
            )
    if not entries:
        raise BadInput(
            f"{path}: holds no benchmark results (was the run saved with --benchmark-only?)"
        )
    fp = ours.get("fingerprint") if isinstance(ours.get("fingerprint"), dict) else None
    return ResultSet(
        path,
        machine,
        commit,
        RUNNER,
        _date_ms(data.get("datetime")),
        entries,
        runner=RUNNER,
        fingerprint=fp,
    )
