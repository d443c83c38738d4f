"""The regression gate: `harness gate BASE HEAD` compares two asv result sets, or two
pytest-benchmark saves (harness.verdict.pytest_benchmark; one of each is exit 3).

BASE and HEAD are result files, directories, commits, `latest` or `baseline[:MACHINE]`
(see harness.verdict.results). The full table (benchmark, base, head, ratio, verdict) is always
printed, also when the gate fails; `--markdown FILE` writes the same table for a
pull-request comment. How each metric is compared is in harness.verdict.compare.

Exit codes (harness.core.exits; the highest that applies wins):

  0  pass: no regression (improvements are listed; benchmarks skipped on both sides are counted)
  1  regression: a counter grew, memory grew beyond tolerance, or a judged timing row (paired
     ratio, reference-normalised time, or a raw time whose calibrated noise band is below the
     threshold) is slower: significant *and* beyond max(threshold, noise band). Raw times
     without such a band are shown "not judged" with the reason (harness.verdict.compare).
     Also: an answer row is WRONG (the faster side of a paired row computes another result),
     whatever the base says, or its error grew past max(10 x the base's, 0.1)
     (harness.verdict.answers)
  2  a benchmark failed, or is present (or skipped) on one side only; an answer check failed
     to run
  3  bad input: missing, corrupt or truncated file, unknown benchmark name or unit, empty
     sample list, NaN/inf value, runs that are not comparable (another machine name, device
     model or CPU thread count; --allow-env-change to override), or nothing to compare
  4  --require-gpu was given and this machine has no CUDA GPU
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re

from harness.core import escape, exits, provenance, settings
from harness.core.table import render
from harness.core.units import format_ratio, format_value
from harness.verdict import answers, between, compare, metrics, noise
from harness.verdict.results import (
    BadInput,
    ResultSet,
    environment_differences,
    load,
    load_noise,
    noise_path,
    not_comparable,
    resolve,
    results_root,
    same_runner,
)

CODE_OF = {
    compare.REGRESSION: exits.REGRESSION,
    compare.WRONG: exits.REGRESSION,
    compare.FAILED: exits.FAILED,
    compare.MISSING: exits.FAILED,
    compare.BAD: exits.BAD_INPUT,
    compare.UNKNOWN: exits.UNDECIDED,
}
HEADER = ("benchmark", "base", "head", "ratio", "verdict", "note")
ALIGN = ("left", "right", "right", "right", "center", "left")
CALM = (compare.OK, compare.SKIPPED, compare.IMPROVED, compare.CHANGED, compare.NOT_JUDGED)


def table(rows: list[compare.Row], fmt: str = "text", title: str = "", footer: str = "") -> str:
    """The gate table as aligned text (terminal) or Markdown (pull-request comment). What the
    rows and the title say comes from result files: escaped for the format (harness.core.escape;
    the footer is escaped by its maker, render)."""
    cells = []
    for r in rows:
        verdict = r.verdict if fmt == "text" or r.verdict in CALM else escape.strong(r.verdict)
        cells.append(
            (
                r.name,
                format_value(r.base, r.unit),
                format_value(r.head, r.unit),
                format_ratio(r.ratio),
                verdict,
                r.note,
            )
        )
    body = render(HEADER, cells, fmt, ALIGN)
    if fmt == "markdown":
        head = f"### {escape.markdown_text(title, limit=escape.MAX_PROSE)}\n\n" if title else ""
    else:
        head = f"{escape.terminal(title, escape.MAX_PROSE)}\n" if title else ""
    tail = ("\n" if fmt == "markdown" else "") + footer + "\n" if footer else ""
    return head + body + tail


@dataclasses.dataclass
class Outcome:
    code: int
    rows: list[compare.Row]
    base: ResultSet | None = None
    head: ResultSet | None = None
    message: str = ""
    env_diff: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    # what the machine's history said of each row's noise between runs (None: not used)
    learned: noise.Learned | None = None

    def summary(self) -> str:
        """One line that leads with the failed benchmarks and every judged regression beside
        them (exit 2 wins over 1, so the regression must not hide behind the failure), then how
        many rows were judged and how many were not, and why: a comparison that judged nothing
        is never a plain pass."""
        lead = "; ".join(filter(None, [answers.lead(self.rows), failures_first(self.rows)]))
        return (
            f"gate: exit {self.code} ({exits.MEANING[self.code]}); "
            f"{lead + '; ' if lead else ''}{tally(self.rows)}"
        )

    def as_json(self) -> dict:
        """The outcome for --json (schema in docs/gate.md)."""
        timing = [r for r in self.rows if not answers.is_answer(r)]
        counts = verdict_counts(self.rows)
        return {
            "schema": 1,
            "exit": self.code,
            "meaning": exits.MEANING[self.code],
            "base": str(self.base.path) if self.base else None,
            "head": str(self.head.path) if self.head else None,
            "base_dirty": self.base.dirty if self.base else None,
            "head_dirty": self.head.dirty if self.head else None,
            # timing rows (every row but the answer rows, which "answers" counts apart)
            "judged": sum(r.verdict in compare.JUDGED for r in timing),
            "judged_by_history": by_history(self.rows),
            "not_judged": sum(r.verdict == compare.NOT_JUDGED for r in timing),
            "answers": answers.counts(self.rows),
            "history": self.learned.as_json() if self.learned else None,
            "counts": counts,
            "message": self.message,
            "environment_differences": [
                {"setting": k, "base": b, "head": h} for k, b, h in self.env_diff
            ],
            "rows": [_json_row(r) for r in self.rows],
        }

    @property
    def title(self) -> str:
        if not (self.base and self.head):
            return ""
        return f"base {self.base.label}  vs  head {self.head.label}  on {self.head.machine}"

    def render(self, fmt: str = "text", message: bool = True) -> str:
        """Environment differences, then the table with its title and footer (summary, and the
        message unless `message` is False: a caller that prints it elsewhere, once)."""
        said = self.message if message else ""
        # the message and the UNKNOWN rows' names come from result files (harness.core.escape)
        md = fmt == "markdown"
        if md:
            said = escape.markdown_text(said, lines=True, limit=escape.MAX_MESSAGE)
            footer = f"{escape.strong(self.summary())}" + (f"\n\n{said}" if said else "")
        else:
            footer = self.summary() + (f"\n{said}" if said else "")
        env = ""
        if self.learned is not None:
            lines = self.learned.header()
            limit = escape.MAX_MESSAGE  # the runs left out say why, read from records
            if fmt == "markdown":
                env += "\n\n".join(escape.markdown_text(x, limit=limit) for x in lines) + "\n\n"
            else:
                env += "\n".join(escape.terminal(x, limit) for x in lines) + "\n\n"
        unknown = [r for r in self.rows if r.verdict == compare.UNKNOWN]
        if unknown:
            cell = escape.markdown_cell if md else escape.terminal
            items = "\n".join(
                f"  {cell(r.name, escape.MAX_CELL)}: {cell(r.note, escape.MAX_PROSE)}"
                for r in unknown
            )
            env += (
                f"{len(unknown)} row(s) UNKNOWN, neither SAME nor DIFFERENT yet (more pairs, "
                f"--max-pairs, or a quieter runner decide them):\n{items}\n\n"
            )
        if self.env_diff:
            env += (
                "environment differences (from each run's fingerprint and record):\n"
                + render(["setting", "base", "head"], self.env_diff, fmt)
                + "\n"
            )
        # A --bench selection of a parametrised benchmark leaves its other parameters skipped on
        # both sides: dozens of rows that say nothing. They stay in --json.
        shown = [r for r in self.rows if r.verdict != compare.SKIPPED or compare.with_reason(r)]
        hidden = len(self.rows) - len(shown)
        if hidden and shown:
            footer += ("\n\n" if fmt == "markdown" else "\n") + (
                f"{hidden} row(s) skipped on both sides (n/a here, or not selected by --bench) "
                "are left out of the table; --json lists them"
            )
        else:
            shown = self.rows
        return env + table(shown, fmt, self.title, footer)


def _json_row(r: compare.Row) -> dict:
    """A row for --json; an answer row's exact mismatch (inf) is null there (JSON has no
    infinity; its note and `answer` say it)."""
    out = dataclasses.asdict(r)
    if answers.is_answer(r):
        for key in ("base", "head", "ratio"):
            if out[key] is not None and not math.isfinite(out[key]):
                out[key] = None
    return out


def verdict_counts(rows: list[compare.Row]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return counts


def by_history(rows: list[compare.Row]) -> int:
    """Judged rows whose threshold took their noise from the history into account."""
    return sum(r.verdict in compare.JUDGED and r.history_runs > 0 for r in rows)


def _reason(note: str) -> str:
    """A not-judged row's reason without its figures, to count rows by reason."""
    first = note.split(";")[0]
    kind = first.split(":")[0]
    if "between runs on this machine" in first:
        noisier = ", a run noisier than its history" if "noisier than its history" in note else ""
        return f"{kind}: moves more than the cap between runs{noisier}"
    if "comparable run(s) of it" in first:
        return f"{kind}: no calibrated noise band, too few runs in the history"
    return re.sub(r"\d+(\.\d+)?%", "N%", first).strip()


