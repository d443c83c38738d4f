"""`harness report`: Markdown + PNGs from a result set; history over commits; bad names exit 3."""

from __future__ import annotations

import re

from test_gate_support import draw, write_set

from harness.cli import main
from harness.verdict import report

W = "dataloader.LoadSyntheticImages.track_samples_per_second"


def test_report_writes_markdown_and_plots(tmp_path, capsys):
    root = tmp_path / "results"
    units = {
        "fusion.PointwiseChain.track_compiled_over_eager": "ratio",
        "amp.AutocastOverFp32.track_autocast_over_fp32": "ratio",
        f"{W}(0, False, 16, False)": "samples/s",
        f"{W}(2, False, 16, False)": "samples/s",
    }
    for i, commit in enumerate(["aaaaaaaa11", "bbbbbbbb22", "cccccccc33"]):
        write_set(
            root / "asv",
            commit,
            {
                "fusion.PointwiseChain.track_compiled_over_eager": 0.5,
                "amp.AutocastOverFp32.track_autocast_over_fp32": 0.8,
                f"{W}(0, False, 16, False)": 100.0,
                f"{W}(2, False, 16, False)": 180.0,
                "fusion.PointwiseChain.track_eager_time": draw(20, seed=i, scale=1 + 0.1 * i),
            },
            date=i + 1,
            units=units,
        )
    out = tmp_path / "report"
    code = main(
        [
            "report",
            "--results-dir",
            str(root),
            "--out",
            str(out),
            "--history",
            "fusion.PointwiseChain.track_eager_time",
        ]
    )
    assert code == 0, capsys.readouterr()
    md = re.sub(r" +", " ", (out / "report.md").read_text())  # column padding aside
    assert "# Benchmark report: cccccccc on m1-cpu" in md
    assert "| PointwiseChain.compiled_over_eager | 0.5 |" in md
    assert "workers 2/0 (pin_memory=False, batch=16, persistent=False) | 1.8 |" in md
    # sections only for the suites the run holds: no transfer, models or training_loop here
    assert [line for line in md.splitlines() if line.startswith("## ") and ":" in line][:3] == [
        "## fusion: " + report.SUITES["fusion"][0],
        "## amp: " + report.SUITES["amp"][0],
        "## dataloader: " + report.SUITES["dataloader"][0],
    ]
    assert "## transfer" not in md and "## models" not in md and "No results" not in md
    assert md.count("| aaaaaaaa |") + md.count("| bbbbbbbb |") + md.count("| cccccccc |") == 3
    for png in (
        "speedups-fusion.png",
        "speedups-amp.png",
        "speedups-dataloader.png",
        "history-fusion.PointwiseChain.track_eager_time.png",
    ):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, png
        assert f"]({png})" in md


def test_report_unknown_history_name_exit_3(tmp_path, capsys):
    root = tmp_path / "results"
    write_set(root / "asv", "aaaaaaaa11", {"x.time": draw(10)})
    code = main(
        ["report", "--results-dir", str(root), "--out", str(tmp_path / "r"), "--history", "no.such"]
    )
    assert code == 3 and "no.such" in capsys.readouterr().err


def test_report_out_of_someone_else_is_refused(tmp_path, capsys):
    root = tmp_path / "results"
    write_set(root / "asv", "aaaaaaaa11", {"x.time": draw(10)})
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "report.md").write_text("my notes")
    code = main(["report", "--results-dir", str(root), "--out", str(foreign)])
    assert code == 3 and "not made by the harness" in capsys.readouterr().err
    assert (foreign / "report.md").read_text() == "my notes"
    own = tmp_path / "own"
    assert main(["report", "--results-dir", str(root), "--out", str(own)]) == 0
    assert main(["report", "--results-dir", str(root), "--out", str(own)]) == 0  # refilled
