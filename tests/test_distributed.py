"""The distributed suite's workload and its torchrun launcher, for real: world size 2 with gloo on
CPU through `python -m torch.distributed.run`, a hanging launch killed with every process it
started, torchrun failures and bad input as clear errors. Each launch costs a few seconds
(torchrun's agent imports torch), so the real DDP launch runs once per module."""

import inspect
import math
import os
import sys
from pathlib import Path

import pytest
from test_workloads import suite_module

from harness.core import processes
from harness.core.exits import BadInput, RunnerFailed
from harness.measure import torchrun
from harness.measure.workloads import NotApplicable
from harness.measure.workloads import distributed as wl
from harness.verdict import metrics

pytestmark = pytest.mark.xdist_group("distributed")  # torchrun launches: one worker at a time
SUITES = Path(__file__).resolve().parents[1] / "suites"


def _tiny_plan(**changes) -> wl.Plan:
    """The suite's parameter grid (so the suite's rows find their cases) on a tiny MLP."""
    options = dict(
        batch=4,
        features=16,
        hidden=32,
        layers=1,
        rounds=3,
        warmup=1,
        bucket_caps_mb=wl.bucket_caps_mb(),
        micro_batches=wl.micro_batch_counts(),
    )
    options.update(changes)
    return wl.Plan(**options)


@pytest.fixture(scope="session")  # once per worker, also when xdist interleaves modules
def ddp_result():
    return wl.measure(2, _tiny_plan(), timeout_s=180)


@pytest.mark.slow
def test_ddp_workload_runs_with_world_size_2_on_cpu(ddp_result):
    meta = ddp_result["meta"]
    assert meta["world_size"] == 2 and meta["backend"] == (
        "nccl" if meta["device"] == "cuda" else "gloo"
    )
    assert meta["threads_per_worker"] == 1  # the fast run's thread count (1), per worker
    # the MLP 16 -> 32 -> 10: weights and biases
    assert meta["parameters"] == 16 * 32 + 32 + 32 * 10 + 10
    rounds = meta["rounds"]
    scaling = ddp_result["scaling"]
    for key in ("ratios", "ddp_step_s", "single_step_s"):
        assert len(scaling[key]) == rounds and all(
            math.isfinite(v) and v > 0 for v in scaling[key]
        ), key
    # the ratio of a round is its DDP step time over its single-process step time
    for r, d, s in zip(scaling["ratios"], scaling["ddp_step_s"], scaling["single_step_s"]):
        assert r == pytest.approx(d / s)
    ar = ddp_result["all_reduce"]
    assert ar["bytes"] == meta["parameters"] * 4
    assert [ar["bytes"] / s for s in ar["seconds"]] == pytest.approx(ar["bytes_per_s"])
    assert set(ddp_result["bucket_cap"]) == {str(c) for c in wl.bucket_caps_mb()}
    assert set(ddp_result["no_sync"]) == {str(k) for k in wl.micro_batch_counts()}
    for ratios in [
        ddp_result["bucket_view"],
        *ddp_result["bucket_cap"].values(),
        *ddp_result["no_sync"].values(),
    ]:
        assert len(ratios) == rounds and all(math.isfinite(v) and v > 0 for v in ratios)
    assert "2 or more CUDA GPUs" in ddp_result["data_parallel"]["not_applicable"]
    assert _live_children() == [], "the launch left processes behind"


