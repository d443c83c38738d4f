"""What asv's log of a run (records.ASV_LOG) says of the benchmark cases that failed.

asv keeps no error in its result files (a failed case is a null), only in its output: with
`--show-stderr` (how `harness bench` runs it) a benchmark's stderr follows its result line,
indented, its first line marked `····`; a parameterised benchmark's holds one section per
case, `For parameters: P1, P2` (the parameters as its case name writes them):

    [100.00%] ··· transfer.PinnedOverPageable.track_pinned_over_pageable          failed
    [100.00%] ···· Traceback (most recent call last):
                     File "...", line 3, in track_pinned_over_pageable
                   RuntimeError: boom

`failures(text)` gives each failed case its error's first line: the exception line of the last
traceback in its section (the frames above it are indented deeper; chained exceptions come
before it), else the section's first line (`asv: benchmark timed out (timeout 300s)`). Cut to
MAX_ERROR characters; shown escaped where it goes (harness.core.escape), never obeyed.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_ERROR = 300  # characters of an error line kept
MAX_LOG = 64 * 1024 * 1024  # bytes of a log read at most (a whole full run's is a few MB)
_RESULT = re.compile(r"^\[\s*\d+(?:\.\d+)?%\] ··· (?P<name>[\w.]+)\s+(?P<result>\S.*)$")
_STDERR = re.compile(r"^\[\s*\d+(?:\.\d+)?%\] ···· ?(?P<first>.*)$")
_OTHER = re.compile(r"^\[\s*\d+(?:\.\d+)?%\] ")  # any other line of asv's own
_PARAMS = "For parameters: "
_NOT_THE_ERROR = (
    "Traceback (most recent call last):",
    "During handling of the above exception",
    "The above exception was the direct cause",
    "asv: benchmark failed (exit status",
)


def failures(text: str) -> dict[str, str]:
    """{case name: its error's first line} for every case whose stderr block the log holds.
    A case that ran fine holds none (asv shows no stderr then) or a skip reason; skips
    (`asv: skipped: ...`) are left out."""
    out: dict[str, str] = {}
    name: str | None = None
    block: list[str] | None = None

    def flush():
        if name and block:
            for case, lines in _sections(name, block):
                error = _error_line(lines)
                if error and not error.startswith("asv: skipped"):
                    out.setdefault(case, error[:MAX_ERROR])

    for line in text.splitlines():
        m = _RESULT.match(line)
        if m and "." in m["name"] and not m["result"].startswith("="):
            flush()
            name, block = m["name"], None
            continue
        m = _STDERR.match(line)
        if m and name:
            if block is not None and m["first"].startswith(_PARAMS):
                block.append(m["first"])  # asv marks each case's section of one block alike
                continue
            flush()
            block = [m["first"]]
            continue
        if _OTHER.match(line):
            flush()
            block = None
            if " Setting up " in line:  # a setup_cache's stderr is not the benchmark's before
                name = None
            continue
        if block is not None:
            block.append(line)
    flush()
    return out


def _sections(name: str, block: list[str]) -> list[tuple[str, list[str]]]:
    """The block cut into (case name, its lines): one per `For parameters:` line, else one."""
    out: list[tuple[str, list[str]]] = []
    for line in block:
        stripped = line.strip()
        if stripped.startswith(_PARAMS):
            out.append((f"{name}({stripped[len(_PARAMS) :]})", []))
        elif out:
            out[-1][1].append(line)
        else:
            out.append((name, [line]))
    return out


def _error_line(lines: list[str]) -> str:
    """The first line of the error a section holds (see the module docstring)."""
    shown = [ln for ln in lines if ln.strip()]
    if not shown:
        return ""
    starts = [i for i, ln in enumerate(shown) if ln.strip().startswith(_NOT_THE_ERROR[0])]
    if starts:
        after = shown[starts[-1] + 1 :]
        base = min((_indent(ln) for ln in after), default=0)
        for ln in after:
            if _indent(ln) == base and not ln.strip().startswith(_NOT_THE_ERROR):
                return ln.strip()
    for ln in shown:
        if not ln.strip().startswith(_NOT_THE_ERROR):
            return ln.strip()
    return shown[0].strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def read_failures(run_dir: Path, log_name: str = "asv.log") -> dict[str, str]:
    """failures() of a run record's asv log ({} without one, or one that cannot be read: the
    rows then say to look in the log). A link is not followed; at most MAX_LOG bytes are read."""
    path = Path(run_dir) / log_name
    try:
        if path.is_symlink() or not path.is_file():
            return {}
        with open(path, "rb") as f:
            data = f.read(MAX_LOG)
    except OSError:
        return {}
    return failures(data.decode("utf-8", errors="replace"))
