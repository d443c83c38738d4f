"""`harness prune`: the only command that deletes results — run records, never baselines — and
only when asked: it lists what it would remove, and removes it only with --yes. Runs that were
interrupted or killed while being written (`.staging-*` folders, never read as runs) are listed
too; those whose writer is gone are removed with --yes, those still being written never.
`--store`: the same rule on the results history in git, as a new commit (harness.core.store)."""

from harness.commands import options


def add_arguments(parser):
    options.results_dir(parser)
    parser.add_argument("--machine", help="only this machine's runs (default: every machine)")
    parser.add_argument("--keep", type=int, metavar="N", help="keep the newest N runs per machine")
    parser.add_argument(
        "--older-than",
        type=float,
        metavar="DAYS",
        help="only runs that started more than DAYS days ago",
    )
    parser.add_argument(
        "--store",
        action="store_true",
        help="prune the results history in git instead (a new commit that removes the runs and "
        "keeps them from being pushed again; local records are left alone; where: --remote, "
        "--ref)",
    )
    options.store_location(parser)
    parser.add_argument(
        "--yes",
        action="store_true",
        help="really remove them (default: a dry run that only lists them)",
    )


def run(args) -> int:
    from harness.core import records, trust
    from harness.core.exits import BadInput
    from harness.verdict.results import results_root

    if args.keep is not None and args.keep < 1:
        raise BadInput("--keep must be at least 1 (use --older-than to age runs out)")
    root = results_root(args.results_dir)
    if (args.remote or args.ref) and not args.store:
        raise BadInput("--remote and --ref name the results history: they go with --store")
    if args.store:
        from harness.core import store

        repo = store.open_repo(root, args.remote, args.ref)
        store.prune(root, repo, args.keep, args.older_than, args.machine, args.yes)
        return 0
    # nothing is deleted through a link below the results root (the root itself may be one)
    trust.inside(root, records.runs_dir(root).name)
    left = records.unfinished(root, args.machine)
    asked = args.keep is not None or args.older_than is not None
    doomed = (
        records.plan_prune(root, args.keep, args.older_than, args.machine)
        if asked or not left
        else []
    )
    verb = "removing" if args.yes else "would remove"
    for item in left:
        state = (
            f"being written by process {item.pid}: kept"
            if item.running
            else (
                f"interrupted (its writer{' ' + str(item.pid) if item.pid else ''} is gone); {verb}"
            )
        )
        print(f"unfinished run {item.path}: {state}")
    for rec in doomed:
        print(f"{verb} {rec.path}")
    abandoned = [u for u in left if not u.running]
    if not doomed and not abandoned:
        print("nothing to prune")
    elif not args.yes:
        print(
            f"dry run: {len(doomed)} run record(s) and {len(abandoned)} unfinished run(s) would be "
            "removed; add --yes to remove them (baselines are never touched)"
        )
        return 0
    for item in abandoned:
        records.remove_unfinished(item)
    for rec in doomed:
        records.remove(rec)
    if doomed:
        records.rebuild_view(root)
    return 0
