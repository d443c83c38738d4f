"""Shared test set-up for tests/.

pytester's in-process runs (test_capture, test_device_goldens, test_user_models) snapshot
sys.modules and drop every module the inner run imported. torch registers dynamo's debug
backends in a process-wide registry when `torch._dynamo.repro.after_dynamo` is first imported
(lazily, by the first torch.compile). Dropped from sys.modules, it is imported again by the next
torch.compile in that worker, re-registers and fails: "duplicate name: dynamo_minifier_backend".
Whether an earlier test had imported it depended on how xdist spread the tests; now it is
imported before any pytester run.
"""

import dataclasses
import os
import pathlib
import subprocess

import pytest

from harness.core import user_models, zoo


@pytest.fixture(autouse=True)
def _torch_lazy_modules_outlive_pytester(request):
    if "pytester" in request.fixturenames:
        import torch._dynamo.repro.after_aot  # noqa: F401
        import torch._dynamo.repro.after_dynamo  # noqa: F401
    yield


@pytest.fixture(autouse=True)
def _environment_outlives_no_test():
    # `--project` sets HARNESS_PROJECT in os.environ for the processes a command starts; in a
    # test's in-process main() that would point every later test in the worker at its project.
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def clean_registry(monkeypatch):
    """Loading registers into process-wide state: put it back after each test."""
    registry, loaded, files = (
        dict(zoo._REGISTRY),
        set(user_models._LOADED),
        set(user_models.LOADED_FILES),
    )
    monkeypatch.delenv(user_models.ENV_VAR, raising=False)
    yield
    zoo._REGISTRY.clear()
    zoo._REGISTRY.update(registry)
    user_models._LOADED.clear()
    user_models._LOADED.update(loaded)
    user_models.LOADED_FILES.clear()
    user_models.LOADED_FILES.update(files)


# What a golden test run reads from the environment: cleared, so the developer's shell (CI set,
# an expect folder elsewhere, a GPU device) cannot change what a pytester run does.
GOLDEN_ENV = (
    "CI",
    "EXPECTTEST_ACCEPT",
    "HARNESS_EXPECT_DIR",
    "HARNESS_FORCE_ACCEPT",
    "HARNESS_FULL",
    "HARNESS_GOLDEN_DEVICE",
    "FAKE_GRAPH",
)


@pytest.fixture
def golden_project(pytester, monkeypatch):
    """`make(module, source)`: a pytester project with one golden test module and a clean
    golden environment."""

    def make(module: str, source: str):
        for var in GOLDEN_ENV:
            monkeypatch.delenv(var, raising=False)
        pytester.makeini("[pytest]\n")
        pytester.makepyfile(**{module: source})
        return pytester

    return make


@pytest.fixture
def short_tmp():
    """A folder of this test's own with a short path (/tmp/harness-test-XXXXXXXX), for use as a
    command's TMPDIR: pytest's tmp_path is too long for the sockets a run makes below it, and
    the run's scratch would go elsewhere (harness.runs.scratch.parent_folder). Removed after."""
    import shutil
    import tempfile

    from harness.runs.scratch import SHORT_TEMP

    path = pathlib.Path(tempfile.mkdtemp(prefix="harness-test-", dir=SHORT_TEMP[0]))
    yield path
    shutil.rmtree(path, ignore_errors=True)  # this fixture made it


# ---- history: a scratch repository of its own, never this checkout's other commits ----

ROOT = pathlib.Path(__file__).resolve().parents[1]

# harness/runs/worker.py in the history repository's commit from "before graph-diff": a worker
# without the graph-capture job, as the harness had before `harness graph-diff` came
WORKER_BEFORE_GRAPH_DIFF = '''"""A worker from before graph-diff (tests/conftest.py)."""
import argparse

parser = argparse.ArgumentParser(prog="python -m harness.runs.worker")
parser.add_subparsers(dest="job", required=True).add_parser("fingerprint")
parser.parse_args()
'''


