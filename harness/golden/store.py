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
from pathlib import Path

from harness.core import files, names, settings
from harness.golden.diff import golden_diff
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


# The torch (major.minor) the goldens in this repository's expect/ were recorded with; pyproject's
# `test` extra pins the same release (tests/test_expect_store.py checks that they agree). A project
# of its own names its own in the ini option `harness_reference_torch` (harness.golden.plugin).
REFERENCE_TORCH = "2.14"
TORCH_VARIANT_PREFIX = "torch-"
FULL_FOLDER = "full"  # expect/full/: the full-size goldens, a root of its own, not a variant


def torch_lane(version: str | None = None) -> str:
    """`2.15` for torch 2.15.0+cu132 (or 2.15.0.dev20261201): the lane a torch build's goldens
    belong to."""
    version = version or torch_version()
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else version


def variant_path(directory: Path, golden_id: str, device: str | None) -> Path | None:
    """`expect/<device>/<id>.expect`: a committed variant for a device whose printout legitimately
    differs from the CPU one (a `device('cuda:0')` constant, a cuDNN-only op). None on the CPU."""
    if not device or device == "cpu":
        return None
    return golden_path(Path(directory) / device, golden_id)


def candidates(
    directory: Path,
    golden_id: str,
    device: str | None = None,
    lane: str | None = None,
    reference: str = REFERENCE_TORCH,
) -> list[Path]:
    """Where a capture on `device` under torch `lane` may find its golden, most specific first:
    `<device>/torch-<lane>/`, `torch-<lane>/`, `<device>/`, then the reference golden. Variants
    apply only off the reference (the torch `reference` the goldens were recorded with): on the
    CPU with the reference torch only the reference exists."""
    directory = Path(directory)
    lane = lane or reference
    on_device = bool(device) and device != "cpu"
    other_torch = lane != reference
    folders = []
    if on_device and other_torch:
        folders.append(directory / device / f"{TORCH_VARIANT_PREFIX}{lane}")
    if other_torch:
        folders.append(directory / f"{TORCH_VARIANT_PREFIX}{lane}")
    if on_device:
        folders.append(directory / device)
    folders.append(directory)
    return [golden_path(folder, golden_id) for folder in folders]


def lookup(
    directory: Path,
    golden_id: str,
    device: str | None = None,
    lane: str | None = None,
    reference: str = REFERENCE_TORCH,
) -> Path:
    """The golden a capture is compared with: the most specific committed variant (see
    `candidates`), else the reference golden (most printouts are the same everywhere)."""
    found = candidates(directory, golden_id, device, lane, reference)
    return next((path for path in found if path.is_file()), found[-1])


def accept_target(
    directory: Path,
    golden_id: str,
    device: str | None = None,
    lane: str | None = None,
    reference: str = REFERENCE_TORCH,
) -> Path:
    """Where `--accept` writes a printout that differs from the golden it was compared with: the
    most specific variant. It is the reference golden only on the CPU with the reference torch,
    so another torch or device can never rewrite the reference."""
    return candidates(directory, golden_id, device, lane, reference)[0]


def lookup_below(
    directory: Path,
    variant: Path,
    device: str | None = None,
    lane: str | None = None,
    reference: str = REFERENCE_TORCH,
) -> Path | None:
    """The golden a capture would fall back to without `variant`: the next existing candidate
    after it, or None."""
    found = candidates(directory, variant.name[: -len(SUFFIX)], device, lane, reference)
    rest = found[found.index(variant) + 1 :] if variant in found else []
    return next((path for path in rest if path.is_file()), None)


def is_reference(directory: Path, path: Path) -> bool:
    return Path(path).parent.resolve() == Path(directory).resolve()


