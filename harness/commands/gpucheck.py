"""`harness gpu-check` (also `.ci/gpu-check`): the GPU proof kit; see harness.runs.gpucheck."""

import sys

from harness.core import exits


def add_arguments(parser):
    from harness.runs.gpucheck import DEADLINE_S

    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run", action="store_true", help="list each check and what it proves; run nothing"
    )
    mode.add_argument(
        "--list-wheels",
        action="store_true",
        help="print the wheels a bare runner needs and the pip download line",
    )
    parser.add_argument(
        "--python-version",
        default=f"{sys.version_info[0]}.{sys.version_info[1]}",
        help="with --list-wheels: the runner's Python (default this one's)",
    )
    parser.add_argument(
        "--platform",
        default="manylinux_2_28_x86_64",
        help="with --list-wheels: the runner's wheel platform tag",
    )
    parser.add_argument(
        "--download", metavar="DIR", help="with --list-wheels: also run the download into DIR"
    )
    parser.add_argument(
        "--wheels", metavar="DIR", help="install these wheels into --target first (no network)"
    )
    parser.add_argument(
        "--target", metavar="DIR", help="private install folder (default .gpu-check/site)"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where the log, results, tables and summary go (default .gpu-check/out-<time>)",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="STEP",
        help="run only these steps (repeatable); an opt-in step, left out of the default plan "
        "(answers: the answer checks on CUDA), runs only so",
    )
    parser.add_argument(
        "--cpu-rehearsal",
        action="store_true",
        help="run every step on the CPU (CUDA-only checks report n/a; no pass on a GPU claim)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=DEADLINE_S,
        help=f"seconds after which no further step starts (default {DEADLINE_S})",
    )
    parser.add_argument(
        "--budget-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="multiply every step budget by F (a slow machine's rehearsal); default 1",
    )


def run(args) -> int:
    from harness.runs import gpucheck

    if args.dry_run:
        print(gpucheck.dry_run_text(args.cpu_rehearsal, args.deadline), end="")
        return exits.PASS
    if args.list_wheels:
        return gpucheck.list_wheels(args)
    return gpucheck.orchestrate(args, gpucheck.project())
