"""The results history in git: run records kept on a ref of a git remote, appended to by every
runner of a fleet at once, read back in part (docs/history.md#the-results-history-in-git).

The history is one ref (default `refs/harness/results` of the project's `origin`: outside
refs/heads/, so a plain clone never downloads it) whose tree is

    store.json                          what this ref is (schema), written by the first push
    runs/<machine>/<run-id>/...         run records, byte for byte as pushed, never changed
    manifests/<machine>/<run-id>.json   the file listing of a record written before records
                                        carried their own manifest.json (the only index)
    pruned/<machine>/<run-id>.json      runs pruned from the history: never pushed again

Records of different runs never touch the same path, so a push that loses a race to another
runner fetches the new tip, applies its records on top again and retries (bounded, with
backoff). Every commit adds or prunes; none is ever rewritten and nothing is force-pushed.
git itself is run by harness.core.gitrepo.

Anyone who can push the ref may be hostile (docs/history.md#what-a-pull-and-a-push-check): a
name read from the history becomes part of a path only after harness.core.trust accepted it,
an entry that is not what the layout allows, or whose name is held twice, is skipped with a
line (and kept as it is by every commit made here, unless git's fsck flags it: then a commit
that writes its folder leaves it out; docs/trust.md#the-historys-trees), a
record is checked entry by entry before any of it is written, and nothing is written outside
runs/ or through a link. The history's folders are read from their raw tree objects, as they
stream, into a compact index (Index): a folder of a million entries stays well under 300 MB.
"""

from __future__ import annotations

import array
import bisect
import collections.abc
import dataclasses
import datetime
import itertools
import json
import os
import random
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

from harness.core import gittree, provenance, records, settings, trust
from harness.core.exits import BadInput, RunnerFailed
from harness.core.gitrepo import NAMES, Entry, Repo, git_tree_oid, project_remote

RUNS, MANIFESTS, PRUNED, MARKER = "runs", "manifests", "pruned", "store.json"
SCHEMA = 1
DEFAULT_LAST = 30  # a bare pull: this machine's newest 30 runs
STALLS = 3  # refusals in a row with the tip unmoved that end a push: not a race
PUSHED_KINDS = ("bench", "nightly")  # pushed without being named (clean runs only)
_BATCH = 64  # run.json blobs fetched at once while selecting by mode or cleanliness


class Refused(BadInput):
    """Records refused by name (not whole, or another record of the same id): exit 3, after
    the others were pushed or pulled."""


def kind_of(meta: dict) -> str:
    """What made a run record: `ab` or `bisect` (a side of either), `imported` (an asv file of
    the old layout), `nightly`, else `bench` (shards and merged shards included)."""
    label = str(meta.get("label") or "")
    if label.startswith("bisect."):
        return "bisect"
    if isinstance(meta.get("ab"), dict):
        return "ab"
    if meta.get("imported_from"):
        return "imported"
    return "nightly" if label == "nightly" else "bench"


# True: run from a tree that differed from its commit; None: not recorded (older runs). The one
# reading of run.json's "dirty" is harness.core.provenance's, which writes it
dirty_of = provenance.of_record


def open_repo(root: Path, remote: str | None = None, ref: str | None = None) -> Repo:
    """The cache repository for the history at `remote` (a remote name of the project, or a
    git URL; default $HARNESS_STORE_REMOTE, else origin) and `ref`."""
    ref = ref or settings.STORE_REF.get()
    if not ref.startswith("refs/"):
        raise BadInput(f"--ref {ref!r}: give a full ref name, e.g. refs/harness/results")
    return Repo(root, project_remote(remote or settings.STORE_REMOTE.get()), ref)


# ---- the history at one commit ----


@dataclasses.dataclass(frozen=True)
class Skip:
    """An entry of the history that is not what the layout says may be there (a name the
    harness does not write, a file where a folder belongs, a link, a gitlink, a name held
    twice): passed over with one line, and kept as it is by every commit the harness makes
    unless git cannot hold it in a valid tree (then left out of the folders that commit
    writes). `count` > 1: that many entries of one folder, said in one line."""

    area: str | None  # RUNS, PRUNED or MANIFESTS (None: the root)
    path: str  # in the history
    machine: str | None  # the machine folder it lies in or is, when that name is one
    name: str | None  # its name below the machine folder (a run id, or not)
    line: str
    count: int = 1


class Index:
    """Keys of one level of the history ("area/machine" or "area/machine/name") with a value
    of `width` bytes each (a kind code, then a 20-byte object id), held as one sorted list and
    one bytes string: a folder of a million run ids costs about 120 MB here, where a dict of
    tuples and strings costs about 400 MB."""

    def __init__(self, width: int):
        self.width = width
        self.keys: list[str] = []
        self.values = bytearray()
        self._sorted = True

    def add(self, key: str, value: bytes) -> None:
        if self.keys and key <= self.keys[-1]:
            self._sorted = False
        self.keys.append(key)
        self.values += value

    def truncate(self, n: int) -> None:
        del self.keys[n:]
        del self.values[n * self.width :]

    def seal(self) -> list[tuple[str, int]]:
        """Sort; every key held more than once is removed (each copy): -> [(key, copies)]."""
        w = self.width
        if not self._sorted:
            order = sorted(range(len(self.keys)), key=self.keys.__getitem__)
            self.keys = [self.keys[i] for i in order]
            self.values = bytearray(b"".join(self.values[i * w : (i + 1) * w] for i in order))
            self._sorted = True
        keys = self.keys
        twice = [i for i in range(1, len(keys)) if keys[i] == keys[i - 1]]
        if not twice:
            return []
        counts: dict[str, int] = {}
        for i in twice:
            counts[keys[i]] = counts.get(keys[i], 1) + 1
        kept = [i for i, k in enumerate(keys) if k not in counts]
        self.keys = [keys[i] for i in kept]
        self.values = bytearray(b"".join(self.values[i * w : (i + 1) * w] for i in kept))
        return sorted(counts.items())

    def get(self, key: str) -> bytes | None:
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            return self.value(i)
        return None

    def under(self, prefix: str) -> range:
        """The positions of the keys starting with `prefix` (which ends in '/')."""
        lo = bisect.bisect_left(self.keys, prefix)
        hi = bisect.bisect_left(self.keys, prefix[:-1] + chr(ord(prefix[-1]) + 1))
        return range(lo, hi)

    def value(self, i: int) -> bytes:
        return bytes(self.values[i * self.width : (i + 1) * self.width])

    def __len__(self) -> int:
        return len(self.keys)


HELD, OTHER = 0, 1  # an entry of the kind the layout wants there; anything else (taken)


class _Names(collections.abc.Sequence):
    """Names cut from an Index's keys at these positions, made when read."""

    def __init__(self, keys: list[str], at, cut: int, end: int):
        self.keys, self.at, self.cut, self.end = keys, at, cut, end

    def __len__(self) -> int:
        return len(self.at)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        key = self.keys[self.at[i]]
        return key[self.cut : len(key) - self.end]


class Held(collections.abc.Mapping):
    """(machine, name) -> object id of the entries of one area that are what the layout wants
    there (a run record's folder; a tombstone or listing file), read from its Index."""

    def __init__(self, area: str, index: Index, suffix: str = ""):
        self.area, self.index, self.suffix = area, index, suffix
        self._len: int | None = None

    def _key(self, key) -> str:
        return f"{self.area}/{key[0]}/{key[1]}{self.suffix}"

    def __getitem__(self, key) -> str:
        ok = isinstance(key, tuple) and len(key) == 2
        value = self.index.get(self._key(key)) if ok else None
        if value is None or value[0] != HELD:
            raise KeyError(key)
        return value[1:].hex()

    def __contains__(self, key) -> bool:
        try:
            self[key]
        except KeyError:
            return False
        return True

    def names(self, machine: str) -> list[str]:
        prefix = f"{self.area}/{machine}/"
        index, cut, end = self.index, len(prefix), len(self.suffix)
        return [
            index.keys[i][cut : len(index.keys[i]) - end]
            for i in index.under(prefix)
            if index.values[i * index.width] == HELD
        ]

    def oldest(self, machine: str) -> _Names:
        """The names of one machine, oldest first, as a sequence that makes each name when it
        is read (a million names are not held at once)."""
        prefix = f"{self.area}/{machine}/"
        index = self.index
        held = (i for i in index.under(prefix) if index.values[i * index.width] == HELD)
        return _Names(index.keys, array.array("q", held), len(prefix), len(self.suffix))

    def starting(self, machine: str, text: str) -> list[str]:
        """The names of one machine that start with `text` (found by bisection)."""
        prefix = f"{self.area}/{machine}/"
        index, cut, end = self.index, len(prefix), len(self.suffix)
        out = []
        i = bisect.bisect_left(index.keys, prefix + text)
        while i < len(index.keys) and index.keys[i].startswith(prefix + text):
            if index.values[i * index.width] == HELD:
                out.append(index.keys[i][cut : len(index.keys[i]) - end])
            i += 1
        return out

    def newest(self, machine: str):
        """The names of one machine, newest (last in order) first, made one at a time."""
        prefix = f"{self.area}/{machine}/"
        index, cut, end = self.index, len(prefix), len(self.suffix)
        for i in reversed(index.under(prefix)):
            if index.values[i * index.width] == HELD:
                yield index.keys[i][cut : len(index.keys[i]) - end]

    def __iter__(self):
        index, end = self.index, len(self.suffix)
        for i in self.index.under(f"{self.area}/"):
            if index.values[i * index.width] == HELD:
                _, machine, name = index.keys[i].split("/", 2)
                yield machine, name[: len(name) - end]

    def machines(self) -> list[str]:
        return sorted({m for m, _ in self})

    def __len__(self) -> int:
        if self._len is None:
            self._len = sum(1 for _ in self)
        return self._len


