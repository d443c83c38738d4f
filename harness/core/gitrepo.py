"""The git plumbing of the results history (harness.core.store): the one place that runs git for
it, always as a subprocess with a timeout and no prompt, in a bare repository of the harness's
own (`<results root>/.store/<remote>-<hash>/`, a cache: safe to delete), never in the project's
repository: the user's working tree, index, branches and config are not touched.

That repository is a shallow (`--depth 1`) partial clone of one ref of one remote, fetched by
levels: the newest commit with the top three levels of its tree (`--filter=tree:3`: the root,
`runs/` and the like, and each machine's folder, whose entries name the records), then only
the records asked for, whole (`fetch_objects`). Nothing else of the history is downloaded. A
commit is made with plumbing on the paths it changes: each folder from the record up to the
root is read from its raw tree object and written anew (`mktree --missing`) from the entries
that pass git's own rules (harness.core.gittree: what `fsck` flags, and names held twice, are
left out and named), every other folder carried by its object id (the records it does not
touch need not be here); a private index file only for the new records' own trees;
`commit-tree`; pushed by hash (`push <sha>:<ref>`), never forced. The cache's fsck settings
are its own (the harness checks what it reads, entry by entry); credentials, URLs and proxies
stay the user's. One process at a time works in the repository (`locked`:
an flock, released by the kernel however the holder ends); lock files a killed git left
behind are removed under that lock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from harness.core import gittree, settings, trust
from harness.core.exits import BadInput, RunnerFailed

CACHE = ".store"  # under the results root
REMOTE = "store"  # the cache repository's one remote (a promisor remote: partial fetches)
TIP = "refs/store/tip"  # the history's newest commit as last seen
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# who makes the history's commits: runners have no git identity of their own
IDENTITY = ("harness store", "harness-store@localhost")
# git's own variables that would point it at another repository, index or identity (set by a
# hook or an outer git command) are dropped; these, which say how to reach a remote, are kept
_KEEP_GIT_VARS = re.compile(
    r"^GIT_(SSH|SSH_COMMAND|SSH_VARIANT|ASKPASS|PROXY_COMMAND|CONFIG_GLOBAL|CONFIG_SYSTEM|"
    r"CONFIG_NOSYSTEM|SSL_NO_VERIFY|SSL_CAINFO|SSL_CAPATH|HTTP_USER_AGENT|HTTP_PROXY_AUTHMETHOD|"
    r"CURL_VERBOSE|TRACE.*|REDACT_COOKIES)$"
)
# the settings every call runs under: no hooks, no signing, no background gc in the cache
_CONFIG = (
    "core.hooksPath=/dev/null",
    "commit.gpgSign=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "fetch.writeCommitGraph=false",
    "advice.detachedHead=false",
    # what a fetch accepts is checked by the harness, entry by entry (one bad tree never
    # refuses the whole history), so a user's own transfer.fsckObjects does not apply here;
    # a push signs nothing and follows no submodule (a kept gitlink names no repository)
    "transfer.fsckObjects=false",
    "fetch.fsckObjects=false",
    "receive.fsckObjects=false",
    # git's "sparse" walk of what a push sends keeps every path of a big folder in memory
    # (a folder of a million entries: 820 MB, against 57 MB without it)
    "pack.useSparse=false",
    "push.gpgSign=false",
    "push.recurseSubmodules=no",
    "fetch.recurseSubmodules=false",
    "submodule.recurse=false",
)
# rejections that may mean another runner moved the ref first (fetch, re-apply, retry); a
# server that cannot write the ref at all says "failed to update ref" too: the store tells the
# two apart by whether the history's tip moved
_RACE = re.compile(
    r"fetch first|non-fast-forward|cannot lock ref|failed to lock|failed to update ref|"
    r"incorrect old value|stale info|but expected",
    re.IGNORECASE,
)


_SCP = re.compile(r"^(?:[^/@:]+@)?[A-Za-z0-9.-]+:(?!//)")


def redact(url: str) -> str:
    """A URL fit for a message: user and password (a token) left out."""
    return re.sub(r"(://)[^/@]*@", r"\1***@", url)


@dataclasses.dataclass(frozen=True)
class Remote:
    """Where the history lives: the URLs git fetches from and pushes to, what the user named
    (`origin`, a URL), and git settings for those URLs carried over from the project's
    repository (http.extraheader, credential helpers: how CI checkouts hold their token)."""

    name: str
    url: str
    push_url: str
    carried: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        shown = redact(self.url)
        return self.name if self.name == shown else f"{self.name} ({shown})"


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _file_oid(path: Path, size: int) -> str:
    """git_blob_oid of a file, read in pieces (a large file is never held in memory whole)."""
    digest = hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def git_tree_oid(folder: Path) -> str:
    """The oid git gives the tree of `folder` with every file as a plain 100644 blob (as the
    history stores a record), computed here: a record held locally and one in the history are
    the same exactly when these agree. Empty folders have no tree (git keeps none). A symbolic
    link is never followed: it counts as git counts one (120000, its target), so a record
    holding one never equals a record of the history; other special files count as absent."""
    return _tree_oid(Path(folder)) or EMPTY_TREE


def _tree_oid(folder: Path) -> str | None:
    entries = []
    with os.scandir(folder) as listing:
        for item in listing:
            name = os.fsencode(item.name)
            if item.is_symlink():
                target = os.fsencode(os.readlink(item.path))
                entries.append((name, b"120000 " + name, git_blob_oid(target)))
            elif item.is_dir(follow_symlinks=False):
                sub = _tree_oid(Path(item.path))
                if sub:  # git keeps no empty folder
                    entries.append((name + b"/", b"40000 " + name, sub))
            elif item.is_file(follow_symlinks=False):
                size = item.stat(follow_symlinks=False).st_size
                entries.append((name, b"100644 " + name, _file_oid(Path(item.path), size)))
    if not entries:
        return None
    # git sorts a folder's name as if it ended in '/'
    body = b"".join(head + b"\0" + bytes.fromhex(oid) for _, head, oid in sorted(entries))
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()


@dataclasses.dataclass(frozen=True)
class Entry:
    mode: str  # 100644, 100755 (files), 040000 (a folder), 120000 (a link), 160000 (a gitlink)
    kind: str  # blob, tree or commit (a gitlink)
    oid: str
    path: str  # as git wrote it, undecodable bytes kept as surrogates (NAMES)


# tree entry names are bytes: kept through str and back unchanged, whatever they hold
NAMES = ("utf-8", "surrogateescape")


DROP = "\0drop"  # the key of a folder's edits naming what else to leave out (no name has \0)


@dataclasses.dataclass(frozen=True)
class Commit:
    oid: str
    tree: str
    author: str
    email: str
    date: str

    def said(self) -> str:
        """Who made it, fit for a message (the author's own words are escaped)."""
        who = f"{trust.shown(self.author, 60)} <{trust.shown(self.email, 60)[1:-1]}>"
        return f"commit {self.oid[:10]} of {self.date}, {who}"


class ServerCannotSend(RunnerFailed):
    """The server's git died sending what a fetch asked for (exit 5): a tree it cannot read."""


@dataclasses.dataclass
class PushOutcome:
    ok: bool
    race: bool = False
    reason: str = ""


class Repo:
    """The harness's bare repository caching one ref of one remote (see the module's text)."""

    def __init__(self, results_root: Path, remote: Remote, ref: str):
        self.remote = remote
        self.ref = ref
        key = hashlib.sha256(f"{remote.url}\n{remote.push_url}\n{ref}".encode()).hexdigest()[:12]
        tail = re.sub(r"[^A-Za-z0-9_.-]+", "_", remote.url.rstrip("/").rsplit("/", 1)[-1])[-40:]
        self.path = Path(results_root) / CACHE / f"{tail or 'remote'}-{key}"
        self.timeout = settings.STORE_TIMEOUT_S.get()
        self.partial = True  # False once the server said it does not filter
        self.fetches = 0

    # ---- running git ----

    def environment(self, network: bool) -> dict:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("GIT_") or _KEEP_GIT_VARS.match(k)
        }
        env.update(
            GIT_DIR=str(self.path),
            GIT_TERMINAL_PROMPT="0",
            GCM_INTERACTIVE="never",
            LC_ALL="C",
            LANGUAGE="C",
            GIT_AUTHOR_NAME=IDENTITY[0],
            GIT_AUTHOR_EMAIL=IDENTITY[1],
            GIT_COMMITTER_NAME=IDENTITY[0],
            GIT_COMMITTER_EMAIL=IDENTITY[1],
        )
        config = list(self.remote.carried) if network else []
        config += [tuple(c.split("=", 1)) for c in _CONFIG]
        # handed over in the environment, not on the command line (a token stays out of `ps`)
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for i, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
        return env

    def git(
        self,
        *args: str,
        input: bytes | None = None,
        network: bool = False,
        check: bool = True,
        extra_env: dict | None = None,
        stdout=None,
        stdin=None,
    ) -> subprocess.CompletedProcess:
        """`git ARGS` in the cache repository, stdout and stderr as bytes (`stdout`: an open
        file git writes into instead); a failure (check) or a timeout is RunnerFailed naming
        git's error in one line. `stdin`: an open file read as git's input (instead of
        `input`)."""
        from harness.core.processes import end_session, start_in_session

        env = self.environment(network)
        env.update(extra_env or {})
        cmd = ["git", *args]
        try:
            proc = start_in_session(
                cmd,
                cwd=self.path,
                env=env,
                stdin=subprocess.PIPE if input is not None else stdin or subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdout is None else stdout,
                stderr=subprocess.PIPE,
            )
        except FileNotFoundError:
            raise RunnerFailed("git is not installed; the results history needs it") from None
        try:
            out, err = proc.communicate(input, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            end_session(proc, grace_s=1.0)  # git stops on SIGINT at once; what it runs may not
            raise RunnerFailed(
                f"git {_verb(args)} did not finish within {self.timeout:g} s "
                f"(${settings.STORE_TIMEOUT_S.name})"
            ) from None
        except BaseException:
            end_session(proc, grace_s=1.0)
            raise
        done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        if check and done.returncode != 0:
            raise _failure(f"git {_verb(args)}", err, self.ref)
        return done

    # ---- the repository and its lock ----

    @contextlib.contextmanager
    def locked(self):
        """Create the repository if needed and hold it for this process alone."""
        trust.inside(self.path.parent.parent, self.path)  # never a link out of the results root
        self.path.mkdir(parents=True, exist_ok=True)
        ignore = self.path.parent / ".gitignore"
        if not ignore.is_file():  # the cache is nobody's to commit
            ignore.write_text("# the harness's cache of the results history: safe to delete\n*\n")
        with open(self.path.parent / f"{self.path.name}.flock", "a+") as handle:
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise RunnerFailed(
                            f"{self.path} is held by another harness process for more than "
                            f"{self.timeout:g} s; try again"
                        ) from None
                    time.sleep(0.1)
            try:
                self._prepare()
                yield self
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _prepare(self) -> None:
        # under the lock, any lock file is a killed git's (a git waiting on one would fail)
        for stale in self.path.rglob("*.lock"):
            stale.unlink(missing_ok=True)
        for stale in self.path.glob("harness-index-*"):
            stale.unlink(missing_ok=True)
        if not (self.path / "HEAD").is_file():
            self.git("init", "--quiet", "--bare", "--template=", str(self.path))
        want = {
            f"remote.{REMOTE}.url": self.remote.url,
            f"remote.{REMOTE}.pushurl": self.remote.push_url,
            f"remote.{REMOTE}.promisor": "true",
            "extensions.partialclone": REMOTE,
            "core.repositoryformatversion": "1",
        }
        have = self.git("config", "--local", "--list", check=False).stdout.decode()
        pairs = dict(line.split("=", 1) for line in have.splitlines() if "=" in line)
        for key, value in want.items():
            if pairs.get(key.lower()) != value:
                self.git("config", "--local", key, value)
        # no default filter: a fetch without --filter (whole records) must get everything
        if f"remote.{REMOTE}.partialclonefilter" in pairs:
            self.git("config", "--local", "--unset", f"remote.{REMOTE}.partialclonefilter")

    # ---- reading the remote ----

    def fetch_tip(self) -> str | None:
        """The history's newest commit with the top three levels of its tree (the root, the
        folders below it, each machine's folder: every record's name and tree oid, no record
        itself), or None when the ref does not exist there yet. A server that cannot filter
        sends the whole tip (`partial` turns False); one that refuses tree filters, the tip's
        trees without blobs. Where the server's git died reading what this cache said it has
        (it reads every tree of a commit named as had), once more naming nothing as had."""
        tries = [("tree:3", "skipping"), ("blob:none", "skipping"), ("tree:3", "noop")]
        for spec, negotiation in tries:
            done = self.git(
                "-c", f"fetch.negotiationAlgorithm={negotiation}",
                "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--depth=1",
                f"--filter={spec}", REMOTE, f"+{self.ref}:{TIP}", network=True, check=False,
            )  # fmt: skip
            self.fetches += 1
            err = done.stderr.decode(errors="replace")
            if "filtering not recognized by server" in err:
                self.partial = False
            if done.returncode == 0:
                return self.rev_parse(TIP)
            if "couldn't find remote ref" in err:
                return None
            if _CANNOT_SERVE.search(err) and negotiation != "noop":
                continue
            if "filter" not in err:
                break
        raise _failure("git fetch", done.stderr, self.ref)

    def fetch_objects(
        self, oids: list[str], spec: str | None = None, refetch: bool = False
    ) -> None:
        """Bring these objects from the remote in one fetch: with no filter `spec` whole (a
        record's tree: its folders and files), `tree:0` a tree alone, `blob:none` for blobs,
        `blob:limit=<n>` a tree with its folders and every file under n bytes (a server that
        filters never sends a bigger one: the store refuses it unread). A blob asked for by
        its oid comes whatever the filter. `refetch`: also what is here already (a tree that
        came alone before: git would otherwise take it as fetched)."""
        if not oids:
            return
        self.git(
            "-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags",
            "--no-write-fetch-head", "--recurse-submodules=no",
            *([f"--filter={spec}"] if spec else []), *(["--refetch"] if refetch else []),
            "--stdin", REMOTE,
            input="".join(f"{o}\n" for o in oids).encode(), network=True,
        )  # fmt: skip
        self.fetches += 1

    def push(self, commit: str) -> PushOutcome:
        """`git push <commit>:<ref>`, never forced: ok, a race lost to another pusher, or a
        rejection that is not a race (a hook, a protected ref, no permission, unreachable)."""
        done = self.git(
            "push", "--porcelain", REMOTE, f"{commit}:{self.ref}", network=True, check=False
        )
        out = done.stdout.decode(errors="replace")
        status = [line for line in out.splitlines() if line.endswith(")") or "\t" in line]
        mine = next((line for line in status if f":{self.ref}\t" in line), "")
        if done.returncode == 0 and not mine.startswith("!"):
            return PushOutcome(True)
        reason = mine.rsplit("\t", 1)[-1] if mine else git_error(done.stderr)
        # git's own status reason says whether it was a race; without one, git's own lines do
        # (never the server's `remote:` lines: a hook may print anything)
        said = reason if mine else _own_lines(done.stderr)
        race = bool(_RACE.search(said))
        remote = remote_reason(done.stderr)
        if remote and not race:  # the server's why (fsck's hasDotdot, a hook's message)
            reason += f"; the server said: {remote}"
            if _UNREADABLE.search(remote):  # its own history: no push can land
                reason += f"; {server_fix(self.ref)}"
        return PushOutcome(False, race=race, reason=reason)

    # ---- objects and trees ----

    def rev_parse(self, name: str) -> str | None:
        done = self.git("rev-parse", "--verify", "--quiet", name + "^{commit}", check=False)
        return done.stdout.decode().strip() or None

    def ls_tree(self, treeish: str, *paths: str, recursive: bool = False) -> list[Entry]:
        """The entries of a tree (`-z`: any name, a newline included, comes back whole).
        `paths` are git's path patterns: only names the harness checked may be one."""
        args = ["ls-tree", "-z", "--full-tree"] + (["-r"] if recursive else [])
        done = self.git(*args, treeish, "--", *paths)
        out = []
        for item in done.stdout.decode(*NAMES).split("\0"):
            if item:
                head, path = item.split("\t", 1)
                mode, kind, oid = head.split()
                out.append(Entry(mode, kind, oid, path))
        return out

    def object_sizes(self, oids: list[str]) -> dict[str, int]:
        """The size of each of these objects, in bytes, before any is read (one process); an
        object the remote has and this cache lacks is fetched first, by git itself."""
        if not oids:
            return {}
        done = self.git(
            "cat-file", "--batch-check", input="".join(f"{o}\n" for o in oids).encode(),
            network=True,
        )  # fmt: skip
        out = {}
        for line in done.stdout.decode(errors="replace").splitlines():
            head = line.split()
            if len(head) == 3 and head[2].isdigit():  # else "<oid> missing"
                out[head[0]] = int(head[2])
        return out

    def missing(self, oids: list[str]) -> set[str]:
        """Which of these objects (trees and what they hold) are not here, one of them absent
        itself included; nothing is fetched."""
        if not oids:
            return set()
        done = self.git(
            "rev-list", "--objects", "--missing=print", "--ignore-missing", "--stdin",
            input="".join(f"{o}\n" for o in oids).encode(),
        )  # fmt: skip
        lines = done.stdout.decode().splitlines()
        gone = {line[1:].split()[0] for line in lines if line.startswith("?")}
        here = {line.split()[0] for line in lines if line and not line.startswith("?")}
        return gone | (set(oids) - here)

    def read_blobs(self, oids: list[str]) -> dict[str, bytes]:
        """The contents of blobs that are here (fetch_objects first), read in one process."""
        if not oids:
            return {}
        done = self.git("cat-file", "--batch", input="".join(f"{o}\n" for o in oids).encode())
        out, data, pos = {}, done.stdout, 0
        while pos < len(data):
            end = data.index(b"\n", pos)
            head = data[pos:end].decode().split()
            if len(head) < 3:  # "<oid> missing"
                pos = end + 1
                continue
            size = int(head[2])
            out[head[0]] = data[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
        return out

    def blob_into(self, oid: str, handle) -> None:
        """Write the blob `oid` (here: fetch_objects first) into the open file `handle`, streamed
        by git (a large file never passes through this process's memory)."""
        handle.flush()
        self.git("cat-file", "blob", oid, stdout=handle)

    def larger_than(self, limit: int) -> list[str]:
        """The blobs here (never fetched: only what this cache holds) of more than `limit`
        bytes."""
        done = self.git(
            "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype) "
            "%(objectsize)", "--unordered",
        )  # fmt: skip
        out = []
        for line in done.stdout.decode(errors="replace").splitlines():
            oid, kind, size = (line.split() + ["", "", ""])[:3]
            if kind == "blob" and size.isdigit() and int(size) > limit:
                out.append(oid)
        return out

    def drop(self, oids: set[str]) -> None:
        """Remove these objects from the cache: a loose one's file, and each pack holding one
        is written again without it (what else it held stays; the new pack is a promisor
        pack like the old, so git takes what it lacks as the remote's)."""
        objects = self.path / "objects"
        for oid in oids:
            (objects / oid[:2] / oid[2:]).unlink(missing_ok=True)
        for idx in sorted((objects / "pack").glob("pack-*.idx")):
            listed = self.git("show-index", input=idx.read_bytes()).stdout.decode().split("\n")
            held = {line.split()[1] for line in listed if len(line.split()) >= 2}
            if not held & oids:
                continue
            keep = sorted(held - oids)
            if keep:
                made = self.git(
                    "pack-objects", "--quiet", str(objects / "pack" / "pack"),
                    input="".join(f"{o}\n" for o in keep).encode(),
                ).stdout.decode().strip()  # fmt: skip
                if idx.with_suffix(".promisor").exists():
                    (objects / "pack" / f"pack-{made}.promisor").touch()
            for suffix in (".pack", ".rev", ".bitmap", ".mtimes", ".promisor", ".keep", ".idx"):
                idx.with_suffix(suffix).unlink(missing_ok=True)

    def hash_objects(self, paths: list[Path]) -> list[str]:
        """Write these files as blobs; their oids in order."""
        if not paths:
            return []
        done = self.git(
            "hash-object", "-w", "--no-filters", "--stdin-paths",
            input="".join(f"{p}\n" for p in paths).encode(),
        )  # fmt: skip
        return done.stdout.decode().split()

    def hash_bytes(self, data: bytes) -> str:
        return (
            self.git("hash-object", "-w", "--no-filters", "--stdin", input=data)
            .stdout.decode()
            .strip()
        )

    def record_trees(self, files: list[tuple[str, str]]) -> dict[str, str]:
        """Trees for new records from their files ("<machine>/<run-id>/<path>", blob oid), made
        in a private index file that lives only for this call: "<machine>/<run-id>" -> oid."""
        index = self.path / f"harness-index-{os.getpid()}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            self.git("read-tree", "--empty", extra_env=env)
            self.git(
                "update-index", "-z", "--index-info",
                input="".join(f"100644 {oid}\t{path}\0" for path, oid in files).encode(),
                extra_env=env,
            )  # fmt: skip
            top = self.git("write-tree", extra_env=env).stdout.decode().strip()
        finally:
            index.unlink(missing_ok=True)
        machines = {path.split("/", 1)[0] for path, _ in files}
        return {e.path: e.oid for e in self.ls_tree(top, *[f"{m}/" for m in sorted(machines)])}

    def history(self, tip: str) -> tuple[list[Commit], Repo] | None:
        """Every commit of the history from `tip` back, newest first, and a repository that
        holds them with their trees' top three levels (no file): a sibling of this cache, as
        this one is shallow, and a server reads every tree of what a fetch names as had.
        Where the server cannot send those trees, the commits alone (a tree not there reads
        as missing: nothing is fetched on demand). None when not even the commits can be."""
        other = Repo.__new__(Repo)
        other.__dict__.update(self.__dict__)
        other.path = self.path.with_name(self.path.name + "-history")
        other.path.mkdir(exist_ok=True)
        other._prepare()
        for spec in ("tree:3", "tree:0"):
            done = other.git(
                "-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags",
                "--no-write-fetch-head", f"--filter={spec}", REMOTE, f"+{self.ref}:{TIP}",
                network=True, check=False,
            )  # fmt: skip
            if done.returncode == 0:
                break
        else:
            return None
        for key in ("extensions.partialclone", f"remote.{REMOTE}.promisor"):
            other.git("config", "--local", "--unset", key, check=False)  # no fetch on demand
        log = other.git("log", "--format=%H%x1f%T%x1f%an%x1f%ae%x1f%as%x1e", tip, check=False)
        if log.returncode != 0:
            return None
        commits = []
        for item in log.stdout.decode(*NAMES).split("\x1e"):
            fields = item.strip("\n").split("\x1f")
            if len(fields) == 5:
                commits.append(Commit(*fields))
        return commits, other

    def tree_of(self, commit: str) -> str:
        return self.git("rev-parse", f"{commit}^{{tree}}").stdout.decode().strip()

    def trees(self) -> gittree.TreeReader:
        """A reader of raw tree objects in this repository (a context manager)."""
        return gittree.TreeReader(self, self.timeout)

    def edit_tree(
        self,
        tree: str | None,
        edits: dict,
        left: gittree.LeftOut | None = None,
        reader: gittree.TreeReader | None = None,
    ) -> str | None:
        """`tree` (None: empty) with `edits` applied, folder by folder: name -> None (remove),
        ("blob" | "tree", oid) (put), or a dict of edits inside that folder (an empty one:
        that folder written anew; its key DROP, if any: a function (mode, name, oid) -> why
        an entry of that folder is left out, "" to keep it). Only the folders on the edited
        paths are read and written; every other entry is carried by its object id, its own
        tree never read or re-sent. In a folder written anew, an entry git cannot hold in a
        valid tree or that its fsck flags (gittree.entry_problem), and every copy of a name
        held twice, is left out and named in `left`; every other entry is kept exactly as it
        is. An edit inside something that is not a folder is BadInput. None when nothing is
        left."""
        left = left if left is not None else gittree.LeftOut()
        if reader is not None:
            return self._edit(reader, tree, edits, b"", left)
        with self.trees() as reader:
            return self._edit(reader, tree, edits, b"", left)

    def _edit(self, reader, tree, edits: dict, where: bytes, left) -> str | None:
        cap = settings.STORE_MAX_ENTRIES.get()
        drop = edits.get(DROP)
        named = {n.encode(*NAMES): n for n in edits if n is not DROP}
        found: dict[bytes, list[tuple[int, str]]] = {}
        seen = gittree.Seen()
        written = 0
        with contextlib.ExitStack() as stack:
            body = stack.enter_context(tempfile.TemporaryFile(dir=self.path))
            if tree is not None:
                items = reader.entries(tree)
                if items is None:
                    raise RunnerFailed(
                        f"{gittree.shown_path(where or b'the root')}: tree {tree} is not in "
                        f"{self.path}; try again (the cache is safe to delete)"
                    )
                count = 0
                try:
                    for mode, name, oid in items:
                        count += 1
                        if count > cap:
                            raise BadInput(
                                f"{gittree.shown_path(where or b'the root')} in the history "
                                f"holds more than {cap:,} entries "
                                f"(${settings.STORE_MAX_ENTRIES.name}); not rewritten"
                            )
                        why = gittree.entry_problem(mode, name, oid)
                        if not why and drop is not None and name not in named:
                            why = drop(mode, name, oid)
                        if why:
                            left.add(where + name, why)
                        elif name in named:
                            found.setdefault(name, []).append((mode, oid))
                        else:
                            seen.add(name)
                            body.write(_tree_line(mode, oid, name))
                            written += 1
                except gittree.Damaged as exc:
                    left.add(where, f"{exc} (the entries before it are kept)")
            twice = seen.again
            del seen
            if twice:
                body, written = _without_repeats(body, twice, where, left, self.path)
                stack.enter_context(body)
            for name, edit in ((b, edits[n]) for b, n in named.items()):
                copies = found.get(name, [])
                base = None
                if len(copies) > 1:
                    left.add(where + name, f"{len(copies)} entries of that name")
                elif copies and isinstance(edit, dict):
                    if copies[0][0] != gittree.TREE:
                        raise BadInput(
                            f"{gittree.shown_path(where + name)} in the history is not a "
                            "folder; not rewritten"
                        )
                    base = copies[0][1]
                if isinstance(edit, dict):
                    sub = self._edit(reader, base, edit, where + name + b"/", left)
                    edit = ("tree", sub) if sub else None
                if edit is not None:
                    mode = gittree.TREE if edit[0] == "tree" else 0o100644
                    body.write(_tree_line(mode, edit[1], name))
                    written += 1
            if not written:
                return None
            body.flush()
            body.seek(0)
            return self.git("mktree", "-z", "--missing", stdin=body).stdout.decode().strip()

    def commit(self, tree: str, parent: str | None, message: str) -> str:
        args = ["commit-tree", "--no-gpg-sign", tree] + (["-p", parent] if parent else [])
        return self.git(*args, input=message.encode()).stdout.decode().strip()


def _verb(args) -> str:
    """The git command of these arguments (`-c key=value` pairs before it skipped)."""
    it = iter(args)
    for arg in it:
        if arg == "-c":
            next(it, None)
        elif not arg.startswith("-"):
            return arg
    return args[0] if args else ""


def _tree_line(mode: int, oid: str, name: bytes) -> bytes:
    """One entry as `git mktree -z` reads it."""
    return b"%o %s %s\t%s\0" % (mode, gittree.kind_of(mode).encode(), oid.encode(), name)


def _without_repeats(body, twice: set[int], where: bytes, left, folder: Path):
    """`body` (mktree lines) without every copy of a name it holds more than once (`twice`:
    the hashes of the names that may be; the names themselves are compared here), each named
    once in `left`; and how many lines are left."""
    counts: dict[bytes, int] = {}
    for line in _lines(body):
        name = line.split(b"\t", 1)[1]
        if hash(name) in twice:
            counts[name] = counts.get(name, 0) + 1
    repeated = {n for n, k in counts.items() if k > 1}
    for name in sorted(repeated):
        left.add(where + name, f"{counts[name]} entries of that name")
    kept = tempfile.TemporaryFile(dir=folder)
    written = 0
    for line in _lines(body):
        if line.split(b"\t", 1)[1] not in repeated:
            kept.write(line + b"\0")
            written += 1
    body.close()
    return kept, written


def _lines(body):
    body.flush()
    body.seek(0)
    rest = b""
    while chunk := body.read(1 << 20):
        *whole, rest = (rest + chunk).split(b"\0")
        yield from whole
    if rest:
        yield rest


def _own_lines(stderr: bytes) -> str:
    lines = stderr.decode(errors="replace").splitlines()
    return "\n".join(line for line in lines if not line.startswith("remote:"))


def remote_reason(stderr: bytes, limit: int = 3) -> str:
    """The server's own reason in one line: its `remote:` error and fatal lines (else its last
    ones), each escaped and cut (a hook on the server may print anything)."""
    lines = [
        line.removeprefix("remote:").strip()
        for line in stderr.decode(errors="replace").splitlines()
        if line.startswith("remote:") and line.removeprefix("remote:").strip()
    ]
    picked = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines[-2:]
    return "; ".join(trust.shown(line, 200) for line in dict.fromkeys(picked[:limit]))


# what git prints when the serving side's pack-objects died: the server cannot send what was
# asked for (a tree git itself cannot read, such as an entry with an empty name)
_CANNOT_SERVE = re.compile(
    r"pack-objects died|bad pack header|possible repository corruption on the remote side"
)


def _failure(what: str, stderr: bytes, ref: str) -> RunnerFailed:
    dead = _CANNOT_SERVE.search(stderr.decode(errors="replace"))
    return (ServerCannotSend if dead else RunnerFailed)(f"{what}: {git_error(stderr, ref)}")


# what git says of a tree it cannot read: the server's own git stops on it (its connectivity
# check reads every tree of the history's tip before it accepts a push)
_UNREADABLE = re.compile(r"empty filename in tree entry|too-short tree|malformed mode|badTree")


def server_fix(ref: str) -> str:
    """What to do where the server's git cannot read the history's tip (one line)."""
    return (
        "the history holds a tree the server's own git cannot read or send (such as an entry "
        "with an empty name, written by hand): no fetch of it and no push lands, and nothing "
        f"here works around it. Fix it on the server: move {ref or 'the ref'} back to the "
        "commit before the one that added that tree (docs/trust.md#hardening-the-server; "
        "`harness store repair` names it where it can)"
    )


def git_error(stderr: bytes, ref: str = "") -> str:
    """git's error in one line: its fatal/error lines (else its last line), joined. Where the
    server could not send what was asked for, the server's reason and the fix there."""
    text = stderr.decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    mine = [line for line in lines if not line.startswith("remote:")]
    picked = [line for line in mine if line.startswith(("fatal:", "error:"))] or lines[-1:]
    said = redact("; ".join(dict.fromkeys(picked)) or "failed with no message")[:500]
    if _CANNOT_SERVE.search(text):
        said += (
            f"; the server could not send it (its git said: {remote_reason(stderr) or '?'}): "
            + server_fix(ref)
        )
    return said


def project_remote(name_or_url: str) -> Remote:
    """A URL or path, taken as it is, or a remote name of the project's repository: its fetch
    and push URLs, with the http and credential settings the project keeps for them."""
    if _looks_like_url(name_or_url):
        url = _absolute(name_or_url, Path.cwd())
        return Remote(name_or_url, url, url)
    from harness.core.project import project_root

    project = project_root()

    def get(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", str(project), *args], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RunnerFailed(f"git config of {project}: {exc}") from None
        return done.stdout.strip() if done.returncode == 0 else ""

    url = get("remote", "get-url", name_or_url)
    if not url:
        raise BadInput(
            f"the project {project} has no git remote {name_or_url!r} for the results history; "
            "name a remote of it or a git URL with --remote (or "
            f"${settings.STORE_REMOTE.name})"
        )
    url = _absolute(url, project)
    push_url = _absolute(get("remote", "get-url", "--push", name_or_url) or url, project)
    carried = []
    for section in ("http", "credential"):
        for line in get("config", "--get-urlmatch", section, url).splitlines():
            key, _, value = line.partition(" ")
            if key:
                carried.append((key, value))
    return Remote(name_or_url, url, push_url, tuple(carried))


def _looks_like_url(text: str) -> bool:
    """A URL, an scp-like address (git@host:path) or a path; else a remote's name."""
    return "://" in text or text.startswith(("/", ".", "~")) or bool(_SCP.match(text))


def _absolute(url: str, base: Path) -> str:
    """A local path (relative to `base`) made absolute: git runs in the cache, elsewhere."""
    if "://" in url or _SCP.match(url):
        return url
    path = Path(os.path.expanduser(url))
    return str(path if path.is_absolute() else (Path(base) / path).resolve())
