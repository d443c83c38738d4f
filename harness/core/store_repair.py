"""`harness store repair`: every entry of the results history that the harness refuses, at every
level (its root, `runs/`, `pruned/`, `manifests/`, the machine folders, the run records and the
files and folders inside them), listed with the commit and author that added it, and with
`yes` removed in one commit of its own, made and retried as a push is (store.commit_and_push)
(docs/trust.md#repairing-the-history).

What it reads: the tip's top three levels (as every store command), every record's folders
without their files (`--filter=blob:none`), then the history's older commits and trees, to find
who added each entry. A record the server cannot send (its git dies on a tree it holds) is found
by halving the fetch and named with who added it; no push lands while the server's own git
cannot read its tip, so that one is fixed on the server (exit 5, saying how). A record refused
for its files' content (not whole, a file too large) is not found here: a pull names it, and
it blocks no one.
"""

from __future__ import annotations

import dataclasses
import sys

from harness.core import gitrepo, gittree, settings, store, trust
from harness.core.exits import BadInput, RunnerFailed
from harness.core.gitrepo import DROP, NAMES, Repo, ServerCannotSend

RUNS, PRUNED, MANIFESTS, MARKER = store.RUNS, store.PRUNED, store.MANIFESTS, store.MARKER
AREAS = (RUNS, PRUNED, MANIFESTS)
SHOWN = 200  # findings listed one by one; beyond, counted by folder
TWICE = -1  # the mode of a finding that is a name held more than once


@dataclasses.dataclass
class Finding:
    """An entry the harness refuses: where (raw names), why, and who added it. `keep`: named,
    but not removed by this command (why is said)."""

    parts: tuple[bytes, ...]
    why: str
    mode: int = 0  # TWICE: every copy of a name; 0: a folder itself (a damaged tree)
    oid: str = ""
    keep: bool = False
    added: str = ""
    server: bool = False  # the server's own git cannot read it: no push lands until fixed there

    @property
    def path(self) -> str:
        return "/".join(p.decode(*NAMES) for p in self.parts)

    def line(self) -> str:
        shown = trust.shown(self.path, 160) if self.parts else "the history's root"
        return f"{shown}: {self.why}" + (f" (added by {self.added})" if self.added else "")


@dataclasses.dataclass
class Scan:
    tip: str
    findings: list[Finding] = dataclasses.field(default_factory=list)
    more: dict[tuple[bytes, ...], int] = dataclasses.field(default_factory=dict)
    folders: set[tuple[bytes, ...]] = dataclasses.field(default_factory=set)  # to write anew
    records: set[tuple[bytes, bytes]] = dataclasses.field(default_factory=set)  # (m, id) out

    def add(self, finding: Finding) -> None:
        """Named one by one (the first SHOWN), else counted by folder; the folders on the way
        to it are written anew by a repair (a damaged folder: that folder too)."""
        parts = finding.parts
        if not finding.keep:
            on_the_way = parts if finding.mode == 0 else parts[:-1]
            for k in range(len(on_the_way) + 1):
                self.folders.add(on_the_way[:k])
        if len(self.findings) < SHOWN or finding.keep:
            self.findings.append(finding)
        else:
            self.more[parts[:-1]] = self.more.get(parts[:-1], 0) + 1

    @property
    def removed(self) -> int:
        return sum(not f.keep for f in self.findings) + sum(self.more.values())


# ---- what the harness refuses, level by level (the rules of store.Snapshot and pull) ----


def _root_rule(mode: int, name: bytes, oid: str) -> str:
    text = name.decode(*NAMES)
    if text in AREAS and mode != gittree.TREE:
        return f"is {store._what_mode(mode)}, where the {text}/ folder belongs"
    if text == MARKER and mode not in store._FILE_MODE_INTS:
        return f"is {store._what_mode(mode)}, not the file a push writes"
    return ""  # outside the layout: ignored by the harness, kept


def _area_rule(mode: int, name: bytes, oid: str) -> str:
    machine = name.decode(*NAMES)
    if not trust.is_machine(machine):
        return trust.why_not_machine(machine)
    return "" if mode == gittree.TREE else f"is {store._what_mode(mode)}, not a folder"


def _machine_rule(area: str, records: frozenset = frozenset()):
    """The rule of one machine folder of `area`; `records`: the names of run records refused
    for what they hold (found below)."""

    def rule(mode: int, name: bytes, oid: str) -> str:
        text = name.decode(*NAMES)
        if area == RUNS:
            if not trust.is_run_id(text):
                return trust.why_not_run_id(text)
            if mode != gittree.TREE:
                return f"is {store._what_mode(mode)}, not a run record"
            return "a run record the harness refuses (named above)" if name in records else ""
        if not text.endswith(".json") or not trust.is_run_id(text[:-5]):
            return f"{trust.shown(text)} is not <run id>.json"
        return "" if mode in store._FILE_MODE_INTS else f"is {store._what_mode(mode)}, not a file"

    return rule


