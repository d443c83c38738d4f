"""What a record says is escaped for where it goes (harness.core.escape): Markdown tables and
text, the terminal and CI log, shell commands the harness prints; end to end through `harness
gate --markdown`, `harness report` and the nightly's bisect hint. The dashboard's data:
tests/test_dashboard.py."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import types

import pytest
from test_gate_support import draw, write_set

from harness.cli import main
from harness.core import escape
from harness.core.table import render

# names a hostile record could carry, each meant to do something where it is shown
HOSTILE = {
    "rows": "t.x\n| a | b |\n| --- | --- |\n| c | d |",
    "image": "t.![img](https://evil.example/x.png)",
    "link": "t.[click](https://evil.example) <https://evil.example> www.evil.example",
    "html": 't.<script>alert(1)</script><img src=x onerror="alert(2)">&amp;',
    "code": "t.```\n~~~ `code` **bold** _em_ $x$ @someone",
    "heading": "# t.heading",
    "command": "::error file=x::pwned",
    "command after newline": "t.y\n::warning::x",
    "command after spaces": "   ::add-mask::secret",
    "legacy command": "t.z ##[error]legacy",
    "terminal": "t.\x1b[31mred\x1b[0m\r\b\x07over\x9b2J\u202egnp.exe\u2066x\u2069\u200b",
    "separators": "t.a\u2028::error::b\u2029c\x85d\x0be\x0cf",
}
BIG = "t." + "A" * 1_000_000  # a 1 MB benchmark name


def _no_raw_controls(text: str, keep: str = "\n") -> bool:
    return escape.visible(text, keep=keep) == text


def _ci_safe(text: str) -> bool:
    """No line a GitHub runner would read as a workflow command."""
    lines = text.split("\n")
    return not any(line.lstrip().startswith("::") or "##[" in line for line in lines)


# ---- the escapers ----


def test_visible_escapes_controls_bidi_and_separators_and_keeps_text():
    assert escape.visible("a\x1b[0m\r\b\x00\x7f\x85\x9b") == r"a\x1b[0m\r\x08\x00\x7f\x85\x9b"
    assert escape.visible("\u202e\u2066\u200b\ufeff\u2028\u2029") == (
        r"\u202e\u2066\u200b\ufeff\u2028\u2029"
    )
    assert escape.visible("a\nb\tc", keep="\n") == "a\\nb\\tc".replace("\\n", "\n")
    plain = "résumé 中文 × ± — µs 1.2 ms (a, 'b') [c] ~d"
    assert escape.visible(plain) == plain


def test_cut_says_how_much_it_left_out():
    assert escape.cut("abc", 5) == "abc"
    assert escape.cut(BIG) == BIG[:200] + "…(999,802 more characters)"
    assert len(escape.cut(BIG)) < 250


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_a_markdown_cell_opens_nothing(what):
    cell = escape.markdown_cell(HOSTILE[what])
    assert "\n" not in cell and "\r" not in cell and _no_raw_controls(cell, keep="")
    assert not re.search(r"[<>]", cell), "HTML is written as entities"
    # every @ stands alone in a code span of its own (no e-mail autolink, no @mention); every
    # other |, [, ], `, *, ~ and $ is backslash-escaped: no cell end, link, image, code or
    # emphasis
    assert "@" not in re.sub(r"(?<!\\)`@+`", "", cell)
    rest = re.sub(r"(?<!\\)`@+`", "", cell)
    for ch in "|[]`*~$":
        assert all(rest[i - 1] == "\\" for i, c in enumerate(rest) if c == ch), (ch, cell)
    assert not re.search(r"(?<!\\)&(?!amp;|lt;|gt;|quot;)", cell), "a raw & opens no entity"
    assert not re.search(r"(?<!\\)(://|www\.)", cell), "no bare autolink"
    assert not cell.lstrip().startswith(("#", "::", "-", "+", "="))


def test_markdown_keeps_ordinary_names_and_figures_readable():
    for same in (
        "fusion.PointwiseChain.track_compiled_over_eager",
        "models.TrainingStep.track_step_time('tiny_vit', False, False)",
        "1.1 ms",
        "-1.5%",
        "3.157",
        "p=1e-05",
    ):
        assert escape.markdown_text(same) == same
    assert escape.markdown_text("__init__ x_y") == r"\_\_init\_\_ x_y"
    assert escape.markdown_text("1. a") == r"1\. a" and escape.markdown_text("- a") == r"\- a"
    assert escape.markdown_text("a\n# b", lines=True) == "a\n\\# b"


MARKUP = [
    "s](https://evil.example/i.png) ![x",
    "x](javascript:alert(1))",
    "[x]: https://evil.example",
    "<img src=x onerror=alert(1)> <a href=https://evil.example>a</a>",
    "a@b.example, mailto:a@b.example, xmpp:a@b.example/x, @someone, a@@b.example",
    "a`@b.example ``@`` \\@x.example",
    "https://evil.example www.evil.example ftp://evil.example",
    "$\\frac{1$ $x$",
]


@pytest.mark.parametrize("text", MARKUP, ids=range(len(MARKUP)))
def test_markdown_text_opens_no_link_image_autolink_or_html(text):
    """In the places the harness writes a record's text: inside its own image's brackets, a
    heading, a line, a table cell. Read by CommonMark's structure, and rendered by markdown-it-py
    and cmark-gfm where installed (tests/render_support.py)."""
    from render_support import renderer_problems, structure_problems

    shown = escape.markdown_text(text)
    md = (
        f"# {shown}\n\n![{shown} ratios](own.png)\n\n{shown}\n\n"
        f"| name | x |\n| --- | --- |\n| {escape.markdown_cell(text)} | 1 |\n"
    )
    assert structure_problems(md) == [] and renderer_problems(md) == []


def test_an_at_sign_is_a_code_span_because_github_autolinks_through_a_backslash():
    assert escape.markdown_text("a@b.example") == "a`@`b.example"
    assert escape.markdown_text("a@@b `@`") == "a`@@`b \\``@`\\`"
    cmarkgfm = pytest.importorskip("cmarkgfm")  # GitHub's renderer, where installed
    html = cmarkgfm.github_flavored_markdown_to_html
    assert 'href="mailto:a@b.example"' in html("a\\@b.example"), "why `\\@` is not enough"
    assert "href" not in html(escape.markdown_text("a@b.example and www.x.example"))


def test_markdown_code_fences_around_backticks():
    assert escape.markdown_code("/tmp/x y") == "`/tmp/x y`"
    assert escape.markdown_code("a`b``c") == "```a`b``c```"
    assert escape.markdown_code("`a") == "`` `a ``"
    assert escape.markdown_code("a\nb") == r"`a\nb`"


def test_html_escapes_markup_and_quotes():
    assert escape.html('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"


def test_a_markdown_table_has_one_row_per_record_and_keeps_its_own_markup():
    rows = [(name, "1 ms", escape.strong("REGRESSION")) for name in HOSTILE.values()]
    rows.append((BIG, "2 ms", "ok"))
    md = render(["benchmark", "time", "verdict"], rows, "markdown")
    lines = md.rstrip("\n").split("\n")
    assert len(lines) == 2 + len(rows)
    assert all(line.startswith("|") and line.endswith("|") for line in lines)
    # the separators between cells: 3 cells, so 4 unescaped pipes per line
    assert all(len(re.findall(r"(?<!\\)\|", line)) == 4 for line in lines)
    assert md.count("**REGRESSION**") == len(HOSTILE)
    assert "…(999,802 more characters)" in md and len(md) < 20_000


def test_a_text_table_shows_control_characters_escaped():
    rows = [(name, "x" * 5000) for name in HOSTILE.values()]
    text = render(["benchmark", "note"], rows)
    assert len(text.rstrip("\n").split("\n")) == 2 + len(rows)
    assert _no_raw_controls(text)
    assert "…(4,000 more characters)" in text, "other cells are cut at MAX_PROSE"


def test_shell_words_come_back_exactly_from_bash(tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    words = [
        "plain",
        "a b",
        "$(touch pwned)",
        "`touch pwned`",
        "a;touch pwned",
        "it's",
        "new\nline",
        "esc\x1b[0m\r",
        "bidi\u202e",
        "back\\slash'\\",
        "^t\\.x$",
    ]
    line = escape.shell_join(words)
    assert "\n" not in line and _no_raw_controls(line, keep="")
    done = subprocess.run(
        [bash, "-c", f"printf '%s\\0' {line}"], cwd=tmp_path, capture_output=True, check=True
    )
    assert done.stdout.decode().split("\0")[:-1] == words
    assert not (tmp_path / "pwned").exists()
    assert escape.shell("plain-word_1.2") == "plain-word_1.2"


# ---- the CI log: every line a command writes ----


def test_no_line_starts_a_workflow_command():
    g = escape.LineGuard()
    assert g("::error file=x::pwned\n") == "\\::error file=x::pwned\n"
    assert g("  \t\u00a0::add-mask::x\n") == "  \t\u00a0\\::add-mask::x\n"
    assert g("a ::error::x\n") == "a ::error::x\n", "only at the start of a line"
    assert g("name\n::warning::x\n") == "name\n\\::warning::x\n"
    assert g("x ##[error]y\n") == "x ##\\u005berror]y\n"
    assert g("a\rb\x1b[2K\x85\u2028c\n") == "a\\rb\\x1b[2K\\x85\\u2028c\n"


def test_the_guard_holds_across_pieces_of_a_line():
    g = escape.LineGuard()
    pieces = [" ", ":", ":error::x\n", "#", "#", "[x]\n", ":", "a\n", "::", "y"]
    out = "".join(g(p) for p in pieces)
    assert out == " :\\:error::x\n##\\u005bx]\n:a\n\\::y"
    assert _ci_safe(out)


def test_json_through_the_guard_is_the_same_json():
    data = {"rows": [{"name": n} for n in HOSTILE.values()]}
    text = json.dumps(data, indent=2)
    guarded = escape.LineGuard()(text)
    assert _ci_safe(guarded) and json.loads(guarded) == data


def test_guarded_output_wraps_and_restores_the_streams():
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        with escape.guarded_output():
            print("::error::a")
            print("::error::b", file=sys.stderr)
            assert sys.stdout.getvalue  # the stream's own attributes pass through
        assert (sys.stdout, sys.stderr) == (out, err)
    finally:
        sys.stdout, sys.stderr = saved
    assert out.getvalue() == "\\::error::a\n" and err.getvalue() == "\\::error::b\n"


def test_lines_relayed_from_a_runner_pass_the_guard(capsys):
    """asv's output, relayed line by line (bench's echo and progress), is printed through the
    guarded streams like the harness's own."""
    from harness.core.processes import run_in_session
    from harness.runs.progress import Progress

    said = [
        "::error file=x::from a benchmark",
        "\x1b[2J  ::add-mask::x ##[warning]y",
        "Running 1 total benchmarks (1 commits * 1 environments * 1 benchmarks)",
        "[100.00%] \u00b7\u00b7\u00b7 canary.A.track_x   n/a",
        "[100.00%] \u00b7\u00b7\u00b7\u00b7 asv: skipped: NotApplicable('\x1b[31m::error::z')",
    ]
    code = "import sys; sys.stdout.write(" + repr("\n".join(said) + "\n") + ")"
    with escape.guarded_output():
        progress = Progress()  # its stream: sys.stdout as the command sees it

        def relay(line):
            print(line)
            progress.feed(line)

        run_in_session([sys.executable, "-c", code], on_line=relay)
        progress.close()
    out = capsys.readouterr().out
    assert _ci_safe(out) and _no_raw_controls(out)
    assert "\\::error file=x::from a benchmark" in out and "[1/1] canary.A.track_x" in out


