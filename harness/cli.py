"""The `harness` command. Each subcommand lives in harness/commands/; this file only dispatches,
importing that one module (and so torch) only when the subcommand runs, and turns errors into the
exit codes of harness.core.exits (docs/gate.md has the table). Its output passes
harness.core.escape's guard: no line of it is a GitHub workflow command.

Each command module provides `add_arguments(parser)` and `run(args) -> int` (the exit code). A
command reports bad input by raising a HarnessError; anything else that escapes is an internal
error: traceback on stderr, exit 70 (never 0 or 1, which CI reads as pass or regression).
"""

from __future__ import annotations

import sys

from harness.commands import COMMANDS, command_parser, top_parser
from harness.core import escape, exits


def _run(argv: list[str]) -> int:
    top = top_parser()
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return exits.PASS if argv else exits.BAD_INPUT
    if argv[0] not in COMMANDS:
        top.error(f"unknown command {argv[0]!r}; choose from {', '.join(COMMANDS)}")
    name, rest = argv[0], argv[1:]
    module, parser = command_parser(name)
    args = parser.parse_args(rest)
    from harness.commands.options import apply_project, check_machine_names

    apply_project(args)
    check_machine_names(args)
    return int(module.run(args) or 0)


def main(argv: list[str] | None = None) -> int:
    from harness.core.processes import terminate_as_interrupt

    argv = list(sys.argv[1:] if argv is None else argv)
    name = f"harness {argv[0]}" if argv and argv[0] in COMMANDS else "harness"
    # SIGTERM (a CI timeout, a cancelled job) unwinds like Ctrl-C: scratch folders and worktrees
    # are removed and the runners we started are ended (harness.core.processes). Every line
    # printed, ours or relayed from asv, passes a guard: what a record says (a benchmark name)
    # never becomes a control sequence or a GitHub workflow command (harness.core.escape).
    with terminate_as_interrupt(), escape.guarded_output():
        return exits.guarded(name, lambda: _run(argv))


if __name__ == "__main__":
    sys.exit(main())
