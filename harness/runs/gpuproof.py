"""The GPU-time proof: A/A runs of GPU-time rows pass the gate's GPU rule, and a 3% slowdown of a
row's GPU time, injected as real GPU work, is caught on that row. Run by the proof kit's
`gate-gpu-time` step and by `harness calibrate --gpu-time`, on the user's own runner.

Each trial is a process of its own (`python -m harness.runs.worker gpu-time-trial`): it times
every proof row clean and then slowed, each through the one GPU timing path
(harness.measure.timing.gpu_sampling, with the row's facts), the slowdown being a spin kernel
(`torch.cuda._sleep`) queued after every call, its cycles set in that process from the clean
row's GPU time and the spin's measured clock rate. Trials are compared the way the gate compares
two runs (harness.verdict.compare.compare_entry with both sides' facts and fingerprints): the
clean rows of consecutive trials are an A/A comparison (must be ok), a trial's slowed row
against the previous trial's clean row is a catch (must be a REGRESSION). So both comparisons
cross processes, as two CI runs do.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLOWDOWN = 0.03
# a trial (start, CUDA, two rows sampled twice) ends in seconds; one that hangs is ended
TRIAL_TIMEOUT_S = 180.0
# the proof's rows: eager fusion workloads at the device's sizes (no compile in a trial process)
ROWS = {
    "fusion.PointwiseChain.track_eager_time": "pointwise_chain",
    "fusion.NormActivationBlock.track_eager_time": "norm_activation",
}
IDENTITY = ("gpu", "gpu_uuid", "gpu_clock_policy", "driver", "torch")


def measure_trial(device_name: str, slowdown: float) -> dict:
    """In a trial's process: every proof row clean, then slowed by `slowdown` of its GPU time."""
    import torch

    from harness.core.env import fingerprint, pick_device
    from harness.measure import timing
    from harness.measure.gputime import CudaDevice
    from harness.measure.workloads import fusion, require_cuda

    device = pick_device(device_name)
    require_cuda(device, "a GPU-time proof")
    fp = fingerprint()
    spin = CudaDevice(device).cycles_per_s()
    out = {"fingerprint": {k: fp.get(k) for k in IDENTITY}, "rows": {}}
    for row, workload in ROWS.items():
        fn = fusion.build(workload, device).eager()
        clean = timing.gpu_sampling([fn], device)
        per_call = statistics.median(clean.sides[0].gpu_s)
        cycles = int(slowdown * per_call * spin)

        def slowed(fn=fn, cycles=cycles):
            fn()
            torch.cuda._sleep(cycles)

        dirty = timing.gpu_sampling([slowed], device)
        out["rows"][row] = {
            "clean": _side(clean, timing.gpu_facts([fn], device, clean)),
            "slowed": _side(dirty, timing.gpu_facts([slowed], device, dirty)),
            "injected_s": cycles / spin,
        }
    return out


def _side(sampling, facts: dict) -> dict:
    return {"samples": list(sampling.sides[0].gpu_s), "facts": facts}


@dataclasses.dataclass
class Comparison:
    kind: str  # "A/A" or "slowed"
    row: str
    trials: tuple[int, int]
    ratio: float | None
    verdict: str
    note: str

    @property
    def passed(self) -> bool:
        from harness.verdict import compare

        want = compare.OK if self.kind == "A/A" else compare.REGRESSION
        return self.verdict == want


def compare_trials(trials: list[dict]) -> list[Comparison]:
    """A/A: trial i-1's clean row vs trial i's; slowed: trial i-1's clean row vs trial i's
    slowed row; each judged by the gate's own rule for a row with facts."""
    from harness.verdict import compare, gpurows

    out = []
    for i in range(1, len(trials)):
        before, after = trials[i - 1], trials[i]
        card = gpurows.card_difference(before["fingerprint"], after["fingerprint"])
        for row in ROWS:
            if row not in before["rows"] or row not in after["rows"]:
                continue
            base = before["rows"][row]["clean"]
            for kind, side in (("A/A", "clean"), ("slowed", "slowed")):
                head = after["rows"][row][side]
                judged = compare.compare_entry(
                    _entry(row, base),
                    _entry(row, head),
                    facts=(base["facts"], head["facts"]),
                    card=card,
                )
                out.append(
                    Comparison(kind, row, (i - 1, i), judged.ratio, judged.verdict, judged.note)
                )
    return out