@pytest.mark.slow
def test_every_suite_row_reads_the_launch_result(ddp_result):
    """The asv rows as asv calls them (setup(cache, *params), then the track_ method), on one
    launch's result: known units, finite samples, DataParallel n/a with its reason on CPU."""
    suite = suite_module("distributed")
    cache = {str(suite.MAIN_WORLD_SIZE): ddp_result}
    ran, skipped = [], []
    for cname, cls in vars(suite).items():
        if cname.startswith("_") or not inspect.isclass(cls) or cls.__module__ != suite.__name__:
            continue
        params = getattr(cls, "params", None)
        combos = [()] if params is None else [(p,) for p in params]
        for method in [m for m in vars(cls) if m.startswith("track_")]:
            for combo in combos:
                bench = cls()
                try:
                    bench.setup(cache, *combo)
                except NotApplicable as e:
                    skipped.append((cname, str(e)))
                    continue
                value = getattr(bench, method)(cache, *combo)
                kind = metrics.kind_of(getattr(cls, method).unit)
                assert value["number"] == 1 and value["samples"], (cname, method)
                assert all(math.isfinite(v) and v > 0 for v in value["samples"]), (cname, method)
                ran.append((cname, method, kind.kind))
    assert ("AllReduceOfGradientSizedTensor", "track_bandwidth", metrics.THROUGHPUT) in ran
    assert sum(k == metrics.RATIO for *_, k in ran) >= 4
    if not wl.data_parallel_unavailable("cuda", 2):
        pytest.skip("2+ GPUs: DataParallel applies")
    assert [c for c, _ in skipped] == ["DataParallelOverDistributed"] and "CUDA GPUs" in skipped[0][
        1
    ]


HANG = """
import os, sys, time
from pathlib import Path
Path(sys.argv[-1] + "." + os.environ["RANK"]).write_text(f"{os.getpid()} {os.getsid(0)}")
time.sleep(600)
"""


@pytest.mark.slow
def test_a_hanging_launch_is_killed_with_every_worker(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    out = tmp_path / "result.json"
    with pytest.raises(
        torchrun.LaunchTimedOut, match=r"ran past its 15 s timeout and was killed"
    ) as err:
        torchrun.launch(
            str(script), nproc=2, timeout_s=15, module=False, result=out, what="hang test"
        )
    assert isinstance(err.value, RunnerFailed) and "none" in str(
        err.value
    )  # nothing alive after the kill
    started = [tmp_path / f"result.json.{rank}" for rank in (0, 1)]
    assert all(p.exists() for p in started), "both workers should have started within the timeout"
    workers = [tuple(map(int, p.read_text().split())) for p in started]
    # torchrun puts each worker in a session of its own: killing torchrun's group alone misses them
    assert all(pid == sid for pid, sid in workers)
    for pid, _ in workers:
        assert not _running(pid), f"worker {pid} survived the launcher's timeout"
    assert not [p for p in _all_pids() if str(tmp_path) in _cmdline(p)], (
        "a process of the launch is left"
    )
    assert _live_children() == []


@pytest.mark.slow
def test_killing_the_benchmark_process_takes_torchrun_and_the_workers_along(tmp_path):
    """asv's own timeout kills only the benchmark process: torchrun (PR_SET_PDEATHSIG set by the
    launcher) and harness workers (die_with_parent, as worker_main calls it) must go with it."""
    import signal
    import subprocess
    import time

    script = tmp_path / "hang_with_parent.py"
    script.write_text(
        "from harness.core.processes import die_with_parent\ndie_with_parent()\n" + HANG
    )
    out = tmp_path / "result.json"
    # killed outright, the benchmark process leaves its scratch folder: in this test's folder,
    # as a run's processes leave theirs in the run's (harness.runs.scratch)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    bench = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from harness.measure import torchrun; "
            "torchrun.launch(sys.argv[1], nproc=2, timeout_s=300, module=False, "
            "result=sys.argv[2])",
            str(script),
            str(out),
        ],
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    started = [tmp_path / f"result.json.{rank}" for rank in (0, 1)]
    deadline = time.monotonic() + 120
    while not all(p.exists() and p.read_text() for p in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    agent = [
        p
        for p in _all_pids()
        if "torch.distributed.run" in _cmdline(p) and str(tmp_path) in _cmdline(p)
    ]
    os.kill(bench.pid, signal.SIGKILL)
    bench.wait()
    assert all(p.exists() for p in started), "the workers did not start within 120 s"
    assert len(agent) == 1
    workers = [int(p.read_text().split()[0]) for p in started]
    deadline = time.monotonic() + 10
    while any(_running(pid) for pid in agent + workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in agent + workers if _running(pid)], (
        "torchrun or a worker outlived the benchmark"
    )


@pytest.mark.slow
def test_a_failing_worker_is_a_clear_runner_error(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("raise SystemExit('worker says: no gradients today')\n")
    with pytest.raises(torchrun.LaunchFailed, match="torchrun exited with") as err:
        torchrun.launch(str(script), nproc=2, timeout_s=120, module=False, what="fail test")
    assert "no gradients today" in str(
        err.value
    )  # the worker's own message, from torchrun's output
    assert err.value.code == 5  # an external runner failed (harness/core/exits.py)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"nproc": 0, "timeout_s": 10}, "number of workers"),
        ({"nproc": 2, "timeout_s": 0}, "timeout"),
        ({"nproc": 2, "timeout_s": 10, "module": False}, "not found"),
    ],
)
def test_bad_launch_arguments_are_bad_input(kwargs, message, tmp_path):
    with pytest.raises(BadInput, match=message):
        torchrun.launch(str(tmp_path / "missing.py"), **kwargs)


