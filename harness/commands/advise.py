"""`harness advise [RUN]`: what each performance tip is worth on this machine, read from a run's
paired ratio rows (harness.verdict.advice). Reruns nothing; exit 0, or 3 for bad input."""

from harness.commands import options


def add_arguments(parser):
    parser.add_argument(
        "run",
        nargs="?",
        default="latest",
        help="the run to read: run id (or prefix), run-record folder, result file, "
        "commit, `latest` (default) or `baseline[:MACHINE]`",
    )
    options.results_dir(parser)
    parser.add_argument(
        "--machine", help="machine name for run ids, commits and latest (default: the only one)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the verdicts as JSON")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=None,
        metavar="FRACTION",
        help="smallest effect called helps/hurts (default 0.05: 5%%)",
    )


def run(args) -> int:
    from harness.core.exits import BadInput
    from harness.core.files import write_json_atomic
    from harness.core.table import render
    from harness.verdict import advice
    from harness.verdict.results import load, resolve, results_root

    tolerance = advice.TOLERANCE if args.tolerance is None else args.tolerance
    if not 0 <= tolerance < 1:
        raise BadInput(f"--tolerance must be a fraction in [0, 1), got {args.tolerance}")
    root = results_root(args.results_dir)
    if args.run == "latest" and not (root / "runs").is_dir() and not (root / "asv").is_dir():
        raise BadInput(
            f"no runs under {root}: run `harness bench` first, or name the results "
            "root with --results-dir"
        )
    rs = load(resolve(args.run, root, args.machine))
    options.load_models()  # the sizes of the project's own models
    if rs.runner != "asv":
        raise BadInput(
            f"{rs.path}: harness advise reads asv runs (harness bench); this is a "
            f"{rs.runner} save, whose rows carry other names"
        )
    result = advice.advise(rs, tolerance)
    print(advice.header(result))
    print(render(advice.HEADERS, advice.rows(result)).rstrip("\n"))
    if args.json:
        write_json_atomic(args.json, advice.to_json(result))
        print(f"advice written to {args.json}")
    return 0
