"""summary.md: the GPU proof kit's one page for a person, beside summary.json, readable in a CI
artifact or a pull-request comment.

`render(summary, attached)` turns the dict the orchestrator writes as summary.json (build_summary:
runner, exit, wall and deadline, every step with its figures, the sanity bands) and the Markdown
files the steps left in --out (`attachments(out)`: gate-*.md, report/report.md) into the page:

1. the header: exit, runner (GPU, driver, torch, CUDA, cuDNN), wall time against the deadline;
2. every step with its status, seconds, budget and detail;
3. where the asv steps' seconds went (asv's start, each benchmark, its end);
4. the GPU figures of step gpu-measure (GPU and host time, busy fraction, noise, clocks,
   throttled samples) and its claims;
5. the advice verdicts and sanity bands against their published ranges;
6. the gate tables (gate-aa.md, gate-canary.md embedded; gate-gpu-time's A/A and slowed runs);
7. the golden cases: counts, failures, candidates, how each device capture ran.

What a step did not produce says "not run" with the step's own status. The renderer reads no file
and writes none: the orchestrator writes its text atomically.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.core.escape import strong
from harness.core.table import render as table
from harness.core.units import format_value
from harness.runs.gpucheck.status import OK_STATUSES

GATE_FILES = {"gate-aa": "gate-aa.md", "gate-canary": "gate-canary.md"}
GPU_TIME_FILE = "gate-gpu-time.md"  # its comparisons, one line each (harness.runs.gpuproof)
REPORT_FILE = Path("report") / "report.md"
# the asv runs: step -> where its run's figures are (asv-spawn's are the step's own)
ASV_RUNS = {"asv-spawn": None, "gate-aa": "run_b"}  # gate-canary gates run B: no asv of its own
DETAIL_CHARS = 160


@dataclasses.dataclass(frozen=True)
class Attachments:
    """The Markdown the steps wrote into --out, by name; absent ones are missing here."""

    gates: dict = dataclasses.field(default_factory=dict)  # step name -> its gate table
    report: str | None = None  # report/report.md


def attachments(out: Path, since: float | None = None) -> Attachments:
    """What of --out the page embeds: the files written at or after `since` (a time.time()),
    so that a rerun into the same --out never shows an earlier run's table as its own."""
    out = Path(out)

    def read(path: Path) -> str | None:
        if not path.is_file() or (since is not None and path.stat().st_mtime < since):
            return None
        return path.read_text(encoding="utf-8")

    gates = {step: read(out / name) for step, name in GATE_FILES.items()}
    gates["gate-gpu-time"] = read(out / GPU_TIME_FILE)
    return Attachments({k: v for k, v in gates.items() if v is not None}, read(out / REPORT_FILE))


def render(summary: dict, attached: Attachments | None = None) -> str:
    attached = attached or Attachments()
    steps = {s["name"]: s for s in summary.get("steps", [])}
    parts = [
        _header(summary),
        _steps(summary.get("steps", [])),
        _asv_seconds(steps),
        _gpu_figures(steps, summary.get("device", "")),
        _advice(summary.get("bands") or [], steps, attached.report),
        _gates(steps, attached.gates),
        _goldens(steps),
    ]
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)


# ---- sections ----


def _header(summary: dict) -> str:
    failed = summary.get("failed_steps") or []
    code = summary.get("exit")
    if code == 0:
        verdict = "every step passed, recorded its figures" + (
            " or was n/a on the CPU" if summary.get("cpu_rehearsal") else ""
        )
    else:
        verdict = f"**failed: {', '.join(failed) or 'see the steps'}**"
    where = "CPU rehearsal" if summary.get("cpu_rehearsal") else f"device {summary.get('device')}"
    lines = [
        f"# GPU proof kit, {summary.get('started', '?')}: exit {code}",
        "",
        f"- **exit {code}**: {verdict}",
        f"- runner: {_runner(summary.get('runner'))}",
        f"- {where}; wall {_s(summary.get('wall_s'))} s against a deadline of "
        f"{_s(summary.get('deadline_s'), 0)} s",
    ]
    return "\n".join(lines)


def _runner(runner: dict | None) -> str:
    if not runner:
        return "unknown (no env.json: step env did not run)"
    gpu = runner.get("gpu") or "no GPU"
    if runner.get("gpu_memory_gib"):
        gpu += f" ({runner['gpu_memory_gib']} GiB)"
    named = (
        ("driver", "driver"),
        ("torch", "torch"),
        ("CUDA", "cuda_build"),
        ("cuDNN", "cudnn"),
        ("Python", "python"),
    )
    bits = [gpu] + [f"{label} {runner[key]}" for label, key in named if runner.get(key)]
    bits.append(f"{runner.get('cpu_count', '?')} CPUs ({runner.get('cpu') or '?'})")
    return ", ".join(bits)