def test_bad_plans_are_bad_input_before_any_launch():
    with pytest.raises(BadInput, match="world size"):
        wl.measure(0, _tiny_plan())
    with pytest.raises(BadInput, match="unknown distributed section"):
        wl.measure(2, _tiny_plan(sections=["scaling", "sharding"]))
    with pytest.raises(BadInput, match="micro-batch"):
        wl.measure(2, _tiny_plan(micro_batches=[1]))


def test_each_launch_gets_its_own_port():
    cmd = torchrun.command("m", [], 2, torchrun.free_port(), module=True)
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--nnodes"] and "--master-port" in cmd
    assert len({torchrun.free_port() for _ in range(5)}) > 1


def _live_children():
    return [
        pid
        for pid, start in torchrun.descendants(os.getpid()).items()
        if processes.alive(pid, start)
    ]


def _all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _running(pid) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_bench_summary_shows_scaling_efficiency_and_bandwidth(tmp_path):
    from harness.verdict import summary
    from harness.verdict.results import Entry, ResultSet

    scaling = "distributed.DistributedStepOverSingleProcess.track_step_time_over_single_process"
    entries = [
        Entry(f"{scaling}(2)", "ratio", 2.0, [1.0, 2.0, 4.0]),
        Entry(
            "distributed.AllReduceOfGradientSizedTensor.track_bandwidth(2)", "bytes/s", 5e8, [5e8]
        ),
        Entry(
            "distributed.DataParallelOverDistributed.track_data_parallel_over_distributed",
            "ratio",
            float("nan"),
            None,
        ),
    ]
    rs = ResultSet(tmp_path, "m", "0" * 40, "env", None, {e.name: e for e in entries})
    rows = dict(summary.key_ratio_rows(rs))
    assert rows["DDP step/single process"] == "2"
    assert rows["DDP scaling efficiency, world size 2"] == "0.5"  # median of 1/ratio per round
    assert rows["all-reduce GB/s, gradient-sized tensor, world size 2"] == "0.5"
    assert rows["DataParallel/DDP step"] == "n/a"


def test_the_section_table_covers_the_suite_and_bench_selects_sections():
    import ast

    suite = Path(__file__).resolve().parents[1] / "suites" / "benchmarks" / "distributed.py"
    rows = {
        f"{cls.name}.{fn.name}"
        for cls in ast.parse(suite.read_text()).body
        if isinstance(cls, ast.ClassDef)
        for fn in cls.body
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("track_")
    }
    assert rows == set(wl.ROW_SECTIONS)
    assert wl.matching([r"^distributed\.DistributedStepOverSingleProcess\.track_step"]) == [
        "scaling"
    ]
    assert wl.matching(["NoSync", "track_bandwidth"]) == ["all_reduce", "no_sync"]
    assert wl.matching([r"^fusion\."]) == list(wl.SECTIONS)  # nothing of ours: every section
