"""Where the project is, which commit it is at, and where its benchmark suites come from: one
resolver for every command.

A project is one of two kinds, found from the working directory (or `--project DIR`, or
$HARNESS_PROJECT) as the nearest directory that is either:
- a *harness checkout*: `asv.conf.json` beside `suites/benchmarks/`; its suites are read from
  that tree (so every revision that `ab` or `bisect` checks out measures its own code);
- a *project of its own* (written by `harness init`): an `asv.conf.json` holding the key
  `"harness_project"`; its benchmark modules (asv's `benchmark_dir`) run beside the suites that
  ship with the installed harness (the package `harness.suites`), and its models (the
  `harness_models` ini option) are the only ones the packaged suites cover.
The project is never derived from the installed package's location, which for `pip install .`
or tox lies in site-packages.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import subprocess
from pathlib import Path

from harness.core import settings
from harness.core.exits import BadInput

ASV_CONF = "asv.conf.json"
# the key of asv.conf.json that marks a project of its own (asv ignores keys it does not know)
OWN_MARKER = "harness_project"
# the packaged suites: `suites/` of this repository, installed as harness.suites (pyproject.toml)
PACKAGE = "harness.suites"
# seconds per benchmark that balance shards (harness.runs.shard): suites/durations.json in a
# checkout, durations.json at the root of a project of its own (committed: every shard agrees)
DURATIONS = "durations.json"


def is_own_project(d: Path) -> bool:
    """A project of its own: an asv.conf.json carrying the harness_project key."""
    return (Path(d) / ASV_CONF).is_file() and OWN_MARKER in asv_conf(d)


def is_checkout(d: Path) -> bool:
    """A harness checkout (or a worktree of one): asv.conf.json and suites/benchmarks/."""
    d = Path(d)
    has_suites = (d / ASV_CONF).is_file() and (d / "suites" / "benchmarks").is_dir()
    return has_suites and not is_own_project(d)


def asv_conf(d: Path) -> dict:
    """A project's asv.conf.json, read as asv reads it (JSON with comments and trailing commas);
    each version of the file parsed once per process."""
    path = Path(d) / ASV_CONF
    try:
        stat = path.stat()
        return dict(_parsed(str(path), stat.st_mtime_ns, stat.st_size))
    except (OSError, ValueError) as exc:
        raise BadInput(f"cannot read {path}: {exc}; fix it (it is JSON with // comments)") from None


@functools.lru_cache(maxsize=64)
def _parsed(path: str, mtime_ns: int, size: int) -> dict:
    from asv import util

    return util.load_json(path, js_comments=True)


def _is_project(d: Path) -> bool:
    return is_checkout(d) or is_own_project(d)


_WHAT = "a harness checkout or a project made by `harness init`"


def project_root(override: str | os.PathLike | None = None) -> Path:
    """The project: `override`, else $HARNESS_PROJECT, else the cwd or a parent of it."""
    given = override or settings.PROJECT.get()
    if given:
        root = Path(given).resolve()
        if not _is_project(root):
            raise BadInput(
                f"{root} is not {_WHAT} (no asv.conf.json with suites/benchmarks/, nor one "
                f'with the key "{OWN_MARKER}"); pass the folder you cloned the harness into, '
                "or run `harness init` there"
            )
        return root
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if _is_project(d):
            return d
    raise BadInput(
        f"not inside a harness checkout or a project of your own ({here} and its parents have "
        "no asv.conf.json with suites/benchmarks/, nor one made by `harness init`): run this "
        "command from such a folder, pass --project DIR, or run `harness init` first"
    )


def head_commit(root: Path) -> str:
    """The full commit hash the project is at (asv files results per commit)."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "HEAD"], cwd=root, capture_output=True, text=True
        )
    except FileNotFoundError:
        raise BadInput(
            "git is not installed; results are filed by commit, so git is needed"
        ) from None
    sha = proc.stdout.strip()
    if proc.returncode or len(sha) != 40:
        inside = subprocess.run(
            ["git", "rev-parse", "--git-dir"], cwd=root, capture_output=True, text=True
        )
        first = "" if inside.returncode == 0 else f"  git init {_quote(root)}\n"
        raise BadInput(
            f"cannot read the current commit of {root} ({proc.stderr.strip() or 'no commit'}); "
            "results are filed by commit, so the project needs a git repository with at least "
            f"one commit:\n{first}  git -C {_quote(root)} add -A\n"
            f'  git -C {_quote(root)} commit -m "harness project"'
        )
    return sha


