"""summary.md, the GPU proof kit's page for a person (harness.runs.gpucheck.page), rendered from
injected summaries: every section, failures shown as failures, and what did not run said so."""

from __future__ import annotations

import os
import re
import time

from harness.runs.gpucheck import page

RUNNER = {
    "gpu": "NVIDIA H200",
    "gpu_memory_gib": 139.8,
    "driver": "580.159.04",
    "torch": "2.11.0+cu130",
    "cuda_build": "13.0",
    "cudnn": 91900,
    "python": "3.12.3",
    "cpu": "Xeon",
    "cpu_count": 16,
}
GATE_AA = (
    "### base 00cd89b2 vs head 00cd89b2 on vm-NVIDIA-H200\n\n"
    "| benchmark | base | head | ratio | verdict | note |\n|---|---|---|---|---|---|\n"
    "| fusion.PointwiseChain.track_eager_time | 34.9 us | 20.7 us | 0.591 | not judged | raw |\n"
)
REPORT = (
    "# Benchmark report\n\n## Sanity bands\n\nbands table\n\n"
    "## Advice: what each tip is worth on this machine\n\n"
    "| tip | verdict |\n|---|---|\n| torch.compile | launch-bound |\n\n### detail\n\nkept\n\n"
    "## Later section\n\nnot embedded\n"
)


def _step(name, status="pass", wall=1.0, budget=10, detail="", figures=None, exit=0):
    return {
        "name": name,
        "status": status,
        "wall_s": wall,
        "budget_s": budget,
        "detail": detail,
        "figures": figures or {},
        "exit": exit,
        "proves": "",
        "command": "",
    }


def _summary(steps, **kw):
    failed = [s["name"] for s in steps if s["status"] not in ("pass", "recorded", "n/a")]
    base = {
        "started": "20261204T114515Z",
        "device": "cuda",
        "cpu_rehearsal": False,
        "wall_s": 296.5,
        "deadline_s": 460.0,
        "exit": 1 if failed else 0,
        "failed_steps": failed,
        "runner": RUNNER,
        "bands": [],
        "steps": steps,
    }
    base.update(kw)
    return base


def _timing(walls: dict, caches=None):
    return {
        "asv_start_s": 6.5,
        "benchmark_wall_s": walls,
        "setup_cache_s": caches or {},
        "asv_end_s": 0.4,
        "wall_s": 60.2,
    }


def test_page_has_every_section_shows_failures_and_says_what_did_not_run():
    goldens = {
        "device": "cuda",
        "counts": {"same": 1, "device names only": 1, "failed": 1},
        "failed": ["word_lm.aot"],
        "candidates": ["gru.aot.expect"],
        "cases": {
            "mlp.jit": {"status": "same", "semantic": "ok", "committed": "matches"},
            "gru.aot": {
                "status": "device names only",
                "semantic": "ok",
                "committed": "no committed golden",
                "capture": "cuDNN off for the capture",
            },
            "word_lm.aot": {
                "status": "failed",
                "semantic": "not run",
                "committed": "",
                "error": "model 'word_lm' (small) on cuda: boom",
            },
        },
    }
    steps = [
        _step("env"),
        _step("warmup", wall=23.8, budget=20, detail="warm-up call 4.08 s"),
        _step(
            "asv-spawn", wall=60.2, budget=80, figures=_timing({"canary.Canary.track_ops": 20.1})
        ),
        _step(
            "gate-aa",
            "fail",
            97.2,
            35,
            "gate A/A exit 1 (want 0)",
            {
                "run_b": _timing(
                    {"fusion.PointwiseChain.track_compiled_time": 14.0}, {"fusion:237": 31.5}
                )
            },
            exit=1,
        ),
        _step("gate-canary", "killed", 20.0, 20, "over its budget of 20 s: killed", exit=None),
        _step("report"),
        _step("goldens", "fail", 41.6, 55, "30 cases; failed: word_lm.aot", goldens, exit=1),
        _step("goldens-plugin", "not run", 0.0, 20, "needs step goldens, which fail", exit=None),
    ]
    bands = [
        {
            "key": "amp",
            "case": "alexnet/bf16_over_fp32",
            "value": 1.396,
            "band": [0.3333, 0.5],
            "verdict": "outside the published range: check the set-up",
            "published": "2-3x faster training",
            "source": "PyTorch recipe 'Automatic Mixed Precision'",
        }
    ]
    text = page.render(_summary(steps, bands=bands), page.Attachments({"gate-aa": GATE_AA}, REPORT))
    for heading in (
        "# GPU proof kit, 20261204T114515Z: exit 1",
        "## Steps",
        "## Where the asv steps' seconds went",
        "## GPU figures",
        "## Advice verdicts and published bands",
        "## Gate tables",
        "## Golden cases",
    ):
        assert f"\n{heading}\n" in f"\n{text}", heading
    # the header: exit, runner, wall against the deadline
    assert "**failed: gate-aa, gate-canary, goldens, goldens-plugin**" in text
    assert "NVIDIA H200 (139.8 GiB), driver 580.159.04, torch 2.11.0+cu130, CUDA 13.0" in text
    assert "wall 296.5 s against a deadline of 460 s" in text
    # every step by name, failures in capitals, a step over its budget marked
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "**FAIL**" in rows["gate-aa"] and "97.2 (over budget)" in rows["gate-aa"]
    assert "**KILLED**" in rows["gate-canary"] and "**NOT RUN**" in rows["goldens-plugin"]
    assert "| pass " in rows["env"] and "over budget" not in rows["env"]
    assert "23.8 (over budget)" in rows["warmup"]
    # where the seconds went, per asv run
    assert re.search(r"^\| benchmark +\| asv-spawn +\| gate-aa +\|$", text, re.M)
    assert "20.1" in rows["canary.Canary.track_ops"]
    assert "14.0" in rows["fusion.PointwiseChain.track_compiled_time"]
    assert "6.5" in rows["(asv start: machine record, discovery)"]
    assert re.search(r"\| — +\| 31\.5 +\|$", rows["(setup_cache fusion:237)"])
    # the GPU figures and the GPU-time gate of steps absent from this run say so
    assert "gpu-measure: not run (the step was not in this run)" in text
    assert "### gate-gpu-time: not run" in text
    # bands and the report's advice section, its headings under this page's
    assert "0.333 .. 0.5" in rows["amp"] and "outside the published range" in rows["amp"]
    assert "### Advice: what each tip is worth" in text and "#### detail" in text
    assert "torch.compile | launch-bound" in text and "not embedded" not in text
    # gate tables embedded; a killed gate step's table is missing and said so
    assert "#### base 00cd89b2 vs head 00cd89b2" in text
    assert "### gate-canary: **killed**" in text
    assert "not run (step killed: over its budget of 20 s: killed)" in text
    # golden cases: counts, the failure first and bold, candidates, the capture mode
    assert "3 cases on cuda: 1 device names only, 1 failed, 1 same" in text
    assert "- failed: word_lm.aot" in text and "`gru.aot.expect`" in text
    assert "| **word_lm.aot** | **failed**" in text
    assert text.index("**word_lm.aot**") < text.index("| gru.aot")
    assert "cuDNN off for the capture" in rows["gru.aot"]
    assert "goldens-plugin: **not run**: needs step goldens" in text


