"""`harness nightly`: run the full suites, keep the results with the fingerprint, publish the
dashboard; on GPU runners `--require-gpu --fast --gate baseline` (see harness.nightly)."""

import pathlib
import sys


def add_arguments(parser):
    parser.add_argument("--results-dir", help="root of results/ (default $HARNESS_RESULTS_DIR's parent or ./results)")
    parser.add_argument("--html-dir", help="where to publish the dashboard (default RESULTS/html)")
    parser.add_argument("--machine", help="machine name (default harness.env.machine_name())")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--fast", action="store_true", help="fast suites (CI) instead of --full")
    mode.add_argument("--skip-bench", action="store_true", help="do not run benchmarks; publish only")
    parser.add_argument("--gate", metavar="BASE", help="afterwards gate BASE (e.g. `baseline`) vs this run")
    parser.add_argument("--markdown", metavar="FILE", help="with --gate: write the table as Markdown")
    parser.add_argument("--save-baseline", action="store_true",
                        help="copy this run to RESULTS/baselines/<machine>/ (the gate's `baseline`)")
    parser.add_argument("--require-gpu", action="store_true", help="exit 4 unless a CUDA GPU is present")


def run(args) -> int:
    from harness import nightly
    from harness.calibrate import git_head
    from harness.results import results_dir

    if args.require_gpu:
        from harness.gate import NO_GPU, gpu_missing_message

        why = gpu_missing_message()
        if why:
            print(f"harness nightly: {why}", file=sys.stderr)
            return NO_GPU
    if args.machine:
        machine = args.machine
    else:
        from harness.env import machine_name
        machine = machine_name()
    return nightly.nightly(root=results_dir(args.results_dir),
                           html_dir=pathlib.Path(args.html_dir) if args.html_dir else None,
                           machine=machine, commit=git_head(), full=not args.fast,
                           skip_bench=args.skip_bench, gate_base=args.gate, markdown=args.markdown,
                           baseline=args.save_baseline)
