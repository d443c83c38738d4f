"""How asv is invoked: the one place that writes asv configs, names the interpreter, records the
machine and runs `asv run` (run: an AsvRun in, an AsvResult out, asv in a session of its own that
ends with it on Ctrl-C or SIGTERM) and `asv publish`. bench, ab, calibrate, nightly and gpu-check
all go through here.

The interpreter path: asv names an existing environment after its interpreter path
(`existing-py_<path>`), so the same suites run from a venv at another path would start a new
history. Runs go through a fixed launcher, `$XDG_CACHE_HOME/harness/asv-python` (a shell script
exec'ing $HARNESS_PYTHON, set to the current interpreter for each run), so the environment name
is the same for every venv of a user on a machine. What differs between venvs (torch version,
flags) is in the fingerprint saved with each result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core import settings
from harness.core.files import write_atomic
from harness.core.processes import run_in_session


def python_launcher() -> Path:
    """A fixed path for asv's `existing` environment (see the module docstring)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "harness"
    path = cache / "asv-python"
    text = (
        "#!/bin/sh\n# written by `harness bench`: asv names its environment after this path\n"
        f'exec "${{{settings.PYTHON.name}:?}}" "$@"\n'
    )
    if not path.is_file() or path.read_text() != text:
        write_atomic(path, text)
        path.chmod(0o755)
    return path


@contextlib.contextmanager
def config(
    root: Path,
    results: Path,
    *,
    benchmark_dir: Path | None = None,
    html_dir: Path | None = None,
    publish: bool = False,
):
    """A run-time copy of the project's asv.conf.json with absolute paths, results in `results`;
    yields its path and removes it afterwards (it lies in ROOT/.asv/, which only asv uses).

    `harness calibrate` points `benchmark_dir` at a scratch folder holding only the modules it
    calibrates (asv imports every module at discovery); `harness nightly` sets `html_dir`.

    Branches: `asv run` without a range benchmarks the tip of every configured branch, so on a
    feature branch or PR checkout `[main, HEAD]` would run every benchmark twice (both saved
    under --set-commit-hash). A run config therefore names HEAD alone; only `publish=True`
    (the dashboard) lists the branches of this checkout.
    """
    from asv import util

    conf = util.load_json(str(root / "asv.conf.json"), js_comments=True)
    html_dir = html_dir or results.parent / "html"
    bench = benchmark_dir or (root / conf.get("benchmark_dir", "benchmarks"))
    conf.update(
        repo=str(root),
        benchmark_dir=str(Path(bench).resolve()),
        results_dir=str(results),
        html_dir=str(html_dir),
        env_dir=str(root / ".asv" / "env"),
        branches=(branches(root, conf.get("branches") or ["main"]) if publish else ["HEAD"]),
    )
    # Not inside results_dir: `asv publish` would try to load every .json there as a result.
    (root / ".asv").mkdir(exist_ok=True)
    fd, path = tempfile.mkstemp(dir=root / ".asv", prefix="harness-run-", suffix=".conf.json")
    with os.fdopen(fd, "w") as f:
        json.dump(conf, f, indent=2)
    _home(Path(path)).mkdir()
    try:
        yield Path(path)
    finally:
        Path(path).unlink(missing_ok=True)
        shutil.rmtree(_home(Path(path)), ignore_errors=True)  # the harness made it


def benchmark_subset(project: Path, modules: list[str], dest: Path) -> Path:
    """A scratch benchmark folder holding only `modules` of the project's suites (and the
    package's __init__): asv imports every module of its benchmark_dir at discovery, in every
    run (~15 s for all the suites, under load more), while a run of one suite needs one.

    A project of its own (harness.core.project.Suites): its whole benchmark folder (its modules
    may import helpers beside them), plus the chosen suites of the installed harness."""
    from harness.core.project import suites

    found = suites(project)
    available = found.modules()
    dest.mkdir(parents=True, exist_ok=True)
    init = found.builtin / "__init__.py"
    write_atomic(dest / "__init__.py", init.read_text() if init.is_file() else "")
    if found.own is not None:
        shutil.copytree(
            found.own,
            dest,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    for mod in modules:
        if Path(available[mod]).parent != found.own:
            shutil.copy(available[mod], dest / f"{mod}.py")
    return dest


def _home(config_path: Path) -> Path:
    """The run's own home folder (record_machine), beside its config."""
    return config_path.with_name(config_path.name.removesuffix(".conf.json") + ".home")


def branches(root: Path, configured: list[str]) -> list[str]:
    """The configured branches that exist in this checkout, plus HEAD when it is on none of them.

    asv resolves every configured branch on `asv run` and `asv publish` and fails on a missing
    one ("Unknown branch main in configuration"): CI systems check pull requests out as a
    detached HEAD without a local `main`, shallow, or with another default branch.
    """

    def rev(name):
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", name + "^{commit}"],
            cwd=root,
            capture_output=True,
            text=True,
        )
        return proc.stdout.strip() if proc.returncode == 0 else None

    present = [b for b in configured if rev(b)]
    head = rev("HEAD")
    if head and head not in {rev(b) for b in present}:
        present.append("HEAD")
    return present or ["HEAD"]


