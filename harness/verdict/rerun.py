"""The command that reruns one benchmark case alone: what `harness bench` prints beside a failed
case and the gate beside a WRONG answer (the answer check runs inside its timed row, so rerunning
that row reruns the check)."""

from __future__ import annotations

import re

from harness.core import escape

RERUN_LABEL = "rerun"


def rerun_command(name: str, flags: tuple[str, ...] = ()) -> str:
    """A shell line that runs one benchmark case alone: `harness bench` with the run's own
    flags (`flags`: mode, threads, machine, results root), the case's suite, the case's full name
    anchored and escaped as a --bench regex, asv's output (and the traceback) shown with -v; it
    keeps its run record, labelled RERUN_LABEL."""
    words = ["harness", "bench", *flags, "--suite", name.split(".", 1)[0]]
    words += ["--bench", f"^{re.escape(name)}$", "--label", RERUN_LABEL, "-v"]
    return escape.shell_join(words)
