"""What would judge a row the gate does not judge, said in the row's note.

A raw or reference-normalised time on a shared runner is shown, not judged, until a noise band
is calibrated (harness.verdict.compare). Three things judge the same question instead:
- the same model's instruction row (instructions suite: `<model>_inference`,
  `<model>_training_step`, and for compile times `<model>_compile`), judged on any runner;
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
    """The instruction key that counts what a timing row times, where there is one."""
    suffix = _BY_BENCHMARK.get(name.split("(")[0])
    m = _FIRST_PARAM.search(name)
    if suffix and m:
        return f"{m['model']}_{suffix}"
    return None


def annotate(rows: list, not_judged: str) -> list:
    """Every row whose verdict is `not_judged` (harness.verdict.compare.Row), its note extended
    with what would judge it (in place; returned)."""
    by_name = {r.name: r for r in rows}
    compiles = sorted(
        r.name for r in rows if r.name.startswith("instructions.") and "_compile'" in r.name
    )
    for row in rows:
        # the raw and reference-normalised rules' rows (a GPU-time row's note says its own why)
        if row.verdict != not_judged or "noise band" not in row.note.split(";")[0]:
            continue
        key = instruction_key(row.name)
        options = []
        if key:
            other = by_name.get(INSTRUCTION_ROW.format(key=key))
            options.append(
                f"its instruction row '{key}'"
                + (f" ({other.verdict})" if other else " (instructions suite, not in this run)")
            )
        elif _COMPILE_TIME.search(row.name):
            options.append(
                "compile instructions ("
                + (
                    ", ".join(f"{_key(n)} {by_name[n].verdict}" for n in compiles)
                    if compiles
                    else "the instructions suite's <model>_compile rows, not in this run"
                )
                + ")"
            )
        options.append(OTHERS)
        said = "; judged instead by " + ", or ".join(options)
        label = f"; {row.device}" if row.device else ""
        if label and row.note.endswith(label):  # the device label stays last
            row.note = row.note[: -len(label)] + said + label
        else:
            row.note += said
    return rows


def _key(name: str) -> str:
    m = re.search(r"\('([^']*)'\)", name)
    return f"'{m[1]}'" if m else name