SHOWN = 3  # failed benchmarks and regressions named in the summary line; the table has them all


def failures_first(rows: list[compare.Row]) -> str:
    """Where benchmarks failed or are on one side only (exit 2): how many, the failed ones named
    with their errors, and every judged regression among the rows both sides have (which alone
    would exit 1), named with its change. "" where nothing failed or is missing."""
    failed = [r for r in rows if r.verdict == compare.FAILED]
    missing = sum(r.verdict == compare.MISSING for r in rows)
    if not (failed or missing):
        return ""

    def name(r: compare.Row) -> str:
        return escape.terminal(r.name, 100)

    parts = []
    if failed:
        shown = "; ".join(
            f"{name(r)}: {escape.terminal(_error_of(r.note), 120)}" for r in failed[:SHOWN]
        )
        more = f"; +{len(failed) - SHOWN} more" if len(failed) > SHOWN else ""
        parts.append(f"{len(failed)} FAILED ({shown}{more})")
    if missing:
        parts.append(f"{missing} MISSING on one side")
    regressed = [r for r in rows if r.verdict == compare.REGRESSION]
    if regressed:
        shown = ", ".join(
            name(r) + (f" ({r.ratio - 1:+.1%})" if r.ratio is not None else "")
            for r in regressed[:SHOWN]
        )
        more = f", +{len(regressed) - SHOWN} more" if len(regressed) > SHOWN else ""
        parts.append(
            f"and {len(regressed)} REGRESSION among the rows both sides have (exit "
            f"{exits.REGRESSION} on its own): {shown}{more}"
        )
    else:
        parts.append("no REGRESSION among the rows both sides have")
    return ", ".join(parts[:-1]) + ("; " if len(parts) > 1 else "") + parts[-1]