@dataclasses.dataclass
class Snapshot:
    tip: str | None
    runs: Held  # (machine, run id) -> the record's tree oid
    pruned: Held  # (machine, run id) in it: pruned
    manifests: Held  # (machine, run id) -> blob oid of its kept listing
    skipped: list[Skip] = dataclasses.field(default_factory=list)
    # history paths of the root and its folders where something other than what the harness
    # would write there lies (a file where runs/ belongs, a folder too large): -> what it is;
    # for machine folders and what they hold, also `levels` (Index values other than HELD)
    taken: dict[str, str] = dataclasses.field(default_factory=dict)
    levels: tuple[Index, Index] = dataclasses.field(default_factory=lambda: (Index(21), Index(21)))
    markers: int = 1  # copies of store.json at the root (each the harness's marker)
    marker_copies: list = dataclasses.field(default_factory=list)  # their (mode, oid)
    _more: dict = dataclasses.field(default_factory=dict)  # (area, machine) -> skips not kept

    @classmethod
    def empty(cls, tip: str | None = None) -> Snapshot:
        folders, entries = Index(21), Index(21)
        return cls(
            tip,
            Held(RUNS, entries),
            Held(PRUNED, entries, ".json"),
            Held(MANIFESTS, entries, ".json"),
            levels=(folders, entries),
        )

    @classmethod
    def load(cls, repo: Repo, tip: str | None, marker: bool = True) -> Snapshot:
        """The history's runs, tombstones and kept listings at `tip`, read from the raw trees
        of its top three levels, entry by entry as git stores them. store.json must be the
        harness's (else BadInput: nothing is read or written under it; `marker` False: any
        store.json goes, for repair); any other entry that is not what the layout allows, or
        that is held twice, is a Skip, never an error, so one bad entry blocks nothing else.
        A folder of more than $HARNESS_STORE_MAX_ENTRIES entries is skipped whole (named);
        more than that many runs, tombstones and listings in all is BadInput."""
        snap = cls.empty(tip)
        if tip is None:
            return snap
        with repo.trees() as reader:
            snap._read(repo, reader, repo.tree_of(tip), marker)
        return snap

    def _read(self, repo: Repo, reader, root: str, marker: bool) -> None:
        cap = settings.STORE_MAX_ENTRIES.get()
        layout: dict[str, list] = {MARKER: [], RUNS: [], PRUNED: [], MANIFESTS: []}
        count = 0
        for mode, name, oid in self._entries(reader, root, ""):
            count += 1
            if count > cap:
                raise BadInput(
                    f"{repo.ref} at {repo.remote}: its root holds more than {cap:,} entries "
                    f"(${settings.STORE_MAX_ENTRIES.name}); nothing pulled or pushed"
                )
            text = name.decode(*NAMES)
            if text in layout:
                layout[text].append((mode, oid))
                continue
            why = _fsck_why(mode, name, oid)
            if why:  # outside the layout, and left out by a commit made here: said
                self._skip(None, None, None, text, why)
        if not layout[MARKER]:
            shown = "nothing" if not count else f"{count:,} entries"
            raise BadInput(
                f"{repo.ref} at {repo.remote} is not a results history (no {MARKER} at its "
                f"root; it holds {shown}); name another --ref"
            )
        self.markers = len(layout[MARKER])
        self.marker_copies = layout[MARKER]
        if marker:
            _check_markers(repo, layout[MARKER])
            if self.markers > 1:
                self._skip(
                    None, None, None, MARKER,
                    f"is held {self.markers} times, each the file a push writes (schema "
                    f"{SCHEMA}): read as one; a commit made here writes one in their place",
                )  # fmt: skip
        folders, entries = self.levels
        for area in (RUNS, PRUNED, MANIFESTS):
            copies = layout[area]
            if len(copies) > 1:
                self._twice(area, None, None, area, len(copies))
            elif copies and copies[0][0] != gittree.TREE:
                what = _what_mode(copies[0][0])
                self.taken[area] = what
                self._skip(area, None, None, area, f"is {what}, not a folder")
            elif copies:
                self._folder(reader, area, copies[0][1], folders, cap)
        for key, n in folders.seal():
            area, machine = key.split("/", 1)
            self._twice(area, machine, None, key, n)
        for i, key in enumerate(folders.keys):
            value = folders.value(i)
            if value[0] == HELD:
                self._machine(reader, key, value[1:].hex(), entries, cap)
            if len(entries) > cap:
                raise BadInput(
                    f"{repo.ref} at {repo.remote}: its folders hold more than {cap:,} runs, "
                    f"tombstones and listings in all (${settings.STORE_MAX_ENTRIES.name}; "
                    f"passed in {key}); nothing pulled or pushed"
                )
        for key, n in entries.seal():
            area, machine, name = key.split("/", 2)
            self._twice(area, machine, name, key, n)
        for (area, machine), (n, path) in self._more.items():
            line = f"and {n:,} more entries of {path} in the history skipped"
            self.skipped.append(Skip(area, path, machine, None, line, n))

    def _folder(self, reader, area: str, oid: str, folders: Index, cap: int) -> None:
        """The machine folders of runs/, pruned/ or manifests/ into `folders`."""
        start = len(folders)
        for count, (mode, name, entry) in enumerate(self._entries(reader, oid, area), 1):
            if count > cap:
                folders.truncate(start)
                self._over(area, None, None, area, cap)
                return
            machine = name.decode(*NAMES)
            path = f"{area}/{machine}"
            why = _fsck_why(mode, name, entry) or trust.why_not_machine(machine)
            if why:
                self._skip(area, None, None, path, why)
            elif mode != gittree.TREE:
                folders.add(path, _other(mode))
                self._skip(area, machine, None, path, f"is {_what_mode(mode)}, not a folder")
            else:
                folders.add(path, bytes([HELD]) + bytes.fromhex(entry))

    def _machine(self, reader, key: str, oid: str, entries: Index, cap: int) -> None:
        """The entries of one machine folder into `entries`."""
        area, machine = key.split("/", 1)
        start = len(entries)
        want = "a run record" if area == RUNS else "a file"
        for count, (mode, name, entry) in enumerate(self._entries(reader, oid, key), 1):
            if count > cap:
                entries.truncate(start)
                self._over(area, machine, None, key, cap)
                return
            text = name.decode(*NAMES)
            path = f"{key}/{text}"
            run_id = text.removesuffix(".json") if area != RUNS else text
            bad = not trust.is_run_id(run_id) or (area != RUNS and not text.endswith(".json"))
            fsck = gittree.entry_problem(mode, name, entry)
            if (bad or fsck) and len(self.skipped) >= MAX_KEPT_SKIPS:
                self._count(area, machine)  # its line would not be kept: no line made
            elif bad or fsck:
                why = trust.why_not_run_id(run_id)
                if area != RUNS and not text.endswith(".json"):
                    why = f"{trust.shown(text)} is not <run id>.json"
                self._skip(area, machine, text, path, _fsck_why(mode, name, entry) or why)
            elif (mode == gittree.TREE) if area == RUNS else (mode in _FILE_MODE_INTS):
                entries.add(path, bytes([HELD]) + bytes.fromhex(entry))
            else:
                entries.add(path, _other(mode))
                self._skip(area, machine, text, path, f"is {_what_mode(mode)}, not {want}")

    def _entries(self, reader, oid: str, path: str):
        """The raw entries of one folder of the history; a tree whose bytes stop being entries
        is read up to there, and said."""
        items = reader.entries(oid)
        if items is None:
            raise RunnerFailed(
                f"{path or 'the root'} of the history (tree {oid}) is not in git's copy; try "
                "again (the cache under .store/ is safe to delete)"
            )
        try:
            yield from items
        except gittree.Damaged as exc:
            self._skip(None, None, None, path or MARKER, f"{exc}; what comes before it is read")

    def _twice(self, area, machine, name, path: str, n: int) -> None:
        self._skip(
            area, machine, name, path,
            f"is held {n} times (one copy cannot be told from another): none is read, and a "
            "commit made here leaves them all out",
        )  # fmt: skip

    def _over(self, area, machine, name, path: str, cap: int) -> None:
        self.taken[path] = f"a folder of more than {cap:,} entries"  # nothing written into it
        self._skip(
            area, machine, name, path,
            f"holds more than {cap:,} entries (${settings.STORE_MAX_ENTRIES.name}): not read",
        )  # fmt: skip

    def _count(self, area, machine) -> None:
        n, where = self._more.get((area, machine), (0, ""))
        where = where or (area if machine is None else f"{area}/{machine}") or "its root"
        self._more[(area, machine)] = (n + 1, where)

    def _skip(self, area, machine, name, path: str, why: str) -> None:
        if len(self.skipped) >= MAX_KEPT_SKIPS:  # counted, not kept: a million cost nothing
            self._count(area, machine)
            return
        said = f"{trust.shown(path, 120)} in the history"
        said += f" {why}" if why.startswith(("is ", "holds ")) else f": {why}"
        self.skipped.append(Skip(area, path, machine, name, f"{said}; skipped"))

    def in_the_way(self, *paths: str) -> str:
        """Why something the harness would write at one of these history paths (or below it)
        cannot be written ("" when nothing is in the way)."""
        for path in paths:
            parts = path.split("/")
            for k in range(1, len(parts) + 1):
                why = self.in_the_way_at("/".join(parts[:k]))
                if why:
                    return why
        return ""

    def in_the_way_at(self, here: str) -> str:
        """in_the_way for this one path, not the folders on the way to it."""
        if here in self.taken:
            return f"the history holds {self.taken[here]} at {here}"
        depth = here.count("/")
        value = self.levels[depth - 1].get(here) if depth in (1, 2) else None
        if value is not None and value[0] != HELD:
            what = _what_mode(_CODE_MODES.get(value[1], -1))
            return f"the history holds {what} at {here}"
        return ""

    def machines(self) -> list[str]:
        return self.runs.machines()

    def run_ids(self, machine: str) -> list[str]:
        return self.runs.names(machine)