def _record_problem(reader, oid: str) -> str:
    """Why a pull refuses this record for its entries alone ("" when it does not): names,
    modes, names held twice, depth, count; read from its raw trees, at every depth."""
    files = 0
    stack = [(oid, b"", 0)]
    while stack:
        tree, where, depth = stack.pop()
        items = reader.entries(tree)
        if items is None:
            return f"holds a folder {gittree.shown_path(where or b'.')} git could not fetch"
        seen: set[bytes] = set()
        try:
            for mode, name, entry in items:
                shown = gittree.shown_path(where + name)
                if name in seen:
                    return f"holds two entries named {shown}"
                seen.add(name)
                if not trust.is_part(name.decode(*NAMES)):
                    return f"holds an entry {shown}, not a name a record may hold"
                if mode == gittree.TREE:
                    if depth >= trust.MAX_DEPTH:
                        return f"holds {shown}, more than {trust.MAX_DEPTH} folders deep"
                    stack.append((entry, where + name + b"/", depth + 1))
                elif mode not in store._FILE_MODE_INTS:
                    return f"holds {store._what_mode(mode)} {shown}"
                else:
                    files += 1
                    if files > trust.MAX_RECORD_FILES:
                        return f"holds more than {trust.MAX_RECORD_FILES:,} files"
        except gittree.Damaged as exc:
            return f"holds a folder {gittree.shown_path(where or b'.')} that is no tree ({exc})"
    return "" if files else "holds no files"


class _Folders:
    """The folders of one folder that are read in turn: names and object ids side by side
    (a machine folder of a million records costs about 80 MB here)."""

    def __init__(self):
        self.names: list[bytes] = []
        self.oids = bytearray()

    def add(self, name: bytes, oid: str) -> None:
        self.names.append(name)
        self.oids += bytes.fromhex(oid)

    def __iter__(self):
        for i, name in enumerate(self.names):
            yield name, self.oids[20 * i : 20 * i + 20].hex()


def _folder(reader, found: Scan, oid: str, parts: tuple[bytes, ...], rule) -> _Folders:
    """The findings of one folder (what git's fsck flags, what `rule` refuses, names held
    twice), read as it streams; and its folders that pass, to read in turn."""
    cap = settings.STORE_MAX_ENTRIES.get()
    below = _Folders()
    seen = gittree.Seen()
    items = reader.entries(oid)
    if items is None:
        found.add(Finding(parts, "is not in git's copy (not fetched); not repaired", keep=True))
        return below
    try:
        for count, (mode, name, entry) in enumerate(items, 1):
            if count > cap:
                found.add(
                    Finding(
                        parts,
                        f"holds more than {cap:,} entries (${settings.STORE_MAX_ENTRIES.name}); "
                        "not read, not repaired (raise the cap to repair it)",
                        keep=True,
                    )
                )
                return _Folders()
            seen.add(name)
            why = gittree.entry_problem(mode, name, entry) or rule(mode, name, entry)
            if why:
                found.add(Finding((*parts, name), why, mode, entry))
            elif mode == gittree.TREE:
                below.add(name, entry)
    except gittree.Damaged as exc:
        found.add(Finding(parts, f"{exc}; what comes after it is left out"))
    twice = seen.again
    if not twice:
        return below
    copies: dict[bytes, int] = {}
    named: set[bytes] = set()  # names a copy of which is named above already
    try:
        for mode, name, entry in reader.entries(oid) or ():
            if hash(name) in twice:
                copies[name] = copies.get(name, 0) + 1
                if gittree.entry_problem(mode, name, entry) or rule(mode, name, entry):
                    named.add(name)
    except gittree.Damaged:
        pass
    held = {n for n, k in copies.items() if k > 1}
    for name in sorted(held - named):
        if parts or name != MARKER.encode():  # store.json: see _markers
            why = f"is held {copies[name]} times (one copy cannot be told from another)"
            found.add(Finding((*parts, name), why, TWICE))
    kept = _Folders()
    for name, entry in below:
        if name not in held:
            kept.add(name, entry)
    return kept


