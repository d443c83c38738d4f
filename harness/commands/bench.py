"""`harness bench`: run the asv suites in this environment, save results, print key ratios."""

import sys

from harness.workloads import AREAS


def add_arguments(parser):
    parser.add_argument("--quick", action="store_true",
                        help="asv --quick: one run per benchmark (our own >= 1 warm-up call is kept)")
    parser.add_argument("--full", action="store_true",
                        help="full sizes and grids (sets HARNESS_FULL=1 for every suite); default: fast")
    parser.add_argument("--suite", action="append", metavar="NAME",
                        help=f"suite to run (repeatable; default all): {', '.join(AREAS)}")
    parser.add_argument("--results-dir", metavar="DIR",
                        help="results root: asv results go to DIR/asv, fingerprints to DIR/fingerprints "
                             "(default: $HARNESS_RESULTS_DIR names the asv directory, else results/asv)")
    parser.add_argument("--launch-method", choices=["auto", "spawn", "forkserver"], default="auto",
                        help="asv launch method; auto: spawn on CUDA, forkserver on CPU")
    parser.add_argument("--machine", help="asv machine name (default: host name + GPU model)")


def run(args) -> int:
    from harness import bench

    try:
        return bench.run(args.suite, quick=args.quick, full=args.full, results=args.results_dir,
                         launch=args.launch_method, machine=args.machine)
    except bench.BenchError as e:
        print(f"harness bench: error: {e}", file=sys.stderr)
        return bench.EXIT_BAD_INPUT