FILE_MODES = ("100644",)  # what the harness writes into the history; 100755 only by hand
_MODES = {
    "100755": "an executable file",
    "120000": "a symbolic link",
    "160000": "a gitlink (a submodule)",
    "040000": "a folder",
}
MAX_MARKER_BYTES = 64 * 2**10


def _what(e) -> str:
    return _MODES.get(e.mode, "a file" if e.mode in FILE_MODES else f"an entry of mode {e.mode}")


def _what_mode(mode: int) -> str:
    return _what(Entry(gittree.mode_text(mode), gittree.kind_of(mode), "", ""))


_FILE_MODE_INTS = (0o100644,)
_CODE_MODES = dict(enumerate((0o100644, 0o100755, 0o120000, 0o160000, gittree.TREE), 1))
_MODE_CODES = {mode: code for code, mode in _CODE_MODES.items()}
MAX_KEPT_SKIPS = 200  # skipped entries kept one by one; beyond, counted by folder


def _fsck_why(mode: int, name: bytes, oid: str) -> str:
    why = gittree.entry_problem(mode, name, oid)
    return f"{why}; a commit made here leaves it out" if why else ""


def _other(mode: int) -> bytes:
    """The Index value of an entry that is not what the layout wants there."""
    return bytes([OTHER, _MODE_CODES.get(mode, 0)]) + bytes(19)


def _value(value) -> str:
    """A JSON value from elsewhere, fit for a message."""
    return trust.shown(value) if isinstance(value, str) else json.dumps(value)[:40]


def _check_markers(repo: Repo, copies: list[tuple[int, str]]) -> None:
    """store.json must be what a push of this harness writes: else nothing is pulled from the
    history nor pushed on top of it (exit 3). Held more than once, every copy must be: a copy
    of another schema may be a newer harness's, and which copy is the history's cannot be
    told (git keeps a tree's entries in the order they were written; a rewrite that sorted
    them would choose), so then too nothing is read or written."""
    whys = [_marker_problem(repo, mode, oid) for mode, oid in copies]
    where = f"{repo.ref} at {repo.remote}: its {MARKER}"
    if len(copies) == 1 and whys[0]:
        raise BadInput(f"{where}{whys[0][1]}")
    if any(whys):
        said = ", ".join(w[0] if w else f"schema {SCHEMA}" for w in whys)
        raise BadInput(
            f"{where} is held {len(copies)} times ({said}, in the tree's order): which one "
            "is the history's cannot be told, and a copy of another schema may be a newer "
            "harness's; nothing pulled or pushed (if only this harness wrote the history, "
            "`harness store repair --yes --marker` keeps one store.json of schema "
            f"{SCHEMA}; else name another --ref)"
        )


def _marker_problem(repo: Repo, mode: int, oid: str) -> tuple[str, str] | None:
    """Why this store.json is not what a push writes (None when it is): in a few words, and
    as the end of a message."""
    fix = (
        "nothing pulled or pushed; repair the ref (a commit on top with the store.json a "
        "push writes) or name another --ref"
    )
    if mode not in _FILE_MODE_INTS:
        what = _what_mode(mode)
        return what, f" is {what}, not the file a push writes; {fix}"
    size = repo.object_sizes([oid]).get(oid)
    if size is None or size > MAX_MARKER_BYTES:
        what = "cannot be read" if size is None else f"is {size:,} bytes"
        return what, f" {what}, not the file a push writes; {fix}"
    try:
        data = trust.loads(repo.read_blobs([oid]).get(oid, b""), "")
    except BadInput as exc:
        said = str(exc).removeprefix(": ").removesuffix("; refused")
        return said.split(" (", 1)[0], f": {said}; {fix}"
    if not isinstance(data, dict):
        return "not a JSON object", f" is not a JSON object; {fix}"
    if data.get("schema") != SCHEMA:
        schema = f"schema {_value(data.get('schema'))}"
        return schema, (
            f" says {schema}: this harness reads and writes schema {SCHEMA} only; nothing "
            "pulled or pushed (a newer harness may read it; else name another --ref)"
        )
    return None


def record_path(machine: str, run_id: str) -> str:
    return f"{RUNS}/{machine}/{run_id}"


# ---- committing: one commit per push, re-applied on top of whoever pushed first ----


@dataclasses.dataclass
class Change:
    edits: dict  # folder by folder, as Repo.edit_tree takes them
    message: str
    what: list[tuple[str, str]]  # the runs it adds or prunes


