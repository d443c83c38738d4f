"""pytest plugin: wires the options and the `golden` fixture; the store lives in store.py.

Options: `--accept` (or EXPECTTEST_ACCEPT=1) writes goldens; `--full` (or HARNESS_FULL=1) uses the
full model configurations and their goldens under `expect/full/`. `HARNESS_GOLDEN_DEVICE=cuda`
captures on the GPU (fixture `golden_device`): a committed variant `expect/cuda/<id>.expect` is
then used where one exists, else the CPU golden; accepting there writes a variant only where the
GPU printout differs from the CPU golden. Under a torch whose major.minor is not the reference
one, a committed `expect/torch-<major.minor>/<id>.expect` (or `expect/<device>/torch-<m.m>/`) is
used the same way, and `--accept` writes there: the reference goldens are only ever written by
the reference torch on the CPU (harness.golden.store.candidates). With CI set, accepting is
refused unless `--force-accept` (or HARNESS_FORCE_ACCEPT=1) is given too.

Models of your own: modules named by the ini option `harness_models`, HARNESS_MODELS or the
`harness.models` entry-point group are loaded at configure time (harness.core.user_models), before
collection, so the graph suite parametrizes over them and `-k tiny_cnn` selects them.

Orphans: every test declares the goldens it produces with `@pytest.mark.golden("id")`. After an
unfiltered run, goldens that no collected test declares are reported; an unfiltered `--accept`
run that passed removes them. A filtered run (-k, -m, a file or node id, --lf, deselection)
never touches them. A golden id is `<model>.<frontend>`: a golden whose model this run does not
know (not registered, declared by no test) is never an orphan -- its model may live in a suite
that is not part of this run -- it is reported as such and kept. Under pytest-xdist the workers
report what they collected and the controller decides, so orphans are computed once. Variants
are orphans with their golden id.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from harness.core import exits, names, settings, user_models
from harness.golden import store


def _zoo():
    """The model registry if this process has loaded it (it imports torch: never forced here)."""
    return sys.modules.get("harness.core.zoo")


def pytest_addoption(parser):
    group = parser.getgroup("harness", "graph goldens")
    group.addoption(
        "--accept",
        action="store_true",
        default=False,
        help="write or update goldens instead of comparing (also EXPECTTEST_ACCEPT=1)",
    )
    group.addoption(
        "--force-accept",
        action="store_true",
        default=False,
        help=f"allow --accept even when CI is set (also {settings.FORCE_ACCEPT.name}=1)",
    )
    group.addoption(
        "--full",
        action="store_true",
        default=False,
        help=f"use full model sizes and expect/full/ goldens (also {settings.FULL.name}=1)",
    )
    parser.addini(
        "harness_expect_dir", "directory of golden files, relative to rootdir", default="expect"
    )
    parser.addini(
        user_models.INI_OPTION,
        "modules or .py paths (relative to the ini file) that register "
        f"models of your own; also {settings.MODELS.name}",
        type="linelist",
        default=[],
    )


class GoldenSession:
    """Per-process state: where goldens live, what this run declared and produced."""

    def __init__(self, config):
        self.config = config
        self.accept = config.getoption("accept") or settings.EXPECTTEST_ACCEPT.get()
        self.full = config.getoption("full") or settings.FULL.get()
        root = settings.EXPECT_DIR.get() or Path(config.rootpath) / config.getini(
            "harness_expect_dir"
        )
        self.directory = root / "full" if self.full else root
        self.device = settings.GOLDEN_DEVICE.get().lower()
        self.lane = store.torch_lane()  # goldens of another torch live in expect/torch-<lane>/
        self.directory_forced = settings.EXPECT_DIR.is_set()
        self.declared: set[str] = set()
        self.produced: set[str] = set()
        self.deselected = False
        self.models: set[str] = set()  # models registered in this run (workers report theirs)
        self.orphans: list[Path] = []
        self.unknown: list[Path] = []  # goldens of models this run does not know: kept
        self.removed: list[Path] = []
        self.redundant: list[tuple[Path, Path]] = []  # (variant removed by --accept, its fallback)

    def directory_for(self, golden_id: str) -> Path:
        """The run's expect folder, or the model's own (register_model(expect_dir=...)) unless
        HARNESS_EXPECT_DIR points every golden elsewhere."""
        zoo = _zoo()
        spec = zoo._REGISTRY.get(names.model_of(golden_id)) if zoo else None
        if spec is not None and spec.expect_dir and not self.directory_forced:
            return Path(spec.expect_dir) / "full" if self.full else Path(spec.expect_dir)
        return self.directory

    def registered_models(self) -> set[str]:
        zoo = _zoo()
        return set(zoo.model_names()) if zoo else set()

    @property
    def size(self) -> str:
        return "full" if self.full else "small"

    def filtered(self) -> bool:
        """True when this run may not see every test: then orphans are never removed."""
        opt = self.config.option
        if getattr(opt, "keyword", "") or getattr(opt, "markexpr", "") or self.deselected:
            return True
        if (
            getattr(opt, "lf", False)
            or getattr(opt, "deselect", None)
            or getattr(opt, "failedfirst", False)
        ):
            return True
        for arg in self.config.args:
            path = arg.split("::")[0]
            if "::" in arg or not Path(self.config.invocation_params.dir, path).is_dir():
                return True
        return False

    def find_orphans(self) -> tuple[list[Path], list[Path]]:
        """(orphans: goldens of known models that no test declares, goldens of unknown models)."""
        known = self.declared | self.produced
        models = self.models | self.registered_models() | {names.model_of(i) for i in known}
        folders = {self.directory} | {self.directory_for(i) for i in known}
        orphans, unknown = [], []
        # variants (torch-*/, <device>/, <device>/torch-*/) are orphans with their golden id
        folders |= {variant for folder in folders for variant in store.variant_folders(folder)}
        for folder in sorted(folders):
            for path in sorted(folder.glob("*" + store.SUFFIX)) if folder.is_dir() else []:
                golden_id = path.name[: -len(store.SUFFIX)]
                if golden_id in known:
                    continue
                (orphans if names.model_of(golden_id) in models else unknown).append(path)
        return orphans, unknown


class GoldenFixture:
    """The `golden` fixture: `golden.check(text, frontend=..., model=...)` compares or accepts."""

    def __init__(self, session: GoldenSession, node):
        self._session = session
        self._node = node

    @property
    def size(self) -> str:
        return self._session.size

    def _default_id(self) -> str:
        marks = list(self._node.iter_markers("golden"))
        if len(marks) != 1 or not marks[0].args:
            raise pytest.UsageError(
                f"{self._node.nodeid}: declare the golden with "
                "@pytest.mark.golden('model.frontend') or pass name="
            )
        return marks[0].args[0]

    def check(self, text: str, name: str | None = None, **fields: str) -> None:
        try:
            self._check(text, name, fields)
            return
        except store.GoldenError as exc:
            problem = str(exc)
        pytest.fail(problem, pytrace=False)  # outside the except: one message, no chained traceback

    def _check(self, text: str, name: str | None, fields: dict) -> None:
        session = self._session
        golden_id = name or self._default_id()
        directory = session.directory_for(golden_id)
        where = (directory, golden_id, session.device, session.lane)
        path = store.lookup(*where)
        target = store.accept_target(*where)
        session.produced.add(golden_id)
        actual = store.normalize(text)
        try:
            existing = store.read(path)
        except store.GoldenError:
            if not session.accept:
                raise
            existing = None  # accepting rewrites an unreadable golden; git still has the old one
        if session.accept:
            self._accept(directory, path, target, existing, actual, fields)
            return
        hint = accept_command(self._node, golden_id, session.full)
        if existing is None:
            pytest.fail(
                f"no golden {_display(path, self._node.config)} yet for {golden_id}. "
                "Create it with:\n"
                f"  {hint}\n"
                f"then review and commit it.",
                pytrace=False,
            )
        if existing.body != actual:
            config = self._node.config
            existing.path = _display(path, config)
            what = ", ".join(f"{k} {v}" for k, v in fields.items()) or golden_id
            note = store.variant_note(
                _display(path, config), _display(target, config), session.lane, hint
            )
            message = store.mismatch_message(existing, actual, what, hint, (note,) if note else ())
            pytest.fail(message, pytrace=False)

    def _accept(self, directory, path, target, existing, actual, fields) -> None:
        """Write what this run captured where it belongs. An equal golden is left alone, so
        accepting twice gives byte-identical files (only a stale header is rewritten). A
        printout that differs goes to the most specific variant (another device, another
        torch): the reference golden only on the CPU with the reference torch."""
        session = self._session
        off_reference = session.lane != store.REFERENCE_TORCH or session.device != "cpu"
        if off_reference and store.is_reference(directory, target):
            raise store.GoldenError(  # accept_target never gives this; the guard keeps it so
                f"refusing to write the reference golden {target} from torch {session.lane} "
                f"on {session.device}"
            )
        if existing is not None and existing.body == actual:
            if path == target and store.stale_header(existing, fields):
                store.save(path, store.render(actual, fields))
            return
        if path == target and not store.is_reference(directory, path):
            # a variant that now says what the golden below it says is no longer needed
            below = store.lookup_below(directory, path, session.device, session.lane)
            golden = store.read(below) if below is not None else None
            if golden is not None and golden.body == actual:
                path.unlink()
                session.redundant.append((path, below))
                return
        store.save(target, store.render(actual, fields))


def accept_command(node, golden_id: str, full: bool) -> str:
    """A command that re-runs exactly this test with --accept, from the directory pytest was
    started in: the node id is made relative to it, and a model registered by a file this command
    would not load (a conftest of another suite) is named through HARNESS_MODELS."""
    config = node.config
    path, sep, rest = node.nodeid.partition("::")
    rel = os.path.relpath(Path(config.rootpath) / path, config.invocation_params.dir)
    parts = ["pytest", "--accept", shlex.quote(rel + sep + rest)] + (["--full"] if full else [])
    zoo = _zoo()
    spec = zoo._REGISTRY.get(names.model_of(golden_id)) if zoo else None
    if (
        spec is not None
        and spec.origin
        and spec.origin != zoo.BUILTIN_ORIGIN
        and spec.origin not in user_models.LOADED_FILES
        and spec.origin != str(Path(node.path).resolve())
    ):
        origin = os.path.relpath(spec.origin, config.invocation_params.dir)
        parts.insert(0, f"{user_models.ENV_VAR}={shlex.quote(origin)}")
    return " ".join(parts)


def _display(path: Path, config) -> Path:
    """`expect/x.expect` rather than an absolute path, when the golden lies below the cwd."""
    rel = os.path.relpath(path, config.invocation_params.dir)
    return Path(rel) if not rel.startswith("..") else path


_KEY = pytest.StashKey[GoldenSession]()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "golden(id): this test produces the golden expect/<id>.expect"
    )
    session = GoldenSession(config)
    config.stash[_KEY] = session
    _load_user_models(config)
    if (
        session.accept
        and settings.CI.get()
        and not (config.getoption("force_accept") or settings.FORCE_ACCEPT.get())
    ):
        raise pytest.UsageError(
            "refusing to accept goldens because CI is set: in CI goldens are only compared. Run "
            "`pytest --accept` locally and commit the reviewed goldens, or pass --force-accept "
            f"({settings.FORCE_ACCEPT.name}=1) if you really mean to rewrite them here."
        )
    if session.full:
        os.environ[settings.FULL.name] = settings.FULL.encode(
            True
        )  # so that suites read one switch
    if session.device != "cpu":
        import torch

        if torch.device(session.device).type == "cuda" and not torch.cuda.is_available():
            raise pytest.UsageError(
                f"{settings.GOLDEN_DEVICE.name}={session.device} but torch sees no CUDA GPU "
                "here; unset it to capture on the CPU"
            )


def _load_user_models(config) -> None:
    """Register the user's own models before collection (see harness.core.user_models)."""
    values = config.getini(user_models.INI_OPTION)
    if not user_models.configured(values):
        return  # nothing named: the registry (and torch) is not imported for nothing
    inipath = getattr(config, "inipath", None)
    try:
        user_models.load_user_models(
            values,
            Path(inipath).parent if inipath else Path(config.rootpath),
            inipath.name if inipath else None,
        )
    except exits.BadInput as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture
