"""Options shared by several commands, spelled and explained once (DECISIONS §4)."""

from __future__ import annotations


def results_dir(parser) -> None:
    parser.add_argument("--results-dir", metavar="ROOT",
                        help="results root: asv/, baselines/, noise/, html/ below it "
                             "(default $HARNESS_RESULTS_DIR, else results/ of the checkout)")


def machine(parser, what: str = "asv machine name") -> None:
    parser.add_argument("--machine", help=f"{what} (default: host name + GPU model)")


def require_gpu(parser) -> None:
    parser.add_argument("--require-gpu", action="store_true",
                        help="exit 4 unless a CUDA GPU is present (for GPU-runner jobs)")


def check_gpu(args) -> None:
    """Raise NoGPU (exit 4) when --require-gpu was given on a machine without a GPU."""
    if getattr(args, "require_gpu", False):
        from harness.core.env import require_gpu

        require_gpu()


def machine_name(args) -> str:
    if args.machine:
        return args.machine
    from harness.core.env import machine_name as default

    return default()
