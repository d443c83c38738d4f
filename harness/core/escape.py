"""What a record says, escaped for where it goes (docs/design.md, "Rendering what records say").

Benchmark names, run ids, commits, suite names, notes, error lines and machine names come from
files other machines wrote (harness.core.trust); none of them may become markup, a terminal
control sequence, a GitHub workflow command or a shell word boundary. One escaper per target:

- `markdown_text` / `markdown_cell`: Markdown (GitHub's: tables, job summaries, comments);
- `plot_text`: a label matplotlib draws (never mathtext);
- `html`: an HTML text node or attribute value;
- `terminal`: one line of a terminal (control and bidi characters shown escaped);
- `shell` / `shell_join`: a word of a POSIX shell command line the harness prints;
- `LineGuard` / `guarded_output`: every line a command writes (harness.cli.main), so that none
  is a GitHub workflow command.

`cut` shortens a name for a table cell with a visible marker; --json outputs keep full names.
"""

from __future__ import annotations

import contextlib
import html as _html
import re
import shlex
import sys
import unicodedata

MAX_CELL = 200  # characters of a name in a table cell (the rest: "…(N more characters)")
MAX_PROSE = 1000  # characters of any other table cell (a note, a reason) before it is cut
MAX_MESSAGE = 4000  # characters of a message below a table (it may name many rows)

# Characters never written raw: controls (C0, DEL, C1), format characters (bidi overrides and
# isolates, zero-width characters, BOM), line and paragraph separators, lone surrogates.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_CANDIDATE = re.compile(r"[^\x20-\x7e]")  # what may be hidden: the callback decides
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown_char(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def visible(text: str, keep: str = "") -> str:
    """`text` with every control, format (bidi) and separator character written as its Python
    escape (`\\x1b`, `\\r`, `\\u202e`); the characters in `keep` (e.g. "\\n\\t") stay."""

    def one(m: re.Match) -> str:
        c = m.group(0)
        if c in keep or unicodedata.category(c) not in _HIDDEN:
            return c
        return _shown_char(c)

    return _CANDIDATE.sub(one, text)


def cut(text: str, limit: int = MAX_CELL) -> str:
    """`text` cut to `limit` characters, with a marker saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text) - limit:,} more characters)"


def terminal(text, limit: int | None = None) -> str:
    """A value from a record, fit for one line of a terminal: every control character (also
    newline and tab) shown escaped; cut to `limit` characters first where given."""
    text = str(text)
    return visible(cut(text, limit) if limit else text)


# ---- Markdown ----

# inline syntax, escaped wherever it stands: HTML (as entities), code, emphasis, links and
# images (both brackets: an unescaped `]` would close the harness's own `![...](...)` and open
# a destination of the record's), table cells, strikethrough, math; `:` of `scheme://` and `.`
# of `www.` (GitHub's extended autolinks); `_` where it could open or close emphasis; `@` as a
# code span (below)
_MD_INLINE = re.compile(
    r"(?P<entity>[&<>])"
    r"|(?P<at>@+)"
    r"|(?P<punct>[\\`*\[\]|~$])"
    r"|(?P<under>(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))"
    r"|(?P<scheme>(?<=[0-9A-Za-z]):(?=//))"
    r"|(?P<www>(?<=[wW]{3})\.)"
)
_ENTITY = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# what opens a block at the start of a line: a heading, a list item, a thematic break or setext
# underline, an ordered list item, and `::` (no Markdown line the harness writes starts with a
# workflow command); `-1.5%` or `1.1 ms` open nothing and stay as they are
_MD_BLOCK = re.compile(
    r"^(\s*)(?:(#(?=#{0,5}(?:\s|$))|[-+](?=\s|$)|-(?=-)|=(?=[=\s]|$)|:(?=:))"
    r"|([0-9]{1,9})([.)])(?=\s|$))"
)


def _md_inline(m: re.Match) -> str:
    if m.group("entity"):
        return _ENTITY[m.group("entity")]
    if m.group("at"):
        # GitHub (cmark-gfm) finds e-mail autolinks in the text after escapes are resolved, so
        # `\\@` and `&#64;` still render `mailto:`; it never looks inside a code span, and
        # neither do @mentions: the address is broken where an autolink needs its `@`
        return f"`{m.group('at')}`"
    return "\\" + m.group(0)


def _md_line(line: str) -> str:
    line = _MD_INLINE.sub(_md_inline, line)
    return _MD_BLOCK.sub(
        lambda m: (
            m.group(1) + ("\\" + m.group(2) if m.group(2) else m.group(3) + "\\" + m.group(4))
        ),
        line,
        count=1,
    )


def markdown_text(text, *, limit: int | None = None, lines: bool = False) -> str:
    """A value from a record, as Markdown text that shows it literally and opens nothing: no
    HTML, link, image, code, emphasis, table cell or block. One line (a newline is shown as
    `\\n`), unless `lines`: then each line is escaped on its own (a message of several lines)."""
    text = str(text)
    if limit:
        text = cut(text, limit)
    if lines:
        return "\n".join(_md_line(visible(line, keep="\t")) for line in text.splitlines())
    return _md_line(visible(text))


def markdown_cell(text, limit: int = MAX_CELL) -> str:
    """A table cell: one line, cut to `limit` characters, nothing that ends the cell or row."""
    return markdown_text(text, limit=limit)


def markdown_code(text) -> str:
    """A code span showing `text` literally (a path, a command) outside a table."""
    text = visible(str(text))
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


class Markup(str):
    """Markdown the harness wrote itself (`strong`): a table passes it through unescaped."""


def strong(text) -> Markup:
    """Bold Markdown of a value (escaped inside): a verdict or status that must stand out."""
    return Markup(f"**{markdown_cell(text, MAX_PROSE)}**")


# ---- HTML ----


def html(text) -> str:
    """A value from a record as an HTML text node or a quoted attribute value."""
    return _html.escape(visible(str(text)), quote=True)


# ---- plots ----


def plot_text(text, limit: int = MAX_CELL) -> str:
    """A label for matplotlib: one line, cut, every `$` escaped. matplotlib parses a text as
    mathtext when its `$` less its `\\$` are an even number above zero (and raises on what it
    cannot parse); with each `$` written `\\$` that count is 0, so a record's text (backslashes
    and all) is drawn as it is, never parsed. Every text a plot shows from a record goes
    through here: titles, tick labels, legends, axis labels with a record's unit."""
    return terminal(text, limit).replace("$", r"\$")