def golden(request) -> GoldenFixture:
    return GoldenFixture(request.config.stash[_KEY], request.node)


@pytest.fixture(scope="session")
def golden_device(pytestconfig) -> str:
    """Where golden tests capture: "cpu" unless HARNESS_GOLDEN_DEVICE names another device."""
    return pytestconfig.stash[_KEY].device


@pytest.fixture(scope="session")
def model_size(pytestconfig) -> str:
    """ "small" by default, "full" under --full / HARNESS_FULL=1."""
    return pytestconfig.stash[_KEY].size


def pytest_deselected(items):
    if items:
        items[0].config.stash[_KEY].deselected = True


def pytest_collection_modifyitems(session, config, items):
    state = config.stash[_KEY]
    for item in items:
        for mark in item.iter_markers("golden"):
            if mark.args:
                state.declared.add(mark.args[0])


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: gather what each worker collected and produced."""
    out = getattr(node, "workeroutput", {}) or {}
    state = node.config.stash[_KEY]
    state.declared.update(out.get("harness_declared", []))
    state.produced.update(out.get("harness_produced", []))
    state.redundant += [(Path(a), Path(b)) for a, b in out.get("harness_redundant", [])]
    state.deselected |= bool(out.get("harness_deselected"))
    state.models.update(out.get("harness_models", []))


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    state = config.stash[_KEY]
    if _is_worker(config):
        config.workeroutput["harness_declared"] = sorted(state.declared)
        config.workeroutput["harness_produced"] = sorted(state.produced)
        config.workeroutput["harness_redundant"] = [[str(a), str(b)] for a, b in state.redundant]
        config.workeroutput["harness_deselected"] = state.deselected
        config.workeroutput["harness_models"] = sorted(state.registered_models())
        return
    if state.filtered() or not (state.declared or state.produced):
        return  # a partial view, or a run with no golden tests: orphans cannot be judged
    state.orphans, state.unknown = state.find_orphans()
    passed = exitstatus == pytest.ExitCode.OK
    if state.accept and passed:
        for path in state.orphans:
            path.unlink(missing_ok=True)
            state.removed.append(path)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash[_KEY]
    lines = []
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and getattr(config.option, "keyword", ""):
        lines += _nothing_selected_hint(config, state)
    for path in state.unknown:
        model = names.model_of(path.name[: -len(store.SUFFIX)])
        lines.append(f"kept golden {path}: model {model!r} not registered in this run")
    if state.unknown:
        lines.append(
            f"(its model may live in a suite outside this run: name that module in the ini option "
            f"`{user_models.INI_OPTION}` or in {user_models.ENV_VAR} so every run knows it; delete "
            f"the file yourself if the model is gone)"
        )
    lines += [f"removed orphan golden {path} (no test produces it)" for path in state.removed]
    lines += [
        f"removed variant {path}: this run prints what {below} holds"
        for path, below in state.redundant
    ]
    if state.orphans and not state.removed:
        lines += [f"orphan golden {path}: no test produces it" for path in state.orphans]
        lines.append("an unfiltered, passing `pytest --accept` run removes them")
    if lines:
        terminalreporter.section("harness goldens")
        for line in lines:
            terminalreporter.write_line(line)


def _nothing_selected_hint(config, state) -> list[str]:
    registered = sorted(state.registered_models())
    return [
        f"no test matched -k {config.option.keyword!r}. Models registered in this run: "
        f"{', '.join(registered) or 'none (the graph suite was not collected)'}.",
        "A model of your own is seen by every run (pytest and `harness`) when its module is named "
        f"in the ini option `{user_models.INI_OPTION}`, in {user_models.ENV_VAR}, or by an "
        f"installed package's `{user_models.ENTRY_POINT_GROUP}` entry point; see README "
        "'Adding a model'.",
    ]
