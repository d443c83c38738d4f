"""End to end, as a new user would (slow tier, a few minutes): a wheel built from this checkout,
installed non-editable into a fresh venv that borrows torch and the other dependencies from this
one (a .pth naming their site-packages, so no 5 GB install), a new git repository outside the
checkout, and there: `harness init` (twice: the second exits 3 and changes nothing), `pytest
--accept`, `pytest`, a changed golden failing with its diff and accept command, `CI=true pytest
--accept` refused, `harness bench --quick` twice and `harness gate` of the two runs."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# what the wheel does not bring (installed --no-deps): found where this interpreter has them
BORROWED = ("torch", "torchvision", "pytest", "asv", "asv_runner", "expecttest", "scipy")
BORROWED += ("matplotlib", "tabulate", "pytest_benchmark", "numpy")

pytestmark = pytest.mark.slow


def run(cmd, cwd, env, timeout=900):
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(folder).parts
    }


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(bin folder, environment): the harness from a wheel of this checkout, nothing editable."""
    work = tmp_path_factory.mktemp("own-e2e")
    src = work / "src"  # the working tree as git sees it (tracked and new files), not .venv
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for rel in filter(None, listed.split("\0")):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("cannot build a wheel here: pip needs setuptools")
    built = run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(work)],
        work,
        dict(os.environ),
    )
    wheels = list(work.glob("harness-*.whl"))
    assert built.returncode == 0 and wheels, built.stderr[-3000:]  # the packaging under test
    run([sys.executable, "-m", "venv", str(work / "venv")], work, dict(os.environ))
    bin_dir = work / "venv" / "bin"
    site = next((work / "venv" / "lib").glob("python*/site-packages"))
    folders = dict.fromkeys(
        str(Path(importlib.util.find_spec(name).origin).parents[1]) for name in BORROWED
    )
    (site / "borrowed.pth").write_text("\n".join(folders) + "\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HARNESS_") and k not in ("CI", "PYTHONPATH", "EXPECTTEST_ACCEPT")
    }
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", XDG_CACHE_HOME=str(work / "cache"))
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "t"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "t@t"
    installed = run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps"]
        + [str(w) for w in wheels],
        work,
        env,
    )
    assert installed.returncode == 0, installed.stderr
    where = run(
        [str(bin_dir / "python"), "-c", "import harness; print(harness.__file__)"], work, env
    )
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    return bin_dir, env


