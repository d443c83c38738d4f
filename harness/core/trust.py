"""What the harness accepts from files other machines wrote (docs/trust.md).

Anyone who can push the results history, upload a CI artifact or write into a shared results
folder may be hostile. Every name read from such a file (a machine name, a run id, a file or
folder name inside a run record) is checked here before it becomes part of a path, and every
destination built from one is checked to lie inside the folder the command owns, with no
symbolic link on the way. JSON read from elsewhere is parsed with a size and a nesting limit.
A name that fails is refused by name (BadInput, exit 3); callers refuse that record and go on
with the others.

The formats, the ones the harness itself writes:

- machine name: ASCII letters, digits, `_`, `.`, `-`; starts with a letter or digit; no `..`;
  at most MAX_NAME characters (`vm-cpu`, `ci-h100-NVIDIA-H100-80GB-HBM3`).
- run id: `YYYYmmddTHHMMSSZ-` (the start time), then letters, digits, `_`, `.`, `-`; no `..`;
  at most MAX_NAME characters (`20261130T174512Z-1a2b3c4d-5e6f70-nightly`).
- a file or folder name inside a run record: ASCII letters, digits, `_`, `.`, `-`, `+`, `=`,
  `@`, `,`; starts with a letter, digit or `_` (no hidden files: no `.git`, no `..`); at most
  MAX_NAME characters; at most MAX_DEPTH folders deep.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from pathlib import Path, PurePosixPath

from harness.core import settings
from harness.core.exits import BadInput

MAX_NAME = 200  # characters of one machine name, run id or file name
MAX_DEPTH = 8  # folders a record's file may lie below the record's own folder
# one file of a record (an asv.log of a full run is ~1 MB): the default of $HARNESS_MAX_FILE_BYTES
MAX_FILE_BYTES = settings.MAX_FILE_BYTES.default
MAX_RECORD_BYTES = 256 * 2**20  # all files of one record
MAX_RECORD_FILES = 10_000  # files of one record (a full run with row facts holds ~600)
MAX_JSON_NESTING = 64  # nested arrays and objects in a JSON file read from elsewhere


def max_file_bytes() -> int:
    """The largest file of a record, or JSON file, read from elsewhere ($HARNESS_MAX_FILE_BYTES)."""
    return settings.MAX_FILE_BYTES.get()


def max_json_tokens() -> int:
    """The most structural characters one JSON file from elsewhere may hold
    ($HARNESS_MAX_JSON_TOKENS): json.loads costs up to ~100 bytes of memory for each."""
    return settings.MAX_JSON_TOKENS.get()


_MACHINE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*", re.ASCII)
_RUN_ID = re.compile(r"[0-9]{8}T[0-9]{6}Z-[A-Za-z0-9_.-]+", re.ASCII)
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=@,-]*", re.ASCII)

MACHINE_RULE = (
    "ASCII letters, digits, '_', '.' and '-', starting with a letter or digit, no '..', "
    f"at most {MAX_NAME} characters"
)
RUN_ID_RULE = (
    "YYYYmmddTHHMMSSZ- then ASCII letters, digits, '_', '.' and '-', no '..', "
    f"at most {MAX_NAME} characters"
)
PART_RULE = (
    "ASCII letters, digits and '_.+=@,-', not starting with '.' or '-', "
    f"at most {MAX_NAME} characters"
)


def _ok(rx: re.Pattern, name) -> bool:
    return (
        isinstance(name, str)
        and 0 < len(name) <= MAX_NAME
        and rx.fullmatch(name) is not None
        and ".." not in name
    )


def is_machine(name) -> bool:
    return _ok(_MACHINE, name)


def is_run_id(name) -> bool:
    return _ok(_RUN_ID, name)


def is_part(name) -> bool:
    """A file or folder name inside a run record."""
    return _ok(_PART, name)


def shown(name, limit: int = 60) -> str:
    """A name from elsewhere, safe to put in a message: repr (control characters escaped),
    cut to `limit` characters."""
    text = repr(name) if isinstance(name, str) else f"<{type(name).__name__}>"
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def why_not_machine(name) -> str:
    """Why `name` is not a machine name ("" when it is one)."""
    return "" if is_machine(name) else f"machine name {shown(name)} is not {MACHINE_RULE}"


def why_not_run_id(name) -> str:
    return "" if is_run_id(name) else f"run id {shown(name)} is not {RUN_ID_RULE}"


def why_not_record_path(rel) -> str:
    """Why `rel` (a '/'-separated path relative to a record's folder) may not name a file of a
    record ("" when it may)."""
    if not isinstance(rel, str) or not rel:
        return f"entry {shown(rel)} is not a file name"
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH + 1:
        return f"entry {shown(rel)} lies more than {MAX_DEPTH} folders deep"
    for part in parts:
        if part in ("", ".", ".."):
            return f"holds an entry named {shown(part or '')}" + (
                f" ({shown(rel)})" if part != rel else ""
            )
        if part.lower() == ".git":
            return f"holds an entry named '.git' ({shown(rel)})"
        if not is_part(part):
            return f"entry {shown(rel)}: {shown(part)} is not {PART_RULE}"
    return ""


def check_machine(name, where: str) -> str:
    why = why_not_machine(name)
    if why:
        raise BadInput(f"{where}: {why}; refused")
    return name


def check_run_id(name, where: str) -> str:
    why = why_not_run_id(name)
    if why:
        raise BadInput(f"{where}: {why}; refused")
    return name


def inside(folder: os.PathLike | str, dest: os.PathLike | str) -> Path:
    """`dest` (absolute, or relative to `folder`) if it lies inside `folder` with no symbolic
    link between the two (the folder itself may be reached through links); else BadInput. The
    destination itself need not exist yet."""
    base = Path(os.path.realpath(folder))
    path = Path(dest) if Path(dest).is_absolute() else Path(folder) / dest
    # lexically first: `..` anywhere is refused, whatever it would resolve to
    try:
        rel = PurePosixPath(os.path.relpath(os.path.abspath(path), os.path.abspath(folder)))
    except ValueError:  # another drive (Windows)
        rel = PurePosixPath("..")
    if rel.parts[:1] == ("..",) or rel.is_absolute():
        raise BadInput(f"{dest}: lies outside {folder}; refused (nothing written there)")
    here = base
    for part in rel.parts:
        if part == ".":
            continue
        here = here / part
        if here.is_symlink():
            try:
                target = f" (it leads to {shown(os.readlink(here), 120)})"
            except OSError:
                target = ""
            raise BadInput(
                f"{here}: a symbolic link inside {folder}{target}; refused (nothing is written "
                "or deleted through a link below the folder a command owns)"
            )
    return here


def links_in(folder: os.PathLike | str) -> list[Path]:
    """Every symbolic link at or below `folder` (the folder itself included), not followed."""
    folder = Path(folder)
    if folder.is_symlink():
        return [folder]
    out = []
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(top) / name
            if p.is_symlink():
                out.append(p)
    return sorted(out)


# a JSON string (escapes included; one left open runs to the end), and what is not a bracket,
# for a text as bytes and as str (each scanned as it came: never both held at once)
_JSON_STRING = {
    bytes: re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL),
    str: re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL),
}
_NOT_BRACKET = {bytes: re.compile(rb"[^\[\]{}]+"), str: re.compile(r"[^\[\]{}]+")}
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
# what json.loads may take of memory for one file, at most: twice its text as Python holds it
# (1, 2 or 4 bytes a character: the text, and the strings parsed out of it) and 80 bytes a
# token (the most measured: 76 for short strings, 69 for {"a":1}, 37 for []). With the default
# limits an ASCII file stays under it (2 x 64 MiB + 80 x 2,000,000 = 288 MiB); a large file
# holding a character beyond U+FFFF (4 bytes a character) does not
MAX_JSON_PARSE_BYTES = 384 * 2**20
_TOKEN_BYTES = 80


def _nesting_at_most(structure, limit: int) -> bool:
    """Whether brackets nest at most `limit` deep in `structure` (a JSON text with its strings
    taken out). Scanned by regular expressions and itertools, not character by character in
    Python: a pull checks every JSON file of every record."""
    brackets = _NOT_BRACKET[type(structure)].sub(type(structure)(), structure)
    if isinstance(brackets, str):
        brackets = brackets.encode("ascii")  # brackets only
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) <= limit


def _tokens(structure) -> int:
    """Brackets, braces, commas and colons: every value json.loads makes is one of them or
    follows one, so their count bounds what parsing allocates (strings cost their length)."""
    marks = ("[", "{", ",", ":") if isinstance(structure, str) else (b"[", b"{", b",", b":")
    return sum(map(structure.count, marks))


def loads(
    data: bytes | str,
    where: str,
    what: str = "JSON",
    *,
    nesting: int = MAX_JSON_NESTING,
    tokens: int | None = None,
):
    """Parse JSON read from elsewhere: BadInput naming `where` when it is not UTF-8 JSON, nests
    deeper than `nesting`, holds more than `tokens` (default $HARNESS_MAX_JSON_TOKENS)
    brackets, braces, commas and colons outside its strings, or would take more than
    MAX_JSON_PARSE_BYTES to parse: all counted before json.loads (which takes a file of 60 MB
    of `[],` to 1.8 GB). Give a str where the caller can drop its bytes first. NaN and
    Infinity parse, as Python writes them: asv's files hold them; readers check their
    numbers."""
    limit = max_json_tokens() if tokens is None else tokens
    # the structure without its strings (at most the text's size; none when it holds none)
    structure = _JSON_STRING[type(data)].sub(type(data)(), data)
    count = _tokens(structure)
    if count > limit:
        raise BadInput(
            f"{where}: {what} holds {count:,} JSON tokens (brackets, commas, colons), over the "
            f"{limit:,} allowed (${settings.MAX_JSON_TOKENS.name}); refused"
        )
    # a cheap bound first: the scan is only needed when there are that many brackets at all
    opening = ("[", "{") if isinstance(structure, str) else (b"[", b"{")
    if sum(map(structure.count, opening)) > nesting and not _nesting_at_most(structure, nesting):
        raise BadInput(f"{where}: {what} nests deeper than {nesting} levels; refused")
    del structure
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"{where}: {what} is not UTF-8 ({exc.reason}); refused") from None
    cost = 2 * sys.getsizeof(data) + _TOKEN_BYTES * count
    if cost > MAX_JSON_PARSE_BYTES:
        raise BadInput(
            f"{where}: {what} would take about {cost // 2**20:,} MiB to parse (its "
            f"{len(data):,} characters, {sys.getsizeof(data) // max(len(data), 1)} bytes each "
            f"as Python holds them, and {count:,} tokens), over the "
            f"{MAX_JSON_PARSE_BYTES // 2**20} MiB allowed; refused"
        )
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{where}: {what} does not parse ({str(exc)[:120]}); refused") from None


def load(path: os.PathLike | str, what: str = "JSON file", *, max_bytes: int | None = None):
    """Read and parse a JSON file from elsewhere (size, encoding, tokens and nesting checked;
    `max_bytes` default $HARNESS_MAX_FILE_BYTES). A missing file is FileNotFoundError (callers
    decide whether that is fine); anything else wrong is BadInput naming the file."""
    path = Path(path)
    max_bytes = max_file_bytes() if max_bytes is None else max_bytes
    try:
        if path.is_symlink():
            raise BadInput(f"{path}: {what} is a symbolic link; refused (links are not followed)")
        size = path.stat().st_size
        if size > max_bytes:
            raise BadInput(f"{path}: {what} is {size:,} bytes, over the {max_bytes:,} allowed")
        text = read_text(path, str(path), what)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise BadInput(f"{path}: {what} is a folder, not a file") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    return loads(text, str(path), what)


def read_text(path: os.PathLike | str, where: str, what: str = "JSON") -> str:
    """A file's UTF-8 text, its bytes dropped as soon as it is decoded (a large file is held
    once, not twice, while it is parsed); BadInput naming `where` when it is not UTF-8."""
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{where}: {what} is not UTF-8 ({exc.reason}); refused") from None


def load_object(path: os.PathLike | str, what: str = "JSON file") -> dict:
    """`load`, and it must be a JSON object."""
    data = load(path, what)
    if not isinstance(data, dict):
        raise BadInput(f"{path}: {what} is not a JSON object; refused")
    return data
