"""`harness nightly`: results kept, fingerprint saved, dashboard published and rendered in
headless Chromium; GPU-runner commands on a machine without a GPU exit 4."""

from __future__ import annotations

import functools
import http.server
import json
import pathlib
import shutil
import subprocess
import tempfile
import threading

import pytest

from harness.cli import main
from harness.core import settings
from harness.core.project import head_commit
from harness.runs import calibrate, nightly
from harness.runs.spec import RunSpec

MACHINE = "nightly-cpu"
ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("nightly")  # the published fixture is built once
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# asv's page builds its navigation from benchmark names by string concatenation
HOSTILE = "canary.Canary.track_x<img src=x onerror=\"document['body']['dataset']['pwned']=1\">"


@pytest.fixture(autouse=True)
def _publish_from_a_copy(checkout_copy, monkeypatch):
    """asv publish walks the configured branches' commits: nightly publishes from this
    checkout's HEAD alone (a copy of it), so what a dashboard holds never depends on the
    checkout's other commits or branches."""
    monkeypatch.setenv(settings.PROJECT.name, str(checkout_copy))


@pytest.fixture(scope="session")  # once per worker, also when xdist interleaves modules
def published(tmp_path_factory, checkout_copy):
    """A results root with one real asv run of the canary, published by `harness nightly`."""
    root = tmp_path_factory.mktemp("results")
    work = tmp_path_factory.mktemp("work")
    bench_dir = calibrate._benchmark_dir(ROOT, ["canary"], work)
    spec = RunSpec(
        machine=MACHINE, benches=(r"^canary\.Canary\.track_(?!instructions)",)
    )  # no valgrind
    calibrate.asv_run(ROOT, bench_dir, root / "asv", spec, head_commit(ROOT))
    # a benchmark name holding HTML, as a record from elsewhere may: kept off the dashboard
    known = json.loads((root / "asv" / "benchmarks.json").read_text())
    known[HOSTILE] = dict(known["canary.Canary.track_time"], name=HOSTILE)
    (root / "asv" / "benchmarks.json").write_text(json.dumps(known))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(settings.PROJECT.name, str(checkout_copy))
        code = main(["nightly", "--skip-bench", "--results-dir", str(root), "--machine", MACHINE])
    assert code == 0
    return root


@pytest.mark.slow
def test_nightly_publishes(published):
    html = published / "html"
    assert (html / "index.html").is_file() and (html / "index.json").is_file()
    assert "canary.Canary.track_time" in json.loads((html / "index.json").read_text())["benchmarks"]
    assert "<img" not in "".join(p.read_text() for p in html.rglob("*.json"))


def test_nightly_runs_the_benchmark_runner_in_process_then_gates(tmp_path, monkeypatch, capsys):
    """Full mode goes through the benchmark runner (in this process) into this results root;
    --gate's BASE is named before the run, so a missing one stops the night before it starts."""
    calls = []
    monkeypatch.setattr(
        nightly, "run_bench", lambda root, spec, commit: calls.append((root, spec)) or 0
    )
    monkeypatch.setattr(nightly, "publish", lambda root, html_dir: 0)
    monkeypatch.setattr(nightly, "vendor_dashboard", lambda html: [])
    code = main(
        ["nightly", "--results-dir", str(tmp_path), "--machine", MACHINE, "--gate", "baseline"]
    )
    assert code == 3 and "no baseline for machine" in capsys.readouterr().err and calls == []
    assert main(["nightly", "--results-dir", str(tmp_path), "--machine", MACHINE]) == 0
    ((root, spec),) = calls
    assert root == tmp_path and (spec.mode, spec.machine, spec.label) == (
        "full",
        MACHINE,
        "nightly",
    )