# ---- end to end: the gate, the report, the nightly's hint ----


def _tree(folder):
    """path -> bytes of every file below `folder` (inputs a rendering command must not touch)."""
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_gate_markdown_of_hostile_names_is_one_row_each_and_small(tmp_path, capsys):
    names = [*HOSTILE.values(), BIG]
    base = write_set(tmp_path / "in" / "base", "aaaaaaaa11", {n: draw(5) for n in names})
    head = write_set(tmp_path / "in" / "head", "bbbbbbbb22", {n: draw(5, seed=1) for n in names})
    before = _tree(tmp_path / "in")
    md, js = tmp_path / "out" / "gate.md", tmp_path / "out" / "gate.json"
    code = main(["gate", str(base), str(head), "--markdown", str(md), "--json", str(js)])
    out, err = capsys.readouterr()
    assert code == 6, err  # raw times, no noise band: undecided, every row shown
    assert _tree(tmp_path / "in") == before
    text = md.read_text()
    assert len(text.encode()) < 100_000, "a 1 MB name makes a small gate.md"
    table = [line for line in text.split("### ", 1)[1].split("\n") if line.startswith("|")]
    assert len(table) == 2 + len(names), "one row per benchmark, whatever its name holds"
    assert not re.search(r"<(script|img|https?:)", text) and not re.search(r"(?<!\\)\[", text)
    assert "…(999,802 more characters)" in text
    for stream in (out, err):
        assert _ci_safe(stream) and _no_raw_controls(stream, keep="\n")
    assert len(out) < 200_000, "the terminal's table is cut too"
    # --json keeps every name whole
    assert {r["name"] for r in json.loads(js.read_text())["rows"]} == set(names)


