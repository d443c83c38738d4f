"""`harness gate BASE HEAD`: compare two result sets; exit codes as harness.core.exits (0 pass,
1 regression, 2 failed or missing benchmark, 3 bad input, 4 no GPU with --require-gpu, 6 no row
judged).
See harness.verdict.gate."""

import sys

from harness.commands import options
from harness.core import escape


def add_arguments(parser):
    from harness.verdict.compare import DEFAULT_ALPHA, DEFAULT_THRESHOLD
    from harness.verdict.metrics import INSTRUCTION_TOLERANCE
    from harness.verdict.noise import DEFAULT_LAST

    parser.add_argument(
        "base", help="result file, directory, commit, `latest` or `baseline[:MACHINE]`"
    )
    parser.add_argument("head", help="same forms as BASE")
    options.results_dir(parser)
    parser.add_argument(
        "--machine",
        help="machine name for commits/latest/baseline (default: the "
        "only machine there, or HEAD's)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"relative change a timing must exceed (default {DEFAULT_THRESHOLD}); "
        "a benchmark's calibrated noise band raises it",
    )
    parser.add_argument(
        "--instruction-tolerance",
        type=float,
        default=INSTRUCTION_TOLERANCE,
        metavar="FRACTION",
        help=f"relative change an instruction count must exceed (default "
        f"{INSTRUCTION_TOLERANCE}, from the A/A spread measured on a shared runner)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help=f"Mann-Whitney significance level (default {DEFAULT_ALPHA}, as asv)",
    )
    parser.add_argument("--noise", help="noise-band file (default RESULTS/noise/<machine>.json)")
    parser.add_argument(
        "--bench",
        action="append",
        metavar="REGEX",
        help="compare only the rows whose full name this regex is found in (repeatable; a plain "
        "name works too); one matching nothing is exit 3",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the verdicts as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    parser.add_argument(
        "--allow-env-change",
        "--allow-machine-mismatch",
        action="store_true",
        dest="allow_env_change",
        help="compare runs from another machine name, device model or CPU thread "
        "count anyway (normally exit 3)",
    )
    parser.add_argument(
        "--no-history-noise",
        action="store_false",
        dest="history_noise",
        help="judge statistical rows without their noise between runs learned from the "
        "machine's history (default: with it, where the history holds enough clean runs of "
        "HEAD's mode; docs/gate.md)",
    )
    parser.add_argument(
        "--history-last",
        type=int,
        default=DEFAULT_LAST,
        metavar="N",
        help=f"learn each row's noise from the machine's newest N clean runs (default "
        f"{DEFAULT_LAST}; with --pull, that many are pulled)",
    )
    options.require_gpu(parser)
    options.pull(
        parser,
        "what BASE and HEAD name: a run id, or for `nightly[:MACHINE]` the newest clean "
        "nightly run of that machine in HEAD's mode,",
    )


def run(args) -> int:
    from harness.core import exits
    from harness.core.exits import BadInput
    from harness.core.files import write_atomic
    from harness.verdict.gate import run_gate
    from harness.verdict.noise import MIN_RUNS

    options.check_gpu(args)
    if args.history_last < MIN_RUNS:
        raise BadInput(
            f"--history-last {args.history_last}: a noise needs at least {MIN_RUNS} runs"
        )
    base, head, pulled = pull_sides(args) if args.pull else (args.base, args.head, None)
    if args.pull and args.history_noise:
        pulled += pull_history(args, head)
    out = run_gate(
        base,
        head,
        root=args.results_dir,
        machine=args.machine,
        threshold=args.threshold,
        alpha=args.alpha,
        noise_file=args.noise,
        only=args.bench,
        allow_env_change=args.allow_env_change,
        instruction_tolerance=args.instruction_tolerance,
        history=args.history_noise,
        history_last=args.history_last,
    )
    bad = out.code == exits.BAD_INPUT
    # bad input is said once, on stderr; the table only where rows were compared at all
    if out.rows or not bad:
        print(out.render("text", message=not bad), end="")
    if bad and out.message:
        print(f"harness gate: error: {out.message}", file=sys.stderr)
    if args.markdown:
        lead = pulled.markdown() if pulled else ""
        write_atomic(args.markdown, lead + out.render("markdown"))
    if args.json:
        from harness.core.files import write_json_atomic

        data = out.as_json()
        if pulled:
            data["pull"] = pulled.as_json()
        write_json_atomic(args.json, data)
    return out.code


def pull_sides(args) -> tuple[str, str, options.Pulled]:
    """`harness gate --pull`: pull what BASE and HEAD name from the history first: a run id
    (or a unique prefix), or for `nightly[:MACHINE]` the newest clean nightly run of that
    machine (default --machine, else this host's) in HEAD's mode, which then names exactly
    that run. Other names (paths, latest, baseline, commits) are local: nothing is pulled.
    These are what the gate compares, so here a failed pull stops it (exit 5, or 3 for a
    history the store refuses whole) and so does a refused run it names (3); anything else
    the pull refused is said and left out."""
    import re

    from harness.core import records
    from harness.core.exits import BadInput
    from harness.verdict.results import resolve, results_root

    root = results_root(args.results_dir)
    names = [args.base, args.head]
    pulled = options.Pulled(asked=True)
    for i, name in enumerate(names):
        if re.match(r"^\d{8}T", name):
            got = options.pull_first(args, "gate", [], strict=True, runs=(name,), last=None)
            pulled += got
            if not got.runs and got.refused:
                raise BadInput(
                    f"gate --pull {escape.terminal(name, escape.MAX_CELL)}: the history's "
                    f"record was refused ({_refusals(got)})"
                )
        elif name == "nightly" or name.startswith("nightly:"):
            mode = None
            other = names[1 - i]
            try:
                rec = records.record_of(resolve(other, root, args.machine))
                mode = rec.meta.get("mode") if rec else None
            except BadInput:  # the other side may be pulled itself, or be bad input (said later)
                mode = None
            machine = name.partition(":")[2] or options.machine_name(args)
            got = options.pull_first(
                args, "gate", [machine], strict=True, last=1, label="nightly", mode=mode, clean=True
            )
            pulled += got
            if not got.runs:  # never a local stand-in: the reference asked for is the history's
                which = f"{machine}{f' in {mode} mode' if mode else ''}"
                if got.refused:
                    raise BadInput(
                        f"gate --pull {name}: the history's newest clean nightly run of {which} "
                        f"was refused ({_refusals(got)}); gate against `baseline` (committed), "
                        "or repair the history"
                    )
                raise BadInput(
                    f"gate --pull {name}: the results history holds no clean nightly run of "
                    f"{which}; gate against `baseline` (committed) until a nightly has pushed "
                    "one (`harness store push`)"
                )
            names[i] = str(records.runs_dir(root) / got.runs[-1][0] / got.runs[-1][1])
    return names[0], names[1], pulled


def _refusals(pulled: options.Pulled) -> str:
    return " | ".join(escape.terminal(r, 300) for r in pulled.refused[: options.SHOWN_REFUSED])


def pull_history(args, head: str) -> options.Pulled:
    """With --pull: the newest clean runs of HEAD's machine and mode too, which teach each
    row's noise between runs. What the pull refused is left out of the noise, and a pull that
    failed leaves the noise to the runs here: both said in one line, never an exit code."""
    from harness.core import records
    from harness.verdict.results import resolve, results_root

    rec = records.record_of(resolve(head, results_root(args.results_dir), args.machine))
    if rec is None:
        return options.Pulled(asked=True)
    return options.pull_first(
        args, "gate", [rec.machine], last=args.history_last, mode=rec.meta.get("mode"), clean=True
    )