def commit_and_push(
    repo: Repo, make, marker: bool = True, say: bool = True
) -> tuple[Snapshot, Change | None, str | None, int]:
    """Fetch the tip, `make(snapshot)` a Change (None: nothing to do), commit it on the tip and
    push; when another runner pushed first, fetch and make it again after a backoff, until
    $HARNESS_STORE_RETRY_S runs out. A rejection that reads like a race but leaves the tip
    where it was (no permission to write the ref, a lock left on the server) is not one: after
    STALLS of those in a row it fails. The commit rewrites only the folders on the paths it
    changes; in those, what git's fsck would flag is left out and named (gitrepo.edit_tree),
    so that every tree it sends is one a server checking what it receives accepts. `marker`
    False: any store.json goes (repair); `say` False: the skipped entries are not said (repair
    lists them itself). Returns (snapshot, change, commit, retries)."""
    deadline = time.monotonic() + settings.STORE_RETRY_S.get()
    retries = stalls = 0
    refused: tuple[str | None, str] | None = None  # (the tip pushed onto, why) of the last try
    said: set[str] = set()
    while True:
        snap = Snapshot.load(repo, repo.fetch_tip(), marker)
        if say:
            say_skipped(snap, said)
        if refused is not None:
            stalls = stalls + 1 if snap.tip == refused[0] else 0
            if stalls >= STALLS:
                raise RunnerFailed(
                    f"{refused[1]}, {stalls + 1} times while the history's tip stayed at "
                    f"{(snap.tip or 'nothing')[:8]}: not another runner's push (no permission "
                    "to write the ref, or a lock or hook on the server)"
                )
        change = make(snap)
        if change is None:
            return snap, None, None, retries
        edits = dict(change.edits)
        if snap.tip is None or (snap.markers > 1 and marker):  # one store.json, the harness's
            edits[MARKER] = ("blob", repo.hash_bytes(_marker()))
        left = gittree.LeftOut()
        tree = repo.edit_tree(repo.tree_of(snap.tip) if snap.tip else None, edits, left)
        if say:
            say_left_out(snap, left, said)
        commit = repo.commit(tree, snap.tip, change.message)
        outcome = repo.push(commit)
        if outcome.ok:
            return snap, change, commit, retries
        if not outcome.race:
            raise RunnerFailed(outcome.reason)
        if time.monotonic() >= deadline:
            raise RunnerFailed(
                f"{outcome.reason}: other runners kept pushing first for "
                f"{settings.STORE_RETRY_S.get():g} s (${settings.STORE_RETRY_S.name})"
            )
        refused = (snap.tip, outcome.reason)
        retries += 1
        # full jitter, so that runners that lost together do not come back together
        pause = random.uniform(0, min(5.0, 0.1 * 2**retries))
        print(
            f"harness store: push refused ({outcome.reason}), another runner may have pushed "
            f"first; fetching and applying again in {pause:.2f} s",
            file=sys.stderr,
        )
        time.sleep(pause)


MAX_SKIP_LINES = 20  # lines naming skipped entries of the history, per command


def say_skipped(snap: Snapshot, said: set[str]) -> None:
    """One line on stderr for each skipped entry of the history not said yet (at most
    MAX_SKIP_LINES in all, then how many more)."""
    new = {}
    for s in snap.skipped:
        if s.line not in said:
            new[s.line] = new.get(s.line, 0) + s.count
    _say(list(new.items()), said, "skipped")


def say_left_out(snap: Snapshot, left: gittree.LeftOut, said: set[str]) -> None:
    """One line for each entry a commit left out that the skipped lines did not name already
    (their lines say what a commit does with them)."""
    named = {s.path for s in snap.skipped}
    lines = [(line, 1) for path, line in left.items if path not in named]
    more = left.count - len(left.items)
    _say(
        lines + ([(f"and {more:,} more entries left out", more)] if more else []), said, "left out"
    )


def _say(lines: list[tuple[str, int]], said: set[str], what: str) -> None:
    room = MAX_SKIP_LINES - len(said)
    for line, _ in lines[: max(room, 0)]:
        print(f"harness store: {line}", file=sys.stderr)
    if len(lines) > room >= 0:
        more = sum(n for _, n in lines[room:])
        print(f"harness store: and {more:,} more entries of the history {what}", file=sys.stderr)
    said.update(line for line, _ in lines)


def _marker() -> bytes:
    return (
        json.dumps(
            {
                "schema": SCHEMA,
                "what": "harness results history: run records, runs/<machine>/<run-id>/, "
                "never changed once pushed; pruned runs in pruned/; see the harness's "
                "docs/history.md",
            },
            indent=2,
        )
        + "\n"
    ).encode()


# ---- push ----


def offered(
    root: Path, names: list[str], machine: str | None
) -> tuple[list[records.RunRecord], dict[str, list[str]]]:
    """The local records a push offers: those named (any kind), else the clean bench and
    nightly runs; and why -> the runs left out because they were not named."""
    runs = records.list_runs(root, machine)
    if names:
        named = {}
        for n in names:
            rec = _named(root, runs, n)
            named[(rec.machine, rec.run_id)] = rec
        return list(named.values()), {}
    chosen, left = [], {}
    for rec in runs:
        kind = kind_of(rec.meta)
        why = f"{kind} runs" if kind not in PUSHED_KINDS else ""
        why = why or ("runs of a dirty tree" if dirty_of(rec.meta) else "")
        if why:
            left.setdefault(why, []).append(f"{rec.machine}/{rec.run_id}")
        else:
            chosen.append(rec)
    return chosen, left


def _named(root: Path, runs: list[records.RunRecord], name: str) -> records.RunRecord:
    path = Path(name)
    if path.is_dir() and (path / records.RUN_JSON).is_file():
        rec = records.load_record(path)
        if rec.path.resolve().parent.parent != records.runs_dir(root).resolve():
            raise BadInput(f"{name}: not a run record under {records.runs_dir(root)}")
        return rec
    found = [r for r in runs if r.run_id.startswith(name)]
    if len(found) != 1:
        what = "no run" if not found else f"{len(found)} runs"
        raise BadInput(
            f"{name!r} names {what} under {records.runs_dir(root)}; give a run id (or a unique "
            "prefix) or a run record's folder"
        )
    return found[0]


class _Outgoing:
    """The local records of one push: their tree oids (to compare with the history's), and,
    once one is to be pushed, its whole-check and blobs (each done once across retries)."""

    def __init__(self, root: Path, repo: Repo, chosen: list[records.RunRecord]):
        self.repo = repo
        # (a run.json from elsewhere may say anything: a machine that is no string is refused)
        self.local = {(_text(r.machine), r.run_id): r for r in chosen}
        self.refused: dict[tuple[str, str], str] = {}
        self.oids: dict[tuple[str, str], str] = {}
        folders: dict[Path, str] = {}  # a machine folder -> why nothing in it may go
        for key, rec in self.local.items():
            why = _not_pushable(root, rec, folders)
            if why:
                self.refused[key] = f"{_local(rec)}: {why}; not pushed"
            else:
                self.oids[key] = git_tree_oid(rec.path)
        self.conflicts: list[str] = []
        self.blocked: list[str] = []
        self.gone: list[str] = []
        self.todo: list[tuple[str, str]] = []
        self._trees: dict[tuple[str, str], str | None] = {}
        self._kept: dict[tuple[str, str], str | None] = {}
        self._listing: dict[tuple[str, str], dict | None] = {}

    def whole(self, key) -> bool:
        if key not in self._listing and key not in self.refused:
            rec = self.local[key]
            own = os.path.lexists(rec.path / records.MANIFEST)
            listing = None if own else records.manifest_of(rec.path, *key)
            problems = records.check_whole(rec.path, rec.machine, rec.run_id, listing)
            if problems:
                self.refused[key] = f"{_local(rec)}: {'; '.join(problems[:3])}"
            else:
                self._listing[key] = listing
        return key not in self.refused

    def sort(self, snap: Snapshot) -> list[tuple[str, str]]:
        """Which records this snapshot lacks (to push), holds already, or pruned."""
        self.conflicts, self.blocked, self.gone, self.todo = [], [], [], []
        for key, rec in self.local.items():
            if key in self.refused:
                continue
            if key in snap.pruned:
                self.gone.append("/".join(key))
            elif key not in snap.runs:
                if not self.whole(key):
                    continue
                paths = [record_path(*key)]
                if self._listing[key] is not None:
                    paths.append(f"{MANIFESTS}/{key[0]}/{key[1]}.json")
                why = snap.in_the_way(*paths)
                if why:
                    self.blocked.append(
                        f"{rec.path}: {why}, not what a push writes; not pushed (what others "
                        "wrote in the history is never written over)"
                    )
                else:
                    self.todo.append(key)
            elif snap.runs[key] != self.oids[key]:
                self.conflicts.append(
                    f"{rec.path}: the history holds run {key[1]} with other content; "
                    "not pushed (run records are never rewritten)"
                )
        return self.todo

    def edits(self, keys) -> dict:
        """The history's edits that add these records: their trees under runs/<machine>/ (and
        a kept listing for a record with no manifest of its own under manifests/<machine>/),
        their files written as blobs in one git process and checked against the records."""
        new = [k for k in keys if k not in self._trees]
        files, names = [], []
        with tempfile.TemporaryDirectory(dir=self.repo.path) as tmp:
            for key in new:
                rec = self.local[key]
                # plain files only (whole() refused links): a link's target never travels
                for p in sorted(rec.path.rglob("*")):
                    if p.is_file() and not p.is_symlink():
                        names.append(f"{key[0]}/{key[1]}/{p.relative_to(rec.path).as_posix()}")
                        files.append(p)
                if self._listing[key] is not None:
                    listing = Path(tmp) / f"{len(files)}.json"
                    data = json.dumps(self._listing[key], indent=2, sort_keys=True) + "\n"
                    listing.write_text(data, encoding="utf-8")
                    names.append(f"{MANIFESTS}/{key[0]}/{key[1]}.json")
                    files.append(listing)
            try:
                oids = dict(zip(names, self.repo.hash_objects(files)))
            except RunnerFailed:  # a file gone, or swapped for a link to nothing, meanwhile
                changed = [k for k in new if git_tree_oid(self.local[k].path) != self.oids[k]]
                if not changed:
                    raise
                for key in changed:
                    why = "its files changed while it was pushed"
                    self.refused[key] = f"{_local(self.local[key])}: {why}; not pushed"
                self.todo = [k for k in self.todo if k not in self.refused]
                oids = None
        if oids is None:
            return self.edits([k for k in keys if k not in self.refused])
        trees = self.repo.record_trees(
            [(n, o) for n, o in oids.items() if not n.startswith(MANIFESTS + "/")]
        )
        for key in new:
            # what is pushed is exactly the record here: a file swapped for a link (or a hard
            # link) while it was read makes another tree, and the record is refused
            tree = trees.get("/".join(key))
            why = "" if tree == self.oids[key] else "its files changed while it was pushed"
            why = why or _hard_linked(self.local[key].path)
            if why:
                self.refused[key] = f"{_local(self.local[key])}: {why}; not pushed"
                continue
            self._trees[key] = tree
            self._kept[key] = oids.get(f"{MANIFESTS}/{key[0]}/{key[1]}.json")
        keys = [k for k in keys if k not in self.refused]
        self.todo = [k for k in self.todo if k not in self.refused]
        edits: dict = {}
        for m, i in keys:
            edits.setdefault(RUNS, {}).setdefault(m, {})[i] = ("tree", self._trees[(m, i)])
            if self._kept[(m, i)]:
                edits.setdefault(MANIFESTS, {}).setdefault(m, {})[f"{i}.json"] = (
                    "blob",
                    self._kept[(m, i)],
                )
        return edits