def scan(repo: Repo, tip: str) -> Scan:
    """Every entry of the history at `tip` that the harness refuses (and the folders a
    repair writes anew)."""
    found = Scan(tip)
    records: list[tuple[bytes, _Folders]] = []
    with repo.trees() as reader:
        for area, oid in _folder(reader, found, repo.tree_of(tip), (), _root_rule):
            text = area.decode(*NAMES)
            if text not in AREAS:
                continue
            for machine, moid in _folder(reader, found, oid, (area,), _area_rule):
                held = _folder(reader, found, moid, (area, machine), _machine_rule(text))
                if text == RUNS:
                    records.append((machine, held))
    dead = _fetch_records(repo, [oid for _, held in records for _, oid in held])
    problems: dict[str, str] = {}  # a record's tree -> why it is refused (read once)
    with repo.trees() as reader:
        for machine, held in records:
            for name, oid in held:
                if oid in dead:
                    why = (
                        "cannot be fetched: the server's git dies sending it (it holds a tree "
                        "git cannot read, such as an entry with an empty name)"
                    )
                    finding = Finding((RUNS.encode(), machine, name), why, gittree.TREE, oid)
                    finding.keep = finding.server = True
                    found.add(finding)
                    continue
                else:
                    if oid not in problems:
                        problems[oid] = _record_problem(reader, oid)
                    why = problems[oid]
                if why:
                    found.records.add((machine, name))
                    found.add(Finding((RUNS.encode(), machine, name), why, gittree.TREE, oid))
    return found


