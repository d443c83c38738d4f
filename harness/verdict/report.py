"""`harness report`: a Markdown summary and PNG plots of one result set, plus one benchmark's
history over all stored commits of a machine.

Plots (matplotlib, Agg): per suite the run holds, its ratio rows with 1 marked (fusion:
compiled/eager time; transfer: pinned/pageable and uint8/float32 copy time; amp: AMP/fp32 step
time; models: channels_last/contiguous and compiled/eager per model; dataloader: samples/s with N
workers over 0 workers; a project's own modules: their paired time ratios); a suite the run does
not hold gets no section, one without ratio rows (instructions, canary) none either. The history
of `--history NAME` (every run a point: median, bars from the 25th to the 75th percentile of
samples; a change of torch version between runs, read from their fingerprints, is marked).
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
import statistics

from harness.core import escape, records
from harness.core.files import write_atomic
from harness.core.table import render
from harness.core.units import format_value, scale
from harness.verdict import accuracy, answers, bands, gpurows, noise
from harness.verdict.compare import central
from harness.verdict.results import BadInput, ResultSet, load_listed
from harness.verdict.summary import COMPUTE_BOUND_BELOW, bandwidth_view, cases, workers_scaling

SUITES = {
    "fusion": (
        "fused / unfused time (compiled/eager, fused/eager, SDPA/hand-written, "
        "foreach or fused/for-loop; checkpointed/plain)",
        "lower is better; < 1: the fused side is faster",
    ),
    "transfer": (
        "time ratio (pinned/pageable, uint8+convert/float32)",
        "lower is better; < 1: faster",
    ),
    "amp": ("AMP / fp32 training-step time", "lower is better; < 1: AMP is faster"),
    "dataloader": (
        "samples/s with N workers / with 0 workers",
        "higher is better; > 1: workers help",
    ),
    "training_loop": (
        "advice / habit time (no_grad, inference_mode, set_to_none, loss summed on device)",
        "lower is better; < 1: the advice is faster",
    ),
    "models": (
        "time ratio per model (channels_last/contiguous, compiled/eager, cudnn.benchmark on/off)",
        "lower is better; < 1: the first side is faster",
    ),
}
# any other suite's ratio rows (a project's own modules): paired time ratios, named A_over_B
OTHER = (
    "paired time ratio (the row's first side over its second)",
    "lower is better; < 1: the first side is faster",
)


def suite_labels(suite: str) -> tuple[str, str]:
    """(what the ratios are, how to read them) for a suite's plot and table."""
    return SUITES.get(suite, OTHER)


@dataclasses.dataclass
class Bar:
    label: str
    value: float
    device: str = ""  # busy NN% / ATen share NN% (harness.verdict.gpurows.label)
    row: str = ""  # the row's full name, where the bar is one row


def md(text) -> str:
    """A value from a result file in a heading or a line of the report (harness.core.escape)."""
    return escape.markdown_text(text, limit=escape.MAX_CELL)


def file_part(name: str) -> str:
    """A suite's or benchmark's name as part of a PNG's file name: letters, digits, `_.-` only
    (a name from a result file never leaves the report's folder), and where characters were
    replaced, a short hash of the name (two names never share a file)."""
    import hashlib

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:100].strip(".") or "_"
    if safe == name:
        return safe
    return f"{safe}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _ok(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _short(name: str) -> str:
    """'fusion.PointwiseChain.track_compiled_over_eager' -> 'PointwiseChain.compiled_over_eager'."""
    name = name.split(".", 1)[1] if "." in name else name
    return name.replace("track_", "")


def held_suites(rs: ResultSet) -> list[str]:
    """The suites this run holds rows of: the harness's in SUITES order, then the others."""
    held = {name.split(".", 1)[0] for name in rs.entries}
    return [x for x in SUITES if x in held] + sorted(held - set(SUITES))


