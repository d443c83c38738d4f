"""Shared test set-up for tests/.

pytester's in-process runs (test_capture, test_device_goldens, test_user_models) snapshot
sys.modules and drop every module the inner run imported. torch registers dynamo's debug
backends in a process-wide registry when `torch._dynamo.repro.after_dynamo` is first imported
(lazily, by the first torch.compile). Dropped from sys.modules, it is imported again by the next
torch.compile in that worker, re-registers and fails: "duplicate name: dynamo_minifier_backend".
Whether an earlier test had imported it depended on how xdist spread the tests; now it is
imported before any pytester run.
"""

import pathlib

import pytest

from harness.core import user_models, zoo


@pytest.fixture(autouse=True)
def _torch_lazy_modules_outlive_pytester(request):
    if "pytester" in request.fixturenames:
        import torch._dynamo.repro.after_aot  # noqa: F401
        import torch._dynamo.repro.after_dynamo  # noqa: F401
    yield


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