def _error_of(note: str) -> str:
    """A FAILED row's error from its note (`benchmark failed on head: ERROR; not in base`)."""
    _, _, after = note.partition(": ")
    return after.split("; not in ")[0] if after else "see asv's output for that run"


def tally(rows: list[compare.Row]) -> str:
    """`12 judged (11 ok, 1 REGRESSION); 16 not judged (raw time: no calibrated noise band);
    3 skipped; answers: 24 same, 1 WRONG, 2 n/a`: judged rows first, then the rest with their
    reasons, then the answer rows, counted apart (harness.verdict.answers)."""
    said = answers.tally(rows)
    timing = [r for r in rows if not answers.is_answer(r)]
    if said and not timing:
        return said
    rows = timing
    counts = verdict_counts(rows)
    judged = {v: counts[v] for v in compare.JUDGED if v in counts}
    learned = by_history(rows)
    details = [f"{n} {v}" for v, n in judged.items()]
    details += [f"{learned} by history noise"] if learned else []
    parts = [f"{sum(judged.values())} judged" + (f" ({', '.join(details)})" if details else "")]
    if compare.UNKNOWN in counts:
        parts.append(f"{counts[compare.UNKNOWN]} UNKNOWN (more pairs or a quieter runner decide)")
    not_judged = [r for r in rows if r.verdict == compare.NOT_JUDGED]
    if not_judged:
        reasons: dict[str, int] = {}
        for r in not_judged:
            reasons[_reason(r.note)] = reasons.get(_reason(r.note), 0) + 1
        why = ", ".join(f"{why} {n}" if len(reasons) > 1 else why for why, n in reasons.items())
        why = escape.terminal(why, escape.MAX_PROSE)  # a note's first part may quote a record
        parts.append(f"{len(not_judged)} not judged ({why})")
    rest = {
        v: n
        for v, n in counts.items()
        if v not in (*compare.JUDGED, compare.UNKNOWN, compare.NOT_JUDGED)
    }
    parts += [f"{n} {v}" for v, n in sorted(rest.items())]
    return "; ".join(parts + ([said] if said else []))