def _fetch_records(repo: Repo, oids: list[str]) -> set[str]:
    """Every record's folders, without files: one fetch, halved where the server cannot send
    a record until each such record is known. -> the records it cannot send."""
    dead: set[str] = set()
    todo = sorted(set(oids))

    def fetch(part: list[str]) -> None:
        try:
            repo.fetch_objects(part, "blob:none")
        except ServerCannotSend:
            if len(part) == 1:
                dead.add(part[0])
                return
            fetch(part[: len(part) // 2])
            fetch(part[len(part) // 2 :])

    for start in range(0, len(todo), 50_000):  # a command line's worth at a time
        if todo[start : start + 50_000]:
            fetch(todo[start : start + 50_000])
    return dead


# ---- who added each entry ----


def who_added(repo: Repo, found: Scan, out) -> None:
    """Fill in `added` for the findings listed: the oldest commit, going back from the tip,
    from which on the entry has been there as it is now (a name held twice: held twice)."""
    wanted = [f for f in found.findings if f.parts and (f.server or not f.keep)]
    if not wanted:
        return
    got = repo.history(found.tip)
    if not got:
        print(
            "harness store: the history's older commits could not be fetched: who added each "
            "entry is not said",
            file=out,
        )
        return
    history, repo = got
    need = [{f.parts[k] for f in wanted if len(f.parts) > k} for k in range(4)]
    cache: dict[tuple[str, int], dict[bytes, list[tuple[int, str]]]] = {}
    last: dict[int, object] = {}
    pending = set(range(len(wanted)))
    with repo.trees() as reader:

        def lookup(tree: str, parts) -> list[tuple[int, str]]:
            for depth, name in enumerate(parts):
                if (tree, depth) not in cache:
                    entries: dict[bytes, list] = {}
                    try:
                        for mode, n, oid in reader.entries(tree) or ():
                            if n in need[depth]:
                                entries.setdefault(n, []).append((mode, oid))
                    except gittree.Damaged:
                        pass
                    cache[(tree, depth)] = entries
                copies = cache[(tree, depth)].get(name, [])
                if depth == len(parts) - 1:
                    return copies
                if len(copies) != 1 or copies[0][0] != gittree.TREE:
                    return []
                tree = copies[0][1]
            return []

        for commit in history:
            for i in list(pending):
                f = wanted[i]
                copies = lookup(commit.tree, f.parts)
                if f.mode == TWICE:
                    there = len(copies) > 1
                elif not f.oid:
                    there = bool(copies)
                else:
                    there = (f.mode, f.oid) in copies
                if there:
                    last[i] = commit
                else:
                    pending.discard(i)
            if not pending:
                break
            if len(cache) > 10_000:
                cache.clear()
    for i, commit in last.items():
        wanted[i].added = commit.said()


# ---- the command ----


def repair(repo: Repo, yes: bool, marker: bool, out=None) -> int:
    """`harness store repair`: list every entry the harness refuses and who added it; with
    `yes`, remove them in one commit (retried as a push is). Exit 0: nothing to repair, or
    listed (dry run), or removed; 3: something named that this command does not remove."""
    out = out or sys.stdout
    where = f"{repo.remote} {repo.ref}"
    with repo.locked():
        tip = repo.fetch_tip()
        if tip is None:
            print(
                f"harness store: {repo.ref} at {repo.remote} is empty; nothing to repair", file=out
            )
            return 0
        fix_marker = _markers(repo, _marker_copies(repo, tip), marker)
        found = scan(repo, tip)
        who_added(repo, found, out)
        for f in found.findings:
            print(f"  {f.line()}{'; not removed' if f.keep else ''}", file=out)
        for folder, n in sorted(found.more.items()):
            shown = trust.shown("/".join(p.decode(*NAMES) for p in folder), 120)
            print(f"  and {n:,} more entries of {shown}", file=out)
        if fix_marker:
            print(f"  {MARKER}: {fix_marker}", file=out)
        n = found.removed + (1 if fix_marker else 0)
        server = [f for f in found.findings if f.server]
        if server:  # no push lands while the server cannot read its own tip
            raise RunnerFailed(
                f"not repaired: {' | '.join(f.line() for f in server[:5])}; "
                + gitrepo.server_fix(repo.ref)
            )
        if not n:
            print(f"harness store: nothing to repair in the results history ({where})", file=out)
        elif not yes:
            print(
                f"dry run: {n:,} entr{'y' if n == 1 else 'ies'} of the results history ({where}) "
                "that the harness refuses would be removed; add --yes to remove them (a new "
                "commit: they stay in git's history)",
                file=out,
            )
        else:
            commit, removed = _commit(repo, found, bool(fix_marker))
            if commit:
                print(
                    f"results history: commit {commit[:12]} removes {removed:,} entr"
                    f"{'y' if removed == 1 else 'ies'} the harness refuses",
                    file=out,
                )
            else:  # another runner's commit left them out meanwhile
                print(f"harness store: nothing left to repair ({where})", file=out)
    kept = [f for f in found.findings if f.keep]
    if kept:
        more = f" and {len(kept) - 5} more" if len(kept) > 5 else ""
        raise BadInput("not repaired: " + " | ".join(f.line() for f in kept[:5]) + more)
    return 0


def _marker_copies(repo: Repo, tip: str) -> list[tuple[int, str]]:
    """The (mode, oid) of each store.json at the root; BadInput when there is none."""
    copies = []
    with repo.trees() as reader:
        try:
            for mode, name, oid in reader.entries(repo.tree_of(tip)) or ():
                if name == MARKER.encode():
                    copies.append((mode, oid))
        except gittree.Damaged:
            pass
    if not copies:
        raise BadInput(
            f"{repo.ref} at {repo.remote} is not a results history (no {MARKER} at its root); "
            "name another --ref"
        )
    return copies


def _markers(repo: Repo, copies: list[tuple[int, str]], marker: bool) -> str:
    """Why store.json is to be written anew ("" when it is not). BadInput where the history
    is not one this harness may repair: its one store.json not the harness's, or copies that
    disagree (unless `marker`, and one of them is the harness's)."""
    try:
        store._check_markers(repo, copies)
    except BadInput:
        if len(copies) == 1 or not marker:
            raise
        if all(store._marker_problem(repo, *copy) for copy in copies):
            raise BadInput(
                f"{repo.ref} at {repo.remote}: no copy of its {MARKER} is the harness's "
                f"(schema {store.SCHEMA}); not repaired"
            ) from None
        return (
            f"held {len(copies)} times, of different schemas: --marker writes one of schema "
            f"{store.SCHEMA} in their place"
        )
    if len(copies) > 1:
        return f"held {len(copies)} times, each of schema {store.SCHEMA}: written once"
    return ""


def _commit(repo: Repo, first: Scan, marker: bool) -> tuple[str, int]:
    removed = [0]

    def make(snap: store.Snapshot):
        found = first if snap.tip == first.tip else scan(repo, snap.tip)
        removed[0] = found.removed + (1 if marker else 0)
        if not removed[0]:
            return None
        edits = _edits(found)
        if marker:
            edits[MARKER] = ("blob", repo.hash_bytes(store._marker()))
        lines = [trust.shown(f.path, 160) for f in found.findings if not f.keep]
        message = f"harness store: repair: remove {removed[0]} entries the harness refuses\n\n"
        return store.Change(edits, message + "\n".join(lines) + "\n", [])

    _, change, commit, _ = store.commit_and_push(repo, make, marker=False, say=False)
    return commit or "", removed[0] if change else 0


def _edits(found: Scan) -> dict:
    """The folders to write anew, each with its level's rule: edit_tree leaves out what git's
    fsck flags and names held twice, the rule what else the harness refuses there."""
    edits: dict = {DROP: _root_rule}
    for folder in sorted(found.folders, key=len):
        if not folder or folder[0].decode(*NAMES) not in AREAS or len(folder) > 2:
            continue
        names = [p.decode(*NAMES) for p in folder]
        here = edits.setdefault(names[0], {DROP: _area_rule})
        if len(folder) == 2:
            out = frozenset(n for m, n in found.records if m == folder[1])
            here[names[1]] = {DROP: _machine_rule(names[0], out)}
    return edits
