"""`harness report`: Markdown summary and PNG plots (speedups per suite, a benchmark's history)."""

import pathlib
import sys


def add_arguments(parser):
    parser.add_argument("result", nargs="?", default="latest",
                        help="result set: file, directory, commit, `latest` (default) or `baseline`")
    parser.add_argument("--out", help="output directory (default RESULTS/report)")
    parser.add_argument("--history", action="append", metavar="NAME",
                        help="also plot this benchmark's history over stored commits (repeatable)")
    parser.add_argument("--results-dir", help="root of results/ (default $HARNESS_RESULTS_DIR's parent or ./results)")
    parser.add_argument("--machine", help="machine name for commits/latest (default: the only one)")


def run(args) -> int:
    from harness.report import write_report
    from harness.results import BadInput, load, resolve, results_dir

    root = results_dir(args.results_dir)
    try:
        rs = load(resolve(args.result, root, args.machine))
        md = write_report(rs, pathlib.Path(args.out) if args.out else root / "report", root, args.history)
    except BadInput as exc:
        print(f"harness report: {exc}", file=sys.stderr)
        return 3
    print(f"report written to {md}")
    return 0
