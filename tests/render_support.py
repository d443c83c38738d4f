"""Checks of what a command rendered from hostile records: Markdown that opens no link, image,
autolink or HTML of a record's, terminal text without raw control characters or workflow
commands, and outputs that stay small. Markdown is checked by its structure (CommonMark's rules,
always) and, where they are installed, by markdown-it-py (with linkify) and cmark-gfm (GitHub's
renderer, through the cmarkgfm bindings), which must agree."""

from __future__ import annotations

import html.parser
import re

# names a hostile record could carry, one for each way of rendering something of its own
HOSTILE = {
    "link": "s](https://evil.example/i.png).A.track_x_over_y",
    "html": "<img src=x onerror=alert(1)>.A.track_ops",
    "mail": "a@b.example.A.track_ops",
    "math": "m$\\frac{1$.A.track_ops",
    "command": "t.x\n::error::x.track_ops",
}
BIG = "t." + "A" * 1_000_000  # a 1 MB benchmark name
SMALL = 100_000  # bytes: no output of a command grows past this from one long name

# what the harness itself writes as an image: a PNG beside the Markdown file
_OWN_IMAGE = re.compile(r"[A-Za-z0-9_.-]+\.png")


def _outside_code(text: str) -> str:
    """`text` with every code span and backslash escape blanked out (CommonMark: a code span
    is a backtick string, up to the next backtick string of the same length; a backslash
    escapes the next ASCII punctuation outside code spans)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            # `\@` stays an @: GitHub finds e-mail autolinks after escapes are resolved
            out.append(" @" if text[i + 1] == "@" else "  ")
            i += 2
            continue
        if c == "`":
            j = i
            while j < n and text[j] == "`":
                j += 1
            fence = text[i:j]
            k = j
            while True:
                k = text.find(fence, k)
                if k < 0 or text[k + len(fence) : k + len(fence) + 1] != "`":
                    break
                k = k + len(fence)
                while k < n and text[k] == "`":
                    k += 1
            if k < 0:  # no closing run: the backticks are text
                out.append(fence)
                i = j
                continue
            out.append(" " * (k + len(fence) - i))
            i = k + len(fence)
            continue
        out.append(c)
        i += 1
    return "".join(out)


def structure_problems(md: str) -> list[str]:
    """What in `md` could render as markup of a record's, read by CommonMark's rules."""
    problems = []
    for n, line in enumerate(md.split("\n"), 1):
        if line.lstrip().startswith("::"):
            problems.append(f"line {n} starts with ::")
        bare = _outside_code(line)
        if re.search(r"<[A-Za-z/!?]", bare):
            problems.append(f"line {n}: raw HTML or autolink: {line[:120]!r}")
        for m in re.finditer(r"\]\(", bare):
            end = bare.find(")", m.end())
            if not _OWN_IMAGE.fullmatch(bare[m.end() : end]):
                problems.append(f"line {n}: a link or image destination: {line[:120]!r}")
        if "@" in bare:
            problems.append(f"line {n}: an @ outside a code span: {line[:120]!r}")
        if re.search(r"://|www\.", bare):
            problems.append(f"line {n}: a bare autolink: {line[:120]!r}")
    return problems


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


_SAFE_TAGS = {
    *"p h1 h2 h3 h4 h5 h6 table thead tbody tr th td code pre strong em ul ol li hr br".split(),
    "blockquote",
}


def _html_problems(rendered: str, who: str) -> list[str]:
    parser = _Tags()
    parser.feed(rendered)
    problems = []
    for tag, attrs in parser.tags:
        if tag == "img" and _OWN_IMAGE.fullmatch(attrs.get("src") or ""):
            continue
        if tag not in _SAFE_TAGS:
            problems.append(f"{who} renders <{tag} {attrs}>")
    return problems


def renderer_problems(md: str) -> list[str]:
    """What markdown-it-py (linkify on) and cmark-gfm (GitHub's extensions: autolinks, tables;
    raw HTML let through, as GitHub does before its sanitizer) render of `md` beyond the
    harness's own markup: links, images from elsewhere, HTML. [] where neither is installed."""
    problems = []
    try:
        from markdown_it import MarkdownIt

        problems += _html_problems(MarkdownIt("gfm-like").render(md), "markdown-it")
    except ImportError:  # markdown-it-py, or linkify-it-py for its autolinks
        pass
    try:
        import cmarkgfm
        from cmarkgfm.cmark import Options

        rendered = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
        problems += _html_problems(rendered, "cmark-gfm")
    except ImportError:
        pass
    return problems


def markdown_problems(md: str) -> list[str]:
    return (
        structure_problems(md)
        + renderer_problems(md)
        + ([f"{len(md.encode()):,} bytes"] if len(md.encode()) >= SMALL else [])
    )


def terminal_problems(text: str) -> list[str]:
    """Raw control characters (but newline), a line a CI runner reads as a workflow command,
    or more than SMALL bytes."""
    from harness.core import escape

    problems = []
    if escape.visible(text, keep="\n") != text:
        problems.append("a raw control character")
    for line in text.split("\n"):
        if line.lstrip().startswith("::") or "##[" in line:
            problems.append(f"a workflow command: {line[:120]!r}")
    if len(text.encode()) >= SMALL:
        problems.append(f"{len(text.encode()):,} bytes")
    return problems
