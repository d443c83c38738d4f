"""`harness nightly`: full suites into a new run record, the dashboard, optionally a baseline
and the gate.

Steps, in order:

1. `--require-gpu` (GPU runners): exit 4 at once when this machine has no CUDA GPU.
2. Run the suites through the benchmark runner (harness.runs.bench, in this process), full
   sizes, labelled nightly (`--fast` for the quick CI pass; `--skip-bench` to only publish what
   is there). Every run is its own run record
   (harness.core.records): a rerun on the same commit adds a run, it overwrites nothing.
3. Publish the asv dashboard (`asv publish`, from the asv view rebuilt out of the run records)
   to RESULTS/html or --html-dir, with its CDN scripts replaced by local copies (Debian libjs-*
   packages) so it renders offline. `asv publish` empties its folder first, so the harness only
   publishes into a folder that is new, empty, or a dashboard it made itself (marked by
   DASHBOARD_MARK); anything else is refused (exit 3) and nothing is deleted.
4. `--save-baseline`: copy the newest run record into RESULTS/baselines/<machine>/ (commit it).
5. `--gate BASE` (e.g. `baseline`, or `latest`: the run before this one, named before the run):
   the gate BASE vs this run; a run compared with itself is bad input.
6. History (harness.verdict.history) over all runs of the machine: when a new step appears (one
   not acknowledged in RESULTS/history-acknowledged.json), a Markdown summary fit for an issue or
   a chat message is written to `--steps-markdown FILE` (default
   RESULTS/report/steps-<newest run id>.md, a new file per night: nothing is overwritten),
   with the `harness bisect` command that searches between the last good night's commit and
   the first bad night's (bisect_hints).

Exit codes (harness.core.exits): 0 done, the gate passed (with --gate) and no new step; 1 a new
step appeared in the history (or, with --gate, the gate found a regression); the gate's 2/3 with
--gate; 3 an unsafe --html-dir or a corrupt acknowledgement file; 4 no GPU with --require-gpu;
5 the benchmark runner or asv publish failed.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from harness.core import escape, exits, records, settings, trust
from harness.core.files import check_own_folder, mark_own_folder, write_atomic
from harness.runs import asv
from harness.runs.spec import RunSpec
from harness.verdict.results import BadInput, baselines_dir, resolve

DASHBOARD_MARK = ".harness-dashboard"


def run_bench(root: pathlib.Path, spec: RunSpec, commit: str) -> int:
    """The suites through the benchmark runner, in this process (harness.runs.bench: the run
    record with its fingerprint, the summary); its exit code."""
    from harness.core.project import project_root
    from harness.runs import bench

    mode = {"quick": ("--quick",), "full": ("--full",)}.get(spec.mode, ())
    rerun = (*mode, *(("--machine", spec.machine) if spec.machine else ()))
    rerun += ("--results-dir", str(root))
    return bench.report(bench.run(project_root(), root, spec, sha=commit), root, rerun=rerun)


def check_html_dir(html_dir: pathlib.Path, root: pathlib.Path) -> None:
    """Refuse a dashboard folder that `asv publish` must not empty (BadInput, exit 3): it may not
    hold the results root, nor be one of its own folders, nor anything the harness did not make."""
    res = pathlib.Path(root)
    if os.path.abspath(html_dir).startswith(os.path.join(os.path.abspath(res), "")):
        trust.inside(res, html_dir)  # below the results root: never through a link
    check_own_folder(
        html_dir,
        DASHBOARD_MARK,
        "--html-dir",
        protect=(res, res / "runs", res / "asv", res / "baselines"),
    )


def publish(root: pathlib.Path, html_dir: pathlib.Path) -> int:
    """`asv publish` into `html_dir` of the asv view rebuilt from the run records, read from a
    scratch copy that holds only the files the rebuild wrote from checked fields (the view
    folder may also hold files it did not write: it never deletes those). A record the rebuild
    leaves out is named on one line; the dashboard is published from the others."""
    import tempfile

    from harness.core.project import project_root

    check_html_dir(html_dir, root)
    project = project_root()
    with tempfile.TemporaryDirectory(prefix="harness-dashboard-") as scratch:
        view = pathlib.Path(scratch) / "asv"
        records.rebuild_view(root, copy_to=view)
        with asv.config(project, view, html_dir=html_dir.resolve(), publish=True) as config:
            proc = subprocess.run(
                asv.publish_command(config),
                env=asv.environment(),
                capture_output=True,
                text=True,
                cwd=project,
            )
    if proc.returncode:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
    else:
        mark_own_folder(html_dir, DASHBOARD_MARK, "harness nightly")
    return proc.returncode


def save_baseline(root: pathlib.Path, machine: str) -> pathlib.Path:
    """Copy the newest run record of `machine` into RESULTS/baselines/<machine>/ (the gate's
    `baseline`: the newest copy there wins; earlier copies stay)."""
    runs = records.list_runs(root, machine)
    if not runs:
        raise BadInput(
            f"no runs in {records.runs_dir(root) / machine} to save as the baseline; "
            "run `harness bench` first"
        )
    return records.copy_record(runs[-1], baselines_dir(root) / machine)


def nightly(
    *,
    root: pathlib.Path,
    html_dir: pathlib.Path | None,
    machine: str,
    commit: str,
    full: bool = True,
    skip_bench: bool = False,
    gate_base: str | None = None,
    markdown: str | None = None,
    baseline: bool = False,
    steps_markdown: str | None = None,
    lead: str = "",
) -> int:
    """`lead`: Markdown the command wrote (what its --pull refused), leading each Markdown file
    this writes."""
    html_dir = html_dir or root / "html"
    check_html_dir(html_dir, root)  # before hours of benchmarks, not after
    # the gate's BASE is named now, before this run exists: `--gate latest` is the previous run
    base = resolve(gate_base, root, machine) if gate_base else None
    if not skip_bench:
        code = run_bench(
            root, RunSpec.from_flags(full=full, machine=machine, label="nightly"), commit
        )
        if code:
            print(
                f"nightly: the benchmark runner exited {code}; results so far are kept",
                file=sys.stderr,
            )
            return exits.RUNNER_FAILED
    if publish(root, html_dir):
        print(f"nightly: asv publish failed for {records.view_dir(root)}", file=sys.stderr)
        return exits.RUNNER_FAILED
    missing = vendor_dashboard(html_dir)
    if missing:
        print(
            "nightly: the dashboard still loads these from the internet (install Debian's "
            "libjs-jquery libjs-jquery-flot libjs-bootstrap libjs-jquery-stupidtable): "
            + ", ".join(missing)
        )
    print(f"nightly: dashboard published to {html_dir}/index.html")
    if baseline:
        print(f"nightly: baseline saved as {save_baseline(root, machine)}; commit it")
    code = exits.PASS
    if gate_base:
        from harness.verdict.gate import run_gate

        outcome = run_gate(str(base), "latest", root=root, machine=machine)
        print(outcome.render("text"), end="")
        if outcome.code == exits.BAD_INPUT and outcome.message:
            print(f"harness nightly: {outcome.message}", file=sys.stderr)
        if markdown:
            write_atomic(markdown, lead + outcome.render("markdown"))
        code = outcome.code
    steps = report_steps(root, machine, steps_markdown, lead)
    return code if code not in (exits.PASS,) else steps


def report_steps(root: pathlib.Path, machine: str, path: str | None, lead: str = "") -> int:
    """History over this machine's runs; on a new step write the Markdown summary (`lead`
    first). Returns history's exit code (1: a new step)."""
    from harness.verdict import history

    if not records.list_runs(root, machine):
        return exits.PASS  # nothing ran on this machine yet: no history to read
    h = history.detect(root, machine)
    print(history.render_text(h), end="")
    if h.code == exits.REGRESSION:
        hints = _hints(root, machine, [s for s in h.steps if s.new])
        for text, command in hints:
            print(f"nightly: {escape.cut(text, escape.MAX_MESSAGE)}{command}")
        newest = records.list_runs(root, machine)[-1].run_id
        target = pathlib.Path(path) if path else root / "report" / f"steps-{newest}.md"
        n = 1
        while target.exists():  # a rerun of the same night: a new file, never an overwrite
            n += 1
            target = target.with_name(f"{target.stem.rsplit('.', 1)[0]}.{n}{target.suffix}")
        extra = "".join(
            f"- {escape.markdown_text(text, limit=escape.MAX_MESSAGE)}"
            f"{escape.markdown_code(command) if command else ''}\n"
            for text, command in hints
        )
        write_atomic(target, lead + history.render_markdown(h) + (f"\n{extra}" if extra else ""))
        print(f"nightly: new step(s); summary written to {target}")
    return h.code