def test_report_of_hostile_suite_and_benchmark_names(tmp_path, capsys):
    root = tmp_path / "results"
    history = "../../escaped.A.track_$\\frac{1$_over_y\n::error::x"  # mathtext, a path, a command
    names = {"<img src=x onerror=alert(1)>.A.track_x_over_y": 0.5, history: 0.7}
    write_set(root / "asv", "aaaaaaaa11", names, units=dict.fromkeys(names, "ratio"))
    out = tmp_path / "report"
    code = main(["report", "--results-dir", str(root), "--out", str(out), "--history", history])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    md = (out / "report.md").read_text()
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    assert not any(line.startswith("::") for line in md.split("\n"))
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.png")}
    assert all(p.startswith("report/") and "/" not in p[len("report/") :] for p in written)
    assert len(written) == 3, written  # two suites and the history, each a file of its own
    assert not (tmp_path / "escaped").exists() and _ci_safe(stdout + stderr)


def test_nightly_hint_quotes_what_records_say(tmp_path, monkeypatch):
    from harness.runs import nightly

    good, bad = "a1" * 20, "b2$(touch pwned);`id`"
    runs = [
        types.SimpleNamespace(run_id="r1", commit=good),
        types.SimpleNamespace(run_id="r2", commit=bad),
    ]
    monkeypatch.setattr(nightly.records, "list_runs", lambda root, machine: runs)
    name = "x$(touch pwned).t\n::warning::y|z"
    step = types.SimpleNamespace(benchmark=name, last_before="r1", run_id="r2")
    (line,) = nightly.bisect_hints(tmp_path, "m1-cpu", [step])
    assert line.startswith("to find the commit: ") and "\n" not in line
    command = line.removeprefix("to find the commit: ")
    bash = shutil.which("bash")
    if bash:
        done = subprocess.run(
            [bash, "-c", f"printf '%s\\0' {command.removeprefix('harness ')}"],
            cwd=tmp_path,
            capture_output=True,
            check=True,
        )
        assert done.stdout.decode().split("\0")[:-1] == [
            "bisect",
            good,
            bad,
            "--suite",
            "x$(touch pwned)",
            "--bench",
            "^" + re.escape(name) + "$",
            "--machine",
            "m1-cpu",
        ]
        assert not (tmp_path / "pwned").exists()


