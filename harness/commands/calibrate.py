"""`harness calibrate`: measure per-benchmark noise bands by A/A runs (see harness.calibrate)."""

import pathlib
import tempfile


def add_arguments(parser):
    parser.add_argument("--bench", action="append", metavar="MODULE",
                        help="benchmark module(s) under suites/benchmarks to calibrate (default: canary)")
    parser.add_argument("--runs", type=int, default=5, help="clean runs per benchmark (default 5)")
    parser.add_argument("--results-dir", help="root of results/ (default $HARNESS_RESULTS_DIR's parent or ./results)")
    parser.add_argument("--machine", help="machine name (default harness.env.machine_name())")
    parser.add_argument("--work", help="keep the asv runs here (default a new temporary directory)")
    parser.add_argument("--trials", type=int, default=0,
                        help="instead: run N end-to-end canary trials (regression + A/A) and report")
    parser.add_argument("--threshold", type=float, default=None, help="gate threshold for --trials")
    parser.add_argument("--json", metavar="FILE", help="also write the outcome as JSON")


def run(args) -> int:
    from harness import calibrate
    from harness.results import noise_path, results_dir, write_json_atomic
    from harness.stats import DEFAULT_THRESHOLD

    root = results_dir(args.results_dir)
    if args.machine:
        machine = args.machine
    else:
        from harness.env import machine_name
        machine = machine_name()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="harness-calibrate-"))
    if args.trials:
        out = calibrate.trials(args.trials, root, machine, work,
                               args.threshold if args.threshold is not None else DEFAULT_THRESHOLD)
        print(f"caught {out['caught']}/{out['trials']} injected regressions; "
              f"false alarms {out['false_alarms']}/{out['trials']} A/A; "
              f"gate run time {out['gate_seconds_median']:.2f} s (median)")
        for name, counts in sorted(out["per_benchmark"].items()):
            print(f"  {name:<45} flagged in {counts['caught']}/{out['trials']} regression trials, "
                  f"{counts['false_alarms']}/{out['trials']} A/A trials")
    else:
        out = calibrate.calibrate(args.bench or ["canary"], args.runs, root, machine, work)
        for name, rec in out.items():
            print(f"{name:<50} band {rec['band']:.1%} over {rec['runs']} runs")
        print(f"noise bands written to {noise_path(root, machine)}")
    if args.json:
        write_json_atomic(args.json, out)
    return 0