# ---- shell ----


def shell(word) -> str:
    """One word of a shell command the harness prints for a person to paste: shlex.quote,
    or, where the word holds a control character, bash's $'...' (one line, exact)."""
    word = str(word)
    if visible(word) == word:
        return shlex.quote(word)
    body = visible(word.replace("\\", "\\\\").replace("'", "\\'"))
    return f"$'{body}'"


def shell_join(words) -> str:
    return " ".join(shell(w) for w in words)


# ---- every line a command writes ----


_LINES = re.compile(r"[^\n]*\n|[^\n]+")
_LEGACY = re.compile(r"(?<=##)\[")  # the `[` of `##[`


class LineGuard:
    """Makes text safe for a CI log, piece by piece as a stream writes it: control characters
    other than newline and tab shown escaped; a line whose first characters after any leading
    whitespace are `::` (GitHub's workflow commands: the runner trims leading whitespace, then
    looks for `::`) gets a backslash before them; `##[` anywhere in a line (the runner's older
    command form, matched anywhere) is written `##\\u005b` (in a JSON string, the same `[`)."""

    _FRESH, _COLON, _DONE = range(3)

    def __init__(self):
        self.state = self._FRESH  # only whitespace so far on this line (or it and one ':')
        self.tail = ""  # the last two characters written on this line

    def __call__(self, text: str) -> str:
        text = visible(text, keep="\n\t")
        out = []
        for piece in _LINES.findall(text):
            body = piece.rstrip("\n")
            body = self._line_start(body)
            joined = _LEGACY.sub(r"\\u005b", self.tail + body)
            body = joined[len(self.tail) :]
            if piece.endswith("\n"):
                self.state, self.tail = self._FRESH, ""
                out.append(body + "\n")
            else:
                self.tail = (self.tail + body)[-2:]
                out.append(body)
        return "".join(out)

    def _line_start(self, body: str) -> str:
        if self.state == self._COLON:
            if body.startswith(":"):
                self.state = self._DONE
                return "\\" + body
            self.state = self._DONE if body else self._COLON
            return body
        if self.state == self._FRESH:
            rest = body.lstrip()
            lead = body[: len(body) - len(rest)]
            if rest.startswith("::"):
                self.state = self._DONE
                return lead + "\\" + rest
            if rest == ":":
                self.state = self._COLON
            elif rest:
                self.state = self._DONE
        return body


class GuardedStream:
    """A text stream whose writes pass through a LineGuard; everything else is the stream's."""

    def __init__(self, stream):
        self._stream = stream
        self._guard = LineGuard()

    def write(self, text: str) -> int:
        self._stream.write(self._guard(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_output():
    """sys.stdout and sys.stderr guarded (LineGuard) while the block runs, then restored:
    whatever the harness prints or relays, no line of it is a GitHub workflow command."""
    saved = sys.stdout, sys.stderr
    if sys.stdout is not None and not isinstance(sys.stdout, GuardedStream):
        sys.stdout = GuardedStream(sys.stdout)
    if sys.stderr is not None and not isinstance(sys.stderr, GuardedStream):
        sys.stderr = GuardedStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
