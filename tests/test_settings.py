"""The settings registry: every variable declared once, read one way, documented from the code."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

from harness.core import settings
from harness.core.exits import BadInput

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAME = re.compile(r"HARNESS_[A-Z_]+")


def test_typed_values_and_bad_numbers_name_the_variable(monkeypatch):
    monkeypatch.setenv(settings.THREADS.name, "3")
    monkeypatch.setenv(settings.MODELS.name, " a.py, pkg.mod ,")
    monkeypatch.setenv(settings.PAIRED_WINDOW_S.name, "")
    assert settings.THREADS.get() == 3 and settings.MODELS.get() == ["a.py", "pkg.mod"]
    assert settings.PAIRED_WINDOW_S.get() is None and settings.GOLDEN_DEVICE.get() == "cpu"
    monkeypatch.setenv(settings.PROFILER_NOISE.name, "0")
    assert settings.PROFILER_NOISE.get() is False  # was on for any non-empty value
    monkeypatch.setenv(settings.THREADS.name, "two")
    with pytest.raises(BadInput, match="HARNESS_THREADS must be a whole number, got 'two'"):
        settings.THREADS.get()
    assert settings.FULL.encode(True) == "1" and settings.MODELS.encode(["a", "b"]) == "a,b"


def _string_constants(path: pathlib.Path):
    """Non-docstring string constants of a module, with their lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_no_module_names_a_variable_but_the_registry():
    found = []
    for folder in ("harness", "suites"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "harness" / "core" / "settings.py":
                continue
            found += [
                f"{path.relative_to(ROOT)}:{line}: {NAME.findall(text)}"
                for line, text in _string_constants(path)
                if NAME.search(text)
            ]
    assert not found, "name these through harness.core.settings:\n" + "\n".join(found)


def test_every_variable_the_code_mentions_is_declared():
    mentioned = set()
    for folder in ("harness", "suites"):
        for path in (ROOT / folder).rglob("*.py"):
            mentioned |= set(NAME.findall(path.read_text(encoding="utf-8")))
    assert mentioned - set(settings.REGISTRY) == set()


def test_the_docs_table_is_the_registrys():
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = page.split(settings.BEGIN, 1)[1].split(settings.END, 1)[0].strip()
    assert table == settings.markdown().strip(), (
        "docs/configuration.md is out of date: "
        "python -m harness.core.settings --write docs/configuration.md"
    )
