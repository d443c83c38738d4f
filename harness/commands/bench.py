"""`harness bench`: run the asv suites in this environment, save results, print key ratios."""

import dataclasses
import sys

from harness.commands import options
from harness.core import exits, settings


def add_arguments(parser):
    parser.add_argument(
        "--quick",
        action="store_true",
        help="asv --quick: one run per benchmark (our own >= 1 warm-up call is kept)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"full sizes and grids (sets {settings.FULL.name}=1 for every suite); default: fast",
    )
    parser.add_argument(
        "--threads",
        metavar="N",
        help="CPU threads for the whole run (torch.set_num_threads in every suite; "
        "recorded in the fingerprint); default 1, all cores with --full",
    )
    parser.add_argument(
        "--suite",
        action="append",
        metavar="NAME",
        help="suite to run (repeatable): a module in suites/benchmarks/ (the harness's), or in "
        "the benchmark folder of a project made by `harness init`; default all but the canary, "
        "and in such a project its own modules and the models suite over its models",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also store operator-level profile summaries in the run record "
        "(profiles.json; always done with --full): a few seconds per workload",
    )
    options.results_dir(parser)
    parser.add_argument(
        "--launch-method",
        choices=["auto", "spawn", "forkserver"],
        default="auto",
        help="asv launch method; auto: spawn on CUDA, forkserver on CPU",
    )
    options.machine(parser)
    parser.add_argument("--label", help="a word appended to the run id (e.g. nightly, base, head)")
    parser.add_argument(
        "--bench",
        action="append",
        metavar="REGEX",
        help="only benchmark cases whose full asv name this regex is found in "
        "(repeatable, as asv's --bench); one matching nothing is exit 3",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="print the benchmarks that would run, one full asv name per line "
        "(nothing else on stdout), and exit without running",
    )
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help="run (or --list) only share K of N; the split depends only on the "
        "benchmark names and the durations file, so every runner computes the same",
    )
    parser.add_argument(
        "--durations",
        metavar="FILE",
        help="seconds per benchmark for balancing shards (default suites/durations.json, "
        "overlaid by a project's own durations.json; refresh with `harness durations RUN`)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="with --list: write the selection, every shard and predicted seconds",
    )
    parser.add_argument(
        "--short",
        action="store_true",
        help="the main job's short selection (what `./dev bench` runs): one or two representative "
        "rows of every area, declared in harness.runs.bench.SHORT; `--list --short` shows it",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show asv's output as it runs (default: one line per benchmark; asv's whole "
        "output is kept in the run record's asv.log either way)",
    )


def run(args) -> int:
    from harness.core import provenance
    from harness.core.project import head_commit, project_root
    from harness.measure.threads import parse_threads
    from harness.runs import bench
    from harness.runs.spec import RunSpec
    from harness.verdict.results import results_root

    project = project_root()
    root = results_root(args.results_dir)
    if args.short:
        if args.bench or args.shard is not None:
            raise exits.BadInput("--short picks its own rows; leave out --bench and --shard")
        args.suite = args.suite or list(dict.fromkeys(area for area, _ in bench.SHORT))
        args.bench = [regex for area, regex in bench.SHORT if area in args.suite]
        if not args.bench:
            raise exits.BadInput(
                f"--short has no rows in suite(s) {', '.join(args.suite)}; its areas: "
                f"{', '.join(dict.fromkeys(area for area, _ in bench.SHORT))}"
            )
    names = bench.check_suites(project, args.suite)  # bad names fail before anything is written
    bench.check_models(project)  # a models module that does not import: one line, exit 3
    threads = parse_threads(args.threads)
    sha = head_commit(project)
    # dirty or not (refused here with HARNESS_REFUSE_DIRTY); a --list runs nothing
    tree = None if args.list else provenance.for_run(project)
    if args.json and not args.list:
        raise exits.BadInput(
            "--json FILE goes with --list (the run's results are in its run record)"
        )
    spec = RunSpec.from_flags(
        quick=args.quick,
        full=args.full,
        threads=threads,
        suites=tuple(names),
        machine=options.machine_name(args),
        label=args.label,
    )
    plan = None
    if args.short and not args.list:
        # a declared list whose every regex a test matches: no discovery pass to check it
        spec = dataclasses.replace(spec, benches=tuple(args.bench))
    elif args.list or args.shard is not None or args.bench:
        plan = _plan(args, project, spec, sha)
        if args.list:
            return _print_list(plan, args.json, (root, spec.machine))
        if not plan.chosen:
            print(
                f"harness bench: shard {args.shard} holds no benchmark "
                "(more shards than benchmarks); "
                "nothing to run, no run record written (merge the other shards with --partial)",
                file=sys.stderr,
            )
            return exits.PASS
    shard = f"{plan.shard[0]}/{plan.shard[1]}" if plan and plan.shard else None
    label = args.label
    if shard:  # the share is visible in the run id: <time>-<sha8>-[label.]shard1of2
        label = f"{label + '.' if label else ''}shard{plan.shard[0]}of{plan.shard[1]}"
        if not args.machine:
            print(
                f"harness bench: note: no --machine, so this shard is filed under "
                f"{options.machine_name(args)!r} (host name + device); shard runners of one "
                "hardware class pass the same --machine, or their runs do not merge",
                file=sys.stderr,
            )
        print(
            f"harness bench: shard {shard}: {len(plan.chosen)} of {len(plan.selection)} "
            "benchmarks, "
            f"predicted {plan.predicted_s(plan.chosen)} s ({plan.durations_note()})",
            flush=True,
        )
    if plan:
        spec = dataclasses.replace(spec, benches=tuple(plan.asv_benches()))
    spec = dataclasses.replace(spec, label=label)
    ran = bench.run(
        project,
        root,
        spec,
        sha=sha,
        launch=args.launch_method,
        shard=shard,
        profile=True if args.profile else None,
        verbose=args.verbose,
        tree=tree,
    )
    return bench.report(ran, root, rerun=_rerun_flags(args))


