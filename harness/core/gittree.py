"""git's tree objects as git stores them, for the results history (harness.core.store): read
entry by entry from the raw object (`git cat-file --batch`: every entry comes back as it is,
duplicates, names holding '/' and empty names included, which `git ls-tree` hides, re-sorts or
dies on), git's own rules for an entry (what `git fsck` flags), and new trees written only from
entries that pass them, so that every tree the harness makes is one a server with
`receive.fsckObjects` accepts (docs/trust.md#the-historys-trees).

A folder is read as it streams: a tree of a million entries is never held whole in memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator

from harness.core import trust

# the modes git writes (fsck's badFilemode: any other; 100664 only in old, non-strict histories)
TREE, COMMIT = 0o40000, 0o160000
MODES = {0o100644: "100644", 0o100755: "100755", 0o120000: "120000", TREE: "040000"}
MODES[COMMIT] = "160000"
KINDS = {TREE: "tree", COMMIT: "commit"}  # else blob
_MODE_OF = {b"%o" % m: m for m in MODES}
NULL_OID = "0" * 40
MAX_NAME_BYTES = 4096  # fsck's largePathname (git 2.43 and later)
# code points HFS+ ignores in a name (git's is_hfs_dotgit): '.g\u200cit' is '.git' on a Mac
_HFS_IGNORED = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def kind_of(mode: int) -> str:
    return KINDS.get(mode, "blob")


def mode_text(mode: int) -> str:
    """A mode as `git ls-tree` prints it (040000 for a folder)."""
    return MODES.get(mode, f"{mode:06o}" if mode >= 0 else "?")


def _hfs_is(name: bytes, word: str) -> bool:
    """Whether HFS+ reads `name` as `word` (ASCII, lower case, starting with '.')."""
    text = name.decode("utf-8", "replace").translate(_HFS_IGNORED)
    return text.isascii() and text.lower() == word


def _only_dots_and_spaces(name: bytes, i: int, seps: bytes = b"") -> bool:
    for c in name[i:]:
        if c == 0x3A or c in seps:  # ':' (an NTFS stream), or the end of a path part
            return True
        if c not in b" .":
            return False
    return True


def _ntfs_is(name: bytes, word: bytes, short: bytes) -> bool:
    """Whether NTFS reads `name` as `.word` (git's is_ntfs_dot_generic): trailing dots and
    spaces dropped, a stream after ':', or an 8.3 short name (`gitmod~1`, `gi7eba~3`)."""
    if name[:1] == b"." and name[1 : 1 + len(word)].lower() == word:
        return _only_dots_and_spaces(name, 1 + len(word))
    if name[:6].lower() == word[:6] and name[6:7] == b"~" and name[7:8] in (b"1", b"2", b"3", b"4"):
        return _only_dots_and_spaces(name, 8)
    i, tilde = 0, False
    while i < 8:
        if i >= len(name):
            return False
        c = name[i]
        if tilde:
            if not 0x30 <= c <= 0x39:
                return False
        elif c == 0x7E:
            i += 1
            if i >= len(name) or not 0x31 <= name[i] <= 0x39:
                return False
            tilde = True
        elif i >= 6 or c & 0x80 or bytes([c]).lower() != short[i : i + 1]:
            return False
        i += 1
    return _only_dots_and_spaces(name, 8)


def _ntfs_dotgit(name: bytes) -> bool:
    low = name[:5].lower()
    if low[:4] == b".git":
        return _only_dots_and_spaces(name, 4, b"\\/")
    if low == b"git~1":
        return _only_dots_and_spaces(name, 5, b"\\/")
    return False


def _reads_as_git_file(name: bytes) -> str:
    """Which of git's own names (.git, .gitmodules, .gitattributes) a file system reads `name`
    as ("" for none): fsck's hasDotgit, and the names whose content fsck parses."""
    if name.isascii() and name[:1] != b"." and b"~" not in name[:8] and b"\\" not in name:
        return ""  # none of them (the common case, decided without the checks below)
    parts = [name] + name.split(b"\\")[1:]
    for part in parts:
        if _hfs_is(part, ".git") or _ntfs_dotgit(part):
            return ".git"
        if _hfs_is(part, ".gitmodules") or _ntfs_is(part, b"gitmodules", b"gi7eba"):
            return ".gitmodules"
        if _hfs_is(part, ".gitattributes") or _ntfs_is(part, b"gitattributes", b"gi7d29"):
            return ".gitattributes"
    return ""


def entry_problem(mode: int, name: bytes, oid: str) -> str:
    """Why git cannot hold this entry in a valid tree, or `git fsck --strict` (what a server
    with receive.fsckObjects runs on every tree it receives) flags it ("" when neither).
    `mode` is -1 where the tree's mode field is not an octal number."""
    if not name:
        return "an empty name (git's pack-objects cannot send it; fsck: emptyName)"
    if b"/" in name:
        return "a name holding '/' (fsck: fullPathname)"
    if name in (b".", b".."):
        return f"a name {name.decode()!r} (fsck: {'hasDot' if name == b'.' else 'hasDotdot'})"
    if len(name) > MAX_NAME_BYTES:
        return f"a name of {len(name):,} bytes (fsck: largePathname, over {MAX_NAME_BYTES:,})"
    special = _reads_as_git_file(name)
    if special == ".git":
        return "a name a file system reads as '.git' (fsck: hasDotgit)"
    if special:
        return f"a name a file system reads as {special!r}, whose content git's fsck parses"
    if mode not in MODES:
        what = f"mode {mode:o}" if mode >= 0 else "a mode that is no number"
        return f"{what}, which git does not write (fsck: badFilemode)"
    if oid == NULL_OID:
        return "a null object id (fsck: nullSha1)"
    return ""


def shown_path(path: bytes, limit: int = 120) -> str:
    """A history path of raw names, fit for a message."""
    return trust.shown(path.decode("utf-8", "surrogateescape"), limit)


@dataclasses.dataclass
class LeftOut:
    """Entries left out of the trees one commit writes: (path, line) of the first `limit`,
    and how many in all."""

    limit: int = 200
    items: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    count: int = 0

    def add(self, path: bytes, why: str) -> None:
        self.count += 1
        if len(self.items) < self.limit:
            text = path.decode("utf-8", "surrogateescape")
            where = trust.shown(text, 120) if path else "the history's root"
            self.items.append((text, f"{where} in the history: {why}; left out of this commit"))


class Seen:
    """Which names of one folder may be held more than once, as the names stream past: a set
    of their hashes while the folder is small, then a bitmap of 2**27 bits (16 MB, whatever
    the count): a name whose bit was set already is a candidate, compared by name afterwards
    (about 1% of a million are candidates by chance). A million names cost 16 MB here, not the
    80 MB of a set of their hashes."""

    SMALL = 100_000
    BITS = 1 << 27

    def __init__(self):
        self._hashes: set[int] | None = set()
        self._bits: bytearray | None = None
        self.again: set[int] = set()  # hashes of the candidates

    def add(self, name: bytes) -> None:
        h = hash(name)
        if self._hashes is not None:
            if h in self._hashes:
                self.again.add(h)
            self._hashes.add(h)
            if len(self._hashes) > self.SMALL:
                self._bits = bytearray(self.BITS // 8)
                for old in self._hashes:
                    self._set(old)
                self._hashes = None
        elif self._set(h):
            self.again.add(h)

    def _set(self, h: int) -> bool:
        """Set h's bit; whether it was set already."""
        bit = h & (self.BITS - 1)
        byte, mask = bit >> 3, 1 << (bit & 7)
        was = self._bits[byte] & mask
        self._bits[byte] |= mask
        return bool(was)


class Damaged(Exception):
    """A tree object whose bytes are not a list of entries (from where it stops)."""


def _not_a_tree(kind: str) -> Iterator[tuple[int, bytes, str]]:
    raise Damaged(f"the object is a {kind}, not a tree")
    yield  # a generator, as entries() returns


class TreeReader:
    """`git cat-file --batch` kept open in one repository: raw tree objects read entry by
    entry, one after the other (each iterator is read to its end before the next is asked
    for). Ended after `timeout` s whatever it is doing (RunnerFailed then)."""

    def __init__(self, repo, timeout: float):
        self.repo = repo
        self.timeout = timeout
        self.proc = None
        self.expired = False
        self._open: Iterator | None = None

    def __enter__(self) -> TreeReader:
        import subprocess
        import tempfile

        from harness.core.processes import start_in_session

        self._err = tempfile.TemporaryFile()
        self.proc = start_in_session(
            ["git", "cat-file", "--batch"],
            cwd=self.repo.path,
            env=self.repo.environment(network=True),  # a missing object: fetched by git
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
        )
        self._timer = threading.Timer(self.timeout, self._expire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _expire(self) -> None:
        from harness.core.processes import end_session

        self.expired = True
        end_session(self.proc, grace_s=1.0)

    def __exit__(self, *exc) -> None:
        import subprocess

        from harness.core.processes import end_session

        self._timer.cancel()
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # git cat-file ends at the end of its input
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            end_session(self.proc, grace_s=1.0)
        self.proc.stdout.close()
        self._err.close()

    def _failed(self) -> Exception:
        from harness.core.exits import RunnerFailed

        if self.expired:
            return RunnerFailed(f"git cat-file did not finish within {self.timeout:g} s")
        return RunnerFailed("git cat-file ended early (reading the history's trees)")

    def entries(self, oid: str) -> Iterator[tuple[int, bytes, str]] | None:
        """The entries of tree `oid` as stored, in its order: (mode, name, oid), mode -1 where
        it is no octal number; Damaged at the point where the bytes stop being entries (at
        once where the object is no tree). None when git has no such object."""
        if self._open is not None:  # the last one read to its end first: one stream
            with contextlib.suppress(Damaged):
                for _ in self._open:
                    pass
        try:
            self.proc.stdin.write(f"{oid}\n".encode())
            self.proc.stdin.flush()
            head = self.proc.stdout.readline().split()
        except OSError:
            raise self._failed() from None
        if len(head) == 2 and head[1] == b"missing":
            return None
        if len(head) != 3:
            raise self._failed()
        size = int(head[2])
        if head[1] != b"tree":  # a folder's entry naming a file or commit: no entries
            self._skip(size + 1)
            return _not_a_tree(head[1].decode(errors="replace"))
        self._open = self._parse(size)
        return self._open

    def _skip(self, n: int) -> None:
        while n > 0:
            got = self.proc.stdout.read(min(n, 1 << 20))
            if not got:
                raise self._failed()
            n -= len(got)

    def _parse(self, size: int) -> Iterator[tuple[int, bytes, str]]:
        try:
            yield from self._items(size)
        finally:  # closed before its end (a reader that stopped early): the rest is skipped
            if self._open is not None and self._left >= 0:
                self._skip(self._left + 1)
                self._open = None

    def _items(self, size: int) -> Iterator[tuple[int, bytes, str]]:
        left, buf, pos = size, b"", 0
        self._left = size
        damaged = ""
        while True:
            space = buf.find(b" ", pos)
            nul = buf.find(b"\0", space + 1) if space >= 0 else -1
            if nul < 0 or nul + 21 > len(buf):
                if left == 0:
                    if pos < len(buf):
                        damaged = f"the tree's last {len(buf) - pos} bytes are not an entry"
                    break
                got = self.proc.stdout.read(min(left, 1 << 20))
                if not got:
                    raise self._failed()
                left -= len(got)
                self._left = left
                buf = buf[pos:] + got
                pos = 0
                continue
            raw = buf[pos:space]
            mode = _MODE_OF.get(raw)
            if mode is None:
                try:
                    mode = int(raw, 8) if raw.isdigit() else -1
                except ValueError:
                    mode = -1
            yield mode, buf[space + 1 : nul], buf[nul + 1 : nul + 21].hex()
            pos = nul + 21
        self._left = -1
        self._skip(1)  # the newline after each object
        self._open = None
        if damaged:
            raise Damaged(damaged)
