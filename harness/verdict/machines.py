"""`harness report --machines A,B`: several machines (a CPU runner, GPU types) in one report,
their key ratios side by side.

Each machine keeps its own history (results/runs/<machine>/, one asv machine each); the ratios
are compared across machines, never the raw times (another device is another scale). Rows: the
key ratios of harness.verdict.summary and every `ratio` benchmark of the suites the report plots
(harness.verdict.report.speedups); a machine without a row shows "n/a".
"""

from __future__ import annotations

import pathlib

from harness.core import escape
from harness.core.files import write_atomic
from harness.core.table import render
from harness.verdict import bands
from harness.verdict.results import ResultSet
from harness.verdict.summary import key_ratio_rows

NA = "n/a"


def rows(sets: list[ResultSet]) -> tuple[list[str], list[list[str]], dict[str, list[float | None]]]:
    """(header, table rows, numbers per row label for the plot), one column per machine."""
    from harness.verdict.report import speedups

    per_machine: list[dict[str, str]] = []
    numbers: dict[str, list[float | None]] = {}
    for i, rs in enumerate(sets):
        col = dict(key_ratio_rows(rs))
        for suite, bars in speedups(rs).items():
            for b in bars:
                label = f"{suite}: {b.label}"
                col[label] = f"{b.value:.3g}"
                numbers.setdefault(label, [None] * len(sets))[i] = b.value
        per_machine.append(col)
    labels = list(dict.fromkeys(label for col in per_machine for label in col))
    header = ["key ratio"] + [rs.machine for rs in sets]
    table = [
        ["device"] + [bands.device_of(rs) for rs in sets],
        ["commit"] + [rs.commit[:8] for rs in sets],
    ]
    table += [[label] + [col.get(label, NA) for col in per_machine] for label in labels]
    return header, table, numbers


def plot(sets: list[ResultSet], numbers: dict[str, list[float | None]], path: pathlib.Path) -> None:
    """Grouped horizontal bars: per ratio one bar per machine, 1 marked."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(numbers)
    height = 0.8 / len(sets)
    fig, ax = plt.subplots(figsize=(9, 1.8 + 0.3 * len(labels) * len(sets)))
    for i, rs in enumerate(sets):
        ys = [j + i * height for j in range(len(labels))]
        vals = [numbers[label][i] for label in labels]
        ax.barh(
            [y for y, v in zip(ys, vals) if v is not None],
            [v for v in vals if v is not None],
            height=height,
            label=escape.plot_text(f"{rs.machine} ({rs.commit[:8]})"),
        )
    # what the labels say comes from result files: never mathtext (harness.core.escape)
    ticks = [escape.plot_text(label) for label in labels]
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(labels))], ticks, fontsize=7)
    ax.axvline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_xlabel("ratio (×; time ratios: < 1 faster; workers scaling: > 1 faster)")
    ax.set_ylabel("key ratio")
    ax.set_title("key ratios by machine")
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def write_machines_report(
    sets: list[ResultSet], out: pathlib.Path, lead: str = ""
) -> tuple[pathlib.Path, str]:
    """report.md with the side-by-side table (and its plot) in `out`; returns it and the text
    table. `lead`: Markdown the command wrote (what its pull refused), below the title."""
    out.mkdir(parents=True, exist_ok=True)
    header, table, numbers = rows(sets)
    lines = [f"# Benchmark report: {len(sets)} machines side by side", ""]
    lines += [lead.rstrip("\n"), ""] if lead else []
    lines += [
        f"- {escape.markdown_text(rs.machine, limit=escape.MAX_CELL)}: commit "
        f"{escape.markdown_text(rs.commit[:8])}, "
        f"{escape.markdown_code(rs.path)}"
        for rs in sets
    ] + [""]
    lines += [
        "Ratios only: each is measured within one machine (raw times of different devices are "
        "not comparable); n/a: not run, failed or not applicable on that machine.",
        "",
    ]
    if numbers:
        png = out / "machines-key-ratios.png"
        plot(sets, numbers, png)
        lines += [f"![key ratios by machine]({png.name})", ""]
    lines.append(render(header, table, "markdown"))
    md = out / "report.md"
    write_atomic(md, "\n".join(lines))
    return md, render(header, table)
