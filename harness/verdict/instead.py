"""What would judge a row the gate does not judge, said in the row's note.

A raw or reference-normalised time on a shared runner is shown, not judged, until a noise band
is calibrated (harness.verdict.compare). Three things judge the same question instead:
- the same model's instruction row (instructions suite: `<model>_inference`,
  `<model>_training_step` for its default set-up, and for a model's compile time
  `<model>_compile`), or the row a project's own instruction workload says it stands for
  (`InstructionWorkload(times=...)`, kept in its summary), judged on any runner;
- `harness calibrate` on a dedicated runner, whose narrow noise band makes the raw time judged;
- `harness ab BASE HEAD`, which alternates both sides' processes and judges raw times from the
  per-pair ratios.
The note names the instruction row with its verdict where the comparison holds it.
"""

from __future__ import annotations

import re

INSTRUCTION_ROW = "instructions.InstructionsPerCall.track_instructions({key!r})"
_FIRST_PARAM = re.compile(r"\(\s*'(?P<model>[^']*)'")
# a timing row's benchmark (the name without parameters) -> the instruction key's suffix
_BY_BENCHMARK = {
    "models.Inference.track_inference_time": "inference",
    "models.Inference.track_inference_time_over_reference": "inference",
    "models.TrainingStep.track_step_time": "training_step",
    "models.TrainingStep.track_step_time_over_reference": "training_step",
}
_COMPILE_TIME = re.compile(r"\.track(_cold)?_compile_time\b")
OTHERS = "`harness calibrate` (a dedicated runner) or `harness ab` (interleaved processes)"


def instruction_key(name: str) -> str | None:
    """The instruction key that counts what a timing row times, where there is one: a model's
    inference or training step in its default set-up (an instruction row counts the model as
    built, contiguous: a row timing another layout or setting has none)."""
    suffix = _BY_BENCHMARK.get(name.split("(")[0])
    m = _FIRST_PARAM.search(name)
    if suffix and m and "True" not in name[m.end() :]:
        return f"{m['model']}_{suffix}"
    return None


def compile_key(name: str) -> str | None:
    """A compile-time row's compile instruction key, where it compiles a model (its first
    parameter); the fusion suite's programs (a pointwise chain, a block) have none."""
    m = _FIRST_PARAM.search(name)
    return f"{m['model']}_compile" if m and _COMPILE_TIME.search(name) else None


def declared(*summaries: dict[str, dict]) -> dict[str, str]:
    """Timing benchmark (its name without parameters) -> the instruction key a project's own
    workload declared it times (its summary's `times`); a later side's declaration wins."""
    out = {}
    for rows in summaries:
        for summary in rows.values():
            for timed in summary.get("times") or ():
                if isinstance(timed, str) and summary.get("workload"):
                    out[timed] = summary["workload"]
    return out


def annotate(
    rows: list, not_judged: str, held: set[str] = frozenset(), own: dict[str, str] | None = None
) -> list:
    """Every row whose verdict is `not_judged` (harness.verdict.compare.Row), its note extended
    with what would judge it (in place; returned). `held`: the rows both sides hold, including
    those a --bench selection left out of `rows`; `own`: declared()'s timing rows."""
    own = own or {}
    by_name = {r.name: r for r in rows}
    for row in rows:
        # the raw and reference-normalised rules' rows (a GPU-time row's note says its own why)
        if row.verdict != not_judged or "noise band" not in row.note.split(";")[0]:
            continue
        options = []
        key = instruction_key(row.name) or compile_key(row.name) or own.get(row.name.split("(")[0])
        other = INSTRUCTION_ROW.format(key=key) if key else None
        if other in by_name:
            options.append(f"its instruction row '{key}' ({by_name[other].verdict})")
        elif other in held:
            options.append(f"its instruction row '{key}' (not selected by --bench)")
        elif key and instruction_key(row.name):  # every model has these two rows
            options.append(f"its instruction row '{key}' (instructions suite, not in this run)")
        options.append(OTHERS)
        said = "; judged instead by " + ", or ".join(options)
        label = f"; {row.device}" if row.device else ""
        if label and row.note.endswith(label):  # the device label stays last
            row.note = row.note[: -len(label)] + said + label
        else:
            row.note += said
    return rows