def bisect_hints(root: pathlib.Path, machine: str, steps: list) -> list[str]:
    """For new history steps: the `harness bisect` command that searches between the commits of
    the last good night and the first bad one, per pair of commits (its rows selected exactly),
    or why there is nothing to bisect (both nights ran the same commit)."""
    return [text + command for text, command in _hints(root, machine, steps)]


def _hints(root: pathlib.Path, machine: str, steps: list) -> list[tuple[str, str]]:
    """bisect_hints as (text, command) pairs ("" where there is no command). Commits, suites and
    names come from run records: every word of the command is shell-quoted and the names in the
    text are shown escaped (harness.core.escape)."""
    import re

    commit_of = {r.run_id: r.commit for r in records.list_runs(root, machine)}
    rows: dict[tuple[str, str], list[str]] = {}
    for step in steps:
        pair = (commit_of.get(step.last_before, ""), commit_of.get(step.run_id, ""))
        rows.setdefault(pair, []).append(step.benchmark)
    hints = []
    for (good, bad), names in rows.items():
        shown = ", ".join(escape.terminal(n, escape.MAX_CELL) for n in names)
        if not (good and bad):
            hints.append((f"{shown}: a night's commit is not recorded; no bisect", ""))
            continue
        if good == bad:
            text = (
                f"{shown}: both nights ran commit {escape.terminal(good[:12])}, so the step is "
                "not a change of this checkout (see the environment differences above)"
            )
            hints.append((text, ""))
            continue
        words = ["harness", "bisect", good, bad]
        cut = False
        for suite in dict.fromkeys(n.split(".", 1)[0] for n in names):
            cut |= len(suite) > escape.MAX_CELL
            words += ["--suite", suite[: escape.MAX_CELL]]
        for n in names:
            # a name longer than a cell selects by its first characters: the command stays one
            # a shell can take, and the summary stays small (a 1 MB name would be a 1 MB line)
            cut |= len(n) > escape.MAX_CELL
            exact = "$" if len(n) <= escape.MAX_CELL else ""
            words += ["--bench", "^" + re.escape(n[: escape.MAX_CELL]) + exact]
        words += ["--machine", machine]
        text = "to find the commit: "
        if cut:
            first = f"long names selected by their first {escape.MAX_CELL} characters"
            text = f"to find the commit ({first}): "
        hints.append((text, escape.shell_join(words)))
    return hints


