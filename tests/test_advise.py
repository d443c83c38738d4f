"""`harness advise`: verdicts on per-round ratios (CI, helps / hurts / no effect), n/a reasons,
a synthetic run record read through the CLI, and a real quick run of a small suite end to end."""

from __future__ import annotations

import json
import os
import pathlib
import random
import re
import subprocess
import sys

import pytest
from asv.results import Results
from asv.runner import BenchmarkResult

from harness.cli import main
from harness.core import records
from harness.verdict import advice

ROOT = pathlib.Path(__file__).resolve().parents[1]
MACHINE = "m1-cpu"
NAN = float("nan")


def _ratios(median: float, n: int = 41, spread: float = 0.02, seed: int = 0) -> list[float]:
    """n per-round ratios spread evenly within ±spread around `median` (exactly the median),
    shuffled."""
    values = [median * (1 + spread * (2 * i / (n - 1) - 1)) for i in range(n)]
    random.Random(seed).shuffle(values)
    return values


def write_run(
    root: pathlib.Path,
    benches: dict,
    *,
    threads: int = 1,
    cuda: bool = False,
    run_id: str = "20261130T120000Z-aaaaaaaa",
) -> pathlib.Path:
    """A run record with a fingerprint and an asv result file holding parameterised ratio rows.
    `benches`: name -> (param_names, {param values tuple (asv's reprs): samples | NAN | None})."""
    meta = {"commit": "a" * 40, "mode": "fast", "quick": True, "suites": []}
    with records.writing(root, MACHINE, run_id, meta) as staging:
        asv_root = staging / "asv"
        (asv_root / MACHINE).mkdir(parents=True)
        (asv_root / MACHINE / "machine.json").write_text(
            json.dumps({"machine": MACHINE, "version": 1})
        )
        res = Results(
            {"machine": MACHINE, "python": "3.11"}, {}, "a" * 40, 1, "3.11", "existing-py", {}
        )
        known = {"version": 2}
        for name, (param_names, by_params) in benches.items():
            combos = list(by_params)
            params = [
                sorted({c[i] for c in combos}, key=[c[i] for c in combos].index)
                for i in range(len(param_names))
            ]
            # asv stores the full cartesian grid; cases not given are skipped (NaN)
            import itertools

            grid = list(itertools.product(*params))
            data = [by_params.get(c, NAN) for c in grid]
            known[name] = {
                "name": name,
                "unit": "ratio",
                "type": "track",
                "version": "1",
                "params": params,
                "param_names": param_names,
            }
            values = [
                None if d is None else NAN if isinstance(d, float) else sorted(d)[len(d) // 2]
                for d in data
            ]
            samples = [d if isinstance(d, list) else None for d in data]
            res.add_result(
                known[name],
                BenchmarkResult(values, samples, [1] * len(grid), 0, "", None),
                record_samples=True,
            )
        res.save(str(asv_root))
        (asv_root / "benchmarks.json").write_text(json.dumps(known))
        fp = {
            "torch_threads": threads,
            "cuda_available": cuda,
            "mode": "fast",
            "quick": True,
            "run_id": run_id,
            "torch": "2.14.1",
            "cpu": "AMD EPYC",
            "gpu": "H200" if cuda else None,
        }
        (staging / "fingerprint.json").write_text(json.dumps(fp))
    return root / "runs" / MACHINE / run_id


# ---- statistics and verdicts on synthetic samples ----


def test_order_statistic_interval_covers_the_median():
    samples = [float(i) for i in range(1, 41)]  # 1..40
    med, lo, hi, coverage = advice.median_ci(samples)
    assert med == 20.5
    # n=40 at 95%: the 14th and 27th order statistics (binomial, as in tables of median CIs)
    assert (lo, hi) == (14.0, 27.0) and 0.95 <= coverage < 0.97
    med, lo, hi, coverage = advice.median_ci([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (med, lo, hi) == (3.0, 1.0, 5.0) and coverage == pytest.approx(0.9375)  # too few for 95%
    assert advice.median_ci([2.0])[1:] == (None, None, 0.0)


@pytest.mark.parametrize(
    "median, verdict",
    [
        (0.5, advice.HELPS),
        (7.4, advice.HURTS),
        (1.0, advice.NO_EFFECT),
        (0.98, advice.NO_EFFECT),
        (1.03, advice.NO_EFFECT),
    ],
)
def test_verdicts_from_the_interval_and_tolerance(median, verdict):
    med, lo, hi, _ = advice.median_ci(_ratios(median, spread=0.01))
    assert advice.judge(med, lo, hi, tolerance=0.05) == verdict


def test_an_interval_that_includes_one_is_no_effect_even_with_a_large_median():
    # few, widely spread rounds: median 0.7 but the interval reaches past 1
    med, lo, hi, _ = advice.median_ci([0.4, 0.6, 0.7, 0.9, 1.3])
    assert med == 0.7 and lo < 1 < hi
    assert advice.judge(med, lo, hi) == advice.NO_EFFECT
    assert advice.effect_text(0.5) == "2.00x faster" and advice.effect_text(7.4) == "7.40x slower"


# ---- a synthetic run through the command ----

AMP = "amp.AutocastOverFp32.track_autocast_over_fp32"
EVAL = "training_loop.EvalForward.track_no_grad_over_grad_enabled"
ZERO = "training_loop.ZeroGrad.track_set_to_none_over_zero_fill"
PINNED = "transfer.PinnedOverPageable.track_pinned_over_pageable"


def _run(tmp_path, **kw):
    return write_run(
        tmp_path / "results",
        {
            AMP: (
                ["model", "precision"],
                {("'alexnet'", "'bf16'"): _ratios(7.4), ("'alexnet'", "'fp16'"): NAN},
            ),
            EVAL: (["model"], {("'mlp'",): _ratios(0.8), ("'alexnet'",): _ratios(1.0, spread=0.2)}),
            ZERO: (["model"], {("'mlp'",): None}),
            PINNED: (["non_blocking", "payload"], {("False", "'float32'"): NAN}),
        },
        **kw,
    )


def test_advise_prints_a_verdict_or_a_reason_for_every_tip(tmp_path, capsys):
    _run(tmp_path, threads=2)
    out_json = tmp_path / "advice.json"
    code = main(["advise", "--results-dir", str(tmp_path / "results"), "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = {}
    for line in out.splitlines():
        for tip in advice.TIPS:
            if line.startswith(tip.name + " "):
                lines.setdefault(tip.name, []).append(re.sub(r" +", " ", line))
    assert set(lines) == {t.name for t in advice.TIPS}, "every tip has a line"
    bf16 = lines["AMP bf16"][0]
    assert "alexnet" in bf16 and "7.40x slower" in bf16 and "hurts" in bf16
    assert "2 threads" in bf16 and "alexnet small (batch=2, image=64" in bf16
    assert any(
        "mlp" in line and "helps" in line and "1.25x faster" in line for line in lines["no_grad"]
    )
    assert any("alexnet" in line and "no measurable effect" in line for line in lines["no_grad"])
    assert "needs CUDA" in lines["AMP fp16"][0] and "this run ran on cpu" in lines["AMP fp16"][0]
    assert "needs CUDA" in lines["pinned memory"][0]
    assert "failed in this run" in lines["zero_grad(set_to_none=True)"][0]
    assert "not in this run: run `harness bench --suite fusion`" in lines["torch.compile"][0]
    assert (
        "not in this run: run `harness bench --suite dataloader`" in lines["DataLoader workers"][0]
    )
    assert "its training_loop suite ran without this benchmark" in lines["no .item() per step"][0]

    data = json.loads(out_json.read_text())
    assert data["run"]["threads"] == 2 and data["run"]["device"] == "cpu"
    (amp,) = [t for t in data["tips"] if t["tip"] == "AMP bf16"]
    (line,) = amp["lines"]
    assert line["verdict"] == "hurts" and line["params"] == {
        "model": "alexnet",
        "precision": "bf16",
    }
    assert line["low"] < line["median"] < line["high"] and line["n"] == 41 and line["threads"] == 2


def test_cuda_only_tips_are_read_on_a_gpu_run(tmp_path, capsys):
    _run(tmp_path, cuda=True)
    assert main(["advise", "--results-dir", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    fp16 = [line for line in out.splitlines() if line.startswith("AMP fp16 ")]
    assert fp16 and "needs CUDA" not in fp16[0] and "skipped (n/a) in this run" in fp16[0]


def test_no_runs_and_bad_tolerance_are_bad_input(tmp_path, capsys):
    assert main(["advise", "--results-dir", str(tmp_path / "empty")]) == 3
    assert "harness bench" in capsys.readouterr().err
    _run(tmp_path)
    assert main(["advise", "--results-dir", str(tmp_path / "results"), "--tolerance", "2"]) == 3
    assert main(["advise", "--results-dir", str(tmp_path / "results"), "nosuchrun"]) == 3


def test_report_has_the_advice_section(tmp_path, capsys):
    _run(tmp_path)
    out = tmp_path / "report"
    assert main(["report", "--results-dir", str(tmp_path / "results"), "--out", str(out)]) == 0
    md = re.sub(r" +", " ", (out / "report.md").read_text())
    assert "## Advice: what each tip is worth on this machine" in md
    assert re.search(
        r"\| AMP bf16 \| model=alexnet \| 7.40x slower \| "
        r"7.4 \\\[[0-9.]+, [0-9.]+\\\] 9[5-9]%, n=41 \| hurts \|",  # brackets escaped: no link
        md,
    )


# ---- a real quick run of the training-loop suite, end to end ----


@pytest.mark.slow
@pytest.mark.xdist_group("advise-e2e")
def test_advise_reads_a_real_quick_run(tmp_path, capsys):
    root = tmp_path / "results"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "bench",
            "--quick",
            "--suite",
            "training_loop",
            "--results-dir",
            str(root),
            "--machine",
            "testmachine-cpu",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out_json = tmp_path / "advice.json"
    assert main(["advise", "--results-dir", str(root), "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    data = json.loads(out_json.read_text())
    assert data["run"]["threads"] == 1 and data["run"]["quick"] is True
    measured = {
        t["tip"]: t["lines"] for t in data["tips"] if t["benchmark"].startswith("training_loop")
    }
    assert set(measured) == {
        "no_grad",
        "inference_mode",
        "inference_mode over no_grad",
        "zero_grad(set_to_none=True)",
        "no .item() per step",
    }
    for tip, lines in measured.items():
        assert {line["params"]["model"] for line in lines} == {"mlp", "alexnet"}, tip
        for line in lines:
            assert line["verdict"] in (advice.HELPS, advice.HURTS, advice.NO_EFFECT), (tip, line)
            assert line["n"] >= 3 and line["low"] <= line["median"] <= line["high"], (tip, line)
            assert line["measured_on"].startswith("1 thread; ") and "small" in line["measured_on"]
    assert "not in this run: run `harness bench --suite amp`" in out


def test_fused_optimizer_and_attention_tips_name_their_rows_and_sizes():
    from harness.core import sizes
    from harness.verdict import advice

    tips = {t.name: t for t in advice.TIPS}
    opt, sdpa = tips["foreach / fused optimizer"], tips["fused attention (SDPA)"]
    assert re.fullmatch(opt.benchmark, "fusion.OptimizerStepOverForLoop.track_step_over_for_loop")
    assert re.fullmatch(
        sdpa.benchmark, "fusion.AttentionOverHandWritten.track_sdpa_over_hand_written"
    )
    fast, full = (sizes.Sizing(f, "cpu", {}) for f in (False, True))
    assert (
        opt.sizes({"optimizer": "Adam", "impl": "fused"}, fast)
        == "one Adam step over 128 parameter tensors (64 Linear 64x64)"
    )
    assert opt.sizes({"optimizer": "SGD"}, full).startswith(
        "one SGD step over 512 parameter tensors"
    )
    assert sdpa.sizes({"backend": "flash", "causal": "True"}, fast).endswith(
        "256 tokens, head dim 64, causal"
    )