def speedups(rs: ResultSet) -> dict[str, list[Bar]]:
    """Suite -> bars, for every suite the run holds: each 'ratio' row of the suite that has a
    value, and the dataloader workers scaling. A suite that holds no ratio row at all (the
    instructions, the canary) is left out; one whose ratio rows all failed or were n/a here
    keeps an empty list."""
    held = held_suites(rs)
    with_ratios = {n.split(".", 1)[0] for n, e in rs.entries.items() if e.unit == "ratio"}
    out: dict[str, list[Bar]] = {
        x: [] for x in held if x in with_ratios or (x == "dataloader" and x in held)
    }
    for name, e in sorted(rs.entries.items()):
        suite = name.split(".", 1)[0]
        if suite in out and e.unit == "ratio" and _ok(e.value):
            out[suite].append(Bar(_short(name), e.value, gpurows.label(rs.facts.get(name)), name))
    for label, value in workers_scaling(rs):
        out.setdefault("dataloader", []).append(
            Bar(label.replace(" samples/s", "").replace("pin=", "pin_memory="), value)
        )
    return out


def plot_speedups(suite: str, bars: list[Bar], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xlabel, hint = suite_labels(suite)
    fig, ax = plt.subplots(figsize=(8, 1.8 + 0.45 * len(bars)))
    ys = range(len(bars))
    ax.barh(list(ys), [b.value for b in bars], color="tab:blue")
    ax.set_yticks(list(ys), [escape.plot_text(b.label) for b in bars], fontsize=8)
    ax.axvline(1.0, color="black", linewidth=1, linestyle="--")
    ax.text(1.0, len(bars) - 0.45, " 1 = no change", fontsize=8, va="bottom")
    for y, b in zip(ys, bars):
        ax.text(b.value, y, f" {b.value:.3g}×", va="center", fontsize=8)
    ax.set_xlabel(f"{xlabel}\n(×, {hint})")  # two lines: long case labels leave little width
    ax.set_ylabel("benchmark case")
    ax.set_title(f"{escape.plot_text(suite)}: key ratios")
    ax.set_xlim(0, max(max(b.value for b in bars), 1.0) * 1.25)
    ax.set_ylim(-0.6, len(bars) - 0.1)
    fig.tight_layout()
    _save(fig, path)


def _save(fig, path: pathlib.Path) -> None:
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")  # never clip a long label
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def history(
    root: pathlib.Path, machine: str, name: str
) -> list[tuple[str, str, float, float, float]]:
    """(commit, run id, median, q25, q75) per run holding `name` on `machine`, in the order the
    runs started: every run is a point, also reruns of one commit."""
    points = []
    for run in records.named_runs(root, machine, skip_merged=True):
        rs = load_listed(run.result_file, run.result_file.parent.parent.parent)
        e = rs.entries.get(name) if rs is not None else None
        if e is None or not _ok(e.value):
            continue
        s = sorted(e.samples) if e.samples else [e.value]
        q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0], s[0], s[0]]
        points.append((rs.commit[:8], run.run_id, statistics.median(s), q[0], q[2]))
    return points


def torch_versions(root: pathlib.Path, machine: str, points) -> list[str]:
    """The torch version of each point's run (from its fingerprint; "?" when it has none)."""
    from harness.core import trust
    from harness.core.exits import BadInput

    by_id = {run.run_id: run for run in records.named_runs(root, machine)}
    out = []
    for p in points:
        run = by_id.get(p[1])
        try:  # a label only: an unreadable fingerprint is "?" (loading the run names it)
            fp = trust.load(run.fingerprint_path, "fingerprint") if run else {}
        except (OSError, BadInput):
            fp = {}
        out.append(str((fp if isinstance(fp, dict) else {}).get("torch") or "?"))
    return out


def torch_changes(versions: list[str]) -> list[tuple[int, str, str]]:
    """(index, previous version, new version) wherever the torch version changes between points."""
    return [
        (i, versions[i - 1], versions[i])
        for i in range(1, len(versions))
        if versions[i] != versions[i - 1]
    ]


