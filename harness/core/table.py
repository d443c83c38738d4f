"""Every table the harness prints, rendered one way (tabulate): aligned text for a terminal,
GitHub Markdown for a pull-request comment or a report. Callers build rows of strings (what was
measured); this module only decides how they look (as torch.utils.benchmark's Compare does)."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

FORMATS = {"text": "simple", "markdown": "github"}


def render(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    fmt: str = "text",
    align: Sequence[str] | None = None,
) -> str:
    """The table as one string ending in a newline. `align` per column: left, right or center."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown table format {fmt!r}; choose from {', '.join(FORMATS)}")
    cells = [[str(c) for c in row] for row in rows]
    if fmt == "markdown":
        header = [h.replace("|", "\\|") for h in header]
        cells = [[c.replace("|", "\\|") for c in row] for row in cells]
    text = tabulate(
        cells, headers=list(header), tablefmt=FORMATS[fmt], colalign=align, disable_numparse=True
    )
    return text + "\n"