def environment(extra: dict | None = None) -> dict:
    """The environment asv runs in: this interpreter behind the fixed launcher, its bin on PATH."""
    env = dict(os.environ, **{settings.PYTHON.name: sys.executable})
    env["COLUMNS"] = "250"  # asv shortens benchmark names to the terminal's width otherwise
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra or {})
    return env


def record_machine(config_path: Path, machine: str, env: dict) -> dict:
    """asv's machine.json, written without questions, under the name that carries the GPU;
    returns the environment the run's asv commands must use. asv keeps its machines in
    ~/.asv-machine.json and rewrites that file in place, so two runs at once could read each
    other's half-written file ("Error parsing JSON"): each run gets a home of its own (beside
    its config), with the user's cache folder kept."""
    home = _home(config_path)
    env = dict(
        env, HOME=str(home), XDG_CACHE_HOME=env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "asv",
            "machine",
            "--config",
            str(config_path),
            "--yes",
            "--machine",
            machine,
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return env


def run_command(
    config_path: Path,
    sha: str,
    machine: str,
    method: str,
    *,
    quick: bool = False,
    benches: list[str] = (),
) -> list[str]:
    """The `asv run` command line: existing environment behind the launcher, commit hash set
    (asv saves nothing otherwise), samples recorded for the gate's statistics."""
    cmd = [
        sys.executable,
        "-m",
        "asv",
        "run",
        "--config",
        str(config_path),
        "-E",
        f"existing:{python_launcher()}",
        "--set-commit-hash",
        sha,
        "--machine",
        machine,
        "--launch-method",
        method,
        "--record-samples",
        "--show-stderr",
    ]
    if quick:
        cmd.append("--quick")
    for regex in benches:
        cmd += ["--bench", regex]
    return cmd


def publish_command(config_path: Path) -> list[str]:
    return [sys.executable, "-m", "asv", "publish", "--config", str(config_path)]


def launch_method(requested: str | None = None) -> str:
    """spawn on CUDA (a forked CUDA context is unusable), forkserver on CPU (suites imported
    once)."""
    if requested and requested != "auto":
        return requested
    from harness.core.env import cuda_available

    return "spawn" if cuda_available() else "forkserver"


@dataclasses.dataclass(frozen=True)
class AsvRun:
    """One `asv run`: the suites of `project` (or of `bench_dir`, a scratch folder of modules),
    results into `results`, for `commit` on `machine`, with the full environment `env`."""

    project: Path
    results: Path
    machine: str
    commit: str
    env: dict
    benches: tuple[str, ...] = ()  # asv --bench regexes (asv ORs them)
    quick: bool = False
    method: str | None = None  # launch method; default: spawn on CUDA, forkserver on CPU
    bench_dir: Path | None = None
    repo: Path | None = None  # the git repository asv reads commits from (default: project)
    capture: bool = True  # keep asv's output (False: it goes to this process's stdout)
    on_line: object = None  # a callable handed asv's output line by line (and it is kept)
    echo: object = None  # a stream the command line is printed to before it runs


@dataclasses.dataclass
class AsvResult:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    files: list[Path]  # the result files asv saved (none when it saved nothing)

    @property
    def output(self) -> str:
        return (self.stdout or "") + (self.stderr or "")


def run(r: AsvRun) -> AsvResult:
    """Config, machine record, `asv run` in a session of its own (ended with everything in it on
    an interrupt: harness.core.processes), the run's config and home removed afterwards."""
    from harness.core.project import suites

    with config(r.project, r.results, benchmark_dir=r.bench_dir) as path:
        if r.repo is not None:
            conf = json.loads(path.read_text())
            conf.update(repo=str(r.repo))
            path.write_text(json.dumps(conf, indent=2))
        # a project of its own tells its benchmark processes which models are its
        env = record_machine(path, r.machine, {**suites(r.project).environment(), **r.env})
        cmd = run_command(
            path,
            r.commit,
            r.machine,
            launch_method(r.method),
            quick=r.quick,
            benches=list(r.benches),
        )
        if r.echo is not None:
            print("$ " + " ".join(cmd[2:]), file=r.echo, flush=True)
        t0 = time.perf_counter()
        proc = run_in_session(cmd, cwd=r.project, env=env, capture=r.capture, on_line=r.on_line)
        wall = time.perf_counter() - t0
    machine_dir = r.results / r.machine
    files = (
        sorted(p for p in machine_dir.glob("*.json") if p.name != "machine.json")
        if machine_dir.is_dir()
        else []
    )
    return AsvResult(proc.returncode, proc.stdout or "", proc.stderr or "", wall, files)
