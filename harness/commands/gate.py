"""`harness gate BASE HEAD`: compare two result sets; exit 0 pass, 1 regression, 2 failed or
missing benchmark, 3 bad input, 4 no GPU with --require-gpu. See harness.gate for details."""

import sys


def add_arguments(parser):
    from harness.stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD

    parser.add_argument("base", help="result file, directory, commit, `latest` or `baseline[:MACHINE]`")
    parser.add_argument("head", help="same forms as BASE")
    parser.add_argument("--results-dir", help="root of results/ (default $HARNESS_RESULTS_DIR or ./results)")
    parser.add_argument("--machine", help="machine name for commits/latest/baseline (default: the "
                        "only machine there, or HEAD's)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help=f"relative change a timing must exceed (default {DEFAULT_THRESHOLD}); "
                        "a benchmark's calibrated noise band raises it")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help=f"Mann-Whitney significance level (default {DEFAULT_ALPHA}, as asv)")
    parser.add_argument("--noise", help="noise-band file (default RESULTS/noise/<machine>.json)")
    parser.add_argument("--bench", action="append", metavar="NAME",
                        help="compare only this benchmark (repeatable); unknown names exit 3")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    parser.add_argument("--allow-machine-mismatch", action="store_true",
                        help="compare results from different machines anyway")
    parser.add_argument("--require-gpu", action="store_true",
                        help="exit 4 unless a CUDA GPU is present (for GPU-runner jobs)")


def run_with_defaults(args) -> int:
    """`run` for callers that build args themselves (harness nightly --gate): None means default."""
    from harness.stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD

    if args.threshold is None:
        args.threshold = DEFAULT_THRESHOLD
    if args.alpha is None:
        args.alpha = DEFAULT_ALPHA
    return run(args)


def run(args) -> int:
    from harness import gate
    from harness.results import write_text_atomic

    if args.require_gpu:
        why = gate.gpu_missing_message()
        if why:
            print(f"harness gate: {why}", file=sys.stderr)
            return gate.NO_GPU
    out = gate.run_gate(args.base, args.head, root=args.results_dir, machine=args.machine,
                        threshold=args.threshold, alpha=args.alpha, noise_file=args.noise,
                        only=args.bench, allow_machine_mismatch=args.allow_machine_mismatch)
    title = ""
    if out.base and out.head:
        title = f"base {out.base.label}  vs  head {out.head.label}  on {out.head.machine}"
    wide = [r.name for r in out.rows if r.threshold and r.unit != "bytes" and r.threshold > 2 * args.threshold]
    if wide:
        out.message = (out.message + "\n" if out.message else "") + (
            f"warning: calibrated noise bands above {2 * args.threshold:.0%} hide smaller timing changes "
            f"for: {', '.join(wide)} (counters are still exact); recalibrate on a quieter machine")
    footer = out.summary() + (f"\n{out.message}" if out.message else "")
    print(gate.render(out.rows, "text", title=title, footer=footer), end="")
    if out.message and out.code == gate.BAD_INPUT:
        print(f"harness gate: {out.message}", file=sys.stderr)
    if args.markdown:
        md_footer = f"**{out.summary()}**" + (f"\n\n{out.message}" if out.message else "")
        write_text_atomic(args.markdown, gate.render(out.rows, "markdown", title=title, footer=md_footer))
    return out.code
