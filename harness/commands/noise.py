"""`harness noise`: each statistical row's noise between runs, learned from the machine's
history, and the threshold the gate would judge it with (harness.verdict.noise). Exit 0, or 3
for bad input (no runs, an unknown --bench pattern)."""

from harness.commands import options


def add_arguments(parser):
    from harness.verdict.noise import DEFAULT_LAST, MODES

    options.results_dir(parser)
    parser.add_argument(
        "--machine", help="machine name (default: this host's, else the only one with runs)"
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        help="the runs' mode (default: the newest run's of the machine); each mode's runs "
        "are a series of their own",
    )
    parser.add_argument(
        "--last",
        type=int,
        default=DEFAULT_LAST,
        metavar="N",
        help=f"the newest N clean runs (default {DEFAULT_LAST})",
    )
    parser.add_argument(
        "--bench",
        action="append",
        metavar="REGEX",
        help="only rows whose full name this regex is found in (repeatable); one matching "
        "nothing is exit 3",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    options.pull(parser, "the newest --last clean runs of --machine in --mode")


def run(args) -> int:
    from harness.core import escape, records
    from harness.core.exits import BadInput
    from harness.core.files import write_atomic, write_json_atomic
    from harness.core.table import render
    from harness.verdict import history, noise
    from harness.verdict.results import results_root

    root = results_root(args.results_dir)
    if args.last < noise.MIN_RUNS:
        raise BadInput(f"--last {args.last}: a noise needs at least {noise.MIN_RUNS} runs")
    machine = args.machine or _machine(root, args)
    # the history's own selection knows run.json's "mode" (fast, full); quick is kept apart here
    stored = {"quick": "fast", "full-quick": "full"}.get(args.mode, args.mode)
    pulled = options.pull_first(args, "noise", [machine], last=args.last, mode=stored, clean=True)
    runs = records.list_runs(root, machine)
    if not runs:
        raise BadInput(
            f"no run records of {machine} under {records.runs_dir(root)}; run `harness bench` "
            "(or pull runs with --pull) first"
        )
    mode = args.mode or noise.mode_of(runs[-1].meta)
    found = noise.learn(root, noise.Wanted(machine, mode, last=args.last))
    names = set(found.spreads) | set(found.counts)
    if args.bench:
        names = set(history.select(sorted(names), args.bench))
    table = noise.rows(found, names)
    judged = sum(r[-1] == "yes" for r in table)
    # the summary names runs and why each was left out, read from records: escaped per target
    summary = found.summary()
    rest = (
        f"{judged} of {len(table)} statistical rows judged by the gate with it (threshold "
        f"{noise.MULTIPLE:g} x sqrt(2) x the spread, at least the gate's own; a row past "
        f"{noise.CAP:.0%} is not judged); a row's spread is pooled with its kind's typical "
        f"(weighted as {noise.PRIOR_RUNS} runs, never narrowing: 'own' is the row's alone); a "
        "noisier run widens its own thresholds\n"
    )
    shown = escape.terminal(summary, escape.MAX_MESSAGE)
    print(f"noise between runs: {shown}\n{rest}" + render(noise.HEADER, table), end="")
    if args.markdown:
        said = escape.markdown_text(summary, limit=escape.MAX_MESSAGE)
        markdown = (
            pulled.markdown()
            + f"noise between runs: {said}\n\n{rest}\n"
            + render(noise.HEADER, table, "markdown")
        )
        write_atomic(args.markdown, markdown)
    if args.json:
        data = noise.as_table_json(found, names)
        if pulled.asked:
            data["pull"] = pulled.as_json()
        write_json_atomic(args.json, data)
    return 0


def _machine(root, args) -> str:
    from harness.core import records

    here = options.machine_name(args)
    known = records.machines(root)
    if here in known or len(known) != 1:
        return here
    return known[0]
