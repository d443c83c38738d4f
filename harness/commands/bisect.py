"""`harness bisect GOOD BAD --bench REGEX`: the first commit whose selected rows differ from
GOOD's, each commit measured as `harness ab` measures a side (see harness.runs.bisect).
Exit 0 the first bad commit named (or no difference between the ends), 6 a range left by
skipped or UNKNOWN commits or the budget, 3 bad input."""

import dataclasses
import sys

from harness.commands import options


def add_arguments(parser):
    parser.add_argument("good", help="a git revision where the rows are as they should be")
    parser.add_argument("bad", help="a later git revision (GOOD in its history) where they moved")
    options.suites(parser)
    parser.add_argument(
        "--bench",
        action="append",
        required=True,
        metavar="REGEX",
        help="the rows to bisect on: benchmarks whose full name the regex is found in "
        "(repeatable; anchor it, ^name$, for one row)",
    )
    parser.add_argument(
        "--max-pairs",
        type=int,
        default=20,
        metavar="N",
        help="timing rows: the most pairs of processes a commit gets while rows are UNKNOWN "
        "(default 20); exact counters and instruction counts take one process a commit",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        metavar="FRACTION",
        help="timing rows judged across processes are SAME within +-FRACTION, DIFFERENT "
        "beyond it (default 0.02, as harness ab)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="bound the search; when it runs out, the narrowed range is reported (exit 6)",
    )
    parser.add_argument(
        "--full", action="store_true", help="full sizes (default: fast, asv --quick)"
    )
    parser.add_argument("--threads", metavar="N", help="CPU threads (default 1; all with --full)")
    parser.add_argument("--json", metavar="FILE", help="also write the answer as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the answer as Markdown")
    options.results_dir(parser)
    options.machine(parser)


def run(args) -> int:
    import time

    started = time.perf_counter()  # --budget counts the checks before the search too
    from harness.core.exits import BadInput
    from harness.core.files import write_atomic, write_json_atomic
    from harness.core.project import head_commit, project_root
    from harness.measure.threads import parse_threads
    from harness.runs import ab, bisect, shard
    from harness.runs.bench import check_suites
    from harness.runs.spec import RunSpec
    from harness.verdict import between
    from harness.verdict.results import results_root

    if args.max_pairs < between.MIN_PAIRS:
        raise BadInput(f"--max-pairs must be at least {between.MIN_PAIRS}")
    threshold = between.DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    if not 0 < threshold < 1:
        raise BadInput(f"--threshold is a fraction (0.02 = 2%), got {threshold}")
    if args.budget is not None and args.budget <= 0:
        raise BadInput(f"--budget is a number of seconds above 0, got {args.budget}")
    project = project_root()
    root = results_root(args.results_dir)
    # bad revisions fail before anything runs
    good = bisect.resolve(project, args.good, "GOOD")
    bad = bisect.resolve(project, args.bad, "BAD")
    bisect.commits_between(project, good, bad)
    suites = check_suites(project, args.suite)
    spec = RunSpec.from_flags(
        quick=not args.full,
        full=args.full,
        threads=parse_threads(args.threads),
        suites=tuple(suites),
        benches=tuple(args.bench),
        machine=options.machine_name(args),
    )
    # a --bench regex that matches nothing is bad input naming what it could match (asv's
    # discovery over this checkout's suites); suites it matches nothing of are left out, so
    # no commit pays an asv process per such suite
    plan = shard.plan(project, spec, sha=head_commit(project), regexes=list(args.bench))
    matched = {name.split(".", 1)[0] for name in plan.selection}
    spec = dataclasses.replace(spec, suites=tuple(s for s in suites if s in matched))
    result = bisect.run(
        project,
        root,
        good,
        bad,
        spec,
        pairs=ab.Pairs(most=args.max_pairs, threshold=threshold),
        budget_s=args.budget,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
        started=started,
    )
    print(bisect.render(result), end="")
    print(
        f"bisect: exit {result.code}; {result.seconds:.0f} s; run records labelled "
        f"bisect.{good[:8]}.{bad[:8]} under {root / 'runs'} (a rerun reuses them)"
    )
    if args.markdown:
        write_atomic(args.markdown, bisect.render(result, "markdown"))
    if args.json:
        write_json_atomic(args.json, bisect.as_json(result))
    return result.code
