"""`harness graph-diff BASE HEAD`: what another torch build (or commit) changed in every model's
graphs, under every front end (see harness.runs.graphdiff)."""

import sys

from harness.commands import options


def add_arguments(parser):
    parser.add_argument(
        "base", help="a Python interpreter (a venv with another torch) or a git revision"
    )
    parser.add_argument("head", help="same forms as BASE")
    parser.add_argument(
        "--model", action="append", metavar="NAME", help="only these models (repeatable)"
    )
    parser.add_argument(
        "--frontend",
        action="append",
        metavar="F",
        help="only these front ends (repeatable): jit, fx, export, dynamo, aot",
    )
    parser.add_argument(
        "--full", action="store_true", help="full model sizes (default: small, as the goldens)"
    )
    parser.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown")
    parser.add_argument("--json", metavar="FILE", help="also write the comparison as JSON")
    options.project(parser)


def run(args) -> int:
    from harness.core.exits import BadInput
    from harness.core.files import write_atomic, write_json_atomic
    from harness.core.project import project_root
    from harness.golden import graphdiff
    from harness.golden.capture import FRONTENDS
    from harness.runs import graphdiff as runner

    unknown = [f for f in args.frontend or () if f not in FRONTENDS]
    if unknown:
        raise BadInput(f"unknown front end {unknown[0]!r}; choose from {', '.join(FRONTENDS)}")
    _, sides, rows, seconds = runner.run(
        project_root(),
        {"base": args.base, "head": args.head},
        "full" if args.full else "small",
        args.model,
        args.frontend,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    if not rows:
        raise BadInput("no model was captured on either side: is any model registered?")
    print(graphdiff.render(rows, sides), end="")
    code = graphdiff.exit_code(rows)
    print(f"graph-diff: exit {code}; {seconds:.0f} s")
    if args.markdown:
        write_atomic(args.markdown, graphdiff.render(rows, sides, "markdown"))
    if args.json:
        data = graphdiff.as_json(rows, sides)
        data["seconds"] = round(seconds, 1)
        write_json_atomic(args.json, data)
    return code
