"""The one rule for names that become file names and test ids: model names and golden ids.

ASCII letters, digits and underscores only (re.ASCII): `str.isalnum` also accepts `modèle`,
`模型` or `²`, names that some file systems and shells mangle and that no golden id accepts.
A golden id is `<model>.<frontend>`: words joined by dots, dashes allowed, no `..`; the graph
test of a test's own model (`golden.check_graph`) is `<test module>.<test name>-<frontend>`.
"""

from __future__ import annotations

import re

# the capture front ends (harness.golden.capture): named here so that the pytest plugin can name
# golden ids without importing torch
FRONTENDS = ("jit", "fx", "export", "dynamo", "aot")

_WORD = "[A-Za-z0-9_]"
MODEL_NAME = re.compile(f"{_WORD}+", re.ASCII)
GOLDEN_ID = re.compile(f"{_WORD}[A-Za-z0-9_.-]*", re.ASCII)

MODEL_NAME_RULE = (
    "ASCII letters, digits and underscores (it becomes part of golden file names and test ids)"
)
GOLDEN_ID_RULE = (
    "ASCII letters, digits, '_', '-' and single dots (no '/', no '..'), e.g. 'alexnet.jit'"
)


def is_model_name(name: str) -> bool:
    return bool(name) and MODEL_NAME.fullmatch(name) is not None


def is_golden_id(golden_id: str) -> bool:
    return bool(golden_id) and GOLDEN_ID.fullmatch(golden_id) is not None and ".." not in golden_id


def model_of(golden_id: str) -> str:
    """The model part of a golden id: `alexnet.jit` -> `alexnet` (model names have no dots)."""
    return golden_id.split(".", 1)[0]


def test_golden_id(module: str, test: str, params: str, frontend: str) -> str:
    """`<test module>.<test name>[.<params>]-<frontend>`: the golden of a test's own model
    (`golden.check_graph`). Characters no golden id takes become `_`; a parameter that only names
    the front end is left out, so `test_x[export]` gives `tests_mod.test_x-export`."""
    kept = [p for p in params.split("-") if p and p != frontend] if params else []
    parts = [module, test] + (["-".join(kept)] if kept else [])
    return ".".join(re.sub(r"[^A-Za-z0-9_-]", "_", p) for p in parts) + f"-{frontend}"
