"""Wheels for a bare GPU runner (part of `harness gpu-check`, see harness.commands.gpucheck).

A GPU runner's `python3` holds torch, numpy, scipy, matplotlib, pytest, pytest-benchmark,
pytest-xdist and tabulate, and has no network. What the harness needs beyond that (asv,
asv-runner, expecttest, nvidia-ml-py and what they need) travels as wheel files built for the
runner's Python and platform, installed with `pip install --no-index --no-deps --target T`: into
a private folder, never into the runner's site-packages, and without pip's resolver re-fetching
what the runner already has (with --target pip ignores installed packages and would want all
of them).

The list is read from this machine's installed metadata: the dependency closure of the four
packages, evaluated for the runner's Python version, minus the closure of what the runner holds.
Only the standard library is used until `list_wheels` needs `packaging` (pip brings it).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

# nvidia-ml-py: the GPU rows' clocks and throttle reasons (harness.core.clocks); a runner image
# may list it without it being importable, and without it nothing is dropped for throttling
WANTED = ("asv", "asv-runner", "expecttest", "nvidia-ml-py")
# What the runner image's python3 already holds (and, through their metadata, what they need).
RUNNER_HAS = (
    "torch",
    "numpy",
    "scipy",
    "matplotlib",
    "pytest",
    "pytest-benchmark",
    "pytest-xdist",
    "tabulate",
    "pip",
)
# Tags older manylinux wheels carry; pip matches each --platform exactly, so a download names
# every tag the runner's glibc accepts (a runner with glibc 2.28+ takes all of these).
MANYLINUX_FALLBACKS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
# Imports that prove the installed wheels work: asv's commands, its runner, expecttest.
IMPORT_CHECK = (
    "asv",
    "asv.commands.run",
    "asv.commands.publish",
    "asv.results",
    "asv_runner.run",
    "expecttest",
    "pynvml",
)


@dataclasses.dataclass(frozen=True)
class Wheel:
    name: str
    version: str | None  # None: not installed here, so no version to pin
    pure: bool | None  # False: holds a C extension, needs the runner's exact Python and platform
    needed_by: str

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}" if self.version else self.name

    def describe(self, python_version: str, platform: str) -> str:
        if self.version is None:
            return f"{self.name}  (not installed here: pick a version; needed by {self.needed_by})"
        cp = "cp" + python_version.replace(".", "")
        kind = (
            "pure Python: *-py3-none-any.whl"
            if self.pure
            else f"C extension: {cp} wheel for {platform}"
            if self.pure is False
            else "wheel kind unknown"
        )
        return f"{self.pin:<28} {kind}; needed by {self.needed_by}"


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def marker_env(python_version: str) -> dict:
    return {
        "python_version": python_version,
        "python_full_version": python_version + ".0",
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": "x86_64",
        "platform_python_implementation": "CPython",
        "implementation_name": "cpython",
        "extra": "",
    }


def requirements(name: str, python_version: str) -> list[str]:
    """Names `name` needs on that Python version (installed metadata; extras left out)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    try:
        reqs = md.distribution(name).requires or []
    except md.PackageNotFoundError:
        return []
    out = []
    for text in reqs:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(marker_env(python_version)):
            out.append(canonical(req.name))
    return out


def closure(roots, python_version: str) -> dict[str, str]:
    """Every package the roots need, transitively: name -> the root-side package that needs it."""
    seen: dict[str, str] = {}
    todo = [(canonical(r), "(asked for)") for r in roots]
    while todo:
        name, parent = todo.pop()
        if name in seen:
            continue
        seen[name] = parent
        todo += [(dep, name) for dep in requirements(name, python_version)]
    return seen


def _installed(name: str) -> tuple[str | None, bool | None]:
    import importlib.metadata as md

    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return None, None
    wheel_file = dist.read_text("WHEEL") or ""
    pure = None
    for line in wheel_file.splitlines():
        if line.startswith("Root-Is-Purelib:"):
            pure = line.split(":", 1)[1].strip().lower() == "true"
    return dist.version, pure


def list_wheels(python_version: str) -> list[Wheel]:
    runner = closure(RUNNER_HAS, python_version)
    needed = closure(WANTED, python_version)
    out = []
    for name, parent in sorted(needed.items()):
        if name in runner:
            continue
        version, pure = _installed(name)
        out.append(Wheel(name, version, pure, parent))
    return out