def ab_pairs(base: ResultSet, head: ResultSet) -> dict | None:
    """The per-pair values of the `harness ab` run these two records are the sides of (kept in
    the head record, naming its base), or None for any other two runs."""
    from harness.core import records

    rb, rh = records.record_of(base.path), records.record_of(head.path)
    data = records.read_ab_pairs(rh.path) if rb and rh else None
    if not data or data.get("base_run") != rb.run_id:
        return None
    return {row: [tuple(p) for p in pairs] for row, pairs in data["pairs"].items()}


def exit_code(rows: list[compare.Row]) -> int:
    """The most serious code the rows call for (3 > 2 > 1 > 6 > 0); rows compared but none
    judged is undecided (6), not a pass."""
    code = max(
        (CODE_OF.get(r.verdict, exits.PASS) for r in rows), key=exits.severity, default=exits.PASS
    )
    if code == exits.PASS and not any(r.verdict in compare.JUDGED for r in rows):
        return exits.UNDECIDED
    return code


def run_gate(
    base_spec: str,
    head_spec: str,
    *,
    root=None,
    machine: str | None = None,
    threshold: float = compare.DEFAULT_THRESHOLD,
    alpha: float = compare.DEFAULT_ALPHA,
    noise_file: str | None = None,
    only: list[str] | None = None,
    allow_env_change: bool = False,
    instruction_tolerance: float = metrics.INSTRUCTION_TOLERANCE,
    ab_threshold: float = between.DEFAULT_THRESHOLD,
    history: bool = True,
    history_last: int = noise.DEFAULT_LAST,
) -> Outcome:
    """Resolve, load and compare; bad input comes back as an Outcome with code 3, not raised.
    Two sides of one `harness ab` run (the head record keeps the per-pair values, naming its
    base) get their raw and normalised rows judged across processes (harness.verdict.between),
    SAME / DIFFERENT / UNKNOWN within +-ab_threshold. `history`: judge statistical rows with
    their noise between runs learned from the machine's newest `history_last` clean runs
    (harness.verdict.noise) where it has enough of them."""
    try:
        root = results_root(root)
        head_file = resolve(head_spec, root, machine)
        head = load(head_file)
        base_file = resolve(base_spec, root, machine or head.machine)
        if pathlib.Path(base_file).resolve() == pathlib.Path(head_file).resolve():
            raise BadInput(
                f"BASE {base_spec!r} and HEAD {head_spec!r} name the same run ({head_file}): a "
                "run compared with itself cannot fail; name two runs"
            )
        base = load(base_file)
        provenance.refuse_dirty_sides(
            [("base", base.dirty, base_spec), ("head", head.dirty, head_spec)]
        )
        same_runner(base, head)
        why = not_comparable(base, head)
        if why and not allow_env_change:
            raise BadInput(
                f"not comparable: {'; '.join(why)} (base {base.path}, head {head.path}); "
                "timings do not compare across these (--allow-env-change to compare anyway)"
            )
        npath = pathlib.Path(noise_file) if noise_file else noise_path(root, head.machine)
        bands = load_noise(npath)
        if only:
            known = set(base.entries) | set(head.entries)
            unknown = [o for o in only if not any(compare.selects(o, n) for n in known)]
            if unknown:
                raise BadInput(
                    f"--bench {', '.join(map(repr, unknown))} matches no benchmark of "
                    f"{base.path} or {head.path}; {compare.could_match(known)}"
                )
        pairs = ab_pairs(base, head)
        # the two sides of an ab run are judged across their pairs, not by the history
        learned = learn(root, base, head, history_last) if history and pairs is None else None
    except BadInput as exc:
        return Outcome(exits.BAD_INPUT, [], message=str(exc))
    rows = compare.compare(
        base, head, threshold, alpha, bands, only, instruction_tolerance, learned=learned
    )
    if pairs is not None:
        rows = between.judge(rows, pairs, ab_threshold)
    code = exit_code(rows)
    message = ""
    if all(r.verdict == compare.SKIPPED for r in rows):
        code, message = (
            exits.BAD_INPUT,
            "nothing was compared: every benchmark was skipped on both sides",
        )
    elif not any(
        (r.name in base.entries and r.name in head.entries) or r.answer for r in rows
    ):  # an answer row of the head is judged alone
        code, message = exits.BAD_INPUT, "nothing was compared: no benchmark is on both sides"
    elif code == exits.UNDECIDED and any(r.verdict == compare.UNKNOWN for r in rows):
        message = (
            "undecided: rows judged across processes are still UNKNOWN (listed above); more "
            "pairs (--max-pairs) or a quieter runner decide them"
        )
    elif code == exits.UNDECIDED:
        message = (
            "undecided: no row was judged (see each row's note; raw times need a calibrated noise "
            "band, or compare with `harness ab`, which judges them across processes)"
        )
    wide = [
        r
        for r in rows
        if r.threshold and r.unit not in ("bytes", "instructions") and r.threshold > 2 * threshold
    ]
    # a built-in drift allowance is the row's own, measured; a wide calibrated band is the
    # machine's; a wide history threshold is what this machine's runs move by
    built_in = [r.name for r in wide if r.basis == "drift"]
    banded = [r.name for r in wide if r.basis == "band"]
    learned_wide = [r.name for r in wide if r.basis == "history"]
    if banded:
        message = (message + "\n" if message else "") + (
            f"warning: calibrated noise bands above {2 * threshold:.0%} hide smaller timing "
            f"changes for: {', '.join(banded)} (counters are still exact); recalibrate on a "
            "quieter machine"
        )
    if built_in:
        message = (message + "\n" if message else "") + (
            f"note: built-in drift allowances above {2 * threshold:.0%} (harness.verdict.metrics."
            f"DRIFT_ALLOWANCE: these ratios move that much between identical runs) hide smaller "
            f"timing changes for: {', '.join(built_in)} (counters are still exact)"
        )
    if learned_wide:
        few = ", ".join(learned_wide[:5]) + (
            f" and {len(learned_wide) - 5} more" if len(learned_wide) > 5 else ""
        )
        message = (message + "\n" if message else "") + (
            f"note: {len(learned_wide)} row(s) move so much between runs on this machine that "
            f"their thresholds from its history pass {2 * threshold:.0%}, hiding smaller "
            f"changes: {few} (`harness noise` lists each row's threshold)"
        )
    dirty = dirty_note(base, head)
    if dirty:
        message = (message + "\n" if message else "") + dirty
    return Outcome(code, rows, base, head, message, environment_differences(base, head), learned)


