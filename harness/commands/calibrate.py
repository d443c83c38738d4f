"""`harness calibrate`: measure per-benchmark noise bands by A/A runs
(see harness.runs.calibrate)."""

import pathlib
import tempfile

from harness.commands import options


def add_arguments(parser):
    parser.add_argument(
        "--suite",
        action="append",
        metavar="NAME",
        help="suite(s) in suites/benchmarks to calibrate (default: canary)",
    )
    parser.add_argument("--runs", type=int, default=5, help="clean runs per benchmark (default 5)")
    options.results_dir(parser)
    options.machine(parser)
    parser.add_argument("--work", help="keep the asv runs here (default a new temporary directory)")
    parser.add_argument(
        "--trials",
        type=int,
        default=0,
        help="instead: run N end-to-end canary trials (regression + A/A) and report",
    )
    parser.add_argument("--threshold", type=float, default=None, help="gate threshold for --trials")
    # test-only (harness.runs.slowdown): the proof on a real workload instead of the canary
    parser.add_argument(
        "--slowdown",
        type=float,
        metavar="F",
        help="with --trials: slow a real workload by the fraction F (0.1 = 10%%) "
        "in a scratch benchmark folder instead of the canary's extra op",
    )
    parser.add_argument(
        "--extra-instructions",
        type=float,
        metavar="F",
        help="with --trials: add F times each named workload's own instructions of "
        "extra work per call (0.01 = 1%%) to the instruction rows "
        "(suites/benchmarks/instructions.py) instead of the canary's extra op",
    )
    parser.add_argument(
        "--workload",
        metavar="NAME",
        action="append",
        help="with --slowdown: pointwise_chain, training_step (fusion) or a zoo "
        "model (its inference and training steps); with --extra-instructions: an instruction "
        "row's key (mlp_training_step, <model>_compile, <module>.<name>, ...; for a compile row "
        "the extra work goes inside the compile); repeatable: the workloads share each run",
    )
    parser.add_argument(
        "--slowed-side",
        choices=("all", "compiled"),
        default="all",
        help="with --slowdown: slow every call, eager and compiled (default), or "
        "the compiled side only (a zoo model: its CompiledOverEager row)",
    )
    parser.add_argument(
        "--route",
        choices=("gate", "ab"),
        default="gate",
        help="with --slowdown: gate on stored runs A,B,C (default) or harness ab",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        help="with --route ab: a fixed number of pairs per ab run (default: as harness ab, "
        "pairs until decided, up to --max-pairs)",
    )
    parser.add_argument(
        "--max-pairs", type=int, default=20, help="with --route ab: as harness ab (default 20)"
    )
    parser.add_argument("--duet", action="store_true", help="with --route ab: as harness ab --duet")
    parser.add_argument(
        "--bench",
        action="append",
        metavar="REGEX",
        help="with --slowdown: run only the wrapper's benchmarks this regex is "
        "found in (repeatable, as asv's --bench), e.g. compiled_over_eager: "
        "each benchmark is its own process, so this only saves time",
    )
    parser.add_argument(
        "--no-aa",
        dest="aa",
        action="store_false",
        help="with --slowdown: only the slowed half of each trial (half the cost); "
        "false alarms are then not measured: take them from A/A runs made apart",
    )
    parser.add_argument(
        "--gpu-time",
        action="store_true",
        help="instead: the GPU-time proof on this machine's GPU (harness.runs.gpuproof): "
        "--trials N trial processes (default 10), each A/A against the one before and slowed "
        "by --slowdown F of each row's GPU time (default 0.03) as a spin kernel; exit 0 when "
        "every A/A passes and every slowdown is caught, 1 otherwise, 4 without a GPU",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the outcome as JSON")


def run(args) -> int:
    from harness.core.files import write_json_atomic
    from harness.core.project import project_root
    from harness.core.table import render
    from harness.runs import calibrate
    from harness.verdict.compare import DEFAULT_THRESHOLD
    from harness.verdict.results import noise_path, results_root

    if args.gpu_time:  # its own proof: no project, results or machine name needed
        return _gpu_time(args)
    project = project_root()
    root = results_root(args.results_dir)
    machine = options.machine_name(args)
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="harness-calibrate-"))
    if args.trials:
        threshold = args.threshold if args.threshold is not None else DEFAULT_THRESHOLD
        out = _trials(args, project, root, machine, work, threshold)
        aa = (
            f"false alarms {out['false_alarms']}/{out['trials']} A/A"
            if out["false_alarms"] is not None
            else "false alarms not measured (--no-aa)"
        )
        print(
            f"caught {out['caught']}/{out['trials']} injected regressions; {aa}"
            + (
                f"; gate run time {out['gate_seconds_median']:.2f} s (median)"
                if "gate_seconds_median" in out
                else f"; ab run {out['ab_seconds_median']:.0f} s (median)"
            )
        )
        n = out["trials"]
        m = n if out["false_alarms"] is not None else 0  # A/A trials run
        rows = [
            (
                name,
                "yes" if c["judged"] else "no",
                f"{c['caught']}/{n}",
                f"{c['false_alarms']}/{m}",
                f"{c['caught_if_judged']}/{n}",
                f"{c['false_alarms_if_judged']}/{m}",
            )
            for name, c in sorted(out["per_benchmark"].items())
            if not c.get("skipped")  # not run in any trial (outside the selection)
        ]
        print(
            render(
                [
                    "benchmark",
                    "judged",
                    "flagged in regression trials",
                    "flagged in A/A trials",
                    "if judged: regression",
                    "if judged: A/A",
                ],
                rows,
            ),
            end="",
        )
    else:
        out = calibrate.calibrate(project, args.suite or ["canary"], args.runs, root, machine, work)
        rows = [(name, f"{rec['band']:.1%}", rec["runs"]) for name, rec in out.items()]
        print(render(["benchmark", "noise band", "runs"], rows), end="")
        print(f"noise bands written to {noise_path(root, machine)}")
    if args.json:
        write_json_atomic(args.json, out)
    return 0