def _steps(steps: list[dict]) -> str:
    rows = []
    for s in steps:
        status = s.get("status", "?")
        over = s.get("wall_s", 0) > s.get("budget_s", float("inf"))
        rows.append(
            (
                s.get("name", "?"),
                status if status in OK_STATUSES else strong(status.upper()),
                _s(s.get("wall_s")) + (" (over budget)" if over else ""),
                _s(s.get("budget_s"), 0),
                _short(s.get("detail", "")),
            )
        )
    return "## Steps\n\n" + table(
        ["step", "status", "seconds", "budget", "detail"], rows, "markdown"
    )


def _asv_seconds(steps: dict) -> str:
    runs = {}
    for name, key in ASV_RUNS.items():
        figures = (steps.get(name) or {}).get("figures") or {}
        ran = figures.get(key) if key else figures
        if isinstance(ran, dict) and ran.get("benchmark_wall_s") is not None:
            runs[name] = ran
    head = "## Where the asv steps' seconds went\n\n"
    if not runs:
        return head + "No asv step recorded its times (not run).\n"
    names: list[str] = []
    for ran in runs.values():
        names += [n for n in ran["benchmark_wall_s"] if n not in names]
    rows = [("(asv start: machine record, discovery)",) + _per(runs, "asv_start_s")]
    caches: list[str] = []
    for ran in runs.values():
        caches += [k for k in ran.get("setup_cache_s") or {} if k not in caches]
    rows += [
        (f"(setup_cache {k})",)
        + tuple(_s((r.get("setup_cache_s") or {}).get(k)) for r in runs.values())
        for k in caches
    ]
    rows += [(n,) + tuple(_s(r["benchmark_wall_s"].get(n)) for r in runs.values()) for n in names]
    rows.append(("(asv end)",) + _per(runs, "asv_end_s"))
    rows.append((strong("asv in all"),) + _per(runs, "wall_s"))
    return (
        head
        + "Seconds per benchmark, from the previous one's end to its own (a spawned process per "
        "benchmark: import, CUDA start, compile, samples).\n\n"
        + table(["benchmark"] + list(runs), rows, "markdown")
    )


def _per(runs: dict, key: str) -> tuple:
    return tuple(_s(r.get(key)) for r in runs.values())


def _gpu_figures(steps: dict, device: str) -> str:
    head = "## GPU figures\n\n"
    step = steps.get("gpu-measure")
    figures = (step or {}).get("figures") or {}
    if not figures.get("rows") and not figures.get("claims"):
        return head + f"gpu-measure: {_absent(step)}\n"
    parts = [head]
    if figures.get("rows"):
        share = "busy" if device != "cpu" else "ATen share"
        rows = []
        for r in figures["rows"]:
            launch = r.get("launch_bound")
            rows.append(
                (
                    r.get("name", "?"),
                    format_value(r.get("gpu_s"), "seconds"),
                    format_value(r.get("host_s"), "seconds"),
                    _pct(r.get("busy")),
                    _pct(r.get("noise")),
                    _num(r.get("sm_clock_mhz")),
                    _num(r.get("throttled_dropped")),
                    _num(r.get("kept_at_power_cap")),
                    strong("launch-bound") if launch else ("no" if launch is not None else "—"),
                )
            )
        parts.append(
            table(
                [
                    "row",
                    "GPU time",
                    "host time",
                    share,
                    "noise",
                    "SM clock (MHz)",
                    "throttled samples dropped",
                    "kept at the power cap",
                    "launch-bound",
                ],
                rows,
                "markdown",
            )
        )
    if figures.get("claims"):
        rows = [
            (
                c.get("claim", "?"),
                _num(c.get("value")),
                c.get("mark", ""),
                "pass" if c.get("pass") else strong("FAIL"),
            )
            for c in figures["claims"]
        ]
        parts.append("\n" + table(["claim", "measured", "mark", "verdict"], rows, "markdown"))
    return "".join(parts)


def _advice(bands: list[dict], steps: dict, report: str | None) -> str:
    parts = ["## Advice verdicts and published bands\n"]
    if bands:
        rows = [
            (
                b.get("key", "?"),
                b.get("case", ""),
                _num(b.get("value")),
                _band(b.get("band")),
                b.get("verdict", ""),
                b.get("published", ""),
            )
            for b in bands
        ]
        parts.append(
            "\nRatios the steps measured in process (amp, conv, transfer) against the range "
            "published for them (a time ratio: < 1 is faster):\n\n"
            + table(
                ["figure", "case", "measured", "published range", "verdict", "published"],
                rows,
                "markdown",
            )
        )
        sources = sorted({b["source"] for b in bands if b.get("source")})
        if sources:
            parts.append("\nSources: " + "; ".join(sources) + "\n")
    else:
        parts.append(
            "\nNo in-process figure with a published range (amp, conv, transfer not run).\n"
        )
    report_step = steps.get("report")
    report_bands = ((report_step or {}).get("figures") or {}).get("bands") or []
    if report_bands:
        rows = [
            (r.get("ratio", ""), r.get("case", ""), r.get("measured", ""), r.get("published", ""))
            + (r.get("verdict", ""),)
            for r in report_bands
        ]
        parts.append(
            "\nThe asv run's ratios (step report):\n\n"
            + table(["ratio", "case", "measured", "published", "verdict"], rows, "markdown")
        )
    advice = _section(report, "## Advice") if report else None
    if advice:
        parts.append("\n" + _demote(advice, 1))
    else:
        parts.append(f"\nThe report's advice verdicts: {_absent(report_step)}\n")
    return "".join(parts)


