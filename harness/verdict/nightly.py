"""`harness nightly`: full suites, results kept for the commit with its fingerprint, dashboard.

Steps, in order:

1. `--require-gpu` (GPU runners): exit 4 at once when this machine has no CUDA GPU.
2. Archive: a result file already stored for this commit and machine is copied to
   RESULTS/history/<machine>/<file>.<timestamp>.json before asv rewrites it. Nothing under
   RESULTS is ever deleted.
3. Run the suites through `harness bench --full` (the benchmark runner; `--fast` for the
   quick CI pass; `--skip-bench` to only publish what is there). It saves the environment
   fingerprint in RESULTS/fingerprints/<machine>/<sha8>.json (outside asv's results_dir, which
   `asv publish` scans), see harness.measure.bench.fingerprint_path.
4. Publish the asv dashboard (`asv publish`) to RESULTS/html, or --html-dir, with its CDN
   scripts replaced by local copies (Debian libjs-* packages) so it renders offline.
5. `--save-baseline`: copy this run into RESULTS/baselines/<machine>/ (commit it).
6. `--gate BASE` (e.g. `baseline`): run the gate BASE vs this run; its exit code is returned.

Exit codes (harness.core.exits): 0 done (and gate passed), the gate's 1/2/3 with --gate, 4 no
GPU with --require-gpu, 5 the benchmark runner or asv publish failed.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time

from harness.core import exits
from harness.core.files import write_atomic
from harness.measure import asv
from harness.verdict.results import BadInput, asv_dir, result_files


def archive_existing(root: pathlib.Path, machine: str, commit: str, stamp: str) -> list[pathlib.Path]:
    """Copy this commit's stored result files aside before a rerun overwrites them."""
    kept = []
    for f in result_files(asv_dir(root) / machine):
        if f.name.startswith(commit[:8]):
            dest = root / "history" / machine / f"{f.stem}.{stamp}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest)
            kept.append(dest)
    return kept


def bench_command(root: pathlib.Path, machine: str, full: bool) -> list[str]:
    """The suites run through the benchmark runner (`harness bench`), not asv directly; it saves
    the fingerprint too (harness.measure.bench.fingerprint_path)."""
    return ([sys.executable, "-m", "harness.cli", "bench", "--results-dir", str(root),
             "--machine", machine] + (["--full"] if full else []))


def run_bench(cmd: list[str]) -> int:
    print("nightly: harness " + " ".join(cmd[3:]), flush=True)
    return subprocess.run(cmd).returncode


def publish(root: pathlib.Path, html_dir: pathlib.Path) -> int:
    """`asv publish` of RESULTS' asv directory into `html_dir`."""
    from harness.core.project import project_root

    project = project_root()
    with asv.config(project, asv_dir(root).resolve(), html_dir=html_dir.resolve()) as config:
        proc = subprocess.run(asv.publish_command(config), env=asv.environment(), capture_output=True,
                              text=True, cwd=project)
    if proc.returncode:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
    return proc.returncode


def save_baseline(root: pathlib.Path, machine: str, stamp: str) -> pathlib.Path:
    """Copy the newest result for `machine`, with benchmarks.json and machine.json, into
    RESULTS/baselines/<machine>/ (the gate's `baseline`); a replaced file goes to history/."""
    from harness.verdict.results import baselines_dir, newest

    src_dir = asv_dir(root) / machine
    files = result_files(src_dir)
    if not files:
        raise BadInput(f"no results in {src_dir} to save as the baseline; run `harness bench` first")
    dest = baselines_dir(root) / machine
    dest.mkdir(parents=True, exist_ok=True)
    for old in result_files(dest):
        kept = root / "history" / "baselines" / machine / f"{old.stem}.{stamp}.json"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(old, kept)  # moved into history, not deleted
    src = newest(files)
    shutil.copy2(src, dest / src.name)
    shutil.copy2(src_dir / "machine.json", dest / "machine.json")
    shutil.copy2(asv_dir(root) / "benchmarks.json", dest / "benchmarks.json")
    return dest / src.name