def _not_pushable(root: Path, rec: records.RunRecord, folders: dict[Path, str]) -> str:
    """Why a local record may not go to the history before any of it is read ("" when it
    may): its machine and run id must be names the harness writes, and neither it nor its
    machine folder a link (whole() checks what it holds). `folders`: machine folders seen."""
    why = trust.why_not_machine(rec.machine) or trust.why_not_run_id(rec.run_id)
    if why:
        return why
    if rec.path.parent not in folders:  # once per machine folder: a push offers every run
        folders[rec.path.parent] = _link_on_the_way(records.runs_dir(root), rec.path.parent)
    if folders[rec.path.parent]:
        return folders[rec.path.parent].replace("it is", f"{rec.path.parent} is")
    if rec.path.is_symlink():
        return "it is a symbolic link, never followed"
    return _hard_linked(rec.path)


def _hard_linked(folder: Path) -> str:
    """Why a local record may not go to the history for a file with another name elsewhere
    (a hard link: its content is whatever that other file holds, a secret perhaps), "" when
    none has. Checked before its files are hashed and again after."""
    for top, _, names in os.walk(folder):  # links are not followed (nor pushed: whole())
        for name in names:
            path = Path(top) / name
            try:
                info = path.lstat()
            except OSError:
                continue  # gone: whole() names it
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                rel = trust.shown(path.relative_to(folder).as_posix(), 120)
                return (
                    f"its file {rel} has {info.st_nlink} hard links (another name for the same "
                    "file lies elsewhere; its content is never pushed): give it a copy of its "
                    f"own (cp -p F F.new && mv F.new F) if it is the record's, else remove it"
                )
    return ""


def _link_on_the_way(runs: Path, path) -> str:
    """Why `path` (under runs/) may not be read or written: a symbolic link at it or on the
    way to it from the results root (runs/ itself included), or a place outside runs/ (""
    when neither)."""
    runs = Path(runs)
    here = runs / path
    try:
        trust.inside(runs.parent, here)
        if os.path.relpath(os.path.abspath(here), os.path.abspath(runs)).startswith(".."):
            raise BadInput(f"{path}: lies outside {runs}; refused (nothing written there)")
    except BadInput as exc:
        for p in (here, *here.parents):
            if p.is_symlink():
                what = "it is" if p == here else f"{p} is"
                try:
                    target = trust.shown(os.readlink(p), 120)
                except OSError:
                    target = "?"
                return f"{what} a symbolic link, never followed (it leads to {target})"
            if p == runs.parent:
                break
        return str(exc)
    return ""


def _text(value) -> str:
    return value if isinstance(value, str) else f"<{type(value).__name__}>"


def _local(rec: records.RunRecord) -> str:
    """A local record's folder, fit for a one-line message whatever its name."""
    ok = trust.is_run_id(rec.path.name) and trust.is_machine(rec.path.parent.name)
    return str(rec.path) if ok else trust.shown(str(rec.path), 200)


def push(
    root: Path, repo: Repo, names: list[str], machine: str | None, dry_run: bool, out=None
) -> int:
    """`harness store push`: exit 0 pushed (or nothing to push), 3 some record refused (the rest
    pushed), 5 git failed (nothing pushed)."""
    out = out or sys.stdout
    chosen, left = offered(root, names, machine)
    if not chosen:
        print(f"harness store: nothing to push: no run records to offer under {root}", file=out)
        for why, runs in sorted(left.items()):
            print(f"  not pushed unless named: {len(runs)} {why} ({_few(runs)})", file=out)
        return 0
    going = _Outgoing(root, repo, chosen)

    def make(snap: Snapshot) -> Change | None:
        todo = going.sort(snap)
        if not todo or dry_run:
            return None
        edits = going.edits(todo)
        todo = going.todo  # less a record that changed while it was read
        if not todo:
            return None
        lines = [f"harness store: add {len(todo)} run(s)", ""] + ["/".join(k) for k in todo]
        return Change(edits, "\n".join(lines) + "\n", todo)

    try:
        with repo.locked():
            _, change, commit, retries = commit_and_push(repo, make)
    except BadInput as exc:
        if "nothing pulled or pushed" in str(exc):
            raise
        raise BadInput(f"{exc}; nothing was pushed") from None
    except RunnerFailed as exc:
        held = sorted("/".join(k) for k in going.todo or going.local)
        raise RunnerFailed(
            f"git could not push to {repo.remote} {repo.ref}: {exc}; nothing was pushed "
            f"({len(held)} run(s) kept here only{': ' + _few(held) if held else ''})"
        ) from None
    todo = ["/".join(k) for k in going.todo]
    if dry_run:
        print(f"harness store: would push {len(todo)} run(s): {_few(todo) or 'none'}", file=out)
    elif change is None:
        there = len(going.local) - len(going.conflicts) - len(going.gone) - len(going.refused)
        there -= len(going.blocked)
        print(
            f"harness store: nothing to push to {repo.remote} {repo.ref} "
            f"({there} run(s) already there)",
            file=out,
        )
    else:
        again = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
        print(
            f"harness store: pushed {len(todo)} run(s) to {repo.remote} {repo.ref} "
            f"(commit {commit[:12]}{again}): {_few(todo)}",
            file=out,
        )
    if going.gone:
        print(f"  pruned from the history, not pushed again: {_few(going.gone)}", file=out)
    for why, runs in sorted(left.items()):
        print(f"  not pushed unless named: {len(runs)} {why} ({_few(runs)})", file=out)
    refused = list(going.refused.values()) + going.conflicts + going.blocked
    if refused:
        raise Refused("refused: " + " | ".join(refused))
    return 0


def _few(items: list[str], n: int = 6) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


# ---- pull ----


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which runs of the history a pull brings: `runs` (run ids or unique prefixes) or the
    newest `last` (None: all) of each machine in `machines`, started at or after `since`,
    labelled `label`, of `mode`; `clean`: only runs not marked dirty."""

    machines: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    last: int | None = DEFAULT_LAST
    since: str | None = None  # a run-id prefix: 20261130T000000Z
    label: str | None = None
    mode: str | None = None
    clean: bool = False

    def describe(self) -> str:
        """The selection in the pull command's words."""
        parts = [f"--machine {m}" for m in self.machines] or ["every machine"]
        parts += list(self.runs)
        if self.since:
            parts.append(f"--since {self.since}")
        for flag, value in (("--label", self.label), ("--mode", self.mode)):
            if value:
                parts.append(f"{flag} {value}")
        if self.clean:
            parts.append("--clean")
        return " ".join(parts)


