"""`harness answers [RUN]`: one run's answer checks judged alone, the single-run form of the
gate's answer rows (harness.verdict.accuracy): per model pass / WRONG / fail_to_run, and per row.
Exit codes: 0 every judged answer the same, 1 a WRONG answer, 2 an answer check that failed to
run, 3 bad input, 6 no answer judged.

`harness answers --rerun ROW`: that row's answer check again, alone, in this process, without
asv or timing (harness.runs.answercheck); the same exit codes, 3 also for a row that does not
exist, is not a paired row, or whose check runs only where it is timed."""

from harness.commands import options
from harness.core import settings


def add_arguments(parser):
    parser.add_argument(
        "run",
        nargs="?",
        default="latest",
        help="the run to read: run id (or prefix), run-record folder, result file, commit, "
        "`latest` (default) or `baseline[:MACHINE]`",
    )
    options.results_dir(parser)
    parser.add_argument(
        "--machine", help="machine name for run ids, commits and latest (default: the only one)"
    )
    parser.add_argument(
        "--suite",
        action="append",
        metavar="NAME",
        help="only the answer rows of this suite (repeatable); one without answer rows in the run "
        "is exit 3",
    )
    parser.add_argument(
        "--bench",
        action="append",
        metavar="REGEX",
        help="only the answer rows whose full name, or their timed row's, this regex is found in "
        "(repeatable); one matching none is exit 3",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the answers as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the tables as Markdown")
    rerun = parser.add_argument_group(
        "rerun a check",
        "rerun paired rows' answer checks alone, in this process: no asv, no warm-up, no timing",
    )
    rerun.add_argument(
        "--rerun",
        action="append",
        metavar="ROW",
        help="a paired row's full name, its timing row `suite.Class.track_x(params)` or its "
        "answer row `answer_x(params)`, or a --bench-style regex selecting several (repeatable): "
        "runs its setup, its answer check and its teardown, prints the answer; exit 0 same, 1 "
        "WRONG, 2 fail_to_run, 6 n/a, 3 no such paired row (or one checked only where it is "
        "timed: the harness bench line that reruns it is named)",
    )
    rerun.add_argument(
        "--quick",
        action="store_true",
        help="with --rerun: the sizes of a quick (or fast) run; default the mode of RUN, quick "
        "where there is no run",
    )
    rerun.add_argument("--full", action="store_true", help="with --rerun: a full run's sizes")
    rerun.add_argument(
        "--threads",
        metavar="N",
        help="with --rerun: CPU threads, as `harness bench --threads` (default 1, all cores with "
        "--full)",
    )
    rerun.add_argument(
        "--device",
        metavar="NAME",
        help=f"with --rerun: the device (`cpu`, `cuda`, `cuda:1`; default ${settings.DEVICE.name}, "
        "else CUDA where present, else the CPU)",
    )


def run(args) -> int:
    if args.rerun:
        return _rerun(args)
    from harness.core.exits import BadInput

    for flag in ("quick", "full", "threads", "device"):
        if getattr(args, flag):
            raise BadInput(f"--{flag} goes with --rerun ROW (a run's answers are read as recorded)")
    from harness.core.files import write_atomic, write_json_atomic
    from harness.verdict import accuracy
    from harness.verdict.results import load, param_names, resolve, results_root

    root = results_root(args.results_dir)
    if args.run == "latest" and not (root / "runs").is_dir() and not (root / "asv").is_dir():
        raise BadInput(
            f"no runs under {root}: run `harness bench` first, or name the results root with "
            "--results-dir"
        )
    rs = load(resolve(args.run, root, args.machine))
    found = accuracy.single(rs, args.bench, args.suite, param_names(rs))
    print(found.render("text"), end="")
    if args.markdown:
        write_atomic(args.markdown, found.render("markdown"))
    if args.json:
        write_json_atomic(args.json, found.as_json())
    return found.code


def _rerun(args) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from harness.core.exits import BadInput
    from harness.core.files import write_json_atomic
    from harness.core.project import project_root
    from harness.measure import answers
    from harness.measure.threads import parse_threads
    from harness.runs import answercheck

    if args.bench or args.markdown:
        raise BadInput(
            "--rerun takes its rows itself (a full name or a regex); leave out --bench and "
            "--markdown"
        )
    if args.quick and args.full:
        raise BadInput("--quick and --full exclude each other")
    threads = parse_threads(args.threads)
    project = project_root()
    mode, said = _mode(args)
    print(f"harness answers --rerun: {said}", flush=True)
    record = Path(tempfile.mkdtemp(prefix="harness-answers-rerun-"))
    try:
        reran = answercheck.rerun(
            project,
            answercheck.Request(
                tuple(args.rerun),
                mode=mode,
                threads=threads,
                device=args.device,
                suites=tuple(args.suite or ()),
                record=record,
            ),
            say=lambda line: print(line, flush=True),
        )
    finally:
        kept = (record / answers.REPRODUCE_DIR / answers.REPRODUCE_FILE).is_file()
        if not kept:  # this command made it; only a first WRONG's reproduction is worth keeping
            shutil.rmtree(record, ignore_errors=True)
    print(reran.render(), end="")
    if kept:
        print(
            f"the rerun's record, with the first WRONG's inputs and results: {record} "
            "(remove it when done)"
        )
    if args.json:
        write_json_atomic(args.json, reran.as_json())
    return reran.code


def _mode(args) -> tuple[str, str]:
    """The rerun's mode: --quick / --full, else the mode of RUN (the latest by default), else
    quick; and a line saying which and why."""
    if args.full:
        return "full", "full sizes (--full)"
    if args.quick:
        return "quick", "quick sizes (--quick)"
    from harness.core.exits import BadInput
    from harness.verdict.results import load, resolve, results_root

    root = results_root(args.results_dir)
    try:
        rs = load(resolve(args.run, root, args.machine))
    except BadInput:
        if args.run != "latest":
            raise  # a run named that does not resolve is bad input, as without --rerun
        return "quick", "quick sizes (no run to take the mode from; --full for full sizes)"
    mode = "full" if "--full" in rs.mode_flags else "quick"
    return mode, f"{mode} sizes, as the run {rs.path} (--quick or --full to choose)"
