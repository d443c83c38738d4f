"""`harness prune`: the only command that deletes results — run records, never baselines — and
only when asked: it lists what it would remove, and removes it only with --yes."""

from harness.commands import options


def add_arguments(parser):
    options.results_dir(parser)
    parser.add_argument("--machine", help="only this machine's runs (default: every machine)")
    parser.add_argument("--keep", type=int, metavar="N", help="keep the newest N runs per machine")
    parser.add_argument("--older-than", type=float, metavar="DAYS",
                        help="only runs that started more than DAYS days ago")
    parser.add_argument("--yes", action="store_true",
                        help="really remove them (default: a dry run that only lists them)")


def run(args) -> int:
    from harness.core import records
    from harness.core.exits import BadInput
    from harness.verdict.results import results_root

    if args.keep is not None and args.keep < 1:
        raise BadInput("--keep must be at least 1 (use --older-than to age runs out)")
    root = results_root(args.results_dir)
    doomed = records.plan_prune(root, args.keep, args.older_than, args.machine)
    verb = "removing" if args.yes else "would remove"
    for rec in doomed:
        print(f"{verb} {rec.path}")
    if not doomed:
        print("nothing to prune")
    elif not args.yes:
        print(f"dry run: {len(doomed)} run record(s) would be removed; add --yes to remove them "
              "(baselines are never touched)")
        return 0
    for rec in doomed:
        records.remove(rec)
    if doomed:
        records.rebuild_view(root)
    return 0
