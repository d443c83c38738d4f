"""Every table the harness prints, rendered one way (tabulate): aligned text for a terminal,
GitHub Markdown for a pull-request comment or a report. Callers build rows of strings (what was
measured); this module only decides how they look (as torch.utils.benchmark's Compare does).

Cells often hold what a record says (a benchmark name, a note naming one), so every cell is
escaped for its target (harness.core.escape): in Markdown nothing in a cell can end the cell or
the row, or become HTML, a link, an image or code; in text no control character reaches the
terminal. The first column (a row's name) is cut at escape.MAX_CELL characters, the others at
escape.MAX_PROSE, each with a marker saying how many characters were left out. A cell built
as escape.Markup (escape.strong) is Markdown the caller wrote and passes as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from harness.core import escape

FORMATS = {"text": "simple", "markdown": "github"}


def _cell(value: object, fmt: str, limit: int) -> str:
    if fmt == "markdown":
        return value if isinstance(value, escape.Markup) else escape.markdown_cell(value, limit)
    return escape.terminal(value, limit)


def render(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    fmt: str = "text",
    align: Sequence[str] | None = None,
) -> str:
    """The table as one string ending in a newline. `align` per column: left, right or center."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown table format {fmt!r}; choose from {', '.join(FORMATS)}")
    cells = [
        [_cell(c, fmt, escape.MAX_CELL if i == 0 else escape.MAX_PROSE) for i, c in enumerate(row)]
        for row in rows
    ]
    header = [_cell(h, fmt, escape.MAX_PROSE) for h in header]
    text = tabulate(
        cells, headers=list(header), tablefmt=FORMATS[fmt], colalign=align, disable_numparse=True
    )
    return text + "\n"
