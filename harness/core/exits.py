"""Exit codes of every `harness` command, and the errors that carry them (docs/gate.md).

A command raises one of these errors; `harness.cli.main` prints its message to stderr and returns
its code. Any other exception is an internal error: traceback on stderr, exit 70 — never 0 or 1,
which CI would read as "pass" or "regression".

When several apply, the most serious wins: 3 > 2 > 1 > 6 > 0 (severity()).
"""

from __future__ import annotations

PASS = 0  # pass / done
REGRESSION = 1  # regression (gate, ab), a new step (history, nightly), a failed check
FAILED = 2  # a benchmark failed, or is present on one side only
BAD_INPUT = 3  # unknown suite/model/benchmark, missing or corrupt file, not comparable
NO_GPU = 4  # no CUDA GPU where --require-gpu was given
RUNNER_FAILED = 5  # an external runner (asv run, asv publish, torchrun, git) failed
UNDECIDED = 6  # no row was judged, or ab rows were left UNKNOWN: not a pass
INTERNAL = 70  # an unexpected exception
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it
TERMINATED = 143  # SIGTERM (128 + SIGTERM): a CI timeout or a cancelled job
PIPE_CLOSED = 141  # the reader of stdout went away (`| head`), as SIGPIPE ends other programs

MEANING = {
    PASS: "pass",
    REGRESSION: "regression",
    FAILED: "benchmark failed or missing",
    BAD_INPUT: "bad input",
    NO_GPU: "no CUDA GPU",
    RUNNER_FAILED: "external runner failed",
    UNDECIDED: "undecided (no row judged, or rows left UNKNOWN)",
    INTERNAL: "internal error",
    INTERRUPTED: "interrupted (Ctrl-C)",
    TERMINATED: "terminated (SIGTERM)",
    PIPE_CLOSED: "output pipe closed",
}


class HarnessError(Exception):
    """An error a command reports with a clear message and a fixed exit code."""

    code = INTERNAL


class BadInput(HarnessError):
    """Input that cannot be used: the message names the file, model or benchmark and what to do."""

    code = BAD_INPUT


class NoGPU(HarnessError):
    code = NO_GPU


class RunnerFailed(HarnessError):
    code = RUNNER_FAILED


def guarded(name: str, fn) -> int:
    """`fn()`'s exit code, with every way out of it mapped onto this table: a HarnessError's code
    (its message on stderr), 130 for Ctrl-C, 143 for SIGTERM (raised as an interrupt carrying
    `exit_code`: harness.core.processes.Terminated), an internal error's traceback and 70."""
    import sys
    import traceback

    from harness.core.processes import check_terminated

    try:
        code = int(fn() or 0)
        check_terminated()  # a SIGTERM whose exception was swallowed still ends in 143
        return code
    except HarnessError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt as exc:
        code = getattr(exc, "exit_code", INTERRUPTED)
        print(f"{name}: {MEANING[code]}", file=sys.stderr)
        return code
    except BrokenPipeError:
        # not an error of ours: stop quietly, and keep Python's exit-time flush from failing too
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return PIPE_CLOSED
    except SystemExit as exc:  # --help and --version exit 0 through argparse
        return exc.code if isinstance(exc.code, int) else INTERNAL
    except Exception:
        traceback.print_exc()
        print(
            f"{name}: internal error (exit {INTERNAL}); please report the traceback above",
            file=sys.stderr,
        )
        return INTERNAL


# bad input beats a failed benchmark, which beats a regression; undecided only when nothing
# worse applies (interrupts and internal errors never meet these: they end the command)
_SEVERITY = [PASS, UNDECIDED, REGRESSION, FAILED, BAD_INPUT]


def severity(code: int) -> int:
    """Rank of an exit code for combining several findings: max(codes, key=severity)."""
    return _SEVERITY.index(code) if code in _SEVERITY else len(_SEVERITY)