def test_page_renders_gpu_measure_rows_claims_and_the_gpu_time_gate():
    measure = {
        "rows": [
            {
                "name": "fusion.cos_cos",
                "gpu_s": 0.000125,
                "host_s": 0.00021,
                "busy": 0.31,
                "noise": 0.012,
                "sm_clock_mhz": 1980,
                "throttled_dropped": 2,
                "kept_at_power_cap": 7,
                "launch_bound": True,
            },
            {"name": "matmul", "gpu_s": 0.0214, "busy": 0.99, "launch_bound": False},
        ],
        "claims": [
            {"claim": "compiled/eager < 1 at device-bound sizes", "value": 0.52, "mark": "< 1"},
            {"claim": "busy >= 0.5 on matmul", "value": 0.99, "mark": ">= 0.5", "pass": True},
        ],
    }
    gpu_gate = {"aa": {"runs": 10, "passed": 9}, "slowed": {"runs": 10, "caught": 10}}
    steps = [
        _step("gpu-measure", "pass", figures=measure),
        _step("gate-gpu-time", "pass", figures={**gpu_gate, "slowdown": 0.03}),
    ]
    text = page.render(_summary(steps))
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    cos = rows["fusion.cos_cos"]
    for cell in ("125 us", "210 us", "31.0%", "1.2%", "1980", "| 2 ", "| 7 ", "**launch-bound**"):
        assert cell in cos, cell
    assert "| busy " in text and "ATen share" not in text
    assert "| no " in rows["matmul"] and "—" in rows["matmul"]  # missing readings shown as such
    # no pass: not passed (a cell's `<` is written as the entity: harness.core.escape)
    assert "**FAIL**" in rows["compiled/eager &lt; 1 at device-bound sizes"]
    assert "| pass " in rows["busy &gt;= 0.5 on matmul"]
    assert "9 of 10 passed" in rows["A/A: the same code twice"]
    assert "10 of 10 caught" in rows["slowed by 3%"]
    # on a CPU the busy slot is the ATen share
    assert "ATen share" in page.render(_summary(steps, device="cpu", cpu_rehearsal=True))


def test_attachments_are_only_the_files_this_run_wrote(tmp_path):
    (tmp_path / "report").mkdir()
    (tmp_path / "gate-aa.md").write_text("old table")
    (tmp_path / "gate-canary.md").write_text("new table")
    (tmp_path / "gate-gpu-time.md").write_text("| kind | row |")
    (tmp_path / "report" / "report.md").write_text("# report")
    start = time.time()
    os.utime(tmp_path / "gate-aa.md", (start - 600, start - 600))  # a previous run's
    got = page.attachments(tmp_path, since=start - 1)
    assert got.gates == {"gate-canary": "new table", "gate-gpu-time": "| kind | row |"}
    assert got.report == "# report"
    assert page.attachments(tmp_path).gates.keys() == {"gate-aa", "gate-canary", "gate-gpu-time"}
    assert page.attachments(tmp_path / "missing") == page.Attachments()
