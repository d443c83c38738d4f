"""The one rule for names that become file names and test ids: model names and golden ids.

ASCII letters, digits and underscores only (re.ASCII): `str.isalnum` also accepts `modèle`,
`模型` or `²`, names that some file systems and shells mangle and that no golden id accepts.
A golden id is `<model>.<frontend>`: words joined by dots, dashes allowed, no `..`.
"""

from __future__ import annotations

import re

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
