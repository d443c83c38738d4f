"""What `harness init` writes: a minimal project of its own, with graph goldens and benchmarks.

The files (`plan`): the pytest configuration (the models module, the reference torch), a
models module registering one small example model, a test module of golden tests
(`golden.check_graph`), the project's own asv benchmark module, an asv configuration marked as
a project of its own (harness.core.project), `expect/`, `results/` (its run records git-ignored)
and a README section of the commands. Where any of them exists, or where the pytest.ini would
shadow a pytest configuration the folder already has, nothing is written (`conflicts`). Nothing
here runs git: results are filed by commit, so `harness bench` asks for the first commit.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from pathlib import Path

from harness.core import files
from harness.core.exits import BadInput
from harness.core.project import ASV_CONF, OWN_MARKER, is_checkout

README_HEADING = "## Graph goldens and benchmarks (harness)"


@dataclasses.dataclass(frozen=True)
class Entry:
    path: str  # relative to the project folder
    text: str
    what: str  # one line for the summary
    append: bool = False  # README.md: a section added to an existing file
    optional: bool = False  # .gitignore: written only where none exists


def reference_torch() -> str:
    """The installed torch's release (major.minor): the project's goldens are recorded with it."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise BadInput("torch is not installed; install torch, then run harness init") from None
    return ".".join(version.split("+")[0].split(".")[:2])


def plan(folder: Path) -> list[Entry]:
    """Every file `harness init` writes into `folder`, in order."""
    folder = Path(folder)
    torch = reference_torch()
    readme = folder / "README.md"
    existing = _read_readme(readme)
    return [
        Entry("pytest.ini", PYTEST_INI.format(torch=torch), f"pytest: models, torch {torch}"),
        Entry("models.py", MODELS, "the project's models (an example: tiny_cnn)"),
        Entry("tests/test_zoo_graphs.py", ZOO_TESTS, "graph goldens of every registered model"),
        Entry("tests/test_model_graphs.py", TESTS, "graph goldens of any module (check_graph)"),
        Entry("benchmarks/__init__.py", BENCH_INIT, "the project's own asv benchmarks"),
        Entry("benchmarks/tiny_cnn.py", BENCH, "its first module (the suite tiny_cnn)"),
        Entry(ASV_CONF, asv_conf(folder.resolve().name), "asv: run through `harness bench`"),
        Entry("expect/.gitkeep", "", "goldens (commit them)"),
        Entry("results/.gitignore", RESULTS_IGNORE, "run records (kept out of git)"),
        Entry(".asv/.gitignore", "*\n", "asv's scratch (kept out of git)"),
        Entry(".gitignore", "__pycache__/\n", "Python's caches (kept out of git)", optional=True),
        Entry(
            "README.md",
            (
                existing.rstrip("\n") + "\n\n"
                if existing is not None
                else f"# {folder.resolve().name}\n\n"
            )
            + README,
            "the commands" + (" (a section added)" if existing is not None else ""),
            append=existing is not None,
        ),
    ]


def _read_readme(path: Path) -> str | None:
    """An existing README's text, read once here so that writing never stops halfway."""
    if not path.is_file() or path.is_symlink():
        return None  # a link is a conflict (conflicts())
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(
            f"cannot read {path} as UTF-8 text ({exc}); harness init adds a section to it: "
            "convert it to UTF-8, or run init in another folder"
        ) from None