# ---- offline dashboard: asv's index.html loads jQuery, flot, bootstrap... from CDNs ----

JS_DIR = settings.JS_DIR.get()
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
    "jquery.flot.time.min.js": "",
    "jquery.flot.selection.min.js": "",
    "jquery.flot.categories.min.js": "",
    "jquery.flot.orderBars.js": "",
    "md5.min.js": "window.md5 = function (s) { var h = 5381; for (var i = 0; i < s.length; i++)"
    " { h = ((h << 5) + h + s.charCodeAt(i)) | 0; } return (h >>> 0).toString(16); };\n",
}


def vendor_dashboard(html_dir: pathlib.Path, js_dir: pathlib.Path = JS_DIR) -> list[str]:
    """Point the dashboard's CDN scripts at local copies so it renders without internet
    (CI runners, headless tests). Returns the CDN files left as they were (none when complete)."""
    import re

    from harness.core import trust

    index = trust.inside(html_dir, "index.html")
    text = index.read_text(encoding="utf-8")
    missing = []

    def local(match):
        tag, url = match.group(0), match.group(2)
        name = url.rsplit("/", 1)[-1]
        # only the names listed here are written, each through no link (trust.inside); the
        # sources are this machine's packages (HARNESS_JS_DIR), read through their links
        if name in VENDOR and (js_dir / VENDOR[name]).is_file():
            write_atomic(
                trust.inside(html_dir, f"vendor/{name}"), (js_dir / VENDOR[name]).read_bytes()
            )
        elif name in STUBS:
            write_atomic(trust.inside(html_dir, f"vendor/{name}"), STUBS[name])
        else:
            missing.append(url)
            return tag
        tag = tag.replace(url, f"vendor/{name}")
        return re.sub(r'\s(integrity|crossorigin|referrerpolicy)="[^"]*"', "", tag)

    text = re.sub(r'<(script|link)\b[^>]*?(?:src|href)="(https://[^"]+)"[^>]*>', local, text)
    labels = trust.inside(html_dir, "jquery.flot.axislabels.js")
    if trust.inside(html_dir, "vendor/jquery.flot.min.js").is_file() and labels.is_file():
        # flot 4 draws axis labels itself; asv's plugin for flot 0.8 would draw them twice
        write_atomic(labels, "")
    write_atomic(index, text)
    return missing