def nightly(*, root: pathlib.Path, html_dir: pathlib.Path | None, machine: str, commit: str,
            full: bool = True, skip_bench: bool = False, gate_base: str | None = None,
            markdown: str | None = None, baseline: bool = False) -> int:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    html_dir = html_dir or root / "html"
    if not skip_bench:
        for k in archive_existing(root, machine, commit, stamp):
            print(f"nightly: kept the earlier result as {k}")
        code = run_bench(bench_command(root, machine, full))
        if code:
            print(f"nightly: the benchmark runner exited {code}; results so far are kept", file=sys.stderr)
            return exits.RUNNER_FAILED
    if publish(root, html_dir):
        print(f"nightly: asv publish failed for {asv_dir(root)}", file=sys.stderr)
        return exits.RUNNER_FAILED
    missing = vendor_dashboard(html_dir)
    if missing:
        print("nightly: the dashboard still loads these from the internet (install Debian's "
              "libjs-jquery libjs-jquery-flot libjs-bootstrap libjs-jquery-stupidtable): "
              + ", ".join(missing))
    print(f"nightly: dashboard published to {html_dir}/index.html")
    if baseline:
        print(f"nightly: baseline saved as {save_baseline(root, machine, stamp)}; commit it")
    if gate_base:
        from harness.verdict.gate import run_gate

        outcome = run_gate(gate_base, "latest", root=root, machine=machine)
        print(outcome.render("text"), end="")
        if outcome.code == exits.BAD_INPUT and outcome.message:
            print(f"harness nightly: {outcome.message}", file=sys.stderr)
        if markdown:
            write_atomic(markdown, outcome.render("markdown"))
        return outcome.code
    return exits.PASS


# ---- offline dashboard: asv's index.html loads jQuery, flot, bootstrap... from CDNs ----

JS_DIR = pathlib.Path(os.environ.get("HARNESS_JS_DIR", "/usr/share/javascript"))
# CDN file name -> path under JS_DIR (Debian: libjs-jquery, libjs-jquery-flot, libjs-bootstrap,
# libjs-jquery-stupidtable). Debian's flot/jquery.flot.js bundles time, selection, categories.
VENDOR = {
    "jquery-3.3.1.min.js": "jquery/jquery.min.js",
    "jquery.flot.min.js": "flot/jquery.flot.js",
    "stupidtable.min.js": "jquery-stupidtable/stupidtable.min.js",
    "bootstrap.min.js": "bootstrap/js/bootstrap.min.js",
    "bootstrap.min.css": "bootstrap/css/bootstrap.min.css",
}
# Covered by the bundle above, or only cosmetic (bar order), or only for the "ignore this
# regression" key of the regressions page (md5 is replaced by a non-cryptographic hash).
STUBS = {
    "jquery.flot.time.min.js": "", "jquery.flot.selection.min.js": "",
    "jquery.flot.categories.min.js": "", "jquery.flot.orderBars.js": "",
    "md5.min.js": "window.md5 = function (s) { var h = 5381; for (var i = 0; i < s.length; i++)"
                  " { h = ((h << 5) + h + s.charCodeAt(i)) | 0; } return (h >>> 0).toString(16); };\n",
}


def vendor_dashboard(html_dir: pathlib.Path, js_dir: pathlib.Path = JS_DIR) -> list[str]:
    """Point the dashboard's CDN scripts at local copies so it renders without internet
    (CI runners, headless tests). Returns the CDN files left as they were (none when complete)."""
    import re

    index = html_dir / "index.html"
    text = index.read_text(encoding="utf-8")
    vendor = html_dir / "vendor"
    vendor.mkdir(exist_ok=True)
    missing = []

    def local(match):
        tag, url = match.group(0), match.group(2)
        name = url.rsplit("/", 1)[-1]
        if name in VENDOR and (js_dir / VENDOR[name]).is_file():
            shutil.copy(js_dir / VENDOR[name], vendor / name)
        elif name in STUBS:
            (vendor / name).write_text(STUBS[name])
        else:
            missing.append(url)
            return tag
        tag = tag.replace(url, f"vendor/{name}")
        return re.sub(r'\s(integrity|crossorigin|referrerpolicy)="[^"]*"', "", tag)

    text = re.sub(r'<(script|link)\b[^>]*?(?:src|href)="(https://[^"]+)"[^>]*>', local, text)
    if (vendor / "jquery.flot.min.js").is_file() and (html_dir / "jquery.flot.axislabels.js").is_file():
        # flot 4 draws axis labels itself; asv's plugin for flot 0.8 would draw them twice
        (html_dir / "jquery.flot.axislabels.js").write_text("")
    write_atomic(index, text)
    return missing
