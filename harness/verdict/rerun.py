"""The commands that rerun one benchmark case alone: what `harness bench` prints beside a failed
case (the case, timed again), and what the gate, `harness answers` and bench's block of wrong
answers print beside a WRONG or fail_to_run answer (the answer check alone, without the timing;
and the timed row, to reproduce its timing too)."""

from __future__ import annotations

import re

from harness.core import answerfacts, escape

RERUN_LABEL = "rerun"


def rerun_command(name: str, flags: tuple[str, ...] = ()) -> str:
    """A shell line that runs one benchmark case alone: `harness bench` with the run's own
    flags (`flags`: mode, threads, machine, results root), the case's suite, the case's full name
    anchored and escaped as a --bench regex, asv's output (and the traceback) shown with -v; it
    keeps its run record, labelled RERUN_LABEL."""
    words = ["harness", "bench", *flags, "--suite", name.split(".", 1)[0]]
    words += ["--bench", f"^{re.escape(name)}$", "--label", RERUN_LABEL, "-v"]
    return escape.shell_join(words)


# Paired benchmarks whose answer check runs inside a setup_cache, where they are measured
# (fusion.MemoryBandwidth's timing loop, the distributed suite's torchrun workers): `harness
# answers --rerun` cannot run it apart from the measurement, so their hint is the timed rerun
# (tests/test_answer_rerun.py holds this list against the suites' setup_caches).
CHECKED_WHERE_TIMED = ("fusion.MemoryBandwidth.", "distributed.")


def answer_rerun_command(row: str, flags: tuple[str, ...] = ()) -> str:
    """A shell line that reruns one paired row's answer check alone (`harness answers --rerun`,
    harness.runs.answercheck: in-process, without asv, warm-up or timing): the timed row's full
    name, the run's sizes (`--full` for a full run, else `--quick`: a fast run checks at the
    quick sizes) and, from the run's `flags` (as rerun_command's), its threads and project. A row
    checked where it is timed (CHECKED_WHERE_TIMED) gets rerun_command's line instead."""
    timed = answerfacts.timed_row(row)
    if timed.startswith(CHECKED_WHERE_TIMED):
        return rerun_command(timed, flags)
    words = ["harness", "answers", "--rerun", timed]
    words.append("--full" if "--full" in flags else "--quick")
    for flag in ("--threads", "--project"):
        if flag in flags[:-1]:
            words += [flag, flags[flags.index(flag) + 1]]
    return escape.shell_join(words)
