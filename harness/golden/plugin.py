"""pytest plugin: wires the options and the `golden` fixture; the store lives in store.py.

Options: `--accept` (or EXPECTTEST_ACCEPT=1) writes goldens; `--full` (or HARNESS_FULL=1) uses the
full model configurations and their goldens under `expect/full/`. `HARNESS_GOLDEN_DEVICE=cuda`
captures on the GPU (fixture `golden_device`): a committed variant `expect/cuda/<id>.expect` is
then used where one exists, else the CPU golden; accepting there writes a variant only where the
GPU printout differs from the CPU golden. Under a torch whose major.minor is not the reference
one, a committed `expect/torch-<major.minor>/<id>.expect` (or `expect/<device>/torch-<m.m>/`) is
used the same way, and `--accept` writes there: the reference goldens are only ever written by
the reference torch on the CPU (harness.golden.store.candidates). With CI set, accepting is
refused unless `--force-accept` (or HARNESS_FORCE_ACCEPT=1) is given too. A project of its own
names the torch its goldens are recorded with in the ini option `harness_reference_torch`
(default: this repository's reference, store.REFERENCE_TORCH).

A test's own model: `golden.check_graph(model, inputs, frontend="export")` captures it, compares
the canonical printout with `<test module>.<test name>-<frontend>` (harness.core.names) and
accepts it as `golden.check` does; those ids are declared for every test that uses the fixture
without a `golden` mark.

Models of your own: modules named by the ini option `harness_models`, HARNESS_MODELS or the
`harness.models` entry-point group are loaded at configure time (harness.core.user_models), before
collection, so the graph suite parametrizes over them and `-k tiny_cnn` selects them. Outside a
harness checkout (rootdir is not one) the packaged graph suite (`pytest --pyargs harness.suites`)
covers those models only, never the built-in zoo (HARNESS_OWN_MODELS, set for the run).

Orphans: every test declares the goldens it produces with `@pytest.mark.golden("id")`. After an
unfiltered run, goldens that no collected test declares are reported; an unfiltered `--accept`
run that passed removes them. A filtered run (-k, -m, a file or node id, --lf, deselection)
never touches them. A golden id is `<model>.<frontend>` (or `<test module>.<test>-<frontend>`): a
golden whose model (or test module) no test of this run declares goldens of is never an orphan --
it may belong to a suite that is not part of this run -- it is reported as such and kept. Under
pytest-xdist the workers report what they collected and the controller decides, so orphans are
computed once. Variants are orphans with their golden id.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from harness.core import exits, names, project, settings, user_models
from harness.golden import store

REFERENCE_OPTION = "harness_reference_torch"


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
        REFERENCE_OPTION,
        "the torch release (major.minor, e.g. 2.14) the goldens in the expect folder are recorded "
        "with; under another torch, goldens that differ go to expect/torch-<major.minor>/ "
        f"(default {store.REFERENCE_TORCH}, the harness's own)",
        default="",
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
        reference = (config.getini(REFERENCE_OPTION) or "").strip()
        self.reference = store.torch_lane(reference) if reference else store.REFERENCE_TORCH
        self.directory_forced = settings.EXPECT_DIR.is_set()
        self.declared: set[str] = set()
        self.produced: set[str] = set()
        self.auto_owners: dict[str, str] = {}  # check_graph's automatic ids -> the test's node id
        self.deselected = False
        self.set_own_models = False  # this run set HARNESS_OWN_MODELS (removed at the end)
        self.orphans: list[Path] = []
        self.unknown: list[Path] = []  # goldens of models this run does not know: kept
        self.removed: list[Path] = []
        self.redundant: list[tuple[Path, Path]] = []  # (variant removed by --accept, its fallback)
        self.written: list[tuple[str, Path]] = []  # ("new" or "updated", path) by --accept

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
            if "::" in arg:
                return True
            if Path(self.config.invocation_params.dir, path).is_dir():
                continue
            if not (getattr(opt, "pyargs", False) and _is_package(path)):
                return True
        return False

    def find_orphans(self) -> tuple[list[Path], list[Path]]:
        """(orphans: goldens of known models that no test declares, goldens of unknown models).
        A model (or test module) is known when a test of this run declares goldens of it: a
        model registered but not covered by this run (a project's `pytest` beside its
        `pytest --pyargs harness.suites`) keeps its goldens."""
        known = self.declared | self.produced
        models = {names.model_of(i) for i in known}
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
        self._claimed: set[str] = set()  # check_graph's golden ids in this test

    @property
    def size(self) -> str:
        return self._session.size

    def _check_id_is_its_own(self, golden_id: str, name: str | None) -> None:
        """Two tests never share one golden (same-named modules in two folders would, by the
        automatic id); a name= that starts with the test's module is declared with a mark, else
        an --accept run in which the test skipped would remove it as an orphan."""
        node = self._node.nodeid
        owner = self._session.auto_owners.setdefault(golden_id, node)
        if owner != node:
            pytest.fail(
                f"{node} and {owner} both check the golden {golden_id}: rename one test or its "
                "module, or pass name=",
                pytrace=False,
            )
        module = Path(self._node.path).stem
        declared = {m.args[0] for m in self._node.iter_markers("golden") if m.args}
        if name and names.model_of(name) == module and name not in declared:
            pytest.fail(
                f"{node}: declare the golden {name} with @pytest.mark.golden({name!r}) (a test "
                "that skips keeps only declared goldens of its module)",
                pytrace=False,
            )

    def _default_id(self) -> str:
        marks = list(self._node.iter_markers("golden"))
        if len(marks) != 1 or not marks[0].args:
            raise pytest.UsageError(
                f"{self._node.nodeid}: declare the golden with "
                "@pytest.mark.golden('model.frontend') or pass name="
            )
        return marks[0].args[0]

    def check_graph(self, model, inputs, frontend: str = "export", *, name: str | None = None):
        """Capture `model` on `inputs` (a tuple, or one tensor) with one front end (jit, fx,
        export, dynamo, aot), in eval mode, and compare its canonical printout with the golden
        `<test module>.<test name>-<frontend>` (or `name`), as the graph suite does: a diff and
        the op counts that changed on a mismatch; `pytest --accept` records it. Eager output that
        differs between two runs on the same input fails first, so a random draw is never
        accepted. On HARNESS_GOLDEN_DEVICE the model and inputs are moved there. Returns the
        capture (`.text`, `.program`)."""
        from harness.core.determinism import nondeterminism
        from harness.golden.capture import CaptureError, capture, on_device

        if frontend not in names.FRONTENDS:
            pytest.fail(
                f"unknown front end {frontend!r}; choose from {', '.join(names.FRONTENDS)}",
                pytrace=False,
            )
        golden_id = name or auto_id(self._node, frontend)
        if golden_id in self._claimed:
            pytest.fail(
                f"{self._node.nodeid} checks the golden {golden_id} twice; pass name= to give "
                "each graph of one test and front end its own golden",
                pytrace=False,
            )
        self._claimed.add(golden_id)
        self._check_id_is_its_own(golden_id, name)
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        device = self._session.device
        label = type(model).__name__
        training = model.training
        model.eval()
        try:
            model, inputs = on_device(model, device), on_device(inputs, device)
            problem = nondeterminism(model, inputs, label=f"{label} in {self._node.name}")
            if problem:
                pytest.fail(problem, pytrace=False)  # before the compare: never accept it
            try:
                captured = capture(model, inputs, frontend, label=f"{label} in {self._node.name}")
            except CaptureError as exc:
                pytest.fail(str(exc), pytrace=False)
        finally:
            model.train(training)
        where = {} if device == "cpu" else {"device": device}
        self.check(captured.text, name=golden_id, frontend=frontend, model=label, **where)
        return captured

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
        where = (directory, golden_id, session.device, session.lane, session.reference)
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
                _display(path, config),
                _display(target, config),
                session.lane,
                hint,
                session.reference,
            )
            message = store.mismatch_message(existing, actual, what, hint, (note,) if note else ())
            pytest.fail(message, pytrace=False)

    def _accept(self, directory, path, target, existing, actual, fields) -> None:
        """Write what this run captured where it belongs. An equal golden is left alone, so
        accepting twice gives byte-identical files (only a stale header is rewritten). A
        printout that differs goes to the most specific variant (another device, another
        torch): the reference golden only on the CPU with the reference torch."""
        session = self._session
        off_reference = session.lane != session.reference or session.device != "cpu"
        if off_reference and store.is_reference(directory, target):
            raise store.GoldenError(  # accept_target never gives this; the guard keeps it so
                f"refusing to write the reference golden {target} from torch {session.lane} "
                f"on {session.device}"
            )
        if existing is not None and existing.body == actual:
            if path == target and store.stale_header(existing, fields):
                store.save(path, store.render(actual, fields))
                session.written.append((UPDATED, path))
            return
        if path == target and not store.is_reference(directory, path):
            # a variant that now says what the golden below it says is no longer needed
            below = store.lookup_below(
                directory, path, session.device, session.lane, session.reference
            )
            golden = store.read(below) if below is not None else None
            if golden is not None and golden.body == actual:
                path.unlink()
                session.redundant.append((path, below))
                return
        kind = UPDATED if target.exists() else NEW
        store.save(target, store.render(actual, fields))
        session.written.append((kind, target))


def _selectable_nodeid(node) -> str:
    """The node id pytest can select: under `--dist loadgroup` xdist (and the project's root
    conftest) append `@<groups>` to it, a suffix no command line accepts."""
    nodeid = node.nodeid
    groups = sorted(
        {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in node.iter_markers("xdist_group")
        }
    )
    suffix = f"@{'_'.join(groups)}"
    if groups and nodeid.endswith(suffix):
        return nodeid[: -len(suffix)]
    return nodeid


def accept_command(node, golden_id: str, full: bool) -> str:
    """A command that re-runs exactly this test with --accept, from the directory pytest was
    started in: the node id is made relative to it, and a model registered by a file this command
    would not load (a conftest of another suite) is named through HARNESS_MODELS."""
    config = node.config
    path, sep, rest = _selectable_nodeid(node).partition("::")
    if Path(config.rootpath).resolve() in Path(node.path).resolve().parents:  # links too
        rel = os.path.relpath(Path(config.rootpath) / path, config.invocation_params.dir)
        parts = ["pytest", "--accept", shlex.quote(rel + sep + rest)]
    else:  # a suite of an installed package (`pytest --pyargs harness.suites`): by module name
        module = _module_name(Path(node.path).resolve()) or node.module.__name__
        parts = ["pytest", "--accept", "--pyargs", shlex.quote(module + sep + rest)]
    parts += ["--full"] if full else []
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


def auto_id(node, frontend: str) -> str:
    """The golden id check_graph gives a test's graph: `<test module>.<test name>-<frontend>`
    (classes and parameters included; harness.core.names.test_golden_id)."""
    classes = node.nodeid.split("::")[1:-1]
    test = getattr(node, "originalname", None) or node.name.split("[")[0]
    callspec = getattr(node, "callspec", None)
    return names.test_golden_id(
        Path(node.path).stem, ".".join([*classes, test]), callspec.id if callspec else "", frontend
    )


def _module_name(path: Path) -> str | None:
    """`harness.suites.test_graphs` for a file of the packaged suites (in an editable install
    they lie in the checkout's suites/, which pytest would name `suites.test_graphs`)."""
    try:
        rel = path.relative_to(project.packaged_suites().resolve()).with_suffix("")
    except (ValueError, exits.BadInput):
        return None
    return ".".join([project.PACKAGE, *rel.parts])


def _is_package(name: str) -> bool:
    """`--pyargs NAME` naming a package (a folder of tests), not a module or a test."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return bool(spec and spec.submodule_search_locations)


def _display(path: Path, config) -> Path:
    """`expect/x.expect` rather than an absolute path, when the golden lies below the cwd."""
    rel = os.path.relpath(path, config.invocation_params.dir)
    return Path(rel) if not rel.startswith("..") else path


_KEY = pytest.StashKey[GoldenSession]()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "golden(id): this test produces the golden expect/<id>.expect"
    )
    config.addinivalue_line(
        "markers", "slow: the harness suites' second tier (captured program against eager)"
    )
    # the graph suite groups each model's tests on one worker under pytest-xdist's loadgroup;
    # registered here too, so a run without pytest-xdist (not a dependency) does not warn
    config.addinivalue_line(
        "markers", "xdist_group(name): pytest-xdist runs tests of one group on one worker"
    )
    session = GoldenSession(config)
    config.stash[_KEY] = session
    try:
        checkout = project.is_checkout(Path(config.rootpath))
    except exits.BadInput as exc:
        raise pytest.UsageError(str(exc)) from None
    if not checkout and not settings.OWN_MODELS.is_set():
        # the packaged graph suite covers this project's models, not the built-in zoo
        os.environ[settings.OWN_MODELS.name] = settings.OWN_MODELS.encode(True)
        session.set_own_models = True
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


def pytest_unconfigure(config):
    session = config.stash.get(_KEY, None)
    if session is not None and session.set_own_models:
        os.environ.pop(settings.OWN_MODELS.name, None)


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
        marks = [mark for mark in item.iter_markers("golden") if mark.args]
        state.declared.update(mark.args[0] for mark in marks)
        if not marks and "golden" in getattr(item, "fixturenames", ()):
            # check_graph's ids, whatever front ends the test uses
            state.declared.update(auto_id(item, frontend) for frontend in names.FRONTENDS)


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
    state.written += [(kind, Path(p)) for kind, p in out.get("harness_written", [])]


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    state = config.stash[_KEY]
    if _is_worker(config):
        config.workeroutput["harness_declared"] = sorted(state.declared)
        config.workeroutput["harness_produced"] = sorted(state.produced)
        config.workeroutput["harness_redundant"] = [[str(a), str(b)] for a, b in state.redundant]
        config.workeroutput["harness_deselected"] = state.deselected
        config.workeroutput["harness_written"] = [[k, str(p)] for k, p in state.written]
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
        golden_id = path.name[: -len(store.SUFFIX)]
        model = names.model_of(golden_id)
        if model in state.registered_models():
            why = f"no test of this run covers model {model!r}"
        elif golden_id.rsplit("-", 1)[-1] in names.FRONTENDS:  # check_graph's
            why = f"test module {model!r} is not part of this run"
        else:
            why = f"model {model!r} not registered in this run"
        lines.append(f"kept golden {path}: {why}")
    if state.unknown:
        lines.append(
            "(it may belong to tests outside this run; a model is known to every run when its "
            f"module is named in the ini option `{user_models.INI_OPTION}` or in "
            f"{user_models.ENV_VAR}. Delete the file yourself if its model or test is gone)"
        )
    lines += [f"removed orphan golden {path} (no test produces it)" for path in state.removed]
    lines += [
        f"removed variant {path}: this run prints what {below} holds"
        for path, below in state.redundant
    ]
    if state.orphans and not state.removed:
        lines += [f"orphan golden {path}: no test produces it" for path in state.orphans]
        lines.append("an unfiltered, passing `pytest --accept` run removes them")
    if state.accept and (state.produced or state.written or state.removed or state.redundant):
        lines += accept_summary(state, config)
    if lines:
        terminalreporter.section("harness goldens")
        for line in lines:
            terminalreporter.write_line(line)


NEW, UPDATED, REMOVED = "new", "updated", "removed"
LIST_AT_MOST = 12  # paths listed one per line; past this the counts alone


def accept_summary(state: GoldenSession, config) -> list[str]:
    """What an --accept run wrote, updated and removed: the counts, then each path (one line
    each) unless there are more than LIST_AT_MOST."""
    changes = sorted(set(state.written), key=lambda c: (str(c[1]), c[0]))
    changes += [(REMOVED, p) for p in state.removed] + [(REMOVED, p) for p, _ in state.redundant]
    counts = {k: sum(kind == k for kind, _ in changes) for k in (NEW, UPDATED, REMOVED)}
    written = counts[NEW] + counts[UPDATED]
    if not changes:
        return ["pytest --accept: no golden written, updated or removed (every one matched)"]
    head = (
        f"pytest --accept: {written} golden(s) written ({counts[NEW]} new, {counts[UPDATED]} "
        f"updated), {counts[REMOVED]} removed"
    )
    if len(changes) > LIST_AT_MOST:
        folders = sorted({f"{_display(path.parent, config)}/" for _, path in changes})
        where = " ".join(folders[:3]) + (" ..." if len(folders) > 3 else "")
        return [f"{head}, in {where}; review them with `git status {where}` and `git diff {where}`"]
    return [head + ":"] + [f"  {kind:<8} {_display(path, config)}" for kind, path in changes]


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
