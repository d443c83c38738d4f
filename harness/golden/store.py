"""The expect store: one readable golden file per (model, front end) under `expect/`.

A golden is a short header followed by the canonical printout:

    # harness golden -- do not edit; update with `pytest --accept`, then review `git diff expect/`
    # frontend: jit
    # model: alexnet (small)
    # torch: 2.14.1+cu130
    # normaliser: 1
    # body-lines: 31
    #
    <canonical printout>

`body-lines` lets a truncated file be told from a changed graph. Writes go to a temporary file
in the same directory and are renamed into place, so an interrupted or parallel run never leaves
a torn file. Nothing here writes outside the directory it is given.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path

from harness.core import files, names, settings
from harness.golden.normalize import NORMALISER_VERSION, normalize, op_counts


def torch_version() -> str:
    """torch.__version__ (with its local part, e.g. +cu130), read from torch/version.py without
    importing torch: the pytest plugin loads in every pytest process and must stay cheap."""
    import importlib.util
    import re as _re

    spec = importlib.util.find_spec("torch")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            match = _re.search(
                r"__version__\s*=\s*['\"]([^'\"]+)", (Path(folder) / "version.py").read_text()
            )
        except OSError:
            continue
        if match:
            return match.group(1)
    return "none"


SUFFIX = ".expect"
FIRST_LINE = (
    "# harness golden -- do not edit; update with `pytest --accept`, then review `git diff expect/`"
)
MAX_DIFF_LINES = 200
# difflib is quadratic in the worst case; past this many line pairs the diff is skipped.
MAX_DIFF_WORK = 50_000_000


class GoldenError(Exception):
    """A golden file that cannot be used as it is; the message says which and what to do."""


@dataclasses.dataclass
class GoldenFile:
    path: Path
    header: dict[str, str]
    body: str

    @property
    def torch_version(self) -> str | None:
        return self.header.get("torch")


def golden_path(directory: Path, golden_id: str) -> Path:
    """The file for a golden id, refusing ids that could escape `directory`."""
    if not names.is_golden_id(golden_id or ""):
        raise GoldenError(
            f"golden id {golden_id!r} is not allowed: use {names.GOLDEN_ID_RULE}. "
            f"Nothing was written."
        )
    path = Path(directory) / (golden_id + SUFFIX)
    if path.resolve().parent != Path(directory).resolve():
        raise GoldenError(
            f"golden id {golden_id!r} resolves outside {directory}; nothing was written."
        )
    return path


def variant_path(directory: Path, golden_id: str, device: str | None) -> Path | None:
    """`expect/<device>/<id>.expect`: a committed variant for a device whose printout legitimately
    differs from the CPU one (a `device('cuda:0')` constant, a cuDNN-only op). None on the CPU."""
    if not device or device == "cpu":
        return None
    return golden_path(Path(directory) / device, golden_id)


def lookup(directory: Path, golden_id: str, device: str | None = None) -> Path:
    """The golden a capture on `device` is compared with: its variant when one is committed,
    else the CPU golden (most printouts are the same on every device)."""
    variant = variant_path(directory, golden_id, device)
    if variant is not None and variant.is_file():
        return variant
    return golden_path(directory, golden_id)


def render(body: str, fields: dict[str, str]) -> str:
    body = normalize(body)
    header = dict(fields)
    header.setdefault("torch", torch_version())
    header["normaliser"] = str(NORMALISER_VERSION)
    header["body-lines"] = str(body.count("\n"))
    lines = [FIRST_LINE] + [f"# {k}: {v}" for k, v in header.items()] + ["#"]
    return "\n".join(lines) + "\n" + body


def parse(path: Path, raw: bytes) -> GoldenFile:
    where = f"golden {path}"
    fix = (
        f"Restore it with `git checkout -- {path}`, or delete it and run `pytest --accept` "
        "to re-record it."
    )
    if b"\0" in raw:
        raise GoldenError(f"{where} is binary (it contains NUL bytes), not a golden. {fix}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GoldenError(
            f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start}). {fix}"
        ) from None
    text = text.replace("\r\n", "\n")  # CRLF from a Windows checkout is tolerated
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FIRST_LINE:
        raise GoldenError(f"{where} does not start with the harness golden header. {fix}")
    header = {}
    for i, line in enumerate(lines[1:], start=1):
        line = line.rstrip()
        if line == "#":
            body = "\n".join(lines[i + 1 :])
            break
        key, sep, value = line[2:].partition(": ")
        if not line.startswith("# ") or not sep:
            raise GoldenError(f"{where}: header line {i + 1} is malformed: {line!r}. {fix}")
        header[key] = value
    else:
        raise GoldenError(f"{where} is truncated: its header never ends. {fix}")
    body = normalize(body) if body.strip() else ""
    expected = header.get("body-lines")
    if expected is None or not expected.isdigit():
        raise GoldenError(f"{where}: header has no valid body-lines count. {fix}")
    if body.count("\n") != int(expected):
        raise GoldenError(
            f"{where} is truncated or was edited by hand: the header promises {expected} "
            f"lines, the file has {body.count(chr(10))}. {fix}"
        )
    return GoldenFile(path, header, body)


def read(path: Path) -> GoldenFile | None:
    """The golden at `path`, None if there is none; GoldenError if it is unusable."""
    try:
        raw = Path(path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise GoldenError(
            f"golden {path} is a directory; remove it so the golden can be written."
        ) from None
    return parse(Path(path), raw)


def save(path: Path, text: str) -> None:
    """Write a golden atomically (harness.core.files), turning an unwritable place into a
    GoldenError."""
    try:
        files.write_atomic(path, text)
    except OSError as exc:
        raise GoldenError(
            f"cannot write golden {path}: {exc.strerror or exc} ({Path(path).parent}). "
            f"Make the directory writable, or point {settings.EXPECT_DIR.name} elsewhere."
        ) from None


def op_count_summary(expected: str, actual: str) -> list[str]:
    """`aten::relu_  7 -> 0` lines for every op whose count changed, biggest change first."""
    before, after = op_counts(expected), op_counts(actual)
    changed = [
        (op, before.get(op, 0), after.get(op, 0))
        for op in set(before) | set(after)
        if before.get(op, 0) != after.get(op, 0)
    ]
    changed.sort(key=lambda c: (-abs(c[2] - c[1]), c[0]))
    width = max((len(op) for op, _, _ in changed), default=0)
    return [f"  {op:<{width}}  {b} -> {a}" for op, b, a in changed]


def unified_diff(expected: str, actual: str, label: str) -> list[str]:
    a, b = expected.splitlines(), actual.splitlines()
    if len(a) * len(b) > MAX_DIFF_WORK:
        return [f"  (diff skipped: {len(a)} vs {len(b)} lines is too large to diff quickly)"]
    diff = list(difflib.unified_diff(a, b, f"{label} (expected)", "actual", lineterm="", n=2))
    if len(diff) > MAX_DIFF_LINES:
        more = len(diff) - MAX_DIFF_LINES
        diff = diff[:MAX_DIFF_LINES] + [f"... diff cut here: {more} more lines not shown"]
    return diff


def mismatch_message(golden: GoldenFile, actual: str, what: str, accept_hint: str) -> str:
    lines = [f"{what} does not match golden {golden.path}."]
    if golden.torch_version and golden.torch_version != torch_version():
        lines.append(
            f"Note: the golden was recorded with torch {golden.torch_version}; this run uses "
            f"torch {torch_version()}. The change may come from torch itself."
        )
    if golden.header.get("normaliser") != str(NORMALISER_VERSION):
        lines.append(
            "Note: the golden was written by normaliser version "
            f"{golden.header.get('normaliser')}; "
            f"this harness prints version {NORMALISER_VERSION}."
        )
    summary = op_count_summary(golden.body, actual)
    lines.append(
        "Op counts (expected -> actual):"
        if summary
        else "Op counts unchanged; the graph differs in shapes, arguments or order."
    )
    lines += summary
    lines.append("Diff:")
    lines += unified_diff(golden.body, actual, str(golden.path))
    lines.append(f"If the change is intended: {accept_hint}, then review `git diff expect/`.")
    return "\n".join(lines)
