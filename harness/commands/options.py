"""Options shared by several commands, spelled and explained once."""

from __future__ import annotations

import dataclasses
import os
import sys

from harness.core import escape, settings


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
        f"${settings.STORE_REMOTE.name}, ${settings.STORE_REF.name}); never without it. What "
        "the pull refuses, or a pull that fails, is said in one line and the command goes on "
        "with the records here: its exit code is its own",
    )


SHOWN_REFUSED = 6  # refusals named in the summary line (`harness store pull` names every one)


@dataclasses.dataclass
class Pulled:
    """What a `--pull` brought: the runs selected (pulled or already here), what the pull
    refused (one line each, as `harness store pull` says them), and why the pull failed as a
    whole ("" when it did not). A command goes on with what it could pull (docs/trust.md,
    "Commands that pull, and rendering"): these are said in one line and in its --json and
    --markdown outputs, never as its exit code."""

    runs: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    refused: list[str] = dataclasses.field(default_factory=list)
    failed: str = ""
    asked: bool = False  # --pull was given

    def __add__(self, other: Pulled) -> Pulled:
        return Pulled(
            self.runs + other.runs,
            self.refused + other.refused,
            "; ".join(x for x in (self.failed, other.failed) if x),
            self.asked or other.asked,
        )

    def _items(self, one, limit: int) -> str:
        shown = [one(r, limit) for r in self.refused[:SHOWN_REFUSED]]
        more = len(self.refused) - SHOWN_REFUSED
        return " | ".join(shown) + (f" | and {more} more" if more > 0 else "")

    def line(self, command: str) -> str:
        """The summary line ("" when the pull refused nothing and did not fail): terminal
        text, one line, bounded whatever the history holds."""
        parts = []
        if self.failed:
            parts.append(
                f"{command}: the pull from the results history failed, so this works on the "
                f"records already here only: {escape.terminal(self.failed, escape.MAX_MESSAGE)}"
            )
        if self.refused:
            parts.append(
                f"{command}: went on without {len(self.refused)} item(s) the pull refused "
                f"(harness store pull names each): {self._items(escape.terminal, 300)}"
            )
        return "\n".join(parts)

    def markdown(self) -> str:
        """The same as a Markdown paragraph leading the command's Markdown output ("" when
        there is nothing to say)."""
        parts = []
        if self.failed:
            parts.append(
                f"{escape.strong('The pull from the results history failed')}; this works on "
                "the records already here only: "
                + escape.markdown_text(self.failed, limit=escape.MAX_MESSAGE)
            )
        if self.refused:
            items = self._items(lambda r, n: escape.markdown_text(r, limit=n), 300)
            parts.append(
                f"{escape.strong(f'The pull refused {len(self.refused)} item(s)')}; this "
                f"goes on without them: {items}"
            )
        return "".join(p + "\n\n" for p in parts)

    def as_json(self) -> dict | None:
        """For --json: None without --pull."""
        if not self.asked:
            return None
        return {
            "runs": ["/".join(k) for k in self.runs],
            "refused": list(self.refused),
            "failed": self.failed or None,
        }


def pull_first(
    args, command: str, machines: list[str] | None = None, strict: bool = False, **selection
) -> Pulled:
    """With --pull: bring these machines' runs (default the command's --machine, else this
    host's; harness.core.store.Selection's fields) from the results history before the command
    reads results. What the pull refused does not stop the command: it is said in one line on
    stderr and comes back in the Pulled. A pull that fails as a whole (git failed, or a history
    the store refuses whole) is said the same way and the command works on the records here,
    unless `strict` (the gate's BASE and HEAD, which must be the history's): then it is raised.
    A results history named wrongly in the settings (a ref not spelt as one) is bad input."""
    if not getattr(args, "pull", False):
        return Pulled()
    machines = [machine_name(args)] if machines is None else machines
    from harness.core import store
    from harness.core.exits import HarnessError
    from harness.verdict.results import results_root

    root = results_root(args.results_dir)
    sel = store.Selection(machines=tuple(machines), **selection)
    repo = store.open_repo(root)
    try:
        report = store.pull(root, repo, sel)
    except HarnessError as exc:
        if strict:
            raise
        pulled = Pulled(failed=str(exc), asked=True)
    else:
        runs = sorted(report.pulled + report.here, key=lambda k: (k[1], k[0]))
        pulled = Pulled(runs, list(report.refused), asked=True)
    said = pulled.line(f"harness {command}")
    if said:
        print(said, file=sys.stderr)
    return pulled
