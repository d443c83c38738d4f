"""`harness bench`: run the asv suites in this environment, save results, print key ratios."""

import sys

from harness.commands import options
from harness.core import exits


def add_arguments(parser):
    parser.add_argument("--quick", action="store_true",
                        help="asv --quick: one run per benchmark (our own >= 1 warm-up call is kept)")
    parser.add_argument("--full", action="store_true",
                        help="full sizes and grids (sets HARNESS_FULL=1 for every suite); default: fast")
    parser.add_argument("--threads", metavar="N",
                        help="CPU threads for the whole run (torch.set_num_threads in every suite; "
                             "recorded in the fingerprint); default 1, all cores with --full")
    parser.add_argument("--suite", action="append", metavar="NAME",
                        help="suite to run (repeatable): a module in suites/benchmarks/; default all "
                             "but the canary")
    parser.add_argument("--profile", action="store_true",
                        help="also store operator-level profile summaries in the run record "
                             "(profiles.json; always done with --full): a few seconds per workload")
    options.results_dir(parser)
    parser.add_argument("--launch-method", choices=["auto", "spawn", "forkserver"], default="auto",
                        help="asv launch method; auto: spawn on CUDA, forkserver on CPU")
    options.machine(parser)
    parser.add_argument("--label", help="a word appended to the run id (e.g. nightly, base, head)")


def run(args) -> int:
    from harness.core.project import head_commit, project_root
    from harness.measure import bench
    from harness.measure.threads import parse_threads
    from harness.verdict.results import load, results_root
    from harness.verdict.summary import failures, summary_table

    project = project_root()
    root = results_root(args.results_dir)
    names = bench.check_suites(project, args.suite)  # bad names fail before anything is written
    threads = parse_threads(args.threads)
    ran = bench.run(project, root, names, sha=head_commit(project), machine=options.machine_name(args),
                    quick=args.quick, full=args.full, threads=threads, launch=args.launch_method,
                    label=args.label, profile=True if args.profile else None)
    if ran.record is None:
        print(f"harness bench: asv saved no results (asv exit code {ran.asv_exit}); no run record kept",
              file=sys.stderr)
        return exits.RUNNER_FAILED
    saved = load(ran.record.result_file())
    saved.entries = {k: e for k, e in saved.entries.items() if k.split(".", 1)[0] in ran.suites}
    print()
    print(summary_table(saved))
    print(f"\nrun record: {ran.record.path}\n(asv view for asv publish/compare: {root / 'asv'})"
          f"\nasv run took {ran.wall_s:.1f} s")
    failed = failures(saved)
    if failed:
        print(f"\nharness bench: {len(failed)} benchmark case(s) failed (the others ran):")
        for name in failed:
            print(f"  FAILED {name}")
        print("its traceback is in the asv output above; rerun one alone with "
              "`asv run --python=same --quick --show-stderr --bench <name>` (saves nothing)")
        return exits.FAILED
    if ran.asv_exit != 0:
        print(f"harness bench: asv exited with {ran.asv_exit}", file=sys.stderr)
        return exits.RUNNER_FAILED
    return exits.PASS