def _entry(row: str, side: dict):
    from harness.verdict.resultset import Entry

    samples = side["samples"]
    return Entry(row, "seconds", statistics.median(samples) if samples else None, samples)


def tally(comparisons: list[Comparison], slowdown: float) -> dict:
    """The counts the kit and calibrate report, per kind and in all."""
    from harness.verdict import compare

    aa = [c for c in comparisons if c.kind == "A/A"]
    slowed = [c for c in comparisons if c.kind == "slowed"]
    return {
        "slowdown": slowdown,
        "aa": {
            "runs": len(aa),
            "passed": sum(c.passed for c in aa),
            "false_alarms": sum(c.verdict in (compare.REGRESSION, compare.IMPROVED) for c in aa),
            "not_judged": sum(c.verdict == compare.NOT_JUDGED for c in aa),
        },
        "slowed": {"runs": len(slowed), "caught": sum(c.passed for c in slowed)},
        "comparisons": [dataclasses.asdict(c) for c in comparisons],
    }


def run(
    device_name: str,
    trials: int,
    work: Path,
    *,
    slowdown: float = SLOWDOWN,
    budget_s: float | None = None,
    log=print,
) -> dict:
    """`trials` comparisons of each kind (trials + 1 trial processes), fewer where `budget_s`
    would run out before the next process ends (its length estimated from the longest so far).
    Returns tally() with "trials_run" and "seconds"."""
    from harness.core.env import require_gpu
    from harness.core.exits import RunnerFailed
    from harness.core.processes import run_in_session

    require_gpu()  # exit 4 on a CPU machine: GPU time needs a GPU
    work.mkdir(parents=True, exist_ok=True)
    # a folder of this proof's own: no trial file an earlier proof left can stand in for a trial
    work = Path(tempfile.mkdtemp(prefix="gpu-time-", dir=work))
    start = time.monotonic()
    done: list[dict] = []
    longest = 0.0
    for i in range(trials + 1):
        spent = time.monotonic() - start
        if budget_s is not None and i >= 2 and spent + 1.2 * longest > budget_s:
            log(f"gpu-time proof: stopping after {i} trials ({spent:.0f} s of {budget_s:.0f} s)")
            break
        out = work / f"trial-{i}.json"
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "harness.runs.worker", "gpu-time-trial", "--out", str(out)]
        cmd += ["--device", device_name, "--slowdown", str(slowdown)]
        try:
            proc = run_in_session(cmd, capture=True, timeout=TRIAL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RunnerFailed(
                f"GPU-time trial {i} did not end within {TRIAL_TIMEOUT_S:.0f} s (ended); "
                "is the GPU shared or stuck?"
            ) from None
        longest = max(longest, time.monotonic() - t0)
        if proc.returncode != 0 or not out.is_file():
            raise RunnerFailed(
                f"GPU-time trial {i} failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}"
            )
        done.append(json.loads(out.read_text()))
        log(f"gpu-time proof: trial {i} done in {time.monotonic() - t0:.1f} s")
    result = tally(compare_trials(done), slowdown)
    result.update(trials_run=len(done), seconds=round(time.monotonic() - start, 1))
    return result


def render(result: dict, fmt: str = "text") -> str:
    """The proof's table (one line per comparison) and its counts."""
    from harness.core.table import render as table

    rows = [
        (
            c["kind"],
            c["row"],
            f"{c['trials'][0]} -> {c['trials'][1]}",
            "—" if c["ratio"] is None else f"{c['ratio']:.4f}",
            c["verdict"],
            c["note"],
        )
        for c in result["comparisons"]
    ]
    aa, slowed = result["aa"], result["slowed"]
    counts = (
        f"A/A: {aa['passed']}/{aa['runs']} passed ({aa['false_alarms']} false alarms, "
        f"{aa['not_judged']} not judged); slowed by {result['slowdown']:.0%}: "
        f"{slowed['caught']}/{slowed['runs']} caught"
    )
    return table(["kind", "row", "trials", "ratio", "verdict", "note"], rows, fmt) + "\n" + counts


def proven(result: dict, at_least: int) -> bool:
    """Every A/A passed and every slowed row caught, at least `at_least` of each."""
    aa, slowed = result["aa"], result["slowed"]
    return (
        aa["runs"] >= at_least
        and aa["passed"] == aa["runs"]
        and slowed["runs"] >= at_least
        and slowed["caught"] == slowed["runs"]
    )
