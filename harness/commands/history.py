"""`harness history`: change points (steps) in every benchmark's series of runs, each explained by
what changed between the last run before and the first after (see harness.verdict.history).
Exit 0 no new step, 1 a new step, 3 bad input."""

from harness.commands import options


def add_arguments(parser):
    parser.add_argument(
        "--since",
        metavar="DATE",
        help="list only steps whose first run after started at or after DATE "
        "(ISO, e.g. 2026-11-30); the runs before still count as history",
    )
    parser.add_argument(
        "--bench",
        action="append",
        metavar="REGEX",
        help="only benchmarks whose full name this regular expression finds "
        "(repeatable); a pattern matching nothing exits 3",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="also write the steps as JSON (schema: harness.verdict.history.as_json)",
    )
    parser.add_argument("--markdown", metavar="FILE", help="also write the new steps as Markdown")
    parser.add_argument(
        "--min-side",
        type=int,
        metavar="N",
        help="runs needed on each side of a step before it is confirmed (default 4; "
        "below 4 only exact counters can step: the Mann-Whitney test of 2 or 3 "
        "runs a side cannot reach p < 0.05)",
    )
    options.results_dir(parser)
    parser.add_argument("--machine", help="machine name (default: every machine with runs)")
    options.pull(parser, "the newest 30 runs of --machine (default: this host's)")


def run(args) -> int:
    import json

    from harness.core import records
    from harness.core.exits import BadInput
    from harness.core.files import write_atomic
    from harness.verdict import history
    from harness.verdict.results import results_root

    pulled = options.pull_first(args, "history")
    root = results_root(args.results_dir)
    machines = [args.machine] if args.machine else records.machines(root)
    if not machines:
        raise BadInput(f"no run records under {records.runs_dir(root)}; run `harness bench` first")
    since = history.parse_since(args.since) if args.since else None
    found = [
        history.detect(
            root, m, args.bench, since, history.MIN_SIDE if args.min_side is None else args.min_side
        )
        for m in machines
    ]
    for h in found:
        print(history.render_text(h), end="")
    if args.json:
        write_atomic(
            args.json,
            json.dumps(
                {
                    "machines": [history.as_json(h) for h in found],
                    "exit_code": max(h.code for h in found),
                    **({"pull": pulled.as_json()} if pulled.asked else {}),
                },
                indent=2,
            )
            + "\n",
        )
    if args.markdown:
        body = "\n".join(history.render_markdown(h) for h in found)
        write_atomic(args.markdown, pulled.markdown() + body)
    return max(h.code for h in found)