def variant_folders(directory: Path) -> list[Path]:
    """Every variant folder under an expect root: `torch-*/`, `<device>/` and
    `<device>/torch-*/` (not `full/`, which is a root of its own)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    out = []
    for child in sorted(p for p in directory.iterdir() if p.is_dir()):
        if child.name == FULL_FOLDER or child.name.startswith("."):
            continue
        out.append(child)
        if not child.name.startswith(TORCH_VARIANT_PREFIX):
            out += sorted(p for p in child.glob(f"{TORCH_VARIANT_PREFIX}*") if p.is_dir())
    return out


def header_of(body: str, fields: dict[str, str]) -> dict[str, str]:
    """The header `render` writes for this body: the caller's fields, then torch, normaliser
    and body-lines."""
    header = dict(fields)
    header.setdefault("torch", torch_version())
    header["normaliser"] = str(NORMALISER_VERSION)
    header["body-lines"] = str(normalize(body).count("\n"))
    return header


def stale_header(golden: GoldenFile, fields: dict[str, str]) -> bool:
    """True when a re-accept from scratch would write another header for the same body (an
    older normaliser, other fields or order); the torch build alone does not count, so a
    golden is not rewritten for every local torch build of the same release."""
    want = header_of(golden.body, fields)
    want["torch"] = golden.header.get("torch", want["torch"])
    return list(golden.header.items()) != list(want.items())


def render(body: str, fields: dict[str, str]) -> str:
    body = normalize(body)
    header = header_of(body, fields)
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


def op_count_changes(expected: str, actual: str) -> list[tuple[str, int, int]]:
    """(op, count before, count after) for every op whose count changed, biggest change first."""
    before, after = op_counts(expected), op_counts(actual)
    changed = [
        (op, before.get(op, 0), after.get(op, 0))
        for op in set(before) | set(after)
        if before.get(op, 0) != after.get(op, 0)
    ]
    return sorted(changed, key=lambda c: (-abs(c[2] - c[1]), c[0]))


def op_count_summary(expected: str, actual: str) -> list[str]:
    """`aten::relu_  7 -> 0` lines for every op whose count changed, biggest change first."""
    changed = op_count_changes(expected, actual)
    width = max((len(op) for op, _, _ in changed), default=0)
    return [f"  {op:<{width}}  {b} -> {a}" for op, b, a in changed]


def unified_diff(expected: str, actual: str, label: str) -> list[str]:
    """The lines that changed in substance (harness.golden.diff: lines that differ only by
    renumbered values are counted, not listed), cut after MAX_DIFF_LINES."""
    a, b = expected.count("\n") + 1, actual.count("\n") + 1
    if a * b > MAX_DIFF_WORK:
        return [f"  (diff skipped: {a} vs {b} lines is too large to diff quickly)"]
    return golden_diff(expected, actual, (f"{label} (expected)", "actual"), MAX_DIFF_LINES)


def variant_note(
    compared: Path, target: Path, lane: str, accept_hint: str, reference: str = REFERENCE_TORCH
) -> str | None:
    """What a failure under another torch says about its lane's variant: which golden was used,
    and the command that records the variant (it writes `target`, never the reference)."""
    if lane == reference:
        return None
    if compared.parent.name == f"{TORCH_VARIANT_PREFIX}{lane}":
        return f"Compared with the torch {lane} variant {compared}."
    return (
        f"No golden variant for torch {lane} exists ({target}); the golden recorded with torch "
        f"{reference} was used. If torch {lane} changed this graph and that is expected, "
        f"record the variant: {accept_hint} (under torch {lane} it writes {target}; the "
        f"torch {reference} golden is never rewritten from another torch)."
    )


def mismatch_message(
    golden: GoldenFile, actual: str, what: str, accept_hint: str, notes: tuple[str, ...] = ()
) -> str:
    lines = [f"{what} does not match golden {golden.path}."]
    if golden.torch_version and golden.torch_version != torch_version():
        lines.append(
            f"Note: the golden was recorded with torch {golden.torch_version}; this run uses "
            f"torch {torch_version()}. The change may come from torch itself."
        )
    lines += [f"Note: {note}" for note in notes]
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