def since_key(text: str) -> str:
    """`--since DATE` (2026-11-30, 2026-11-30T12:00, ...) as the run-id prefix it compares to."""
    try:
        when = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"--since {text!r}: give an ISO date, e.g. 2026-11-30") from None
    if when.tzinfo is not None:
        when = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return f"{when:%Y%m%dT%H%M%SZ}"


def select(repo: Repo, snap: Snapshot, sel: Selection) -> list[tuple[str, str]]:
    machines = list(sel.machines) or snap.machines()
    if sel.runs:
        out = []
        for name in sel.runs:
            found = [(m, i) for m in machines for i in snap.runs.starting(m, name)]
            if len(found) != 1:
                what = "no run" if not found else f"{len(found)} runs"
                raise BadInput(
                    f"{name!r} names {what} in the results history ({repo.remote} {repo.ref}); "
                    "give a run id or a unique prefix"
                )
            out += found
        return sorted(set(out), key=lambda k: (k[1], k[0]))
    out = []
    for m in machines:
        ids = (  # newest first, made one by one: `last` of a million costs `last`
            i
            for i in snap.runs.newest(m)
            if (sel.since is None or i >= sel.since)
            and (sel.label is None or i.endswith(f"-{sel.label}"))
        )
        if sel.mode or sel.clean:
            ids = iter(_by_meta(repo, snap, m, ids, sel))
        out += [(m, i) for i in itertools.islice(ids, sel.last)]
    return sorted(out, key=lambda k: (k[1], k[0]))


def _by_meta(repo: Repo, snap: Snapshot, machine: str, ids, sel: Selection):
    """The runs among `ids` (newest first) whose run.json matches mode and cleanliness, read
    in batches until `last` are found: run.json blobs only, never whole records."""
    kept = []
    ids = iter(ids)
    while batch := list(itertools.islice(ids, _BATCH)):
        paths = [f"{record_path(machine, i)}/{records.RUN_JSON}" for i in batch]
        repo.fetch_objects([snap.runs[(machine, i)] for i in batch], "tree:0")
        entries = {
            e.path: e.oid
            for e in repo.ls_tree(snap.tip, *paths)
            if e.kind == "blob" and e.mode in FILE_MODES  # a gitlink's commit is nowhere
        }
        oids = sorted(set(entries.values()))
        repo.fetch_objects(oids, "blob:none")
        sizes = repo.object_sizes(oids)
        # what is matched of each run.json, read a group at a time (never all 64 at once)
        facts: dict[str, dict] = {}
        readable = [o for o in oids if _readable(sizes.get(o))]
        for oid, data in _read_grouped(repo, readable, sizes):
            try:
                meta = trust.loads(data or b"{}", f"run.json {oid[:12]}")
            except BadInput:
                meta = {}  # not the run asked for: a record the pull would refuse anyway
            meta = meta if isinstance(meta, dict) else {}
            facts[oid] = {"mode": meta.get("mode"), "dirty": meta.get("dirty")}
        for run_id, path in zip(batch, paths):
            meta = facts.get(entries.get(path, ""), {})
            if sel.mode and meta.get("mode") != sel.mode:
                continue
            if sel.clean and dirty_of(meta):
                continue
            kept.append(run_id)
        if sel.last is not None and len(kept) >= sel.last:
            break
    return kept


@dataclasses.dataclass
class PullReport:
    pulled: list[tuple[str, str]]
    here: list[tuple[str, str]]
    refused: list[str]
    dropped: int = 0  # files over the size limit removed from the store's cache


def pull(root: Path, repo: Repo, sel: Selection, dry_run: bool = False, out=None) -> PullReport:
    """`harness store pull`: bring the selected records into runs/, each checked whole before it
    is renamed into place; a local record of the same id with other content is refused."""
    out = out or sys.stdout
    root = Path(root)
    report = PullReport([], [], [])
    try:
        with repo.locked():
            try:
                _pull(root, repo, sel, dry_run, out, report)
            finally:
                _drop_big_blobs(repo, report)
    except RunnerFailed as exc:
        pulled = ["/".join(k) for k in report.pulled]
        raise RunnerFailed(
            f"git could not fetch from {repo.remote} {repo.ref}: {exc}; pulled "
            f"{len(pulled)} run(s){': ' + _few(pulled) if pulled else ''}"
        ) from None
    finally:
        if report.pulled:
            records.rebuild_view(root)
    return report


