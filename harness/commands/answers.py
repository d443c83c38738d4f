"""`harness answers [RUN]`: one run's answer checks judged alone, the single-run form of the
gate's answer rows (harness.verdict.accuracy): per model pass / WRONG / fail_to_run, and per row.
Exit codes: 0 every judged answer the same, 1 a WRONG answer, 2 an answer check that failed to
run, 3 bad input, 6 no answer judged."""

from harness.commands import options


def add_arguments(parser):
    parser.add_argument(
        "run",
        nargs="?",
        default="latest",
        help="the run to read: run id (or prefix), run-record folder, result file, commit, "
        "`latest` (default) or `baseline[:MACHINE]`",
    )
    options.results_dir(parser)
    parser.add_argument(
        "--machine", help="machine name for run ids, commits and latest (default: the only one)"
    )
    parser.add_argument(
        "--suite",
        action="append",
        metavar="NAME",
        help="only the answer rows of this suite (repeatable); one without answer rows in the run "
        "is exit 3",
    )
    parser.add_argument(
        "--bench",
        action="append",
        metavar="REGEX",
        help="only the answer rows whose full name, or their timed row's, this regex is found in "
        "(repeatable); one matching none is exit 3",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the answers as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the tables as Markdown")


def run(args) -> int:
    from harness.core.exits import BadInput
    from harness.core.files import write_atomic, write_json_atomic
    from harness.verdict import accuracy
    from harness.verdict.results import load, param_names, resolve, results_root

    root = results_root(args.results_dir)
    if args.run == "latest" and not (root / "runs").is_dir() and not (root / "asv").is_dir():
        raise BadInput(
            f"no runs under {root}: run `harness bench` first, or name the results root with "
            "--results-dir"
        )
    rs = load(resolve(args.run, root, args.machine))
    found = accuracy.single(rs, args.bench, args.suite, param_names(rs))
    print(found.render("text"), end="")
    if args.markdown:
        write_atomic(args.markdown, found.render("markdown"))
    if args.json:
        write_json_atomic(args.json, found.as_json())
    return found.code
