"""The `harness` command. Each subcommand lives in the module that does its job; this file only
dispatches, importing that one module (and so torch) only when the subcommand runs.

Each command module provides `add_arguments(parser)` and `run(args) -> int` (the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Order is the order shown by `harness --help`.
COMMANDS = {
    "models": ("harness.commands.models", "list the model zoo with parameter counts"),
    "graph": ("harness.commands.graph", "print a model's canonical graph for one front end"),
    "env": ("harness.commands.env", "print the environment fingerprint"),
    "bench": ("harness.commands.bench", "run the asv benchmark suites and summarise key ratios"),
    "gate": ("harness.commands.gate", "compare two result sets; exit 1 on a regression"),
    "calibrate": ("harness.commands.calibrate", "measure per-benchmark noise bands (A/A runs)"),
    "report": ("harness.commands.report", "write a Markdown summary and plots"),
    "nightly": ("harness.commands.nightly", "run the full suites, save results, publish the dashboard"),
}


def _top_parser() -> argparse.ArgumentParser:
    epilog = "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="harness", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Graph goldens, benchmarks and a regression gate for PyTorch.",
        epilog="commands:\n" + epilog + "\n\nRun `harness COMMAND --help` for a command's options.")
    parser.add_argument("command", choices=list(COMMANDS), metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = _top_parser()
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        top.error(f"unknown command {argv[0]!r}; choose from {', '.join(COMMANDS)}")
    name, rest = argv[0], argv[1:]
    module_name, help_ = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"harness {name}", description=help_)
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
