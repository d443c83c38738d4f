"""The real instruction counter under valgrind (slow: each valgrind process imports torch, ~45 s
or more). Skipped, with the reason, where valgrind is missing."""

from __future__ import annotations

import concurrent.futures
import pathlib

import pytest

from harness.measure import instructions
from harness.measure.workloads import instructions as wl

SOURCE = str(pathlib.Path(__file__).with_name("instruction_workloads.py"))
WHY = instructions.unavailable()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(WHY is not None, reason=f"no instruction counts here: {WHY}"),
    pytest.mark.xdist_group("valgrind"),
]


def test_a_count_moves_with_one_added_op_and_repeats_in_another_process(tmp_path, monkeypatch):
    monkeypatch.setenv(instructions.RECORD_ENV, str(tmp_path))
    # calibrate's injection on one workload: a fifth more of its own instructions per call (the
    # tiny workload's wrapper call alone is a twentieth of it: smaller fractions round coarsely)
    monkeypatch.setenv(instructions.EXTRA_ENV, "0.2")
    monkeypatch.setenv(instructions.EXTRA_WORKLOADS_ENV, "two_ops_injected")
    first = [
        instructions.Target("t.T.track_instructions('one_op')", SOURCE, "one_op"),
        instructions.Target("t.T.track_instructions('two_ops')", SOURCE, "two_ops"),
        instructions.Target(
            "t.T.track_instructions('two_ops_in_place')", SOURCE, "two_ops_in_place"
        ),
        instructions.Target(
            "t.T.track_instructions('two_ops_injected')", SOURCE, "two_ops_injected"
        ),
    ]
    # faults stay in their rows: the other rows of the process are counted as before
    again = [
        instructions.Target(f"t.T.track_instructions({k!r})", SOURCE, k)
        for k in ("raises", "one_op", "crashes", "hangs")
    ]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two valgrind processes at once
        a, b = pool.map(instructions.count, [first, again])
    assert not a.failed, a.failed
    assert b.failed == {
        "t.T.track_instructions('raises')": "ValueError: this workload cannot be built",
        "t.T.track_instructions('crashes')": (
            "the counting child (crashes, layout 0) crashed under valgrind (SIGSEGV)"
        ),
        "t.T.track_instructions('hangs')": (
            "the counting child (hangs, layout 0) ran past its time limit of 20 s and was ended"
        ),
    }
    one, two = (
        a.rows["t.T.track_instructions('one_op')"],
        a.rows["t.T.track_instructions('two_ops')"],
    )
    assert two > one * 1.2, (one, two)  # the mul of 1024 floats and its dispatch
    # the injection adds what it was asked for, measured in the row itself (not half of it);
    # on in-place ops, whose count does not move with glibc's heap
    clean = a.rows["t.T.track_instructions('two_ops_in_place')"]
    injected = a.rows["t.T.track_instructions('two_ops_injected')"]
    assert injected / clean == pytest.approx(1.2, abs=0.01), (clean, injected)
    # another process, another list of workloads, another scratch folder: the same count, to
    # the instruction (a child's start does not depend on the other rows of its process)
    assert b.rows["t.T.track_instructions('one_op')"] == one
    record = a.record
    assert record["fingerprint"]["threads"] == 1 and record["fingerprint"]["valgrind"].startswith(
        "valgrind"
    )
    summary = record["rows"]["t.T.track_instructions('two_ops')"]
    assert len(summary["layouts"]) == 2 and summary["groups"]["libtorch"] > 0
    names = [f["function"] for f in summary["functions"]]
    assert any("mul" in n for n in names) and any("add" in n for n in names), names[:10]
    kept = tmp_path / "instructions" / "t.T.json"  # the run record's copy
    assert kept.is_file()


FIRST = """
import torch
from torch import nn

from harness.zoo import register_model


class First(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 10))

    def forward(self, x):
        return self.body(x)


register_model(
    "first",
    build=lambda cfg: First(cfg["width"]),
    inputs=lambda cfg, gen: (torch.randn(cfg["batch"], 16, generator=gen),),
    small={"batch": 4, "width": 32, "num_classes": 10},
    full={"batch": 4, "width": 32, "num_classes": 10},
)
"""
SECOND = """

class Second(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.conv(x).mean(dim=(2, 3)))


register_model(
    "second",
    build=lambda cfg: Second(cfg["width"]),
    inputs=lambda cfg, gen: (torch.randn(cfg["batch"], 3, 8, 8, generator=gen),),
    small={"batch": 2, "width": 8, "num_classes": 10},
    full={"batch": 2, "width": 8, "num_classes": 10},
    compile_instructions=True,
)
"""
COUNT = """
import json, sys
from harness.measure import instructions
from harness.measure.workloads import instructions as wl
from harness.measure.workloads import instructions as wl
keys = sys.argv[1:]
counted = instructions.count([instructions.Target(wl.row(k), wl.SOURCE, k, k) for k in keys])
rows = counted.record["rows"]
print(json.dumps({"rows": counted.rows, "failed": counted.failed, "summaries": rows}))
"""


def _count_in_project(project, keys):
    """The counts of a project's model rows, in a process of their own (a fresh registry)."""
    import json
    import os
    import subprocess
    import sys

    from harness.core import settings

    env = dict(os.environ, **{settings.OWN_MODELS.name: "1", settings.PROJECT.name: str(project)})
    proc = subprocess.run(
        [sys.executable, "-c", COUNT, *keys], env=env, capture_output=True, text=True, check=True
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["failed"], out["failed"]
    return out


def test_registering_a_second_model_leaves_the_first_models_counts(tmp_path):
    """A user adds a model to their models module: the first model's counts stay (the counting
    process's state before a child starts does not depend on the registry, the child looks its
    row up by key, and its calls allocate from a malloc arena of their own). The second model's
    compile row is counted in the same process: a real compile, counted alone."""
    import platform

    project = tmp_path / "proj"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nharness_models = models.py\n")
    (project / "models.py").write_text(FIRST)
    keys = ["first_inference", "first_training_step"]
    before = _count_in_project(project, keys)["rows"]
    (project / "models.py").write_text(FIRST + SECOND)
    counted = _count_in_project(project, keys + ["second_compile"])
    after = counted["rows"]
    for key in keys:
        row = wl.row(key)
        assert after[row] == pytest.approx(before[row], rel=0.001), (key, before, after)
    compile_row = counted["summaries"][wl.row("second_compile")]
    # dynamo, AOTAutograd and inductor's lowering and code generation of a small conv net:
    # hundreds of millions of instructions (a compile served from a cache would be a fraction)
    assert compile_row["per_call"] > 2e8, compile_row["per_call"]
    assert "C++ compiler not counted" in compile_row["what"]
    assert compile_row["tolerance"] == wl.COMPILE_TOLERANCE
    facts = compile_row["fingerprint"]
    assert facts["inductor_vec_isa"] not in ("", "none")  # what inductor picked under valgrind
    if platform.machine() == "x86_64":
        assert facts["inductor_march"] == "haswell"