def learn(root, base: ResultSet, head: ResultSet, last: int) -> noise.Learned | None:
    """The noise between runs of head's machine, from its history in head's mode (never the two
    runs judged), and each side's state against it; None for runs outside run records."""
    from harness.core import records

    rh, rb = records.record_of(head.path), records.record_of(base.path)
    if head.runner != "asv" or rh is None:
        return None
    exclude = frozenset(str(r.path) for r in (rb, rh) if r) | {r.run_id for r in (rb, rh) if r}
    want = noise.Wanted(head.machine, noise.mode_of(rh.meta), head, exclude, last)
    names = {n for n in set(base.entries) & set(head.entries)}
    hist = noise.learn(root, want, only=names)
    return noise.Learned(hist, (hist.state(base), hist.state(head)))


def dirty_note(base: ResultSet, head: ResultSet) -> str:
    """What a comparison with a run of uncommitted code says (it still judges every row)."""
    sides = [side for side, rs in (("base", base), ("head", head)) if rs.dirty]
    if not sides:
        return ""
    which = " and ".join(sides)
    return (
        f"note: {which} measured a working tree that differed from its commit (marked dirty "
        f"above): {'their' if len(sides) > 1 else 'its'} figures are of uncommitted code, not "
        f"of the commit named; the rows are judged all the same "
        f"({settings.REFUSE_DIRTY.name}=1 refuses such runs)"
    )
