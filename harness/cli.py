"""The `harness` command. Each subcommand lives in harness/commands/; this file only dispatches,
importing that one module (and so torch) only when the subcommand runs, and turns errors into the
exit codes of harness.core.exits (DECISIONS §5).

Each command module provides `add_arguments(parser)` and `run(args) -> int` (the exit code). A
command reports bad input by raising a HarnessError; anything else that escapes is an internal
error: traceback on stderr, exit 70 (never 0 or 1, which CI reads as pass or regression).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from harness.core import exits

# name -> (module, one-line help). Order is the order shown by `harness --help`.
COMMANDS = {
    "models": ("harness.commands.models", "list the model zoo with parameter counts"),
    "graph": ("harness.commands.graph", "print a model's canonical graph for one front end"),
    "env": ("harness.commands.env", "print the environment fingerprint"),
    "bench": ("harness.commands.bench", "run the asv benchmark suites and summarise key ratios"),
    "merge": (
        "harness.commands.merge",
        "combine shard runs of one machine and commit into one run record",
    ),
    "durations": (
        "harness.commands.durations",
        "refresh suites/durations.json (shard balance) from runs",
    ),
    "gate": ("harness.commands.gate", "compare two result sets; exit 1 on a regression"),
    "ab": ("harness.commands.ab", "run BASE and HEAD alternately in this job, then gate them"),
    "calibrate": ("harness.commands.calibrate", "measure per-benchmark noise bands (A/A runs)"),
    "report": ("harness.commands.report", "write a Markdown summary and plots"),
    "advise": (
        "harness.commands.advise",
        "what each performance tip is worth on this machine, from a run",
    ),
    "nightly": (
        "harness.commands.nightly",
        "run the full suites, save results, publish the dashboard",
    ),
    "history": (
        "harness.commands.history",
        "find steps in each benchmark's run history; exit 1 on a new one",
    ),
    "prune": (
        "harness.commands.prune",
        "remove old run records (dry run unless --yes; never baselines)",
    ),
    "check": (
        "harness.commands.check",
        "silent-bug checks on models and data pipelines; exit 1 on a failed check",
    ),
    "gpu-check": (
        "harness.commands.gpucheck",
        "the GPU proof kit: every GPU claim checked on a CUDA runner",
    ),
}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is bad input (exit 3), as DECISIONS §5 says, not argparse's 2."""

    def error(self, message):
        self.print_usage(sys.stderr)
        raise exits.BadInput(message)


def _top_parser() -> Parser:
    epilog = "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items())
    codes = "\n".join(f"  {code:<3} {meaning}" for code, meaning in exits.MEANING.items())
    parser = Parser(
        prog="harness",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Graph goldens, benchmarks and a regression gate for PyTorch.",
        epilog="commands:\n"
        + epilog
        + "\n\nexit codes:\n"
        + codes
        + "\n\nRun `harness COMMAND --help` for a command's options.",
    )
    parser.add_argument("command", choices=list(COMMANDS), metavar="COMMAND")
    return parser


def _run(argv: list[str]) -> int:
    top = _top_parser()
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return exits.PASS if argv else exits.BAD_INPUT
    if argv[0] not in COMMANDS:
        top.error(f"unknown command {argv[0]!r}; choose from {', '.join(COMMANDS)}")
    name, rest = argv[0], argv[1:]
    module_name, help_ = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = Parser(prog=f"harness {name}", description=help_)
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    from harness.commands.options import apply_project

    apply_project(args)
    return int(module.run(args) or 0)


def main(argv: list[str] | None = None) -> int:
    from harness.core.processes import terminate_as_interrupt

    argv = list(sys.argv[1:] if argv is None else argv)
    name = f"harness {argv[0]}" if argv and argv[0] in COMMANDS else "harness"
    # SIGTERM (a CI timeout, a cancelled job) unwinds like Ctrl-C: scratch folders and worktrees
    # are removed and the runners we started are ended (harness.core.processes)
    with terminate_as_interrupt():
        return exits.guarded(name, lambda: _run(argv))


if __name__ == "__main__":
    sys.exit(main())