def platforms(platform: str) -> list[str]:
    """The --platform tags for a download: the one given, plus older manylinux tags it accepts."""
    tags = [platform]
    if platform.startswith("manylinux") and platform.endswith("_x86_64"):
        tags += [t for t in MANYLINUX_FALLBACKS if t not in tags and _glibc(t) <= _glibc(platform)]
    return tags


def _glibc(tag: str) -> tuple[int, int]:
    legacy = {
        "manylinux1_x86_64": (2, 5),
        "manylinux2010_x86_64": (2, 12),
        "manylinux2014_x86_64": (2, 17),
    }
    if tag in legacy:
        return legacy[tag]
    parts = tag.split("_")
    try:
        return int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return (0, 0)


def download_command(
    wheels: list[Wheel], python_version: str, platform: str, dest: str
) -> list[str]:
    cmd = [
        "python3",
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
    ]
    for tag in platforms(platform):
        cmd += ["--platform", tag]
    return cmd + ["-d", dest] + [w.pin for w in wheels]


def install_command(python: str, wheel_dir: Path, target: Path) -> list[str]:
    """Every wheel in the folder into the private target folder; nothing fetched, nothing
    resolved."""
    wheels = sorted(str(p) for p in Path(wheel_dir).glob("*.whl"))
    return [
        python,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--disable-pip-version-check",
        "--upgrade",
        "--find-links",
        str(wheel_dir),
        "--target",
        str(target),
        *wheels,
    ]


def duplicates(wheel_dir: Path) -> list[str]:
    """Projects with more than one wheel in the folder (pip would refuse the whole install)."""
    seen: dict[str, list[str]] = {}
    for p in sorted(Path(wheel_dir).glob("*.whl")):
        seen.setdefault(canonical(p.name.split("-")[0]), []).append(p.name)
    return [", ".join(v) for v in seen.values() if len(v) > 1]


def search_path(root: Path, target: Path | None) -> str:
    """The checkout (the harness itself, never installed) and the wheels' folder, in that order."""
    parts = [str(root)] + ([str(target)] if target else [])
    return os.pathsep.join(parts)


def child_environment(root: Path, target: Path | None, base: dict | None = None) -> dict:
    """PYTHONPATH for the steps, and ASV_PYTHONPATH for asv's benchmark processes: asv drops
    PYTHONPATH for them (asv/environment.py: `env['PYTHONPATH'] = env['ASV_PYTHONPATH']`, else
    pops it) and asv/benchmark.py puts ASV_PYTHONPATH's entries at the front of sys.path."""
    env = dict(os.environ if base is None else base)
    path = search_path(root, target)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = path + (os.pathsep + old if old else "")
    env["ASV_PYTHONPATH"] = env["PYTHONPATH"]
    return env


def install(wheel_dir: Path, target: Path, log, timeout_s: float = 30) -> None:
    """Install the folder's wheels into `target` within `timeout_s` (pip in a session of its own,
    ended on a timeout or an interrupt); raises RuntimeError with pip's output."""
    from harness.core.processes import run_in_session

    wheel_dir = Path(wheel_dir)
    if not wheel_dir.is_dir() or not any(wheel_dir.glob("*.whl")):
        raise RuntimeError(
            f"--wheels {wheel_dir}: no .whl files there; build the folder with "
            "`.ci/gpu-check --list-wheels --python-version X.Y --platform TAG --download DIR`"
        )
    dup = duplicates(wheel_dir)
    if dup:
        raise RuntimeError(
            f"--wheels {wheel_dir}: several versions of one project ({'; '.join(dup)}); "
            "keep one of each"
        )
    cmd = install_command(sys.executable, wheel_dir, target)
    log("$ " + " ".join(cmd[:10]) + f" ... ({len(cmd) - 10} wheels)")
    try:  # part of the wheels step's budget: local wheels install in seconds
        proc = run_in_session(cmd, capture=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"pip install into {target} took over {timeout_s:.0f} s; ended"
        ) from None
    log(proc.stdout[-3000:] + proc.stderr[-3000:])
    if proc.returncode:
        raise RuntimeError(
            f"pip install into {target} failed (exit {proc.returncode}); see the log"
        )


def import_check_command(python: str) -> list[str]:
    code = (
        "; ".join(f"import {m}" for m in IMPORT_CHECK) + "; print('imports ok:', asv.__version__)"
    )
    return [python, "-c", code]
