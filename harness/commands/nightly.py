"""`harness nightly`: run the full suites, keep the results with the fingerprint, publish the
dashboard; on GPU runners `--require-gpu --fast --gate baseline` (see harness.runs.nightly)."""

import pathlib

from harness.commands import options


def add_arguments(parser):
    options.results_dir(parser)
    parser.add_argument("--html-dir", help="where to publish the dashboard (default RESULTS/html)")
    options.machine(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--fast", action="store_true", help="fast suites (CI) instead of --full")
    mode.add_argument(
        "--skip-bench", action="store_true", help="do not run benchmarks; publish only"
    )
    parser.add_argument(
        "--gate", metavar="BASE", help="afterwards gate BASE (e.g. `baseline`) vs this run"
    )
    parser.add_argument(
        "--markdown", metavar="FILE", help="with --gate: write the table as Markdown"
    )
    parser.add_argument(
        "--save-baseline",
        action="store_true",
        help="copy this run to RESULTS/baselines/<machine>/ (the gate's `baseline`)",
    )
    parser.add_argument(
        "--steps-markdown",
        metavar="FILE",
        help="where to write the summary of new history steps (default "
        "RESULTS/report/steps-<run id>.md); exit 1 when there are any",
    )
    options.require_gpu(parser)
    options.pull(parser, "this machine's newest 30 runs (so that history sees the nights before)")


def run(args) -> int:
    from harness.core.project import head_commit, project_root
    from harness.runs import nightly
    from harness.verdict.results import results_root

    options.check_gpu(args)
    pulled = options.pull_first(args, "nightly")
    return nightly.nightly(
        root=results_root(args.results_dir),
        html_dir=pathlib.Path(args.html_dir) if args.html_dir else None,
        machine=options.machine_name(args),
        commit=head_commit(project_root()),
        full=not args.fast,
        skip_bench=args.skip_bench,
        gate_base=args.gate,
        markdown=args.markdown,
        baseline=args.save_baseline,
        steps_markdown=args.steps_markdown,
        lead=pulled.markdown(),
    )
