"""pytest plugin: wires the options and the `golden` fixture; the store lives in store.py.

Options: `--accept` (or EXPECTTEST_ACCEPT=1) writes goldens; `--full` (or HARNESS_FULL=1) uses the
full model configurations and their goldens under `expect/full/`. `HARNESS_GOLDEN_DEVICE=cuda`
captures on the GPU (fixture `golden_device`): a committed variant `expect/cuda/<id>.expect` is
then used where one exists, else the CPU golden; accepting there writes a variant only where the
GPU printout differs from the CPU golden. With CI set, accepting is
refused unless `--force-accept` (or HARNESS_FORCE_ACCEPT=1) is given too.

Orphans: every test declares the goldens it produces with `@pytest.mark.golden("id")`. After an
unfiltered run, goldens that no collected test declares are reported; an unfiltered `--accept`
run that passed removes them. A filtered run (-k, -m, a file or node id, --lf, deselection)
never touches them. Under pytest-xdist the workers report what they collected and the
controller decides, so orphans are computed once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.core import switches
from harness.golden import store


def pytest_addoption(parser):
    group = parser.getgroup("harness", "graph goldens")
    group.addoption("--accept", action="store_true", default=False,
                    help="write or update goldens instead of comparing (also EXPECTTEST_ACCEPT=1)")
    group.addoption("--force-accept", action="store_true", default=False,
                    help="allow --accept even when CI is set (also HARNESS_FORCE_ACCEPT=1)")
    group.addoption("--full", action="store_true", default=False,
                    help="use full model sizes and expect/full/ goldens (also HARNESS_FULL=1)")
    parser.addini("harness_expect_dir", "directory of golden files, relative to rootdir", default="expect")


class GoldenSession:
    """Per-process state: where goldens live, what this run declared and produced."""

    def __init__(self, config):
        self.config = config
        self.accept = config.getoption("accept") or switches.flag("EXPECTTEST_ACCEPT")
        self.full = config.getoption("full") or switches.full_mode()
        root = Path(os.environ.get("HARNESS_EXPECT_DIR") or
                    Path(config.rootpath) / config.getini("harness_expect_dir"))
        self.directory = root / "full" if self.full else root
        self.device = (os.environ.get("HARNESS_GOLDEN_DEVICE") or "cpu").strip().lower()
        self.declared: set[str] = set()
        self.produced: set[str] = set()
        self.deselected = False
        self.orphans: list[Path] = []
        self.removed: list[Path] = []

    @property
    def size(self) -> str:
        return "full" if self.full else "small"

    def filtered(self) -> bool:
        """True when this run may not see every test: then orphans are never removed."""
        opt = self.config.option
        if getattr(opt, "keyword", "") or getattr(opt, "markexpr", "") or self.deselected:
            return True
        if getattr(opt, "lf", False) or getattr(opt, "deselect", None) or getattr(opt, "failedfirst", False):
            return True
        for arg in self.config.args:
            path = arg.split("::")[0]
            if "::" in arg or not Path(self.config.invocation_params.dir, path).is_dir():
                return True
        return False

    def find_orphans(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        known = self.declared | self.produced
        return sorted(p for p in self.directory.glob("*" + store.SUFFIX)
                      if p.name[: -len(store.SUFFIX)] not in known)


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
            raise pytest.UsageError(f"{self._node.nodeid}: declare the golden with "
                                    "@pytest.mark.golden('model.frontend') or pass name=")
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
        path = store.lookup(session.directory, golden_id, session.device)
        variant = store.variant_path(session.directory, golden_id, session.device)
        session.produced.add(golden_id)
        actual = store.normalize(text)
        try:
            existing = store.read(path)
        except store.GoldenError:
            if not session.accept:
                raise
            existing = None  # accepting rewrites an unreadable golden; git still has the old one
        if session.accept:
            # Leave an equal golden alone, so accepting twice gives byte-identical files. On a
            # device, a printout that differs from the CPU golden goes to the device's variant.
            if existing is None or existing.body != actual:
                target = variant or path
                store.save(target, store.render(actual, fields))
            return
        if existing is None:
            pytest.fail(f"no golden {_display(path, self._node.config)} yet for {golden_id}. Create it with:\n"
                        f"  pytest --accept {self._node.nodeid!r}{' --full' if session.full else ''}\n"
                        f"then review and commit it.", pytrace=False)
        if existing.body != actual:
            existing.path = _display(path, self._node.config)
            what = ", ".join(f"{k} {v}" for k, v in fields.items()) or golden_id
            hint = f"pytest --accept {self._node.nodeid!r}{' --full' if session.full else ''}"
            pytest.fail(store.mismatch_message(existing, actual, what, hint), pytrace=False)


def _display(path: Path, config) -> Path:
    """`expect/x.expect` rather than an absolute path, when the golden lies below the cwd."""
    rel = os.path.relpath(path, config.invocation_params.dir)
    return Path(rel) if not rel.startswith("..") else path


_KEY = pytest.StashKey[GoldenSession]()


def pytest_configure(config):
    config.addinivalue_line("markers", "golden(id): this test produces the golden expect/<id>.expect")
    session = GoldenSession(config)
    config.stash[_KEY] = session
    if session.accept and switches.in_ci() and not (config.getoption("force_accept") or
                                                 switches.flag("HARNESS_FORCE_ACCEPT")):
        raise pytest.UsageError(
            "refusing to accept goldens because CI is set: in CI goldens are only compared. Run "
            "`pytest --accept` locally and commit the reviewed goldens, or pass --force-accept "
            "(HARNESS_FORCE_ACCEPT=1) if you really mean to rewrite them here.")
    if session.full:
        os.environ["HARNESS_FULL"] = "1"  # so that suites read one switch
    if session.device != "cpu":
        import torch

        if torch.device(session.device).type == "cuda" and not torch.cuda.is_available():
            raise pytest.UsageError(f"HARNESS_GOLDEN_DEVICE={session.device} but torch sees no CUDA GPU "
                                    "here; unset it to capture on the CPU")


@pytest.fixture
def golden(request) -> GoldenFixture:
    return GoldenFixture(request.config.stash[_KEY], request.node)


@pytest.fixture(scope="session")
def golden_device(pytestconfig) -> str:
    """Where golden tests capture: "cpu" unless HARNESS_GOLDEN_DEVICE names another device."""
    return pytestconfig.stash[_KEY].device


@pytest.fixture(scope="session")
def model_size(pytestconfig) -> str:
    """"small" by default, "full" under --full / HARNESS_FULL=1."""
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
    state.deselected |= bool(out.get("harness_deselected"))


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    state = config.stash[_KEY]
    if _is_worker(config):
        config.workeroutput["harness_declared"] = sorted(state.declared)
        config.workeroutput["harness_produced"] = sorted(state.produced)
        config.workeroutput["harness_deselected"] = state.deselected
        return
    if state.filtered() or not (state.declared or state.produced):
        return  # a partial view, or a run with no golden tests: orphans cannot be judged
    state.orphans = state.find_orphans()
    passed = exitstatus == pytest.ExitCode.OK
    if state.accept and passed:
        for path in state.orphans:
            path.unlink(missing_ok=True)
            state.removed.append(path)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash[_KEY]
    if state.removed:
        terminalreporter.section("harness goldens")
        for path in state.removed:
            terminalreporter.write_line(f"removed orphan golden {path} (no test produces it)")
    elif state.orphans:
        terminalreporter.section("harness goldens")
        for path in state.orphans:
            terminalreporter.write_line(f"orphan golden {path}: no test produces it")
        terminalreporter.write_line("an unfiltered, passing `pytest --accept` run removes them")