def test_a_new_project_from_a_wheel(venv, tmp_path):
    bin_dir, env = venv
    proj = tmp_path / "myproject"
    proj.mkdir()
    assert run(["git", "init", "-q"], proj, env).returncode == 0
    harness, python = str(bin_dir / "harness"), str(bin_dir / "python")

    first = run([harness, "init"], proj, env)
    assert first.returncode == 0, first.stderr
    before = snapshot(proj)
    again = run([harness, "init"], proj, env)
    assert again.returncode == 3 and "wrote nothing" in again.stderr, again.stderr
    assert snapshot(proj) == before

    accepted = run([python, "-m", "pytest", "-q", "--accept", "-p", "no:cacheprovider"], proj, env)
    assert accepted.returncode == 0, accepted.stdout[-3000:]
    # it says what it wrote: the example model under 5 front ends, 3 check_graph goldens
    assert "pytest --accept: 8 golden(s) written (8 new, 0 updated), 0 removed:" in (
        accepted.stdout
    )
    assert "  new      expect/tiny_cnn.jit.expect" in accepted.stdout
    assert (proj / "expect" / "tiny_cnn.jit.expect").is_file()
    assert (proj / "expect" / "test_model_graphs.test_small_mlp-export.expect").is_file()
    assert not list((proj / "expect").glob("alexnet.*")), "never the built-in zoo"
    # no warning without pytest-xdist (the graph suite's xdist_group mark is known)
    compared = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
        + ["-W", "error::pytest.PytestUnknownMarkWarning"],
        proj,
        env,
    )
    assert compared.returncode == 0, compared.stdout[-3000:]

    golden = proj / "expect" / "tiny_cnn.jit.expect"
    text = golden.read_text()
    golden.write_text(text.replace("= aten::relu(", "= aten::gelu("))
    changed = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "jit"], proj, env)
    assert changed.returncode == 1, changed.stdout[-3000:]
    assert "does not match golden expect/tiny_cnn.jit.expect" in changed.stdout
    assert "aten::gelu  1 -> 0" in changed.stdout
    assert (
        "pytest --accept 'tests/test_zoo_graphs.py::test_graph_matches_golden[tiny_cnn-jit]'"
        in (changed.stdout)
    )
    golden.write_text(text)
    refused = run(
        [python, "-m", "pytest", "-q", "--accept", "-p", "no:cacheprovider"],
        proj,
        {**env, "CI": "true"},
    )
    assert refused.returncode == 4 and "refusing to accept goldens" in refused.stderr

    assert run(["git", "add", "-A"], proj, env).returncode == 0
    assert run(["git", "commit", "-qm", "harness project"], proj, env).returncode == 0
    for _ in range(2):
        ran = run([harness, "bench", "--quick", "--machine", "e2e"], proj, env)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        assert "tiny_cnn.Inference.track_inference_mode_over_no_grad" in ran.stdout
    runs = sorted(p.name for p in (proj / "results" / "runs" / "e2e").iterdir())
    assert len(runs) == 2
    # a models module that does not import: one line, exit 3, before asv starts
    models = (proj / "models.py").read_text()
    (proj / "models.py").write_text(models + "\ndef broken(:\n")
    broken = run([harness, "bench", "--quick", "--machine", "e2e"], proj, env)
    assert broken.returncode == 3 and len(broken.stderr.splitlines()) == 1, broken.stderr
    assert "cannot load models from 'models.py'" in broken.stderr and broken.stdout == ""
    # an uncommitted edit of the model: the run is marked dirty, in its header and record
    (proj / "models.py").write_text(models.replace('"width": 8,', '"width": 12,', 1))
    dirty = run(
        [harness, "bench", "--quick", "--machine", "e2e", "--bench", "PeakMemory"], proj, env
    )
    assert dirty.returncode == 0, dirty.stdout[-3000:] + dirty.stderr[-3000:]
    assert re.search(r"commit [0-9a-f]{8} \(dirty\), run ", dirty.stdout), dirty.stdout[:500]
    newest = sorted((proj / "results" / "runs" / "e2e").iterdir())[-1]
    assert json.loads((newest / "run.json").read_text())["dirty"] is True
    marked = run([harness, "gate", runs[0], newest.name, "--machine", "e2e"], proj, env)
    assert "(dirty)" in marked.stdout and "working tree" in marked.stdout, marked.stdout
    (proj / "models.py").write_text(models)
    gate = run([harness, "gate", runs[0], runs[1], "--machine", "e2e"], proj, env)
    assert gate.returncode in (0, 6), gate.stdout[-3000:] + gate.stderr
    # an exact row is judged, and the same code twice is ok
    assert re.search(
        r"models\.PeakMemory\.track_peak_memory\('tiny_cnn', False\).*\bok\b", gate.stdout
    )
    assert "alexnet" not in gate.stdout, "the models suite covers the project's models only"
    from harness.measure import instructions

    if instructions.unavailable() is None:  # the model's cost, judged on this runner too
        for key in ("tiny_cnn_inference", "tiny_cnn_training_step", "tiny_cnn.forward"):
            assert re.search(
                rf"track_instructions\('{re.escape(key)}'\).*\bok\b.*instructions:", gate.stdout
            ), key
        assert "judged instead by its instruction row 'tiny_cnn_inference' (ok)" in gate.stdout
        # the example module's own timing row: its workload says it times the same call
        assert re.search(
            r"tiny_cnn\.Inference\.track_forward_time .*judged instead by its instruction row "
            r"'tiny_cnn\.forward' \(ok\)",
            gate.stdout,
        ), gate.stdout
        assert "tiny_cnn_training_step" in ran.stdout  # bench's table of instruction rows
    assert run(["git", "status", "--porcelain"], proj, env).stdout == "", "runs stay out of git"
