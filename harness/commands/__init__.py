"""One module per `harness` subcommand: argument wiring and printing only. Commands sit on top:
they import the jobs (golden, measure, verdict, runs) and the core, and nothing but harness.cli
imports them. This package also holds the list of commands and how a command's parser is built,
so that harness.cli (dispatch) and harness.commands.reference (docs/cli.md) build the same one.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from harness.core import exits

# name -> (module, one-line help). Order is the order shown by `harness --help`.
COMMANDS = {
    "init": (
        "harness.commands.init",
        "write a project of its own: models, golden tests, benchmarks, asv configuration",
    ),
    "models": ("harness.commands.models", "list the model zoo with parameter counts"),
    "graph": ("harness.commands.graph", "print a model's canonical graph for one front end"),
    "graph-diff": (
        "harness.commands.graph_diff",
        "what another torch build or commit changed in every model's graphs",
    ),
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
    "answers": (
        "harness.commands.answers",
        "one run's answer checks: pass / WRONG / fail_to_run per model; exit 1 on a WRONG",
    ),
    "ab": ("harness.commands.ab", "run BASE and HEAD alternately in this job, then gate them"),
    "bisect": (
        "harness.commands.bisect",
        "find the first commit between GOOD and BAD whose benchmark rows moved",
    ),
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
    "noise": (
        "harness.commands.noise",
        "each row's noise between runs, learned from the machine's history",
    ),
    "store": (
        "harness.commands.store",
        "push run records to a results history in git, or pull them from it",
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
    """argparse, but a usage error exits 3, bad input (harness/core/exits.py), not argparse's 2."""

    def error(self, message):
        self.print_usage(sys.stderr)
        raise exits.BadInput(message)


def command_parser(name: str):
    """(the command's module, its parser): the module is imported only now (and with it torch)."""
    module_name, help_ = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = Parser(prog=f"harness {name}", description=help_)
    module.add_arguments(parser)
    return module, parser


def top_parser() -> Parser:
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
