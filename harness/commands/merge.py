"""`harness merge RUN...`: the shard runs of one machine and one commit become one run record
(harness.runs.merge); asv publish/compare, the gate and the report then read it as one run."""

import sys

from harness.commands import options


def add_arguments(parser):
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="shard runs: run-record folders, run ids (or unique prefixes), result files",
    )
    options.results_dir(parser)
    parser.add_argument(
        "--machine", help="machine name for run ids (default: the only machine there)"
    )
    parser.add_argument("--label", help="label of the merged run id (default: merged)")
    parser.add_argument(
        "--partial",
        action="store_true",
        help="merge even when some shards K/N of the set are not named (normally exit 3)",
    )
    parser.add_argument(
        "--allow-env-change",
        action="store_true",
        help="merge runs whose device model or CPU thread count differ (normally exit 3)",
    )


def run(args) -> int:
    from harness.core import records
    from harness.runs.merge import merge
    from harness.verdict.results import results_root

    root = results_root(args.results_dir)
    rec = merge(
        args.runs,
        root,
        machine=args.machine,
        label=args.label,
        partial=args.partial,
        allow_env_change=args.allow_env_change,
        log=lambda m: print(m, file=sys.stderr),
    )
    records.rebuild_view(root)
    parts = ", ".join(
        f"{s['run_id']} ({s['cases']} cases"
        + (f", shard {s['shard']}" if s.get("shard") else "")
        + ")"
        for s in rec.meta["merged_from"]
    )
    print(
        f"merged run record: {rec.path}\n  from {parts}\n(asv view for asv publish/compare: "
        f"{records.view_dir(root)})"
    )
    return 0