def _rerun_flags(args) -> tuple[str, ...]:
    """The flags of this run that a rerun of one of its benchmarks needs to run alike and to
    be filed beside it (harness.runs.bench.rerun_command)."""
    flags = ["--quick"] if args.quick else ["--full"] if args.full else []
    flags += ["--threads", str(args.threads)] if args.threads else []
    flags += ["--machine", args.machine] if args.machine else []
    flags += ["--results-dir", str(args.results_dir)] if args.results_dir else []
    flags += ["--project", str(args.project)] if getattr(args, "project", None) else []
    if args.launch_method and args.launch_method != "auto":
        flags += ["--launch-method", args.launch_method]
    return tuple(flags)


def _plan(args, project, spec, sha):
    from harness.runs import shard

    part = shard.parse_shard(args.shard) if args.shard is not None else None
    return shard.plan(
        project, spec, sha=sha, regexes=args.bench, shard=part, durations_file=args.durations
    )


def _print_list(plan, json_file, here) -> int:
    """Names on stdout, one per line (CI scripts read it); the figures on stderr: the split's
    prediction (the durations files alone, the same on every runner) and the estimate on this
    machine (harness.runs.estimate: its earlier runs first; "unknown" where nothing is
    recorded)."""
    from harness.core.files import write_json_atomic
    from harness.runs import estimate

    for name in plan.chosen:
        print(name)
    shares = ", ".join(
        f"{i + 1}/{len(plan.shards)}: {len(s)} benchmarks, {plan.predicted_s(s)} s"
        for i, s in enumerate(plan.shards)
    )
    print(
        f"harness bench --list: {len(plan.chosen)} of {len(plan.selection)} benchmarks"
        + (f" (shard {plan.shard[0]}/{plan.shard[1]})" if plan.shard else "")
        + f"; predicted {plan.predicted_s(plan.chosen)} s ({plan.durations_note()})"
        + (f"; shares {shares}" if plan.shard else ""),
        file=sys.stderr,
    )
    chosen = set(plan.chosen)
    here_est = estimate.estimate(
        [b for b in plan.benchmarks if b["name"] in chosen],
        plan.selection,
        plan.durations,
        plan.mode,
        here,
    )
    print(
        f"harness bench --list: estimated on {here[1]}: {here_est.describe()} "
        f"({here_est.from_here} of {len(chosen)} benchmarks from its earlier runs)",
        file=sys.stderr,
    )
    if json_file:
        data = plan.as_json()
        data["estimate_here_s"] = here_est.total  # None: unknown
        write_json_atomic(json_file, data)
    return exits.PASS
