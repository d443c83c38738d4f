"""`harness ab BASE HEAD`: PR gating with both sides run in this job, in pairs of processes that
take turns row by row (see harness.runs.ab). BASE and HEAD: a git revision of this checkout, or a
Python interpreter."""

import sys

from harness.commands import options


def _assignments(pairs: list[str] | None, flag: str) -> dict[str, str]:
    from harness.core.exits import BadInput

    out = {}
    for item in pairs or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"{flag} takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def add_arguments(parser):
    parser.add_argument(
        "base", help="git revision (commit, branch, tag, HEAD~1) or a Python interpreter"
    )
    parser.add_argument("head", help="same forms as BASE")
    options.suites(parser)
    parser.add_argument(
        "--bench",
        action="append",
        metavar="REGEX",
        help="only benchmarks whose full name matches (repeatable, as asv's --bench)",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        metavar="N",
        help="a fixed number of pairs per suite, the sides taking turns row by row (default: "
        "pairs are added until every row judged across processes is SAME or DIFFERENT, up to "
        "--max-pairs)",
    )
    parser.add_argument(
        "--max-pairs",
        type=int,
        default=20,
        metavar="N",
        help="the most pairs a suite gets while rows are UNKNOWN (default 20; fewer when the "
        "rows left need far more at the spread seen)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        metavar="FRACTION",
        help="rows judged across processes (raw and normalised times) are SAME when the per-pair "
        "ratios' 99%% interval lies within +-FRACTION, DIFFERENT when wholly beyond it (default "
        "0.02)",
    )
    parser.add_argument(
        "--duet",
        action="store_true",
        help="run both sides of a pair at the same time, each pinned to its own half of the CPUs "
        "with one thread (swapped every pair), so interference hits both alike",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the verdicts as JSON")
    parser.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="bound the whole run; suites that do not fit are left out and named",
    )
    parser.add_argument(
        "--full", action="store_true", help="full sizes (default: fast, asv --quick)"
    )
    parser.add_argument(
        "--threads", metavar="N", help="CPU threads for both sides (default 1; all with --full)"
    )
    parser.add_argument(
        "--base-env",
        action="append",
        metavar="KEY=VALUE",
        help="environment for BASE's benchmark processes only (e.g. a torch flag)",
    )
    parser.add_argument(
        "--head-env",
        action="append",
        metavar="KEY=VALUE",
        help="environment for HEAD's benchmark processes only",
    )
    parser.add_argument("--markdown", metavar="FILE", help="also write the gate table as Markdown")
    options.results_dir(parser)
    options.machine(parser)


def run(args) -> int:
    from harness.core.exits import BadInput
    from harness.core.files import write_atomic
    from harness.core.project import project_root
    from harness.measure.threads import parse_threads
    from harness.runs import ab
    from harness.runs.bench import check_suites
    from harness.runs.spec import RunSpec
    from harness.verdict import between
    from harness.verdict.gate import run_gate
    from harness.verdict.results import results_root

    if args.pairs is not None and args.pairs < 1:
        raise BadInput("--pairs must be at least 1")
    if args.max_pairs < between.MIN_PAIRS:
        raise BadInput(f"--max-pairs must be at least {between.MIN_PAIRS}")
    if args.pairs is not None and args.pairs < ab.MIN_PAIRS:
        print(
            f"harness ab: warning: {args.pairs} pairs; at least {ab.MIN_PAIRS} give the statistics "
            "enough to decide",
            file=sys.stderr,
        )
    threshold = between.DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    if not 0 < threshold < 1:
        raise BadInput(f"--threshold is a fraction (0.02 = 2%), got {threshold}")
    if args.duet and ab.duet_cpus() is None:
        raise BadInput("--duet needs at least 2 CPUs (one set per side); this process has 1")
    policy = ab.Pairs(args.pairs, args.max_pairs, threshold, args.duet)
    project = project_root()
    root = results_root(args.results_dir)
    suites = check_suites(project, args.suite)
    envs = {
        "base": _assignments(args.base_env, "--base-env"),
        "head": _assignments(args.head_env, "--head-env"),
    }
    threads = parse_threads(args.threads)
    if args.duet and threads not in (None, 1):
        raise BadInput("--duet runs one thread a side; leave --threads out")
    spec = RunSpec.from_flags(
        quick=not args.full,
        full=args.full,
        threads=1 if args.duet else threads,
        suites=tuple(suites),
        benches=tuple(args.bench or ()),
        machine=options.machine_name(args),
    )
    out = ab.run(
        project,
        root,
        {"base": args.base, "head": args.head},
        spec,
        pairs=policy,
        budget_s=args.budget,
        envs=envs,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    base, head = out["records"]["base"], out["records"]["head"]
    # judged across its own processes, not by the machine's history
    outcome = run_gate(
        str(base.path), str(head.path), root=root, ab_threshold=threshold, history=False
    )
    print(outcome.render("text"), end="")
    print(
        f"ab: ran {ab.what_ran(out, outcome.rows, policy)}; {out['seconds']:.0f} s; runs kept as "
        f"{base.path} and {head.path}"
    )
    if out["left_out"]:
        print(
            f"ab: left out to stay within --budget {args.budget:.0f} s: suites "
            f"{', '.join(out['left_out'])}"
        )
    if args.markdown:
        write_atomic(args.markdown, outcome.render("markdown"))
    if args.json:
        from harness.core.files import write_json_atomic

        data = outcome.as_json()
        data["ab"] = {
            "policy": policy.describe(),
            "pairs": out["pairs"],
            "counted_once": out["counted"],
            "seconds": out["seconds"],
            "threshold": threshold,
            "left_out": out["left_out"],
        }
        write_json_atomic(args.json, data)
    return outcome.code
