"""`harness init [DIR]`: write a minimal project of its own (harness.core.scaffold)."""

import sys
from pathlib import Path


def add_arguments(parser):
    parser.add_argument(
        "dir",
        nargs="?",
        default=".",
        metavar="DIR",
        help="the folder to write into (default: the current one; made if missing). Nothing is "
        "written where any of the files exists (exit 3, naming each)",
    )


def run(args) -> int:
    from harness.core import exits, scaffold

    folder = Path(args.dir).resolve()
    if folder.exists() and not folder.is_dir():
        raise exits.BadInput(f"{folder} is not a folder; give a folder for the project")
    entries = scaffold.plan(folder)
    found = scaffold.conflicts(folder, entries)
    if found:
        raise exits.BadInput(
            f"harness init wrote nothing into {folder}: "
            + ("these files exist" if len(found) > 1 else "this file exists")
            + ":\n"
            + "\n".join(f"  {line}" for line in found)
            + "\nMove them away, or pick another folder (harness init DIR)"
        )
    written = scaffold.write(folder, entries)
    width = max(len(e.path) for e in written)
    print(f"harness init: wrote a project of its own in {folder}")
    for entry in written:
        print(f"  {entry.path:<{width}}  {entry.what}")
    here = "" if folder == Path.cwd().resolve() else f"cd {folder}\n  "
    git = "" if (folder / ".git").exists() else "git init && "
    print(
        "next:\n"
        f"  {here}pytest --accept          record the goldens (then review expect/)\n"
        f'  {git}git add -A && git commit -m "harness project"   (runs are filed by commit)\n'
        "  harness bench --quick    the project's benchmarks, the models and instructions suites\n"
        "  harness gate <run> latest   two runs compared (exit 1 on a regression)",
        file=sys.stdout,
    )
    return exits.PASS