@pytest.mark.slow
def test_save_baseline_then_gate_against_it(published, capsys):
    """The published run becomes the committed baseline; the gate finds it by machine."""
    assert (
        main(
            [
                "nightly",
                "--skip-bench",
                "--save-baseline",
                "--results-dir",
                str(published),
                "--machine",
                MACHINE,
            ]
        )
        == 0
    )
    (copy,) = (published / "baselines" / MACHINE).iterdir()  # a copy of the run record
    run = published / "runs" / MACHINE / copy.name
    assert (copy / "run.json").is_file() and (copy / "asv" / "benchmarks.json").is_file()
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == sorted(
        p.relative_to(run) for p in run.rglob("*")
    )
    assert main(["gate", "baseline", "latest", "--results-dir", str(published)]) == 0
    assert "canary.Canary.track_ops" in capsys.readouterr().out
    # saving again keeps what is there (the same run is not copied twice)
    assert (
        main(
            [
                "nightly",
                "--skip-bench",
                "--save-baseline",
                "--results-dir",
                str(published),
                "--machine",
                MACHINE,
            ]
        )
        == 0
    )
    assert [p.name for p in (published / "baselines" / MACHINE).iterdir()] == [copy.name]


@pytest.mark.parametrize("where", ["results-root", "parent-of-root", "foreign-folder", "a-file"])
def test_html_dir_that_publish_would_empty_is_refused(tmp_path, capsys, where):
    """asv publish empties its html_dir: only a new, empty or harness-made dashboard folder is
    used."""
    root = tmp_path / "results"
    (root / "runs").mkdir(parents=True)
    keep = root / "runs" / "precious.txt"
    keep.write_text("data")
    html = {
        "results-root": root,
        "parent-of-root": tmp_path,
        "foreign-folder": tmp_path / "site",
        "a-file": tmp_path / "file.html",
    }[where]
    if where == "foreign-folder":
        html.mkdir()
        (html / "index.md").write_text("mine")
    if where == "a-file":
        html.write_text("x")
    code = main(["nightly", "--skip-bench", "--results-dir", str(root), "--html-dir", str(html)])
    assert code == 3, capsys.readouterr()
    assert "--html-dir" in capsys.readouterr().err
    assert keep.read_text() == "data"
    if where == "foreign-folder":
        assert (html / "index.md").read_text() == "mine", "nothing deleted"


@pytest.mark.slow
def test_dashboard_is_republished_in_place(published):
    """A folder harness nightly made itself is refreshed without complaint."""
    assert (published / "html" / nightly.DASHBOARD_MARK).is_file()
    assert (
        main(["nightly", "--skip-bench", "--results-dir", str(published), "--machine", MACHINE])
        == 0
    )


def _serve(directory: pathlib.Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _dump_dom(url: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=15000",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    return proc.stdout


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium not installed "
    "(Debian: apt-get install -y chromium; .ci/run installs it)",
)
@pytest.mark.slow
def test_dashboard_renders_in_headless_chromium(published):
    html = published / "html"
    if not (html / "vendor" / "jquery-3.3.1.min.js").exists():
        pytest.skip(
            "dashboard scripts not vendored: apt-get install -y libjs-jquery libjs-jquery-flot "
            "libjs-bootstrap libjs-jquery-stupidtable (offline machines cannot reach asv's CDNs)"
        )
    server = _serve(html)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        index = _dump_dom(base)
        assert "Can not determine continental origin" not in index, (
            "dashboard scripts failed to load"
        )
        assert "canary.Canary.track_time" in index and "canary.Canary.track_ops" in index
        graph = _dump_dom(base + "#canary.Canary.track_time")
        assert '<canvas class="flot-base"' in graph, "no graph drawn for canary.Canary.track_time"
        assert "data-pwned" not in index + graph, "a benchmark name ran as a script"
    finally:
        server.shutdown()


def test_gpu_runner_without_gpu_exits_4(capsys, tmp_path):
    from harness.core.env import cuda_available

    if cuda_available():
        pytest.skip("this machine has a GPU")
    assert main(["nightly", "--require-gpu", "--skip-bench", "--results-dir", str(tmp_path)]) == 4
    assert main(["gate", "--require-gpu", "a.json", "b.json"]) == 4
    err = capsys.readouterr().err
    assert "no CUDA GPU" in err and "Exit 4" in err
