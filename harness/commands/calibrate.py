"""`harness calibrate`: measure per-benchmark noise bands by A/A runs (see harness.verdict.calibrate)."""

import pathlib
import tempfile

from harness.commands import options


def add_arguments(parser):
    parser.add_argument("--suite", action="append", metavar="NAME",
                        help="suite(s) in suites/benchmarks to calibrate (default: canary)")
    parser.add_argument("--runs", type=int, default=5, help="clean runs per benchmark (default 5)")
    options.results_dir(parser)
    options.machine(parser)
    parser.add_argument("--work", help="keep the asv runs here (default a new temporary directory)")
    parser.add_argument("--trials", type=int, default=0,
                        help="instead: run N end-to-end canary trials (regression + A/A) and report")
    parser.add_argument("--threshold", type=float, default=None, help="gate threshold for --trials")
    parser.add_argument("--json", metavar="FILE", help="also write the outcome as JSON")


def run(args) -> int:
    from harness.core.files import write_json_atomic
    from harness.core.project import project_root
    from harness.core.table import render
    from harness.verdict import calibrate
    from harness.verdict.compare import DEFAULT_THRESHOLD
    from harness.verdict.results import noise_path, results_root

    project = project_root()
    root = results_root(args.results_dir)
    machine = options.machine_name(args)
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="harness-calibrate-"))
    if args.trials:
        out = calibrate.trials(project, args.trials, root, machine, work,
                               args.threshold if args.threshold is not None else DEFAULT_THRESHOLD)
        print(f"caught {out['caught']}/{out['trials']} injected regressions; "
              f"false alarms {out['false_alarms']}/{out['trials']} A/A; "
              f"gate run time {out['gate_seconds_median']:.2f} s (median)")
        rows = [(name, f"{c['caught']}/{out['trials']}", f"{c['false_alarms']}/{out['trials']}")
                for name, c in sorted(out["per_benchmark"].items())]
        print(render(["benchmark", "flagged in regression trials", "flagged in A/A trials"], rows), end="")
    else:
        out = calibrate.calibrate(project, args.suite or ["canary"], args.runs, root, machine, work)
        rows = [(name, f"{rec['band']:.1%}", rec["runs"]) for name, rec in out.items()]
        print(render(["benchmark", "noise band", "runs"], rows), end="")
        print(f"noise bands written to {noise_path(root, machine)}")
    if args.json:
        write_json_atomic(args.json, out)
    return 0
