"""Every writer, fed records whose names and fingerprints are hostile (a link or image
destination, HTML, an e-mail address, mathtext, a newline with a workflow command, a 1 MB
name): the Markdown of `history`, the nightly's steps summary, `noise`, `report` and `gate`
renders none of it as a link, an image from elsewhere, an autolink or HTML (checked by
CommonMark's structure, and by markdown-it-py and cmark-gfm where installed:
tests/render_support.py); terminal output holds no raw control character and no line a CI
runner reads as a command; no output passes 100 kB; plots never parse a record's text as
mathtext."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib

import pytest
from render_support import BIG, HOSTILE, SMALL, markdown_problems, terminal_problems
from test_gate_support import write_set
from test_history import noisy

from harness.cli import main
from harness.core import escape, records, settings

MACHINE = "m1-cpu"
TIME = "canary.Canary.track_time"
# a fingerprint value of the first run after the step: it is named among the differences
TORCH = "2.15\n::error::torch <img src=x onerror=alert(1)> a@b.example](https://evil.example/i.png)"
# a file a record's manifest lists, missing: the record is left out of the noise, named
LISTED = "<img src=x onerror=alert(2)> a@b.example](https://evil.example/j.png) $\\frac{1$"


def harness(*argv: str) -> tuple[int, str, str]:
    """`harness ARGV` in this process: exit code, stdout, stderr (the tests look at each)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _write_runs(root: pathlib.Path, n: int = 10, step_at: int = 6) -> None:
    """`n` run records; every hostile counter steps 10 -> 11 and the hostile ratio 1.0 -> 1.2
    at run `step_at`, where torch's version turns hostile too."""
    units = {HOSTILE["link"]: "ratio", TIME: "seconds"}
    for i in range(n):
        after = i >= step_at
        benches = {name: 11 if after else 10 for name in [*HOSTILE.values(), BIG]}
        benches[HOSTILE["link"]] = noisy(10, level=1.2 if after else 1.0, sd=0.01, seed=i)
        benches[TIME] = noisy(20, level=4e-4, sd=0.05, seed=50 + i)
        commit = f"{i:040x}"
        run_id = f"20261201T{i // 60:02d}{i % 60:02d}00Z-{commit[:8]}"
        with records.writing(root, MACHINE, run_id, {"commit": commit, "machine": MACHINE}) as d:
            write_set(d / "asv", commit, benches, machine=MACHINE, units=units)
            fp = {"torch": TORCH if after else "2.14.1", "torch_threads": 1, "cpu": "x"}
            (d / "fingerprint.json").write_text(json.dumps({**fp, "commit": commit}))
    oldest = records.list_runs(root, MACHINE)[0]
    manifest = json.loads((oldest.path / records.MANIFEST).read_text())
    manifest["files"][LISTED] = {"size": 1, "sha256": "0" * 64}
    (oldest.path / records.MANIFEST).write_text(json.dumps(manifest))


# the tests over `said` share one worker, so the commands it runs run once
pytestmark = pytest.mark.xdist_group("render-hostile")


@pytest.fixture(scope="module")
def said(tmp_path_factory):
    """What each command printed and wrote over one hostile results root."""
    from harness.runs import nightly

    tmp = tmp_path_factory.mktemp("hostile")
    root = tmp / "results"
    _write_runs(root)
    runs = records.list_runs(root, MACHINE)
    r = str(root)
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(settings.PROJECT.name, "")
        mp.delenv(settings.RESULTS_DIR.name, raising=False)
        mp.setattr(nightly, "publish", lambda root, html_dir: 0)
        mp.setattr(nightly, "vendor_dashboard", lambda html: [])
        md = {k: tmp / f"{k}.md" for k in ("history", "steps", "noise", "gate")}
        out["history"] = harness(
            "history", "--results-dir", r, "--markdown", str(md["history"]),
            "--json", str(tmp / "history.json"),
        )  # fmt: skip
        out["nightly"] = harness(
            "nightly", "--skip-bench", "--results-dir", r, "--machine", MACHINE,
            "--steps-markdown", str(md["steps"]),
        )  # fmt: skip
        out["noise"] = harness(
            "noise", "--results-dir", r, "--machine", MACHINE, "--markdown", str(md["noise"])
        )
        out["report"] = harness("report", "--results-dir", r, "--out", str(tmp / "report"))
        md["report"] = tmp / "report" / "report.md"
        base, head = runs[1].run_id, runs[-1].run_id
        out["gate"] = harness("gate", base, head, "--results-dir", r, "--markdown", str(md["gate"]))
        out["gate --bench"] = harness("gate", base, head, "--results-dir", r, "--bench", "NO")
        out["history --bench"] = harness("history", "--results-dir", r, "--bench", "NO")
        out["advise"] = harness("advise", "--results-dir", r, "--machine", MACHINE)
    return out, {k: p.read_text() if p.exists() else "" for k, p in md.items()}, tmp


@pytest.mark.parametrize(
    "writer", ["history", "steps", pytest.param("noise", marks=pytest.mark.slow), "report", "gate"]
)  # noise: the second tier (~5 s under load)
def test_markdown_of_hostile_records_renders_nothing_of_theirs(said, writer):
    _, markdown, _ = said
    text = markdown[writer]
    assert text and markdown_problems(text) == []
    # what the names were is still said, as text (escaped), the long one cut with a marker
    if writer == "report":  # the report plots and lists the ratio rows
        assert "s\\](https\\://evil" in text
    elif writer != "noise":  # the noise's table holds statistical rows only
        assert "a`@`b.example.A.track_ops" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    if writer in ("history", "steps", "gate"):
        assert "…(999,802 more characters)" in text or "…(999,800 more characters)" in text