def plot_history(
    name: str, unit: str, points, path: pathlib.Path, changes: list[tuple[int, str, str]] = ()
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    factor, label = scale(unit, max(p[4] for p in points))
    xs = list(range(len(points)))
    med = [p[2] / factor for p in points]
    lo = [(p[2] - p[3]) / factor for p in points]
    hi = [(p[4] - p[2]) / factor for p in points]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.errorbar(
        xs, med, yerr=[lo, hi], marker="o", capsize=3, label="median (bars: 25th–75th percentile)"
    )
    ax.set_xticks(xs, [escape.plot_text(p[0]) for p in points], rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("run, by start time (labelled with its commit)")
    quantity = {"seconds": "time per call", "bytes": "memory"}.get(unit, unit)
    ax.set_ylabel(escape.plot_text(f"{quantity} [{label}]"))  # the unit is the record's
    ax.set_ylim(bottom=0)
    for i, _old, new in changes:  # a torch upgrade explains many steps: mark it on the plot
        ax.axvline(i - 0.5, color="tab:red", linestyle=":", linewidth=1)
        ax.text(
            i - 0.5,
            ax.get_ylim()[1],
            f" torch {escape.plot_text(new)}",
            color="tab:red",
            fontsize=7,
            rotation=90,
            va="top",
        )
    ax.set_title(f"history: {escape.plot_text(name)}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def device_section(rs: ResultSet) -> list[str]:
    """Every timing row's device facts from the run record: on CUDA GPU and host time per call,
    busy fraction, noise, SM clock and throttled samples; on a CPU the ATen share."""
    from harness.core.clocks import POWER_CAP_CLOCK_SHARE
    from harness.core.units import format_value

    gpu, cpu = [], []
    for name, f in sorted(rs.facts.items()):
        if gpurows.is_gpu(f):
            for i, side in enumerate(f.get("sides") or [f]):
                gpu.append(
                    (
                        name + (f" [side {i + 1}]" if f.get("sides") else ""),
                        format_value(side.get("gpu_s"), "seconds"),
                        format_value(side.get("host_s"), "seconds"),
                        "?" if side.get("busy") is None else f"{side['busy']:.0%}",
                        "?" if side.get("noise") is None else f"{side['noise']:.2%}",
                        f"{f['sm_clock_mhz']:.0f} MHz" if f.get("sm_clock_mhz") else "not read",
                        f"{f.get('dropped_throttled', 0)} of {f.get('taken', 0)}"
                        + (
                            f" ({f['kept_at_power_cap']} kept at the power cap)"
                            if f.get("kept_at_power_cap")
                            else ""
                        ),
                    )
                )
        elif f.get("aten_share") is not None:
            cpu.append((name, gpurows.label(f)))
    if not gpu and not cpu:
        return []
    lines = ["## Device facts per timing row", ""]
    if gpu:
        notes = {f.get("clock_note") for f in rs.facts.values() if f.get("clock_note")}
        lines += [
            "GPU time: CUDA events over batches of calls (per call); host: launch to "
            "synchronise per call; busy: GPU activity over the time a caller waits per call "
            f"(below {gpurows.LAUNCH_BOUND:.0%}: launch-bound, the row times the host); noise: "
            "relative standard error of the median; throttled: samples dropped while a "
            "thermal or power limit was active (at the power cap alone a sample is kept while "
            f"the SM clock holds {POWER_CAP_CLOCK_SHARE:.0%} of its maximum).",
            "",
            render(
                ["row", "GPU time", "host time", "busy", "noise", "SM clock", "throttled"],
                gpu,
                "markdown",
            ),
            "",
        ]
        lines += [
            f"Not checked: {escape.markdown_text(note, limit=escape.MAX_PROSE)}"
            for note in sorted(notes)
        ]
        lines += [""] if notes else []
    if cpu:
        lines += [
            "ATen share: time in ATen kernels and compiled graphs over a call's wall time (low: "
            "Python and dispatch overhead dominate).",
            "",
            render(["row", "ATen share"], cpu, "markdown"),
            "",
        ]
    return lines


def answers_section(rs: ResultSet) -> list[str]:
    """Whether both sides of each paired row computed the same result (harness.verdict.answers):
    per model, the accuracy column of PyTorch's dashboard (pass / WRONG / fail_to_run), then
    every WRONG and fail_to_run row with what differed; rendered escaped (records are input)."""
    from harness.verdict.results import param_names

    if not rs.answers:
        return []
    found = accuracy.single(rs, params=param_names(rs))
    lines = [
        "## Answers: do both sides of each paired row compute the same result?",
        "",
        escape.markdown_text(
            f"{found.summary().split('; ', 1)[1]}. pass: every judged answer of the model the "
            "same; WRONG: a faster side computes another result, so its speed-up is none; "
            "fail_to_run: a side or the check could not run (docs/answers.md).",
            limit=escape.MAX_PROSE,
        ),
        "",
        render(
            ["model", "answer", "rows"],
            [(m, col, ", ".join(f"{n} {s}" for s, n in c.items())) for m, col, c in found.models],
            "markdown",
        ),
    ]
    bad = [(n, a) for n, a in found.rows if a.status in (answers.WRONG, answers.FAIL_TO_RUN)]
    if bad:
        lines += [
            "",
            render(
                ["row", "answer", "output and error", "tolerance", "reason", "reproduce"],
                [
                    (
                        n,
                        a.status,
                        answers.figures(a),
                        answers.tolerance(a) if a.status == answers.WRONG else "",
                        a.reason,
                        answers.reproduce(a, rs) or answers.rerun(n, rs),
                    )
                    for n, a in bad
                ],
                "markdown",
            ),
        ]
    return lines + [""]


NOISE_COLUMNS = ("between runs", "smallest change caught")


def history_noise(rs: ResultSet, root: pathlib.Path) -> noise.History | None:
    """Each statistical row's noise between runs on this run's machine, learned from its other
    clean runs of the same mode (harness.verdict.noise); None outside a run record or with no
    row known."""
    rec = records.record_of(rs.path)
    if rec is None:
        return None
    want = noise.Wanted(rs.machine, noise.mode_of(rec.meta), rs, frozenset({rec.run_id}))
    found = noise.learn(root, want, only=set(rs.entries))
    return found if found.spreads else None


def noise_cells(learned: noise.History, row: str) -> tuple[str, str]:
    """(how far one run moves, the smallest change a gate of two runs catches 9 times in 10)."""
    r = learned.row(row) if row else None
    if r is None:
        return ("", "")
    caught = max(r.caught, r.threshold)
    return (f"+-{r.moves:.1%}", f"{caught:.0%}" + (" (not judged)" if r.too_noisy else ""))


def noise_section(rs: ResultSet, learned: noise.History | None) -> list[str]:
    """Every statistical row of the run beside its noise between runs and the smallest change
    the gate catches in it (the gate's threshold: max of this and its own; docs/gate.md)."""
    if learned is None:
        return []
    cells = []
    for name, e in sorted(rs.entries.items()):
        r = learned.row(name)
        if r is None or not _ok(e.value):
            continue
        value = format_value(central(e), e.unit)
        cells.append((name, value, *noise_cells(learned, name), f"{r.threshold:.1%}"))
    if not cells:
        return []
    return [
        "## Noise between runs",
        "",
        md(
            f"Learned from {learned.summary()}: how far one run moves from its level, the "
            "threshold a gate of two runs uses, and the smallest change it catches 9 times in 10 "
            f"(rows past {noise.CAP:.0%} are not judged)."
        ),
        "",
        render(
            ["row", "value", *NOISE_COLUMNS, "threshold"],
            cells,
            "markdown",
            ("left", "right", "right", "right", "right"),
        ),
    ]


def sanity_section(rs: ResultSet) -> list[str]:
    """Key ratios beside the ranges PyTorch publishes (harness.verdict.bands)."""
    device = bands.device_of(rs)
    lines = [f"## Sanity bands: key ratios vs published figures ({device})", ""]
    found = bands.rows(bands.measured(rs), device)
    if not found:
        return lines + ["None of the ratios with a published range is in this set.", ""]
    lines.append(
        "A ratio outside its published range is a prompt to check the set-up (model size, "
        "GPU generation, CPU), not a failure."
    )
    lines.append("")
    return lines + [render(list(bands.HEADERS), found, "markdown"), ""]


def advice_section(rs: ResultSet) -> list[str]:
    """The lines of `harness advise` for this run (harness.verdict.advice), as a Markdown table."""
    from harness.verdict import advice

    result = advice.advise(rs)
    # a tip whose suite the run did not hold is one line below the table, not a row each
    held = set(held_suites(rs))
    absent = [
        tip
        for tip in result.tips
        if tip.suite not in held and not (tip.needs_cuda and result.run["device"] != "cuda")
    ]
    names = {tip.name for tip in absent}
    result.lines = [line for line in result.lines if line.tip not in names]
    # the header names the run's machine, CPU, GPU and torch as its record says them
    header = escape.markdown_text(advice.header(result), lines=True, limit=escape.MAX_MESSAGE)
    lines = ["## Advice: what each tip is worth on this machine", "", header, ""]
    if result.lines:
        lines += [render(advice.HEADERS, advice.rows(result), "markdown").rstrip("\n"), ""]
    if absent:
        suites = sorted({tip.suite for tip in absent})
        lines.append(
            f"Not in this run: {', '.join(tip.name for tip in absent)} (the suites "
            f"{', '.join(suites)}: `harness bench --suite NAME` measures them)."
        )
    return lines


SEED_CLAIM = (
    "The seed: `x.cos().cos()` eager makes 4 global memory passes (read x, write t, read t, "
    'write y), fused 2, "so fusion will speed it up by 2x".'
)


def claim_verdict(bytes_ratio: float, measured: float, compute_bound: bool) -> str:
    """Whether the measured eager/fused time ratio is the one the saved bytes predict (within
    25%), and what explains it where it is not."""
    if abs(measured / bytes_ratio - 1) <= 0.25:
        return f"holds: {measured:.2f}x measured, {bytes_ratio:.2f}x predicted by bytes"
    why = (
        "the kernels are compute-bound, so bytes do not set the time"
        if compute_bound
        else "memory-bound, yet the fused kernel does not reach the eager kernels' bandwidth"
    )
    if measured > bytes_ratio:
        why = (
            "the fused kernel computes faster (inductor's own vectorised code), beyond what "
            "the saved bytes explain"
            if compute_bound
            else why
        )
    return f"does not hold: {measured:.2f}x measured vs {bytes_ratio:.2f}x predicted; {why}"


def bandwidth_section(rs: ResultSet) -> list[str]:
    """The seed's 2x claim next to the measured eager/fused ratio and the bandwidth behind it."""
    view = bandwidth_view(rs)
    lines = ["## fusion: the 2x claim vs memory bandwidth", "", SEED_CLAIM, ""]
    if not view:
        return lines + [
            "No fusion.MemoryBandwidth results in this set (not run, failed or n/a).",
            "",
        ]
    small = [
        e.value
        for _, e in cases(rs, "fusion.PointwiseChain.track_compiled_over_eager")
        if _ok(e.value) and e.value > 0
    ]
    if small:
        lines += [
            f"At the suite's small size (in cache), eager/compiled time for the chain: "
            f"{1 / small[0]:.2f}x.",
            "",
        ]
    lines += [
        "Beyond the last-level cache, eager vs fused (torch.compile), a plain device copy timed "
        "in the same rounds as the limit (fraction of its GB/s in brackets); a kernel below "
        f"{COMPUTE_BOUND_BELOW:.0%} of it is called compute-bound:",
        "",
    ]
    rows = []
    for b in view:
        ratio, measured = b.bytes_eager / b.bytes_fused, 1 / b.fused_over_eager
        rows.append(
            (
                b.workload,
                f"{b.bytes_eager / 2**20:.0f} MiB",
                f"{b.bytes_fused / 2**20:.0f} MiB",
                f"{measured:.2f}x",
                f"{b.gbps_eager:.3g} ({b.fraction_eager:.2f})",
                f"{b.gbps_fused:.3g} ({b.fraction_fused:.2f})",
                f"{b.gbps_copy:.3g}",
                b.bound.split(" (")[0],
                claim_verdict(ratio, measured, b.compute_bound),
            )
        )
    lines.append(
        render(
            [
                "workload",
                "bytes/call eager",
                "fused",
                "eager/fused time",
                "GB/s eager",
                "GB/s fused",
                "GB/s copy",
                "eager is",
                "2x claim (bytes ratio as the prediction)",
            ],
            rows,
            "markdown",
        )
    )
    return lines + [""]


def write_report(
    rs: ResultSet,
    out: pathlib.Path,
    root: pathlib.Path,
    history_names: list[str] | None = None,
    lead: str = "",
) -> pathlib.Path:
    """Write report.md and its PNGs into `out`; returns the Markdown path. `lead`: Markdown the
    command wrote (what its pull refused), below the title."""
    out.mkdir(parents=True, exist_ok=True)
    dirty = " (dirty)" if rs.dirty else ""
    # what the result file says (commit, machine, names) is escaped for Markdown
    lines = [
        f"# Benchmark report: {md(rs.commit[:8])}{dirty} on {md(rs.machine)}",
        "",
        f"Source: {escape.markdown_code(rs.path)}",
    ]
    lines += ["", lead.rstrip("\n")] if lead else []
    if rs.dirty:
        lines.append(
            "\nThe run measured a working tree that differed from its commit (uncommitted "
            "changes): these figures are not the commit's."
        )
    lines.append("")
    learned = history_noise(rs, root)
    for suite, bars in speedups(rs).items():
        xlabel, hint = suite_labels(suite)
        lines += [f"## {md(suite)}: {xlabel}", ""]
        if not bars:
            lines += ["Its ratio rows have no value in this run (failed, or n/a here).", ""]
            continue
        png = out / f"speedups-{file_part(suite)}.png"
        plot_speedups(suite, bars, png)
        lines += [f"![{md(suite)} ratios]({png.name})", ""]
        with_facts = any(b.device for b in bars)
        said = [answers.cell(rs, b.row) if b.row else "" for b in bars]
        header = ["case", f"ratio ({hint})"] + (["busy / ATen share"] if with_facts else [])
        cells = [(b.label, f"{b.value:.3g}") + ((b.device,) if with_facts else ()) for b in bars]
        align = ("left", "right") + (("left",) if with_facts else ())
        if any(said):  # whether both sides computed the same result (answers_section)
            header += ["answer (error/tol)"]
            cells = [c + (a,) for c, a in zip(cells, said)]
            align += ("left",)
        if learned is not None:
            header += list(NOISE_COLUMNS)
            cells = [c + noise_cells(learned, b.row) for c, b in zip(cells, bars)]
            align += ("right", "right")
        lines += [render(header, cells, "markdown", align)]
    if "fusion" in held_suites(rs):
        lines += bandwidth_section(rs)
    lines += answers_section(rs)
    lines += device_section(rs)
    lines += noise_section(rs, learned)
    lines += sanity_section(rs)
    lines += advice_section(rs)
    for name in history_names or []:
        e = rs.entries.get(name)
        if e is None:
            raise BadInput(
                f"unknown benchmark {escape.terminal(repr(name), escape.MAX_CELL)} for "
                f"--history: not in {rs.path}; names look like "
                + ", ".join(escape.terminal(n, escape.MAX_CELL) for n in sorted(rs.entries)[:3])
            )
        points = history(root, rs.machine, name)
        lines += [f"## History: {md(name)}", ""]
        if not points:
            lines += ["No successful results stored for it.", ""]
            continue
        png = out / f"history-{file_part(name)}.png"
        versions = torch_versions(root, rs.machine, points)
        changes = torch_changes(versions)
        plot_history(name, e.unit, points, png, changes)
        lines += [f"![history of {md(name)}]({png.name})", ""]
        lines += (
            [
                "torch changed: "
                + ", ".join(
                    f"{md(old)} -> {md(new)} at run {md(points[i][1])}" for i, old, new in changes
                ),
                "",
            ]
            if changes
            else []
        )
        changed = {i for i, *_ in changes}
        lines += [
            render(
                ["run", "commit", "torch", f"median ({e.unit})"],
                [
                    (
                        p[1],
                        p[0],
                        versions[i] + (" (changed)" if i in changed else ""),
                        f"{p[2]:.4g}",
                    )
                    for i, p in enumerate(points)
                ],
                "markdown",
                ("left", "left", "left", "right"),
            )
        ]
    path = out / "report.md"
    write_atomic(path, "\n".join(lines))
    return path
