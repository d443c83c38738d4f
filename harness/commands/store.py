"""`harness store push|pull|repair`: run records kept in a results history in git (a ref of a
git remote, default `refs/harness/results` of the project's origin), appended to by every runner
at once and read back in part, and repaired where someone wrote what the harness refuses. See
harness.core.store, harness.core.store_repair and docs/history.md."""

from harness.commands import options


def _where(parser) -> None:
    options.store_location(parser)
    options.results_dir(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would move; push or pull nothing"
    )


def add_arguments(parser):
    from harness.commands import Parser
    from harness.core.store import DEFAULT_LAST

    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    sub.required = True
    push = sub.add_parser(
        "push",
        help="add run records to the history: one commit, never forced, retried when another "
        "runner pushed first",
        description="Add run records to the results history. Without RUN: the clean `bench` "
        "and `nightly` runs not in it yet (runs of ab, bisect, imported files and of a dirty "
        "tree only when named; a run without the dirty mark counts as clean). Exit 0 pushed "
        "or nothing to push, 3 a record refused by name (the others pushed), 5 git failed "
        "(nothing pushed).",
    )
    push.add_argument(
        "runs", nargs="*", metavar="RUN", help="run id (or a unique prefix) or run record folder"
    )
    push.add_argument("--machine", help="only this machine's runs (default: every machine)")
    _where(push)
    pull = sub.add_parser(
        "pull",
        help="bring run records from the history into results/runs/ (only what is asked for)",
        description="Bring run records from the results history into RESULTS/runs/, each "
        f"checked whole before it is renamed into place. Without RUN: the newest {DEFAULT_LAST} "
        "runs of this machine (--machine; host name + GPU model by default). Only the "
        "records selected are downloaded where the server allows partial fetch. Exit 0, 3 a "
        "record refused (a local one of the same id with other content, or one not whole in "
        "the history; the others pulled), 5 git failed.",
    )
    pull.add_argument(
        "runs", nargs="*", metavar="RUN", help="run id or a unique prefix of one (repeatable)"
    )
    pull.add_argument(
        "--machine",
        action="append",
        metavar="NAME",
        help="this machine's runs (repeatable; default: this host's machine name)",
    )
    pull.add_argument(
        "--all-machines", action="store_true", help="runs of every machine in the history"
    )
    pull.add_argument(
        "--last",
        type=int,
        metavar="N",
        help=f"the newest N runs per machine (default {DEFAULT_LAST})",
    )
    pull.add_argument("--all", action="store_true", help="every run selected, not the newest N")
    pull.add_argument(
        "--since", metavar="DATE", help="runs started at or after DATE (ISO, e.g. 2026-11-30)"
    )
    pull.add_argument("--label", metavar="NAME", help="runs labelled NAME (e.g. nightly)")
    pull.add_argument(
        "--mode", choices=("fast", "full"), help="runs of this mode (read from run.json)"
    )
    pull.add_argument(
        "--clean", action="store_true", help="leave out runs recorded as made from a dirty tree"
    )
    _where(pull)
    from harness.core import settings

    repair = sub.add_parser(
        "repair",
        help="list every entry of the history the harness refuses, and who added it; --yes "
        "removes them in one commit",
        description="List every entry of the results history that the harness refuses, at "
        "every level (its root, runs/, pruned/, manifests/, the machine folders, the run "
        "records and what they hold), with the commit and author that added each; with --yes "
        "remove them in one commit of its own (they stay in git's history), retried like a "
        "push while others push. Dry run by default. Exit 0 (nothing to repair, listed, or "
        "removed), 3 something named that it does not remove (a folder over "
        f"${settings.STORE_MAX_ENTRIES.name}, a store.json not the harness's), 5 git failed "
        "(or the server cannot read its own tip: fix it there).",
    )
    repair.add_argument(
        "--yes", action="store_true", help="remove them (default: a dry run that lists them)"
    )
    repair.add_argument(
        "--marker",
        action="store_true",
        help="where store.json is held twice with different schemas, write the one this "
        "harness writes in their place (only for a history that this harness wrote)",
    )
    options.store_location(repair)
    options.results_dir(repair)


def run(args) -> int:
    from harness.core import store, trust
    from harness.verdict.results import results_root

    machines = getattr(args, "machine", None)
    for name in [machines] if isinstance(machines, str) else machines or []:
        trust.check_machine(name, f"--machine {trust.shown(name)}")  # a folder under runs/
    root = results_root(args.results_dir)
    repo = store.open_repo(root, args.remote, args.ref)
    if args.action == "repair":
        from harness.core import store_repair

        return store_repair.repair(repo, args.yes, args.marker)
    if args.action == "push":
        return store.push(root, repo, args.runs, args.machine, args.dry_run)
    return _pull(args, root, repo, store)


def _pull(args, root, repo, store) -> int:
    from harness.core.exits import BadInput

    if args.last is not None and args.last < 1:
        raise BadInput("--last must be at least 1")
    if args.all_machines and args.machine:
        raise BadInput("--all-machines goes without --machine")
    if args.runs or args.all_machines:  # run ids are looked up on every machine
        machines = tuple(args.machine or ())
    else:
        machines = tuple(args.machine or [options.machine_name(args)])
    sel = store.Selection(
        machines=machines,
        runs=tuple(args.runs),
        last=None if args.all or args.runs else (args.last or store.DEFAULT_LAST),
        since=store.since_key(args.since) if args.since else None,
        label=args.label,
        mode=args.mode,
        clean=args.clean,
    )
    report = store.pull(root, repo, sel, args.dry_run)
    if report.refused:
        raise store.Refused("refused: " + " | ".join(report.refused))
    return 0