def test_the_noise_lead_line_shows_a_hostile_manifest_as_text(said):
    code, out, _ = said[0]["noise"]
    markdown = said[1]
    assert code == 0
    lead = markdown["noise"].split("\n")[0]
    assert lead.startswith("noise between runs: ") and "left out: 20261201T000000Z" in lead
    assert "(not a whole record: '&lt;img src=x onerror=alert(2)&gt; a`@`b.example\\](https" in lead
    assert "onerror=alert(2)" in out and not terminal_problems(out)


def test_report_images_are_the_reports_own(said):
    _, markdown, tmp = said
    text = markdown["report"]
    images = [line for line in text.split("\n") if line.startswith("![")]
    assert images and all(line.endswith(".png)") for line in images)
    suite = next(line for line in images if "evil" in line)
    # the suite is the name's first part: `s](https://evil`, its brackets and `:` escaped
    assert suite.startswith("![s\\](https\\://evil ratios](speedups-s_https_evil-")
    pngs = sorted(p.name for p in (tmp / "report").glob("*.png"))
    assert pngs == [suite.split("](")[-1].rstrip(")")]


@pytest.mark.parametrize(
    "command", ["history", "nightly", "noise", "report", "gate", "gate --bench", "history --bench"]
)
def test_terminal_output_of_hostile_records(said, command):
    code, out, err = said[0][command]
    assert "Traceback" not in err, err
    assert terminal_problems(out) == [] and terminal_problems(err) == []
    assert code in {"history": (1,), "nightly": (1,), "noise": (0,), "report": (0,)}.get(
        command, (1, 2, 3, 6)
    )
    if command in ("history", "nightly"):
        # the fingerprint's newline is shown, not a line break of its own
        lines = [line for line in out.split("\n") if "environment differences" in line]
        assert lines and all("2.15\\n::error::torch" in line for line in lines)
        assert not any(line.startswith("::error::torch") for line in out.split("\n"))


@pytest.mark.parametrize("command", ["gate --bench", "history --bench"])
def test_a_pattern_matching_nothing_lists_names_cut_and_one_a_line(said, command):
    code, out, err = said[0][command]
    assert code == 3 and len(err.encode()) < 10_000, len(err)
    listed = [line for line in err.split("\n") if line.startswith("  ")]
    assert len(listed) == len(HOSTILE) + 2, listed  # each benchmark once, the time row too
    assert any("…(999,802 more characters)" in line for line in listed)
    assert any("t.x\\n::error::x.track_ops" in line for line in listed)


def test_advise_header_shows_record_text_on_its_own_lines(said):
    code, out, err = said[0]["advise"]
    assert code == 0, err
    assert "torch 2.15\\n::error::torch <img" in out and not terminal_problems(out)


def test_history_and_steps_summary_stay_small_with_a_1_mb_name(said):
    outputs, markdown, tmp = said
    for text in markdown.values():
        assert len(text.encode()) < SMALL
    for _, out, err in outputs.values():
        assert len(out.encode()) < SMALL and len(err.encode()) < SMALL
    # the nightly's bisect hint selects the long name by its first characters, and says so
    assert "long names selected by their first 200 characters" in markdown["steps"]
    # --json keeps every name whole
    steps = json.loads((tmp / "history.json").read_text())["machines"][0]["steps"]
    assert BIG in {s["benchmark"] for s in steps}


# ---- plots: a record's text is never mathtext ----

PLOT_TEXTS = [
    "$\\frac{1$",
    "$x^2$",
    "a$b$c$d$",
    "\\$x$",
    "back\\slash $\\alpha$ \\",
    "$$",
    "new\nline\x1b[0m",
    BIG,
]


@pytest.mark.parametrize("text", PLOT_TEXTS, ids=range(len(PLOT_TEXTS)))
def test_plot_text_is_never_parsed_as_mathtext(text):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    shown = escape.plot_text(text)
    label = Text(0, 0, shown)
    drawn, math = label._preprocess_math(shown)
    assert math is False and "\n" not in drawn and len(drawn) < 300
    fig, ax = plt.subplots()
    try:
        ax.set_title(shown)
        ax.set_yticks([0], [shown])
        ax.plot([0], [0], label=shown)
        ax.legend()
        fig.savefig(io.BytesIO(), format="png")  # mathtext would be parsed (and raise) here
    finally:
        plt.close(fig)


def test_report_machines_with_mathtext_in_a_result_files_machine(tmp_path):
    """A machine name inside an asv result file holding mathtext: `report --machines` writes
    its plot (exit 70 before)."""
    root = tmp_path / "results"
    for machine in ("m1-cpu", "m2-cpu"):
        commit = "a" * 40
        run_id = f"20261201T000000Z-{commit[:8]}"
        with records.writing(root, machine, run_id, {"commit": commit, "machine": machine}) as d:
            result = write_set(
                d / "asv", commit, {"fusion.A.track_x_over_y": 0.5}, machine=machine,
                units={"fusion.A.track_x_over_y": "ratio"},
            )  # fmt: skip
            data = json.loads(result.read_text())
            data["params"]["machine"] = f"{machine} $\\frac{{1$"
            result.write_text(json.dumps(data))
    code, out, err = harness(
        "report", "--results-dir", str(root), "--machines", "m1-cpu,m2-cpu",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    assert (tmp_path / "out" / "machines-key-ratios.png").is_file()
    assert not markdown_problems((tmp_path / "out" / "report.md").read_text())