def _gates(steps: dict, gates: dict) -> str:
    parts = ["## Gate tables\n"]
    for name in GATE_FILES:
        step = steps.get(name)
        parts.append(f"\n### {name}: {_status_line(step)}\n\n")
        text = gates.get(name)
        if step is not None:
            parts.append(_demote(text, 1) if text else f"{_absent(step)}\n")
    step = steps.get("gate-gpu-time")
    parts.append(f"\n### gate-gpu-time: {_status_line(step)}\n\n")
    figures = (step or {}).get("figures") or {}
    if "aa" in figures or "slowed" in figures:
        aa, slowed = figures.get("aa") or {}, figures.get("slowed") or {}
        slowdown = figures.get("slowdown")
        rows = [
            (
                "A/A: the same code twice",
                f"{aa.get('passed', '—')} of {aa.get('runs', '—')} passed",
            ),
            (
                "slowed"
                + (f" by {slowdown * 100:.0f}%" if isinstance(slowdown, (int, float)) else ""),
                f"{slowed.get('caught', '—')} of {slowed.get('runs', '—')} caught",
            ),
        ]
        parts.append(table(["GPU-time rows", "outcome"], rows, "markdown"))
        if gates.get("gate-gpu-time"):
            parts.append("\n" + gates["gate-gpu-time"])
    elif step is not None:
        parts.append(f"{_absent(step)}\n")
    return "".join(parts)


def _goldens(steps: dict) -> str:
    head = "## Golden cases\n\n"
    step = steps.get("goldens")
    figures = (step or {}).get("figures") or {}
    cases = figures.get("cases") or {}
    if not cases:
        return head + f"goldens: {_absent(step)}\n"
    counts = figures.get("counts") or {}
    lines = [
        f"{len(cases)} cases on {figures.get('device', '?')}: "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())),
    ]
    failed = figures.get("failed") or []
    lines.append(f"failed: {', '.join(failed) if failed else 'none'}")
    candidates = figures.get("candidates") or []
    if candidates:
        lines.append(
            "candidates (printouts that differ on the device; review `cuda-candidates/`, then "
            "commit under `expect/cuda/`): " + ", ".join(f"`{c}`" for c in candidates)
        )
    plugin = steps.get("goldens-plugin")
    if plugin is not None:
        lines.append(f"goldens-plugin: {_status_line(plugin)}")
    text = head + "\n".join(f"- {line}" for line in lines) + "\n\n"
    rows = []
    for golden_id, c in sorted(cases.items(), key=lambda kv: (kv[0] not in failed, kv[0])):
        bad = golden_id in failed
        rows.append(
            (
                strong(golden_id) if bad else golden_id,
                strong(c.get("status")) if bad else c.get("status", ""),
                c.get("semantic", ""),
                c.get("committed", ""),
                c.get("capture", "") or "",
                _short(c.get("error", "")),
            )
        )
    return text + table(
        ["case", "printout vs CPU", "vs eager", "committed golden", "capture", "error"],
        rows,
        "markdown",
    )


# ---- small helpers ----


def _status_line(step: dict | None) -> str:
    if step is None:
        return "not run (not in this run)"
    status = step.get("status", "?")
    shown = status if status in OK_STATUSES else f"**{status}**"
    detail = _short(step.get("detail", ""))
    return (
        f"{shown}"
        + (f", {_s(step.get('wall_s'))} s" if step.get("wall_s") else "")
        + (f": {detail}" if detail else "")
    )


def _absent(step: dict | None) -> str:
    """What to say where a step's output is missing."""
    if step is None:
        return "not run (the step was not in this run)"
    status = step.get("status", "?")
    detail = _short(step.get("detail", ""))
    if status in ("pass", "recorded"):
        return f"nothing recorded (step {status}{': ' + detail if detail else ''})"
    return f"not run (step {status}{': ' + detail if detail else ''})"


def _section(markdown: str, prefix: str) -> str | None:
    """The section of `markdown` whose heading starts with `prefix`, to the next heading of its
    level or above."""
    level = _heading_level(prefix)
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            end = next(
                (j for j in range(i + 1, len(lines)) if 0 < _heading_level(lines[j]) <= level),
                len(lines),
            )
            return "\n".join(lines[i:end]).rstrip() + "\n"
    return None


def _heading_level(line: str) -> int:
    stripped = line.lstrip("#")
    return len(line) - len(stripped) if stripped.startswith(" ") else 0


def _demote(markdown: str, by: int) -> str:
    """Headings `by` levels deeper, so an embedded file sits under this page's sections."""
    out = []
    for line in markdown.splitlines():
        out.append("#" * by + line if _heading_level(line) else line)
    return "\n".join(out).rstrip() + "\n"


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 3] + "..."


def _s(value, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _num(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _band(band) -> str:
    if not band or len(band) != 2:
        return "—"
    return f"{band[0]:.3g} .. {band[1]:.3g}"
