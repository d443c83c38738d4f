"""`harness durations RUN...`: refresh the committed durations file that balances shards
(harness.runs.shard) from the per-benchmark durations asv measured in those runs."""

from harness.commands import options


def add_arguments(parser):
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="runs to read (run-record folders, run ids, `latest`, commits; a merged "
        "shard set counts as one run)",
    )
    options.results_dir(parser)
    parser.add_argument(
        "--machine", help="machine name for run ids (default: the only machine there)"
    )
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="durations file to update (default: suites/durations.json of a harness checkout, "
        "durations.json at the root of a project of its own)",
    )


def run(args) -> int:
    import pathlib

    from harness.core import records
    from harness.core.exits import BadInput
    from harness.core.project import project_root, suites
    from harness.runs import shard
    from harness.verdict.results import resolve, results_root

    root = results_root(args.results_dir)
    out = pathlib.Path(args.out) if args.out else suites(project_root()).durations_files()[-1]
    by_mode: dict[str, dict[str, float]] = {}
    sources: dict[str, list[str]] = {}
    for spec in args.runs:
        f = resolve(spec, root, args.machine)
        rec = records.record_of(f)
        meta = rec.meta if rec else {}
        if "quick" not in meta:
            raise BadInput(
                f"{spec!r} ({f}) has no run record saying how it ran (quick/fast/full); "
                "name a run `harness bench` wrote"
            )
        mode = shard.mode_of_record(meta)
        by_mode.setdefault(mode, {}).update(shard.durations_of(f))
        sources.setdefault(mode, []).append(f"{rec.machine}/{rec.run_id}")
    for mode, measured in sorted(by_mode.items()):
        shard.update_durations(out, mode, measured, sources[mode])
        print(
            f"{out}: {mode}: {len(measured)} benchmarks, {sum(measured.values()):.1f} s in all "
            f"(from {', '.join(sources[mode])})"
        )
    print("commit the file: every shard runner reads the same split from it")
    return 0
