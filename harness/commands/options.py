"""Options shared by several commands, spelled and explained once."""

from __future__ import annotations

import os

from harness.core import settings


def results_dir(parser) -> None:
    parser.add_argument(
        "--results-dir",
        metavar="ROOT",
        help="results root: runs/, asv/, baselines/, noise/, html/ below it "
        f"(default ${settings.RESULTS_DIR.name}, else results/ of the project)",
    )
    project(parser)


def project(parser) -> None:
    parser.add_argument(
        "--project",
        metavar="DIR",
        help="the harness checkout, or a project made by `harness init` (default: found from "
        f"the working directory; also ${settings.PROJECT.name})",
    )


def apply_project(args) -> None:
    """--project DIR holds for this process and what it starts (asv, harness bench under
    nightly)."""
    if getattr(args, "project", None):
        from harness.core.project import project_root

        os.environ[settings.PROJECT.name] = str(project_root(args.project))


def check_machine_names(args) -> None:
    """--machine NAME (and --machines A,B) become folder names in the results and the shared
    history: each must be a machine name (harness.core.trust), else bad input naming the rule."""
    from harness.core import trust

    given = getattr(args, "machine", None)
    names = list(given) if isinstance(given, list) else [given] if given else []
    several = getattr(args, "machines", None)
    if isinstance(several, str):
        names += [m.strip() for m in several.split(",") if m.strip()]
    for name in names:
        trust.check_machine(name, "--machine")


def load_models() -> None:
    """The project's own models registered beside the built-in zoo (the ini option
    harness_models, HARNESS_MODELS, the harness.models entry points), as `harness models` lists
    them: every command that looks a model up calls this first. A module that does not import
    is bad input (exit 3) naming it."""
    from harness.core.user_models import load_user_models

    load_user_models()


def suites(parser) -> None:
    parser.add_argument(
        "--suite",
        action="append",
        metavar="NAME",
        help="suite(s) in suites/benchmarks, and a project's own benchmark modules (repeatable; "
        "default all but the canary; in a project of its own, its modules and models)",
    )


def machine(parser, what: str = "asv machine name") -> None:
    parser.add_argument("--machine", help=f"{what} (default: host name + GPU model)")


def require_gpu(parser) -> None:
    parser.add_argument(
        "--require-gpu",
        action="store_true",
        help="exit 4 unless a CUDA GPU is present (for GPU-runner jobs)",
    )


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


def store_location(parser) -> None:
    """--remote and --ref: where the results history in git lives (harness.core.store)."""
    from harness.core import settings

    parser.add_argument(
        "--remote",
        metavar="NAME|URL",
        help="a git remote of the project or any git URL (default "
        f"${settings.STORE_REMOTE.name}, else origin)",
    )
    parser.add_argument(
        "--ref",
        metavar="REF",
        help=f"the ref holding the history (default ${settings.STORE_REF.name}, else "
        f"{settings.STORE_REF.default})",
    )


def pull(parser, what: str) -> None:
    parser.add_argument(
        "--pull",
        action="store_true",
        help=f"first pull {what} from the results history in git (`harness store pull`; "
        f"${settings.STORE_REMOTE.name}, ${settings.STORE_REF.name}); never without it",
    )


def pull_first(args, machines: list[str] | None = None, **selection) -> list[tuple[str, str]]:
    """With --pull: bring these machines' runs (default the command's --machine, else this
    host's; harness.core.store.Selection's fields) from the results history before the command
    reads results. Returns the runs selected, pulled or already here."""
    if not getattr(args, "pull", False):
        return []
    machines = [machine_name(args)] if machines is None else machines
    from harness.core import store
    from harness.verdict.results import results_root

    root = results_root(args.results_dir)
    sel = store.Selection(machines=tuple(machines), **selection)
    report = store.pull(root, store.open_repo(root), sel)
    if report.refused:
        raise store.Refused("refused: " + " | ".join(report.refused))
    return sorted(report.pulled + report.here, key=lambda k: (k[1], k[0]))