def git(repo, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def clone_checkout(dest: pathlib.Path) -> str:
    """A one-commit clone of this checkout's HEAD (committed files only; detached, no branches),
    ready to commit in; returns that HEAD's sha. The same repository whatever the checkout's
    history, branches or remotes: CI checks out one commit (`git clone --depth 1`), so tests
    that need history make it here, and commands that walk a branch (asv publish) run here."""
    head = git(ROOT, "rev-parse", "HEAD")
    subprocess.run(
        ["git", "clone", "--quiet", "--depth", "1", "--no-checkout", f"file://{ROOT}", str(dest)],
        check=True,
    )
    git(dest, "checkout", "--quiet", "--detach", head)
    git(dest, "remote", "remove", "origin")
    for branch in git(dest, "for-each-ref", "--format=%(refname:short)", "refs/heads").split():
        git(dest, "branch", "--quiet", "--delete", "--force", branch)
    git(dest, "config", "user.email", "tests@example.com")
    git(dest, "config", "user.name", "harness tests")
    return head


@pytest.fixture(scope="session")
def checkout_copy(tmp_path_factory) -> pathlib.Path:
    """This checkout's HEAD alone, in a repository of its own (clone_checkout), once per
    worker: where a command reads a branch's commits (asv publish walks them)."""
    repo = tmp_path_factory.mktemp("checkout") / "repo"
    clone_checkout(repo)
    return repo


@pytest.fixture(scope="session")
def checkout_clone():
    """clone_checkout, for tests that build a history of their own."""
    return clone_checkout


@dataclasses.dataclass(frozen=True)
class History:
    path: pathlib.Path
    shas: list[str]  # oldest first: this checkout's HEAD, then the three commits made on it
    before_graph_diff: str  # shas[1]: its harness has no graph-diff (no graph-capture worker)
    graph_diff_added: str  # shas[2]: the harness of this checkout again, graph-diff included


@pytest.fixture(scope="session")
def history(tmp_path_factory) -> History:
    """A scratch repository: this checkout's HEAD and three commits on it, HEAD~3..HEAD. The
    first removes graph-diff (harness/golden/graphdiff.py and the graph-capture worker), the
    second puts this checkout's harness back, the third changes a file of its own. Built once
    per worker (~0.2 s); tests that work in it use `in_history`."""
    repo = tmp_path_factory.mktemp("history") / "repo"
    shas = [clone_checkout(repo)]
    graphdiff, worker = "harness/golden/graphdiff.py", "harness/runs/worker.py"
    git(repo, "rm", "--quiet", graphdiff)
    (repo / worker).write_text(WORKER_BEFORE_GRAPH_DIFF)
    for message, change in [
        ("a harness from before graph-diff", lambda: None),
        ("graph-diff", lambda: git(repo, "checkout", shas[0], "--", graphdiff, worker)),
        ("a later commit", lambda: (repo / "history-scratch.txt").write_text("later\n")),
    ]:
        change()
        git(repo, "add", "--all")
        git(repo, "commit", "--quiet", "--message", message)
        shas.append(git(repo, "rev-parse", "HEAD"))
    return History(repo, shas, shas[1], shas[2])


@pytest.fixture
def in_history(history, monkeypatch) -> History:
    """Work in the history repository: its folder is the cwd and the harness's checkout
    (HARNESS_PROJECT, as --project sets it for the whole process; put back after the test)."""
    from harness.core import settings

    monkeypatch.chdir(history.path)
    monkeypatch.setenv(settings.PROJECT.name, str(history.path))
    return history


@pytest.fixture
def own_store_settings(monkeypatch):
    """The results-history tests' own settings: no store remote, ref or results root of the
    environment, the default caps, no project (put back after a test's --project sets it), and
    a short push retry."""
    from harness.core import settings

    for s in (
        settings.STORE_REMOTE,
        settings.STORE_REF,
        settings.RESULTS_DIR,
        settings.MAX_FILE_BYTES,
        settings.MAX_JSON_TOKENS,
        settings.STORE_PULL_MAX_BYTES,
        settings.STORE_PULL_MAX_REPEATED_BYTES,
    ):
        monkeypatch.delenv(s.name, raising=False)
    monkeypatch.setenv(settings.PROJECT.name, "")
    monkeypatch.setenv(settings.STORE_RETRY_S.name, "20")


@pytest.fixture(scope="module")
def light_git_spawns():
    """The git processes the harness starts in this test process (harness.core.gitrepo and
    gittree, through processes.start_in_session), started without the PR_SET_PDEATHSIG hook:
    a pre-exec hook makes Python fork() the whole worker instead of vfork(), and a worker that
    has imported torch and captured graphs (1 GB and more) takes 35 ms a fork on an idle core
    against 7 ms (`harness store` itself never imports torch). Used by the results-history
    tests (some 1,500 git calls); the hook itself is proven by tests/test_processes.py."""
    import subprocess

    from harness.core import processes

    def start_in_session(cmd, **popen):
        processes.check_terminated()
        return subprocess.Popen(cmd, start_new_session=True, **popen)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(processes, "start_in_session", start_in_session)
        yield