def test_nightly_step_of_a_hostile_name_prints_and_writes_it_escaped(tmp_path, monkeypatch, capsys):
    from harness.runs import nightly
    from tests.test_history import write_runs

    name = "canary.x\n::warning::pwned <b>|`id`"
    root = tmp_path / "results"
    monkeypatch.setattr(nightly, "publish", lambda root, html_dir: 0)
    monkeypatch.setattr(nightly, "vendor_dashboard", lambda html: [])
    write_runs(root, [{name: 10}] * 6 + [{name: 11}] * 4)
    capsys.readouterr()
    argv = ["nightly", "--skip-bench", "--results-dir", str(root), "--machine", "m1-cpu"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert _ci_safe(out + err) and "to find the commit: harness bisect" in out
    (summary,) = (root / "report").glob("steps-*.md")
    lines = summary.read_text().split("\n")
    hint = next(line for line in lines if line.startswith("- to find the commit"))
    assert "$'^canary" in hint and hint.endswith("``"), "the command is one code span"
    rest = [line for line in lines if line != hint]
    assert not any("<b>" in line or line.startswith("::") for line in rest)
    assert any(line.startswith("### canary.x\\\\n::warning::pwned &lt;b&gt;") for line in rest)


def test_bisect_markdown_escapes_commit_subjects_and_rows():
    from harness.runs import bisect

    def commit(sha, subject):
        return {"commit": sha * 40, "subject": subject, "author_date": "2026-12-01"}

    hostile = "<img src=x onerror=alert(1)>\n| a | b |\n# heading"
    fb = dict(
        commit("c", hostile),
        parent=commit("b", "ok"),
        environment={"torch": "2.14 <b>"},
        environment_differences=[],
        rows=[
            {
                "name": HOSTILE["rows"],
                "unit": "ops",
                "base": 1,
                "head": 2,
                "ratio": 2.0,
                "verdict": "REGRESSION",
                "note": "",
            }
        ],
        explanation=["| not | a table", "# not a heading"],
    )
    r = bisect.Result(0, commit("a", "x"), commit("d", "y"), 3, None, [], None, "found", fb)
    md = bisect.render(r, "markdown")
    assert "<" not in md.replace("&lt;", "") and "\n# " not in md and "\n| not" not in md
    table = [line for line in md.split("\n") if line.startswith("|")]
    assert len(table) == 3, "header, rule, one row"