def conflicts(folder: Path, entries: list[Entry]) -> list[str]:
    """Why `harness init` may not write into `folder`: every file it would write that exists,
    and every pytest configuration its pytest.ini would shadow (pytest reads pytest.ini first)."""
    folder = Path(folder)
    if is_checkout(folder):
        return [f"{folder} is a harness checkout: its suites and goldens are the harness's own"]
    found = []
    for entry in entries:
        path = folder / entry.path
        if entry.optional:
            continue
        if entry.append:
            if entry.text.count(README_HEADING) > 1:
                found.append(f"{path} (already holds the section {README_HEADING!r})")
        elif path.exists() or path.is_symlink():
            found.append(str(path))
    from harness.core.user_models import is_pytest_config

    for name in (".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        path = folder / name
        if path.is_file() and is_pytest_config(path):
            found.append(f"{path} (a pytest configuration that pytest.ini would override)")
    return found


def write(folder: Path, entries: list[Entry]) -> list[Entry]:
    """Write the entries (atomically, harness.core.files); returns those written."""
    folder = Path(folder)
    written = []
    for entry in entries:
        path = folder / entry.path
        if entry.optional and (path.exists() or path.is_symlink()):
            continue
        files.write_atomic(path, entry.text)
        written.append(entry)
    return written


def asv_conf(name: str) -> str:
    return ASV_CONF_TEXT.replace("@NAME@", json.dumps(name)).replace("@MARKER@", OWN_MARKER)


PYTEST_INI = """\
# Written by `harness init`. `pytest` compares graphs with expect/, `pytest --accept` records
# them (README.md lists the commands).
[pytest]
testpaths = tests
# the modules that register this project's models (harness.zoo.register_model): .py paths
# relative to this file, or importable module names; pytest and every `harness` command load them
harness_models = models.py
# the torch release (major.minor) the goldens in expect/ are recorded with: under another torch a
# graph that differs is recorded in expect/torch-<major.minor>/, and these goldens stay
harness_reference_torch = {torch}
"""

MODELS = '''\
"""This project's models, registered for the harness (`harness init` wrote this example).

pytest.ini names this module (`harness_models`), so pytest and every `harness` command load it.
Each model has a *small* configuration (seconds on two CPU cores: golden tests and quick
benchmarks) and a *full* one (the real sizes: `pytest --full`, `harness bench --full`); each
needs `batch` and `num_classes`, and the model's first output is logits over `num_classes`
(the training-step benchmarks take a loss of it).
"""

import torch
from torch import nn

from harness.zoo import register_model


class TinyCNN(nn.Module):
    def __init__(self, width: int = 8, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


register_model(
    "tiny_cnn",  # ASCII letters, digits and _: it becomes part of file names
    build=lambda cfg: TinyCNN(cfg["width"], cfg["num_classes"]),
    inputs=lambda cfg, gen: (
        torch.randn(cfg["batch"], 3, cfg["image"], cfg["image"], generator=gen),
    ),
    small={"batch": 2, "width": 8, "image": 32, "num_classes": 10},
    full={"batch": 32, "width": 64, "image": 224, "num_classes": 1000},
    image_model=True,  # the channels_last benchmarks apply
    kind="conv",  # a conv net: held against the published channels_last range for conv nets
    # instruction rows (callgrind, judged on any runner): its inference and training step are
    # counted by default; instructions="why" opts a model too big to count out, and
    # compile_instructions=True also counts what torch.compile spends compiling it.
    # torch.compile: every run compiles its inference once and checks that the compiled model
    # computes what eager does (a WRONG answer fails `harness gate`); compile="full" compiles
    # it in full runs only, compile="why" never (its rows say why)
)
'''

ZOO_TESTS = '''\
"""Every model models.py registers, under every capture front end: the harness's graph suite.

Each golden is expect/<model>.<front end>.expect; a second test runs the captured program
against eager on another input. A model that cannot support a front end declares it:
register_model(..., unsupported={"fx": "why"}).
"""

from harness.suites.test_graphs import *  # noqa: F403
'''

TESTS = '''\
"""A golden of any module in a few lines (`harness init` wrote these examples; edit them).

`golden.check_graph` captures the graph and compares its canonical printout with expect/; a
mismatch fails with the diff, the op counts that changed and the command that accepts it.
`pytest --accept` records the goldens (then review `git diff expect/`). The golden of a test is
expect/<test module>.<test name>-<front end>.expect.
"""

import pytest
import torch


def small_mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


@pytest.mark.parametrize("frontend", ["export", "fx", "jit"])
def test_small_mlp(golden, frontend):
    golden.check_graph(small_mlp(), torch.randn(2, 16), frontend=frontend)
'''

BENCH_INIT = '''\
"""This project's own asv benchmarks: each module is a suite (`harness bench --suite NAME`)."""
'''

BENCH = '''\
"""The project's own benchmarks (`harness init` wrote this example; a module is a suite).

`harness bench --quick` runs this module beside the harness's models suite (over models.py's
models) and the instructions suite. A `track_` method returns samples of the harness's timing
loop (warm-up calls, the run's fixed thread count) and says its unit: a raw time ("seconds") is
shown and judged once `harness calibrate` has measured its noise; a paired ratio ("ratio", both
sides timed in the same rounds of one process) is judged by `harness gate` from the first run.
A paired ratio says what its two sides must agree on (`answer=`, harness.answers): before the
timing each side is called once and the results compared; a WRONG answer fails the gate.

INSTRUCTION_WORKLOADS adds rows to the run's instruction counter (one valgrind process for the
run; `instructions.InstructionsPerCall.track_instructions('tiny_cnn.forward')`): the CPU work of
one call, judged on any runner to about 1%. Each entry's factory builds the callable inside the
counting process; keep what it builds small, as a call runs ~50x slower under valgrind.
"""

import torch

from harness.answers import exact
from harness.instructions import InstructionWorkload
from harness.measure import timing
from harness.measure.threads import fix_threads
from models import TinyCNN


def setup():
    fix_threads()  # the run's fixed CPU thread count (1 in quick runs)


def _forward(folder):
    """What track_forward_time times, built in the counting process (`folder`: scratch space)."""
    torch.manual_seed(0)
    model = TinyCNN(width=8, num_classes=10).eval()
    x = torch.randn(8, 3, 32, 32)

    def call():
        with torch.no_grad():
            return model(x)

    return call


# times: the timing row that times the same call; the gate's note on it names this row
INSTRUCTION_WORKLOADS = {
    "forward": InstructionWorkload("forward", _forward, times=("Inference.track_forward_time",))
}


class Inference:
    def setup(self):
        torch.manual_seed(0)
        self.model = TinyCNN(width=8, num_classes=10).eval()
        self.x = torch.randn(8, 3, 32, 32)

    def _no_grad(self):
        with torch.no_grad():
            return self.model(self.x)

    def _inference_mode(self):
        with torch.inference_mode():
            return self.model(self.x)

    def track_forward_time(self):
        return timing.asv_samples(timing.measure(self._no_grad))

    track_forward_time.unit = "seconds"

    def track_inference_mode_over_no_grad(self):
        # the same kernels either way: the outputs must be bit-identical (allclose(...) for
        # results that may round differently, with a float64 referee: harness.answers)
        same = exact("inference_mode vs no_grad: one forward of the same model and input")
        return timing.asv_samples(
            timing.measure_paired(self._inference_mode, self._no_grad, answer=same)
        )

    track_inference_mode_over_no_grad.unit = "ratio"
'''

ASV_CONF_TEXT = """\
{
    // Written by `harness init`: asv's configuration of this project (the key
    // "@MARKER@" tells the harness so). Run the benchmarks through `harness bench`: it
    // runs the modules in benchmarks/ and the harness's models and instructions suites over
    // models.py's models
    // (`--suite NAME` runs another of the harness's suites), files each run under results/runs/,
    // and `harness gate` judges two runs.
    "version": 1,
    "project": @NAME@,
    "project_url": "",
    "repo": ".",
    "environment_type": "existing",
    "benchmark_dir": "benchmarks",
    "results_dir": "results/asv",
    "html_dir": "results/html",
    "launch_method": "forkserver",
    "show_commit_url": "",
    "regressions_thresholds": {".*": 0.1},
    "@MARKER@": 1
}
"""

RESULTS_IGNORE = """\
# Written by `harness init`: run records stay on the machine that made them; commit only
# baselines/ and noise/ (the gate's references) if you make them.
runs/
asv/
html/
fingerprints/
history/
report/
gate.md
"""

README = f"""\
{README_HEADING}

Written by `harness init` (the harness: graph goldens, benchmarks and a regression gate for
PyTorch). Models live in `models.py`, golden tests in `tests/` (every registered model under
every front end, and `golden.check_graph` of any module), benchmarks in `benchmarks/`.

```bash
pytest                                # compare every graph with its golden in expect/
pytest --accept                       # record new or changed goldens, then `git diff expect/`
harness bench --quick                 # benchmarks/, the models and instructions suites
harness bench --quick --suite fusion  # one of the harness's own suites
harness gate <run> latest             # exit 1 on a regression between two runs
harness history                       # steps in each benchmark's run history
harness report                        # a Markdown summary and plots of the latest run
```

Results are filed by commit: commit before `harness bench`. In CI, goldens are compared and
never accepted (`CI=true pytest --accept` is refused).
"""