def _gpu_time(args) -> int:
    """The GPU-time proof (as the proof kit's gate-gpu-time step), as many trials as asked."""
    from harness.core.exits import BadInput
    from harness.core.files import write_json_atomic
    from harness.runs import gpuproof

    if args.workload or args.extra_instructions is not None or args.route != "gate":
        raise BadInput(
            "--gpu-time proves its own rows; --workload, --route and "
            "--extra-instructions go with the CPU proofs"
        )
    slowdown = gpuproof.SLOWDOWN if args.slowdown is None else args.slowdown
    if not 0 < slowdown < 1:
        raise BadInput(f"--slowdown is a fraction of the GPU time (0.03 = 3%), got {slowdown}")
    from harness.runs.scratch import RunScratch

    with RunScratch() as scratch:
        work = pathlib.Path(args.work) if args.work else scratch.folder("gpu-time")
        result = gpuproof.run("cuda", args.trials or 10, work, slowdown=slowdown)
    print(gpuproof.render(result))
    if args.json:
        write_json_atomic(args.json, result)
    return 0 if gpuproof.proven(result, 1) else 1


def _trials(args, project, root, machine, work, threshold) -> dict:
    from harness.core.exits import BadInput
    from harness.runs import calibrate, slowdown
    from harness.runs.spec import RunSpec

    if args.extra_instructions is not None:
        return _instruction_trials(args, project, root, machine, work, threshold)
    if args.slowdown is None:
        if args.workload or args.route != "gate" or not args.aa or args.bench:
            raise BadInput(
                "--workload, --route ab, --no-aa and --bench go with --slowdown F "
                "or --extra-instructions F"
            )
        return calibrate.trials(
            project, args.trials, root, work, threshold, RunSpec(machine=machine)
        )
    if not args.workload:
        raise BadInput(
            "--slowdown needs --workload NAME (pointwise_chain, training_step or a zoo model)"
        )
    if not 0 < args.slowdown < 10:
        raise BadInput(
            f"--slowdown is a fraction of the call time (0.1 = 10%), got {args.slowdown}"
        )
    options.load_models()  # --workload may name a model of the project's own
    bench = slowdown.write_suite(project, args.workload, work)
    env = slowdown.environment(args.slowdown, args.slowed_side)
    spec = RunSpec(
        mode="quick",
        machine=machine,
        suites=tuple(slowdown.modules_for(args.workload)),
        benches=tuple(args.bench or ()),
    )
    return _run_trials(args, project, root, work, threshold, spec, bench, env)


def _run_trials(args, project, root, work, threshold, spec, bench, slowed_env) -> dict:
    """Either proof's trials on the benchmark folder `bench`, through the gate or harness ab."""
    from harness.runs import calibrate

    if args.route == "ab":
        return calibrate.ab_trials(
            project,
            args.trials,
            work,
            threshold,
            spec,
            bench,
            slowed_env,
            _pairs(args),
            aa=args.aa,
        )
    return calibrate.trials(
        project,
        args.trials,
        root,
        work,
        threshold,
        spec,
        bench_dir=bench,
        slowed_env=slowed_env,
        aa=args.aa,
    )


def _pairs(args):
    """harness ab's pair policy for --route ab trials."""
    from harness.core.exits import BadInput
    from harness.runs import ab

    if args.duet and ab.duet_cpus() is None:
        raise BadInput("--duet needs at least 2 CPUs (one set per side); this process has 1")
    return ab.Pairs(args.pairs, args.max_pairs, duet=args.duet)


def _instruction_trials(args, project, root, machine, work, threshold) -> dict:
    """The instruction rows' proof: real extra work of F times each workload's own instructions
    (harness.measure.instructions, HARNESS_TEST_EXTRA_INSTRUCTIONS), counted only for the named
    workloads (the others would only add time)."""
    from harness.core.exits import BadInput
    from harness.measure import instructions
    from harness.runs import calibrate
    from harness.runs.spec import RunSpec

    if args.slowdown is not None or args.bench:
        raise BadInput(
            "--extra-instructions and --slowdown/--bench are two different proofs; give one"
        )
    keys = calibrate.instruction_keys(project)
    if not args.workload:
        raise BadInput(f"--extra-instructions needs --workload NAME: {', '.join(keys)}")
    unknown = [w for w in args.workload if w not in keys]
    if unknown:
        raise BadInput(
            f"unknown instruction workload(s) {', '.join(unknown)}; choose from {', '.join(keys)}"
        )
    if not 0 < args.extra_instructions < 10:
        raise BadInput(
            f"--extra-instructions is a fraction of the call's instructions (0.01 = 1%), "
            f"got {args.extra_instructions}"
        )
    why = instructions.unavailable()
    if why:
        raise BadInput(f"cannot count instructions here: {why}")
    names = ",".join(dict.fromkeys(args.workload))
    spec = RunSpec(
        mode="quick",
        machine=machine,
        suites=("instructions",),
        # the instruction rows alone (a project's own modules come along in its benchmark folder)
        benches=(r"^instructions\.",),
        env=((instructions.SELECT_ENV, names),),
    )
    slowed = {
        instructions.EXTRA_ENV: repr(args.extra_instructions),
        instructions.EXTRA_WORKLOADS_ENV: names,
    }
    bench = calibrate._benchmark_dir(project, ["instructions"], work)
    return _run_trials(args, project, root, work, threshold, spec, bench, slowed)
