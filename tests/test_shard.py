"""Sharded runs end to end on real asv results: list, run two shards, merge, gate; plus the split
itself, merge refusals, and several machines in one results root (asv publish, report).

Real asv runs of the canary (3 benchmarks, ~1 s of benchmark time each run; the rest is torch
import and asv's discovery), all at the same time as on a CI matrix: the listing, shard 1/2,
shard 2/2, one whole run (the A/A other side) and one run under a second machine name.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from harness.cli import main
from harness.core import records
from harness.runs import shard

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("shard-e2e")
MACHINE, OTHER = "shard-cpu", "shard-other-cpu"
NO_INSTRUCTIONS = r"^canary\.Canary\.track_(?!instructions)"
CANARY = [
    "canary.Canary.track_ops",
    "canary.Canary.track_time",
    "canary.Canary.track_time_over_reference",
]


# ---- the split: a pure function of names and durations ----


def test_split_is_balanced_stable_and_covers_every_name_once():
    durations = {"a": 9.0, "b": 5.0, "c": 4.0, "d": 3.0, "e": 3.0}
    names = ["e", "d", "c", "b", "a", "new"]  # `new` is not in the file: counts the median, 4 s
    shards = shard.split(names, durations, 2)
    assert shards == shard.split(list(reversed(names)), dict(reversed(durations.items())), 2)
    assert sorted(n for s in shards for n in s) == sorted(names)
    # longest first (ties by name) into the lightest (ties: lowest number):
    # a(9)->1 | b(5)->2 | c(4)->2: 9 | new(4)->1 (9 = 9): 13 | d(3)->2: 12 | e(3)->2: 15
    assert shards == [["a", "new"], ["b", "c", "d", "e"]]
    assert shard.predicted(["new"], durations) == {"new": 4.0}
    assert shard.split(names, {}, 7)[6] == []  # more shards than benchmarks: some are empty
    assert [len(s) for s in shard.split(names, {}, 3)] == [2, 2, 2]  # all default: by name


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", ""])
def test_bad_shard_is_exit_3(text, capsys, tmp_path):
    code = main(
        ["bench", "--list", "--shard", text, "--suite", "canary", "--results-dir", str(tmp_path)]
    )
    assert code == 3 and "K/N" in capsys.readouterr().err


def test_selection_and_anchored_asv_regexes():
    benches = [
        {"name": "s.A.time", "params": []},
        {"name": "s.B.time", "params": [["1", "2"], ["'x'"]]},
        {"name": "s.BB.time", "params": []},
    ]
    sel = shard.select(benches, ["s"], [r"B\.time\(2"])
    assert sel == {"s.B.time": ["s.B.time(2, 'x')"]}
    assert shard.asv_regexes(sel, benches) == [r"^s\.B\.time\(2,\ 'x'\)$"]
    whole = shard.select(benches, ["s"])
    assert shard.asv_regexes(whole, benches) == [
        r"^s\.A\.time$",
        r"^s\.B\.time\(",
        r"^s\.BB\.time$",
    ]
    for rx in shard.asv_regexes({"s.B.time": whole["s.B.time"]}, benches):
        assert not re.search(rx, "s.BB.time")  # anchored: no prefix of another name
    with pytest.raises(Exception, match="matches no benchmark"):
        shard.select(benches, ["s"], ["nothing"])


def test_durations_file_keeps_other_modes_and_names(tmp_path):
    path = tmp_path / "durations.json"
    shard.update_durations(path, "quick", {"a": 1.0, "b": 2.0}, ["m/run1"])
    shard.update_durations(path, "quick", {"b": 3.0}, ["m/run2"])
    shard.update_durations(path, "full", {"a": 60.0}, ["m/run3"])
    assert shard.load_durations(path, "quick") == {"a": 1.0, "b": 3.0}
    assert shard.load_durations(path, "full") == {"a": 60.0}
    assert shard.load_durations(tmp_path / "missing.json", "quick") == {}


# ---- real runs ----


def _harness(work, home, *args):
    """One `harness` process. Its own HOME (asv writes ~/.asv-machine.json unlocked), one cache
    for all (asv names the environment after the launcher path in it: one name, as on runners
    of one image)."""
    env = {**os.environ, "HOME": str(work / home), "XDG_CACHE_HOME": str(work / "cache")}
    (work / home).mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(*procs):
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-3000:] + err[-3000:]
    return [o for o, _ in outs]


# session, not module: xdist may run another module's test between these on the worker, and
# a module fixture would then be torn down and its five real runs made again
@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """As a CI matrix does it: every job its own results folder, all at once; then the run
    records are gathered into one results root (the merge job's downloaded artifacts)."""
    work = tmp_path_factory.mktemp("shard")
    root, durations = work / "results", work / "durations.json"
    # the canary's instruction row (a valgrind process, ~1 min) is left out: shards split by
    # benchmark name, and test_instructions covers how merge joins instruction records
    common = ["--quick", "--suite", "canary", "--durations", durations]
    timing = ["--bench", NO_INSTRUCTIONS]
    jobs = {
        "list": ["bench", "--list", "--shard", "1/2", "--json", work / "list.json", *timing],
        "shard1": ["bench", "--shard", "1/2", "--machine", MACHINE, *timing],
        "shard2": ["bench", "--shard", "2/2", "--machine", MACHINE, *timing],
        "whole": ["bench", "--machine", MACHINE, *timing],
        "other": ["bench", "--machine", OTHER, "--bench", "track_ops"],
    }
    procs = [
        _harness(work, job, *args, *common, "--results-dir", work / job)
        for job, args in jobs.items()
    ]
    listed = _wait(*procs)[0]
    for job in jobs:
        if (work / job / "runs").is_dir():
            shutil.copytree(work / job / "runs", root / "runs", dirs_exist_ok=True)
    shards = [records.list_runs(work / f"shard{k}", MACHINE)[0] for k in (1, 2)]
    shards = [records.load_record(root / "runs" / MACHINE / r.run_id) for r in shards]
    whole = records.load_record(
        root / "runs" / MACHINE / records.list_runs(work / "whole")[0].run_id
    )
    return work, root, listed, json.loads((work / "list.json").read_text()), shards, whole


def _merge(capsys, root, *runs):
    code = main(["merge", *map(str, runs), "--results-dir", str(root)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.slow
def test_list_prints_names_only_and_shards_cover_the_list(runs):
    _, _, listed, plan, shards, _ = runs
    assert listed.splitlines() == plan["shards"][0]["benchmarks"]  # stdout: names, nothing else
    parts = [set(s["benchmarks"]) for s in plan["shards"]]
    assert parts[0].isdisjoint(parts[1]) and parts[0] | parts[1] == set(CANARY) == set(
        plan["all_benchmarks"]
    )
    # each shard run holds exactly its share, and its run id says which share it is
    for rec, part, k in zip(shards, parts, (1, 2)):
        assert rec.run_id.endswith(f"-shard{k}of2") and rec.meta["shard"] == f"{k}/2"
        held = json.loads(rec.result_file().read_text())["results"]
        assert set(held) == part


@pytest.mark.slow
def test_merged_shards_gate_a_a_against_a_whole_run(runs, capsys):
    work, root, _, _, shards, whole = runs
    code, out = _merge(capsys, root, *(r.path for r in shards))
    assert code == 0, out
    merged = records.list_runs(root, MACHINE)[-1]
    assert merged.run_id.endswith("-merged") and len(merged.meta["merged_from"]) == 2
    assert set(json.loads(merged.result_file().read_text())["results"]) == set(CANARY)
    # the operator counts: each shard counted only what it ran (a shard without a counter row
    # skips the operator pass and stores none); the merged record holds them all
    counted = [set(records.read_op_counts(r.path) or {}) for r in shards]
    assert counted[0] | counted[1] == {"canary.Canary.track_ops"} and not counted[0] & counted[1]
    assert set(records.read_op_counts(merged.path) or {}) == {"canary.Canary.track_ops"}
    # the asv view shows the merged set for this commit and machine, not a shard
    manifest = json.loads((root / "asv" / records.VIEW_MANIFEST).read_text())["files"]
    assert {e["run"] for k, e in manifest.items() if k.startswith(MACHINE + "/")} == {merged.run_id}
    code = main(["gate", str(whole.path), str(merged.path), "--results-dir", str(root)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert all(name in out for name in CANARY)
    # refreshing the durations file from the merged run: every benchmark, with asv's seconds
    code = main(
        ["durations", str(merged.path), "--results-dir", str(root), "--out", str(work / "d.json")]
    )
    assert code == 0
    measured = shard.load_durations(work / "d.json", "quick")
    assert set(measured) == set(CANARY) and all(v > 0 for v in measured.values())


@pytest.mark.slow
def test_a_benchmark_in_two_runs_is_exit_3_naming_it(runs, capsys):
    _, root, _, _, shards, whole = runs
    code, out = _merge(capsys, root, shards[0].path, whole.path)
    assert code == 3
    held = json.loads(shards[0].result_file().read_text())["results"]
    assert any(f"benchmark {name!r} is in two shards" in out for name in held), out


@pytest.mark.slow
def test_merge_refuses_other_machines_and_missing_shards(runs, capsys):
    _, root, _, _, shards, _ = runs
    other = records.list_runs(root, OTHER)[0]
    code, out = _merge(capsys, root, shards[1].path, other.path)
    assert code == 3 and "different machines" in out
    code, out = _merge(capsys, root, shards[0].path)
    assert code == 3 and "not named" in out and "--partial" in out


@pytest.mark.slow
def test_merge_refuses_shards_of_other_sizes(runs, capsys, tmp_path):
    """A shard run with another HARNESS_SIZES (run.json's `sizes`) is another workload."""
    _, _, _, _, shards, _ = runs
    root = tmp_path / "results"
    copies = []
    for rec in shards:
        dest = root / "runs" / MACHINE / rec.run_id
        shutil.copytree(rec.path, dest)
        copies.append(dest)
    meta = json.loads((copies[1] / records.RUN_JSON).read_text())
    assert meta["sizes"] is None  # recorded even without an override
    meta["sizes"] = "pointwise_elements=1024"
    (copies[1] / records.RUN_JSON).write_text(json.dumps(meta))
    code, out = _merge(capsys, root, *copies)
    assert code == 3 and "differ in sizes" in out, out


@pytest.mark.slow
def test_two_machines_publish_into_one_dashboard(runs, capsys, tmp_path, checkout_copy):
    _, root, _, _, _, _ = runs
    from harness.runs import asv

    records.rebuild_view(root)
    html = tmp_path / "html"
    # from this checkout's HEAD alone: asv publish walks the commits of the branch it is given
    with asv.config(checkout_copy, root / "asv", html_dir=html) as config:
        proc = subprocess.run(
            asv.publish_command(config),
            cwd=checkout_copy,
            capture_output=True,
            text=True,
            env=asv.environment(),
            timeout=300,
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    index = json.loads((html / "index.json").read_text())
    assert set(index["params"]["machine"]) == {MACHINE, OTHER}
    code = main(
        [
            "report",
            "--machines",
            f"{MACHINE},{OTHER}",
            "--results-dir",
            str(root),
            "--out",
            str(tmp_path / "report"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    header = next(line for line in out.splitlines() if line.startswith("key ratio"))
    assert MACHINE in header and OTHER in header


def test_report_machines_puts_key_ratios_side_by_side(tmp_path, capsys):
    from test_gate_support import write_set

    root = tmp_path / "results"
    fusion = "fusion.PointwiseChain.track_compiled_over_eager"
    write_set(
        root / "asv", "aaaaaaaa11", {fusion: 0.5}, machine="host-cpu", units={fusion: "ratio"}
    )
    write_set(
        root / "asv",
        "aaaaaaaa11",
        {fusion: 0.25},
        machine="host-NVIDIA_H100",
        units={fusion: "ratio"},
    )
    out = tmp_path / "report"
    code = main(
        [
            "report",
            "--machines",
            "host-cpu,host-NVIDIA_H100",
            "--results-dir",
            str(root),
            "--out",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0, text
    row = next(
        line for line in text.splitlines() if line.startswith("compiled/eager, pointwise chain")
    )
    assert row.split()[-2:] == ["0.5", "0.25"]  # one column per machine, in the order named
    md = re.sub(r" +", " ", (out / "report.md").read_text())
    assert "| fusion: PointwiseChain.compiled_over_eager | 0.5 | 0.25 |" in md
    assert (out / "machines-key-ratios.png").read_bytes()[:4] == b"\x89PNG"
    code = main(["report", "--machines", "host-cpu", "--results-dir", str(root), "--out", str(out)])
    assert code == 3 and "two or more" in capsys.readouterr().err
