"""End to end (slow tier): a project of one's own whose benchmark declares the answer check of
its paired row (`answer=answers.Pair(...)` to `timing.measure_paired`), and a side made wrong by
an environment variable. `harness bench --quick` clean and wrong: bench exits 0 both times and
prints the wrong answer loudly; `harness gate` of the two exits 1 naming the row, the output and
the error and the `harness answers --rerun` line, which reruns the check alone (exit 1 with the
wrong side, 0 without); `harness answers` exits 1 on the wrong run and 0 on a clean one; the record
keeps the reproduction file; two clean runs gate clean."""

from __future__ import annotations

import json
import subprocess
import tempfile

import pytest

from harness.cli import main
from harness.core import answerfacts, exits, records, settings

pytestmark = pytest.mark.slow

CHECKED = """
import os

import torch

from harness.measure import answers, timing
from harness.measure.threads import fix_threads


def setup():
    fix_threads()


class Checked:
    def setup(self):
        torch.manual_seed(0)
        self.w = torch.randn(64, 64)
        self.x = torch.randn(16, 64)

    def _fast(self):
        y = self.x @ self.w
        if os.environ.get("CHECKED_WRONG"):
            y = y + 0.01  # the faster side computes something else
        return y

    def _slow(self):
        return torch.einsum("ij,jk->ik", self.x, self.w)

    def track_fast_over_slow(self):
        pair = answers.Pair("x @ w vs einsum")
        return timing.asv_samples(timing.measure_paired(self._fast, self._slow, answer=pair))

    track_fast_over_slow.unit = "ratio"
"""
ROW = "checked.Checked.track_fast_over_slow"
ANS = answerfacts.answer_row(ROW)


def test_a_wrong_side_in_a_project_of_its_own_fails_the_gate_and_the_single_run_form(
    tmp_path, capsys, monkeypatch, clean_registry
):
    proj, root = tmp_path / "proj", tmp_path / "results"
    assert main(["init", str(proj)]) == exits.PASS
    (proj / "benchmarks" / "checked.py").write_text(CHECKED)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    subprocess.run(["git", "add", "-A"], cwd=proj, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=proj, check=True)
    monkeypatch.delenv(settings.PROJECT.name, raising=False)
    monkeypatch.chdir(proj)
    capsys.readouterr()

    def bench(wrong: bool) -> str:
        if wrong:
            monkeypatch.setenv("CHECKED_WRONG", "1")
        else:
            monkeypatch.delenv("CHECKED_WRONG", raising=False)
        argv = ["bench", "--quick", "--suite", "checked", "--results-dir", str(root)]
        code = main([*argv, "--machine", "m"])
        out = capsys.readouterr().out
        assert code == exits.PASS, out  # bench keeps its exit code
        return records.list_runs(root, "m")[-1].run_id, out

    clean, out = bench(False)
    assert "!!!" not in out and "answer (error/tol)" in out and "same" in out
    wrong, out = bench(True)
    block = out[out.index("!!!") :]
    assert f"WRONG {ANS}: output 'output'" in block and "rtol 0.0001" in block
    kept = root / "runs" / "m" / wrong / "answers" / "first-wrong.pt"
    assert str(kept) in block

    import torch

    payload = torch.load(kept, weights_only=True)  # readable without the harness
    assert payload["row"] == ROW and set(payload["new"]) == {"output"}
    assert (payload["new"]["output"] - payload["reference"]["output"]).abs().max() > 0.009

    out_json = tmp_path / "gate.json"
    code = main(["gate", clean, wrong, "--results-dir", str(root), "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == exits.REGRESSION, out
    row = next(r for r in json.loads(out_json.read_text())["rows"] if r["name"] == ANS)
    assert row["verdict"] == "WRONG" and "output 'output'" in row["note"]
    assert "max |diff| 0.01" in row["note"]
    assert f"harness answers --rerun {ROW} --quick" in row["note"]

    # the line the note names reproduces the verdict alone: WRONG with the wrong side, same without
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a WRONG's rerun record goes
    assert main(["answers", "--rerun", ROW, "--quick"]) == exits.REGRESSION
    assert "WRONG" in capsys.readouterr().out
    assert list(tmp_path.glob("harness-answers-rerun-*/answers/first-wrong.pt"))
    monkeypatch.delenv("CHECKED_WRONG")
    assert main(["answers", "--rerun", ROW, "--quick"]) == exits.PASS
    capsys.readouterr()

    assert main(["answers", wrong, "--results-dir", str(root)]) == exits.REGRESSION
    assert main(["answers", clean, "--results-dir", str(root)]) == exits.PASS
    again, _ = bench(False)
    capsys.readouterr()
    assert main(["gate", clean, again, "--results-dir", str(root), "--bench", "answer_"]) == 0
