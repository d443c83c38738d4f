"""The documentation stays true to the code: the command reference is the parsers' own help, every
page is in the site's navigation, and the README stays a short entry point. Fast: no mkdocs build
here (`mkdocs build --strict` checks links; see docs/index.md)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from harness.commands import reference

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_MAX_LINES = 200


def _nav_pages(entries) -> list[str]:
    """Every page file a MkDocs `nav` names, nested sections included."""
    pages = []
    for entry in entries:
        if isinstance(entry, str):
            pages.append(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def nav_pages() -> list[str]:
    yaml = pytest.importorskip("yaml")  # asv's dependency, so there wherever the harness is
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config.get("docs_dir", "docs") == "docs"
    return [p for p in _nav_pages(config["nav"]) if not re.match(r"[a-z]+://", p)]


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="docs/cli.md holds Python 3.11's argparse layout (the reference environment)",
)
def test_cli_reference_is_the_parsers_help():
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert page == reference.markdown(), f"docs/cli.md is out of date: {reference.REGENERATE}"


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = nav_pages()
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(nav) - set(pages)) == [], "mkdocs.yml's nav names pages that do not exist"
    assert sorted(set(pages) - set(nav)) == [], "pages missing from mkdocs.yml's nav"
    assert len(nav) == len(set(nav)), "a page is listed twice in mkdocs.yml's nav"


def test_readme_is_short_and_its_doc_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.count("\n") + (not text.endswith("\n"))
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail into docs/"
    )
    links = re.findall(r"\]\((docs/[^)#\s]+)", text)
    assert links, "README.md links no page under docs/"
    assert [link for link in links if not (ROOT / link).is_file()] == []
