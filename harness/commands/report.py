"""`harness report`: Markdown summary and PNG plots (speedups per suite, a benchmark's history)."""

from harness.commands import options

REPORT_MARK = ".harness-report"


def add_arguments(parser):
    parser.add_argument(
        "result",
        nargs="?",
        default="latest",
        help="result set: file, directory, commit, `latest` (default) or `baseline`",
    )
    parser.add_argument("--out", help="output directory (default RESULTS/report)")
    parser.add_argument(
        "--history",
        action="append",
        metavar="NAME",
        help="also plot this benchmark's history over stored commits (repeatable)",
    )
    options.results_dir(parser)
    parser.add_argument("--machine", help="machine name for commits/latest (default: the only one)")
    options.pull(parser, "the newest 30 runs of --machine (default: this host's)")
    parser.add_argument(
        "--machines",
        metavar="A,B",
        help="several machines side by side: RESULT (default latest) of each "
        "machine, key ratios in one table and plot",
    )


def run(args) -> int:
    from harness.core.files import check_own_folder, mark_own_folder
    from harness.verdict.report import write_report
    from harness.verdict.results import load, resolve, results_root

    machines = [m.strip() for m in args.machines.split(",") if m.strip()] if args.machines else None
    pulled = options.pull_first(args, "report", machines)
    root = results_root(args.results_dir)
    # RESULTS/report is the harness's own; a folder given with --out must be new, empty or one
    # an earlier report filled, so that no file of someone else's is overwritten
    if args.machines:
        return _machines(args, root, pulled.markdown())
    rs = load(resolve(args.result, root, args.machine))
    options.load_models()  # the advice's sizes and the bands' model kinds (harness.core.zoo)
    out = check_own_folder(args.out, REPORT_MARK, "--out") if args.out else root / "report"
    md = write_report(rs, out, root, args.history, lead=pulled.markdown())
    if args.out:
        mark_own_folder(out, REPORT_MARK, "harness report")
    print(f"report written to {md}")
    return 0


def _machines(args, root, lead: str) -> int:
    from harness.core.exits import BadInput
    from harness.core.files import check_own_folder, mark_own_folder
    from harness.verdict.machines import write_machines_report
    from harness.verdict.results import load, resolve

    names = [m.strip() for m in args.machines.split(",") if m.strip()]
    if len(names) < 2 or len(set(names)) != len(names):
        raise BadInput(
            f"--machines {args.machines!r}: name two or more different machines, e.g. "
            "--machines host-cpu,host-NVIDIA_H100"
        )
    if args.machine or args.history:
        raise BadInput(
            "--machines goes without --machine and --history (one table of several machines)"
        )
    sets = [load(resolve(args.result, root, name)) for name in names]
    out = check_own_folder(args.out, REPORT_MARK, "--out") if args.out else root / "report"
    md, text = write_machines_report(sets, out, lead)
    if args.out:
        mark_own_folder(out, REPORT_MARK, "harness report")
    print(text, end="" if text.endswith("\n") else "\n")
    print(f"report written to {md}")
    return 0