def _pull(root: Path, repo: Repo, sel: Selection, dry_run: bool, out, report: PullReport):
    runs = records.runs_dir(root)
    why = _link_on_the_way(runs, ".")
    if why:  # before anything is fetched: a pull writes only into the results root's own runs/
        raise BadInput(
            f"{why.replace('it is', f'{runs} is')} (a pull never writes through a link below "
            "the results root); make runs/ a folder, or give --results-dir the folder the link "
            "leads to"
        )
    tip = repo.fetch_tip()
    if not repo.partial:
        print(
            f"harness store: {repo.remote} does not allow partial fetch "
            "(uploadpack.allowFilter): fetched every record of the history",
            file=out,
        )
    if tip is None:
        if sel.runs:
            raise BadInput(f"the results history {repo.ref} at {repo.remote} is empty")
        print(f"harness store: {repo.ref} at {repo.remote} is empty; nothing to pull", file=out)
        return
    snap = Snapshot.load(repo, tip)
    say_skipped(snap, set())
    asked = sum(s.count for s in snap.skipped if _asked(s, sel))
    if asked:  # said above, one line each (or one line for many)
        report.refused.append(
            f"{asked:,} entr{'y' if asked == 1 else 'ies'} of the history in the selection "
            "skipped (not records the harness can read)"
        )
    chosen = select(repo, snap, sel)
    if not chosen:  # said, so that a reader never compares against nothing unawares
        held = ", ".join(f"{m} ({len(snap.run_ids(m))} runs)" for m in snap.machines())
        print(
            f"harness store: no run in {repo.ref} at {repo.remote} matches the selection "
            f"({sel.describe()}); it holds {held or 'no run'}",
            file=out,
        )
        return
    todo = []
    for key in chosen:
        name = "/".join(key)
        here = runs / key[0] / key[1]
        why = _link_on_the_way(runs, name)
        if why:
            report.refused.append(f"{name} not pulled: {why.replace('it is', f'{here} is')}")
            continue
        if not os.path.lexists(here):
            todo.append(key)
        elif here.is_dir() and git_tree_oid(here) == snap.runs[key]:
            report.here.append(key)
        else:
            report.refused.append(
                f"{here}: a record of that id is here with other content; not overwritten"
            )
    if dry_run:
        print(
            f"harness store: would pull {len(todo)} run(s) ({len(report.here)} already here): "
            f"{_few(['/'.join(k) for k in todo]) or 'none'}",
            file=out,
        )
        return
    todo.reverse()  # newest first: where a cap on bytes written stops a pull, the newest are in
    budget = _Budget()
    try:
        for start in range(0, len(todo), _BATCH // 2):
            _pull_batch(root, repo, snap, todo[start : start + _BATCH // 2], report, budget)
    finally:
        report.pulled.sort(key=lambda k: (k[1], k[0]))
    report.refused += budget.refusals()
    print(
        f"harness store: pulled {len(report.pulled)} run(s) from {repo.remote} {repo.ref} into "
        f"{records.runs_dir(root)} ({len(report.here)} already here)",
        file=out,
    )


class _Budget:
    """What one pull may write under runs/ ($HARNESS_STORE_PULL_MAX_BYTES), and of that, how
    much may be content it already wrote for another record
    ($HARNESS_STORE_PULL_MAX_REPEATED_BYTES): many run ids over one tree, or over one shared
    file, cost a runner at most that much disk. Sizes are known before a byte is written."""

    def __init__(self):
        self.most = settings.STORE_PULL_MAX_BYTES.get()
        self.most_repeated = settings.STORE_PULL_MAX_REPEATED_BYTES.get()
        self.written = self.repeated = 0
        self.blobs: set[str] = set()  # written by this pull
        self.over: list[str] = []  # runs not pulled for the caps
        self.which: set[str] = set()

    def allows(self, key, entries: list[Entry], sizes: dict[str, int]) -> bool:
        """Whether this record fits what is left; if so, counted as written."""
        total = repeated = 0
        seen = set(self.blobs)
        for e in entries:
            size = sizes.get(e.oid, 0)
            total += size
            if e.oid in seen:
                repeated += size
            seen.add(e.oid)
        if self.written + total > self.most:
            self.which.add(settings.STORE_PULL_MAX_BYTES.name)
        elif self.repeated + repeated > self.most_repeated:
            self.which.add(settings.STORE_PULL_MAX_REPEATED_BYTES.name)
        else:
            self.written += total
            self.repeated += repeated
            self.blobs = seen
            return True
        self.over.append("/".join(key))
        return False

    def refusals(self) -> list[str]:
        if not self.over:
            return []
        caps = []
        if settings.STORE_PULL_MAX_BYTES.name in self.which:
            caps.append(f"${settings.STORE_PULL_MAX_BYTES.name} = {self.most:,} bytes written")
        if settings.STORE_PULL_MAX_REPEATED_BYTES.name in self.which:
            caps.append(
                f"${settings.STORE_PULL_MAX_REPEATED_BYTES.name} = {self.most_repeated:,} "
                "bytes of content it already wrote for other records"
            )
        return [
            f"{len(self.over)} run(s) not pulled: past what one pull may write "
            f"({'; '.join(caps)}; this pull wrote {self.written:,} bytes): "
            f"{_few(sorted(self.over))}; pull fewer at a time, or raise the cap"
        ]


def _drop_big_blobs(repo: Repo, report: PullReport) -> None:
    """No file over the size limit stays in the store's cache: a server that filters blobs
    never sent one (fetch_objects), one that does not sent it whole; it is removed here."""
    try:
        big = repo.larger_than(trust.max_file_bytes())
        if big:
            repo.drop(set(big))
            report.dropped += len(big)
            print(
                f"harness store: removed {len(big)} file(s) over the {trust.max_file_bytes():,} "
                f"bytes allowed from the store's cache ({repo.path})",
                file=sys.stderr,
            )
    except RunnerFailed as exc:  # the cache is a cache: said, never a failed pull
        print(f"harness store: could not clean the store's cache ({exc})", file=sys.stderr)


def _asked(skip: Skip, sel: Selection) -> bool:
    """Whether a pull of `sel` would have brought this skipped entry, were it a record."""
    if skip.area != RUNS:
        return False
    if skip.path == RUNS:
        return True
    if sel.machines and skip.machine not in sel.machines:
        return False
    if sel.runs:
        return skip.name is not None and any(skip.name.startswith(r) for r in sel.runs)
    return True


def _readable(size: int | None) -> bool:
    """Whether a blob of this size (None: unknown) is read at all."""
    return size is not None and size <= trust.max_file_bytes()


def _pull_batch(
    root: Path, repo: Repo, snap: Snapshot, keys, report: PullReport, budget: _Budget
) -> None:
    """Fetch these records (one fetch: every folder and every file within the size limit;
    a server that filters blobs never sends a larger one), check every entry of each record
    (names, modes, sizes) before a byte of it is read, and place each record that passes."""
    trees = [snap.runs[k] for k in keys]
    kept = {k: snap.manifests[k] for k in keys if k in snap.manifests}
    limit = trust.max_file_bytes()
    gone = repo.missing(trees)
    if gone:  # what a record lacks here: a tree read alone before (for its run.json) again
        partial = sorted({t for t in trees if t in gone or repo.missing([t])})
        repo.fetch_objects(partial, f"blob:limit={limit + 1}", refetch=True)
    # a kept listing is asked for by name, and so comes whatever its size
    repo.fetch_objects(sorted(repo.missing(sorted(set(kept.values())))))
    still = repo.missing(trees)
    files: dict[tuple[str, str], list[Entry]] = {k: [] for k in keys}
    for e in repo.ls_tree(snap.tip, *[record_path(*k) + "/" for k in keys], recursive=True):
        if e.path.count("/") < 3:
            continue  # (never: the paths asked for are folders, and only what is in them comes)
        _, m, i, rel = e.path.split("/", 3)
        files.setdefault((m, i), []).append(dataclasses.replace(e, path=rel))
    checked = {}
    for key in keys:
        entries = files[key]
        why = _entries_problem(entries)
        if not why and any(e.oid in still for e in entries):
            why = _not_fetched([e for e in entries if e.oid in still], repo, limit)
        if why:
            report.refused.append(_said(f"{'/'.join(key)} in the history", why, "not pulled"))
            continue
        checked[key] = entries
    wanted = {e.oid for entries in checked.values() for e in entries}
    sizes = repo.object_sizes(sorted(wanted | {kept[k] for k in checked if k in kept}))
    for key, entries in checked.items():
        why = _sizes_problem(entries, sizes, repo.partial)
        if why:
            report.refused.append(_said(f"{'/'.join(key)} in the history", why, "not pulled"))
            continue
        listing = None
        if key in kept:  # a listing that cannot be read is none: check_whole says so
            listing = {}
            if _readable(sizes.get(kept[key])):
                data = repo.read_blobs([kept[key]]).get(kept[key], b"")
                try:
                    listing = trust.loads(data, f"{MANIFESTS}/{'/'.join(key)}.json")
                except BadInput:
                    listing = {}
                listing = listing if isinstance(listing, dict) else {}
        if budget.allows(key, entries, sizes):
            _place(root, repo, snap, key, entries, sizes, listing, report)


def _not_fetched(entries: list[Entry], repo: Repo, limit: int) -> str:
    """Why a record some of whose files (names checked: _entries_problem) are not here after
    its fetch is not pulled: a server that filters blobs leaves out those over the limit."""
    e = entries[0]
    if repo.partial:
        return (
            f"holds {e.path} of more than {limit:,} bytes, over the allowed "
            f"{limit:,} (${settings.MAX_FILE_BYTES.name}; not fetched: the server filters "
            "blobs by size)"
        )
    return f"{e.path} cannot be fetched"


def _said(subject: str, why: str, then: str) -> str:
    return f"{subject}{' ' if why.startswith('holds ') else ': '}{why}; {then}"


def _entries_problem(entries: list[Entry]) -> str:
    """Why a record of the history with these entries (paths relative to the record) may not
    be written here ("" when it may): git's own checks (no '..', no '.git', plain files only)
    and harness.core.trust's rules for a record's names, before anything is read."""
    if not entries:
        return "holds no files"
    if len(entries) > trust.MAX_RECORD_FILES:
        return f"holds {len(entries):,} files, over the allowed {trust.MAX_RECORD_FILES:,}"
    seen = set()
    for e in entries:
        why = trust.why_not_record_path(e.path)
        if why:
            return why
        if e.kind != "blob" or e.mode not in FILE_MODES:
            return f"holds {_what(e)} {trust.shown(e.path)}"
        if e.path in seen:
            return f"holds two entries named {trust.shown(e.path)}"
        seen.add(e.path)
    for e in entries:
        parts = e.path.split("/")
        for k in range(1, len(parts)):
            if "/".join(parts[:k]) in seen:
                return f"holds {trust.shown('/'.join(parts[:k]))} as a file and as a folder"
    return ""


def _sizes_problem(entries: list[Entry], sizes: dict[str, int], filtered: bool = True) -> str:
    total = 0
    limit = trust.max_file_bytes()
    for e in entries:
        size = sizes.get(e.oid)
        if size is None:
            return f"{e.path} cannot be read from git's copy"
        if size > limit:
            how = (
                "fetched: the server does not filter blobs; removed from the store's cache"
                if not filtered
                else "removed from the store's cache"
            )
            return (
                f"holds {e.path} of {size:,} bytes, over the allowed {limit:,} "
                f"(${settings.MAX_FILE_BYTES.name}; {how})"
            )
        total += size
    if total > trust.MAX_RECORD_BYTES:
        return f"holds {total:,} bytes, over the allowed {trust.MAX_RECORD_BYTES:,}"
    return ""


_GROUP_BYTES = 16 * 2**20  # files read from git in one process, at most (one larger: streamed)


def _place(
    root: Path, repo: Repo, snap: Snapshot, key, entries, sizes, listing, report: PullReport
) -> None:
    """Write one record into a staging folder, check it whole, rename it into place. Every
    path written lies inside runs/ with no link on the way (harness.core.trust.inside), and
    no file is opened through a link. Small files are read from git a group at a time and a
    large one streamed by git into its file: a record never sits in memory whole."""
    machine, run_id = key
    name = f"{machine}/{run_id}"
    runs = records.runs_dir(root)
    final = runs / machine / run_id
    staging = final.parent / f"{records.STAGING}{run_id}-{os.getpid()}"
    try:
        for place in (final, staging):
            why = _link_on_the_way(runs, place)
            if why:
                raise BadInput(why.replace("it is", f"{place} is"))
        final.parent.mkdir(parents=True, exist_ok=True)
        if staging.is_dir():  # left by an earlier process of this pid, a pull or a run
            shutil.rmtree(staging)
        staging.mkdir()
    except BadInput as exc:
        report.refused.append(f"{name} not pulled: {exc}")
        return
    except OSError as exc:
        report.refused.append(
            f"{name} not pulled: {final.parent} cannot hold it ({exc.strerror or exc})"
        )
        return
    try:
        try:
            _write_files(runs, staging, repo, entries, sizes)
        except (OSError, BadInput, KeyError, RunnerFailed) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            report.refused.append(
                f"{name} in the history cannot be written here ({why}); not pulled"
            )
            return
        problems = records.check_whole(staging, machine, run_id, listing)
        if not problems and git_tree_oid(staging) != snap.runs[key]:
            problems = ["its files differ from the history's tree"]
        if problems:
            report.refused.append(
                f"{machine}/{run_id} in the history is not a whole record: "
                f"{'; '.join(problems[:3])}; not pulled"
            )
            return
        try:
            os.rename(staging, final)
        except OSError:
            if not final.is_symlink() and final.is_dir() and git_tree_oid(final) == snap.runs[key]:
                report.here.append(key)  # another pull placed it meanwhile
            else:
                report.refused.append(
                    f"{final}: a record of that id appeared here with other content; "
                    "not overwritten"
                )
            return
        report.pulled.append(key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_files(runs: Path, staging: Path, repo: Repo, entries, sizes) -> None:
    """The record's files into the (new) staging folder: every folder made here, checked to
    lie inside runs/ with no link on the way, and no file opened through a link."""
    made = {staging}
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)

    def opened(e):
        *folders, leaf = e.path.split("/")
        here = staging
        for part in folders:
            here = here / part
            if here not in made:
                here.mkdir()
                trust.inside(runs, here)
                made.add(here)
        return os.fdopen(os.open(here / leaf, flags, 0o644), "wb")

    large = [e for e in entries if sizes[e.oid] > _GROUP_BYTES // 4]
    small: dict[str, list] = {}
    for e in entries:
        if e not in large:
            small.setdefault(e.oid, []).append(e)
    for oid, data in _read_grouped(repo, sorted(small), sizes):
        if data is None:
            raise KeyError(f"{oid} is not in git's copy")
        for e in small[oid]:
            with opened(e) as handle:
                handle.write(data)
    for e in large:
        with opened(e) as handle:
            repo.blob_into(e.oid, handle)


def _read_grouped(repo: Repo, oids: list[str], sizes: dict[str, int]):
    """(oid, bytes) of these blobs (here, sizes known), read from git in groups of at most
    _GROUP_BYTES: what a pull holds of them at once stays bounded."""
    group: list[str] = []
    held = 0
    for oid in [*oids, None]:
        if group and (oid is None or held + sizes[oid] > _GROUP_BYTES):
            blobs = repo.read_blobs(group)
            for got in group:
                yield got, blobs.pop(got, None)  # None: not here after all
            group, held = [], 0
        if oid is not None:
            group.append(oid)
            held += sizes[oid]


# ---- prune ----


def prune(
    root: Path,
    repo: Repo,
    keep: int | None,
    older_than_days: float | None,
    machine: str | None,
    yes: bool,
    out=None,
) -> list[tuple[str, str]]:
    """Prune runs from the history (`harness prune --store`): a new commit that removes their
    folders and leaves a tombstone for each (one blob, the same for every run of one commit:
    only a tombstone's name is read), so that no runner pushes them again. Dry run unless
    `yes`. One commit prunes at most MAX_PRUNED runs, the oldest first; the rest is said (run
    it again). Returns the runs pruned (or that would be)."""
    out = out or sys.stdout
    records.prune_selection([], keep, older_than_days)  # says what is missing before fetching
    rule = " ".join(
        ([f"--keep {keep}"] if keep is not None else [])
        + ([f"--older-than {older_than_days:g}"] if older_than_days is not None else [])
    )
    planned: dict[str, list[str]] = {}  # machine -> run ids, oldest first
    blocked: list[str] = []
    left = [0]  # selected beyond MAX_PRUNED: for the next prune

    def make(snap: Snapshot) -> Change | None:
        planned.clear()
        blocked.clear()
        beyond = 0  # selected, past MAX_PRUNED of its machine: left for the next commit
        for m in [machine] if machine else snap.machines():
            folder = snap.in_the_way(f"{PRUNED}/{m}")  # once a machine, then each tombstone
            ids = snap.runs.oldest(m)  # made one by one as the rule reads them
            for i in records.pruned_of(ids, keep, older_than_days):
                why = folder or snap.in_the_way_at(f"{PRUNED}/{m}/{i}.json")
                if why:  # its tombstone would be written over someone else's entry
                    blocked.append(f"{m}/{i}: {why}, where its tombstone goes; not pruned")
                elif len(planned.get(m, ())) >= MAX_PRUNED:
                    beyond += 1
                else:
                    planned.setdefault(m, []).append(i)
        left[0] = _cap_plan(planned, MAX_PRUNED) + beyond
        if not planned or not yes:
            return None
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        stone = {"pruned": now, "rule": rule, "by": "harness prune --store"}
        oid = repo.hash_bytes((json.dumps(stone) + "\n").encode())
        edits: dict = {RUNS: {}, PRUNED: {}, MANIFESTS: {}}
        for m, ids in planned.items():
            edits[RUNS][m] = dict.fromkeys(ids)
            edits[PRUNED][m] = {f"{i}.json": ("blob", oid) for i in ids}
            kept = [f"{i}.json" for i in ids if (m, i) in snap.manifests]
            if kept:
                edits[MANIFESTS][m] = dict.fromkeys(kept)
        n = sum(map(len, planned.values()))
        names = [f"{m}/{i}" for m, ids in planned.items() for i in ids[:MESSAGE_RUNS]]
        more = f"\nand {n - len(names):,} more" if n > len(names) else ""
        message = f"harness store: prune {n} run(s) ({rule})\n\n" + "\n".join(names) + more
        return Change({k: v for k, v in edits.items() if v}, message + "\n", [])

    with repo.locked():
        _, change, commit, _ = commit_and_push(repo, make)
    verb = "pruned" if change is not None else "would prune"
    n = 0
    for m, ids in planned.items():
        for i in ids:
            print(f"{verb} {m}/{i} from the results history", file=out)
        n += len(ids)
    if not n:
        print(f"nothing to prune in the results history ({repo.remote} {repo.ref})", file=out)
    elif change is None:
        more = f" ({n:,} listed; one commit prunes at most {MAX_PRUNED:,})" if left[0] else ""
        print(
            f"dry run: {n + left[0]:,} run(s) would be pruned from the results history "
            f"({repo.remote} {repo.ref}){more}; add --yes to prune them (a new commit; the "
            "runs stay in git's history, and no runner pushes them again)",
            file=out,
        )
    else:
        print(f"results history: commit {commit[:12]} prunes {n:,} run(s)", file=out)
    if left[0] and change is not None:
        print(
            f"  {left[0]:,} more run(s) to prune: one commit prunes at most {MAX_PRUNED:,}; "
            "run the same command again",
            file=out,
        )
    if blocked:
        raise Refused("refused: " + " | ".join(blocked))
    return [(m, i) for m, ids in planned.items() for i in ids]


MAX_PRUNED = 100_000  # runs one prune commit removes (memory and time stay bounded)
MESSAGE_RUNS = 1_000  # runs a commit message names one by one, per machine


def _cap_plan(planned: dict[str, list[str]], most: int) -> int:
    """Keep the `most` oldest runs of the plan (by run id, across machines); -> how many
    were left for another commit."""
    total = sum(map(len, planned.values()))
    if total <= most:
        return 0
    cut = sorted(i for ids in planned.values() for i in ids)[most - 1]
    for m in list(planned):
        planned[m] = [i for i in planned[m] if i <= cut][:most]
        if not planned[m]:
            del planned[m]
    kept = sum(map(len, planned.values()))
    while kept > most:  # ids equal across machines: cut the last machine's tail
        m = max(planned, key=lambda k: planned[k][-1])
        planned[m].pop()
        kept -= 1
        if not planned[m]:
            del planned[m]
    return total - kept
