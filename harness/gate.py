"""The regression gate: `harness gate BASE HEAD` compares two asv result sets.

BASE and HEAD are result files, directories, commits, `latest` or `baseline[:MACHINE]`
(see harness.results). The full table (benchmark, base, head, ratio, verdict) is always
printed, also when the gate fails; `--markdown FILE` writes the same table for a
pull-request comment. How each metric is compared is in harness.stats.

Exit codes (the highest that applies wins):

  0  pass: no regression (improvements and benchmarks skipped on both sides are listed)
  1  regression: a counter grew, memory grew beyond tolerance, or a timing is slower
     (significant Mann-Whitney test *and* beyond max(threshold, noise band))
  2  a benchmark failed, or is present (or skipped) on one side only
  3  bad input: missing, corrupt or truncated file, unknown benchmark name or unit, empty
     sample list, NaN/inf value, results from different machines (unless
     --allow-machine-mismatch), or nothing to compare
  4  --require-gpu was given and this machine has no CUDA GPU (a GPU-runner job on the
     wrong machine must not pass silently)
"""

from __future__ import annotations

import dataclasses
import math
import pathlib

from harness import stats
from harness.results import BadInput, ResultSet, load, load_noise, noise_path, resolve, results_dir

PASS, REGRESSED, BENCH_FAILED, BAD_INPUT, NO_GPU = 0, 1, 2, 3, 4
EXIT_MEANING = {PASS: "pass", REGRESSED: "regression", BENCH_FAILED: "benchmark failed or missing",
                BAD_INPUT: "bad input", NO_GPU: "no GPU on a GPU-runner job"}
CODE_OF = {stats.REGRESSION: REGRESSED, stats.FAILED: BENCH_FAILED, stats.MISSING: BENCH_FAILED,
           stats.BAD: BAD_INPUT}


# ---- rendering: one table, two formats ----

_SCALE = {"seconds": [(1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")],
          "bytes": [(2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")]}


def fmt_value(x: float | None, unit: str) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and math.isnan(x):
        return "n/a"
    if unit in _SCALE:
        for factor, suffix in _SCALE[unit]:
            if abs(x) >= factor or factor == _SCALE[unit][-1][0]:
                return f"{x / factor:.3g} {suffix}"
    if unit == "samples/s":
        return f"{x:.4g}/s"
    if float(x).is_integer() and unit not in ("ratio", "efficiency"):
        return f"{int(x)} {unit}"
    return f"{x:.3g}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "—"
    return "inf" if math.isinf(r) else f"{r:.3f}"


HEADER = ("benchmark", "base", "head", "ratio", "verdict", "note")


def table_cells(rows: list[stats.Row]) -> list[tuple[str, ...]]:
    return [(r.name, fmt_value(r.base, r.unit), fmt_value(r.head, r.unit), fmt_ratio(r.ratio),
             r.verdict, r.note) for r in rows]


def render(rows: list[stats.Row], fmt: str = "text", title: str = "", footer: str = "") -> str:
    """The gate table as aligned text (terminal) or Markdown (pull-request comment)."""
    cells = table_cells(rows)
    out = []
    if fmt == "markdown":
        if title:
            out += [f"### {title}", ""]
        esc = lambda s: s.replace("|", "\\|")  # noqa: E731
        out.append("| " + " | ".join(HEADER) + " |")
        out.append("|" + "|".join(["---", "--:", "--:", "--:", ":-:", "---"]) + "|")
        for c in cells:
            c = list(c)
            if c[4] not in (stats.OK, stats.SKIPPED, stats.IMPROVED):
                c[4] = f"**{c[4]}**"
            out.append("| " + " | ".join(esc(x) for x in c) + " |")
        if footer:
            out += ["", footer]
        return "\n".join(out) + "\n"
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(HEADER)]
    line = lambda c: "  ".join(  # noqa: E731
        (x.rjust(w) if i in (1, 2, 3) else x.ljust(w)) for i, (x, w) in enumerate(zip(c, widths))).rstrip()
    if title:
        out.append(title)
    out += [line(HEADER), line(tuple("-" * w for w in widths))]
    out += [line(c) for c in cells]
    if footer:
        out.append(footer)
    return "\n".join(out) + "\n"


# ---- the gate ----

@dataclasses.dataclass
class Outcome:
    code: int
    rows: list[stats.Row]
    base: ResultSet | None = None
    head: ResultSet | None = None
    message: str = ""

    def summary(self) -> str:
        counts = {}
        for r in self.rows:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        parts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        return f"gate: exit {self.code} ({EXIT_MEANING[self.code]}); {len(self.rows)} benchmarks: {parts or 'none'}"


def exit_code(rows: list[stats.Row]) -> int:
    return max([CODE_OF.get(r.verdict, PASS) for r in rows], default=PASS)


def run_gate(base_spec: str, head_spec: str, *, root=None, machine: str | None = None,
             threshold: float = stats.DEFAULT_THRESHOLD, alpha: float = stats.DEFAULT_ALPHA,
             noise_file: str | None = None, only: list[str] | None = None,
             allow_machine_mismatch: bool = False) -> Outcome:
    """Resolve, load and compare; bad input comes back as an Outcome with code 3, not raised."""
    root = results_dir(root)
    try:
        head = load(resolve(head_spec, root, machine))
        base = load(resolve(base_spec, root, machine or head.machine))
        if base.machine != head.machine and not allow_machine_mismatch:
            raise BadInput(f"results come from different machines: base {base.path} is from "
                           f"{base.machine!r}, head {head.path} from {head.machine!r}; timings do "
                           "not compare across machines (--allow-machine-mismatch to override)")
        npath = pathlib.Path(noise_file) if noise_file else noise_path(root, head.machine)
        noise = load_noise(npath)
        if only:
            known = set(base.entries) | set(head.entries)
            unknown = [o for o in only if not any(n == o or n.startswith(o + "(") for n in known)]
            if unknown:
                raise BadInput(f"unknown benchmark name(s): {', '.join(unknown)}; neither "
                               f"{base.path} nor {head.path} has them")
    except BadInput as exc:
        return Outcome(BAD_INPUT, [], message=str(exc))
    rows = stats.compare(base, head, threshold, alpha, noise, only)
    code = exit_code(rows)
    message = ""
    if all(r.verdict == stats.SKIPPED for r in rows):
        code, message = BAD_INPUT, "nothing was compared: every benchmark was skipped on both sides"
    return Outcome(code, rows, base, head, message)


def gpu_missing_message() -> str | None:
    """None when a CUDA GPU is usable, else why not (for --require-gpu, exit 4)."""
    from harness.env import cuda_available

    if cuda_available():
        return None
    return ("no CUDA GPU on this machine (torch.cuda.is_available() is False): this is a "
            "GPU-runner job; run it on a self-hosted GPU runner. Exit 4, not a pass.")


if __name__ == "__main__":  # `python -m harness.gate --require-gpu`: the GPU check alone (tox -e gpu)
    import sys

    if sys.argv[1:] != ["--require-gpu"]:
        sys.exit("usage: python -m harness.gate --require-gpu   (for comparisons: harness gate BASE HEAD)")
    why = gpu_missing_message()
    print(why or "GPU present: " + __import__("harness.env").env.gpu_name(), file=sys.stderr)
    sys.exit(NO_GPU if why else PASS)