def _quote(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def packaged_suites() -> Path:
    """The folder of the installed harness's suites (harness.suites), found without importing
    it: in an editable install it is the checkout's suites/."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.origin:
        raise BadInput(
            f"this harness install has no {PACKAGE} (the suites ship with the package); "
            "reinstall the harness from a checkout or a wheel built from one"
        )
    return Path(spec.origin).parent


@dataclasses.dataclass(frozen=True)
class Suites:
    """Where one tree's benchmark suites come from; a suite is a module, named by its stem.

    `builtin`: the harness's asv suites (the tree's own suites/benchmarks/ in a checkout, the
    installed package's in a project of its own); `own`: a project's own benchmark folder."""

    tree: Path
    builtin: Path
    own: Path | None = None  # None in a checkout, or where the project has no such folder yet
    own_project: bool = False

    def durations_files(self) -> list[Path]:
        """The durations files a shard split reads, later ones overriding earlier ones; the last
        is the one `harness durations` refreshes. A project of its own reads the packaged
        suites' file first (the built-in suites it runs with --suite), then its own."""
        if not self.own_project:
            return [self.builtin.parent / DURATIONS]
        return [self.builtin.parent / DURATIONS, self.tree / DURATIONS]

    def own_modules(self) -> list[str]:
        return _stems(self.own) if self.own is not None else []

    def modules(self) -> dict[str, Path]:
        """Every suite: name -> file. A project's module may not take a built-in suite's name."""
        found = {name: self.builtin / f"{name}.py" for name in _stems(self.builtin)}
        for name in self.own_modules():
            if name in found:
                raise BadInput(
                    f"{self.own / (name + '.py')} has the name of a harness suite ({name}); "
                    "rename it (a suite is named by its module)"
                )
            found[name] = self.own / f"{name}.py"
        return dict(sorted(found.items()))

    def defaults(self, only_when_named: tuple[str, ...]) -> list[str]:
        """What runs when no suite is named: every built-in suite but `only_when_named` in a
        checkout; elsewhere the project's own modules, the models suite (over its models) and the
        instructions suite (its models' and modules' instruction rows; n/a without valgrind)."""
        if self.own_project:
            return self.own_modules() + ["models", "instructions"]
        return [n for n in self.modules() if n not in only_when_named]

    def environment(self) -> dict[str, str]:
        """What the benchmark processes of a project of its own are told: cover only its
        models (found from its ini), with its tree on the path for its own modules."""
        if not self.own_project:
            return {}
        return {
            settings.OWN_MODELS.name: settings.OWN_MODELS.encode(True),
            settings.PROJECT.name: str(self.tree),
            "ASV_PYTHONPATH": str(self.tree),
        }


def _stems(folder: Path) -> list[str]:
    return sorted(p.stem for p in Path(folder).glob("*.py") if not p.stem.startswith("_"))


def suites(tree: Path) -> Suites:
    """The suites of `tree`: a checkout (or a worktree of one) reads its own suites/benchmarks/;
    a project of its own adds its benchmark folder to the installed harness's suites."""
    tree = Path(tree)
    if is_own_project(tree):
        own = tree / asv_conf(tree).get("benchmark_dir", "benchmarks")
        return Suites(tree, packaged_suites() / "benchmarks", own if own.is_dir() else None, True)
    if (tree / "suites" / "benchmarks").is_dir():
        return Suites(tree, tree / "suites" / "benchmarks")
    raise BadInput(f"{tree} is not {_WHAT}: it has no suites to run")
