"""Text-level normalisation shared by the printers and the expect store (no torch import here,
so the pytest plugin stays cheap to load).

`normalize` is the last pass applied to *both* expected and actual text: LF line ends, no
trailing spaces, and no address, absolute path or `___torch_mangle_N` that slipped through a
printer. The printers in canonical.py already avoid all of these; this pass makes comparisons
independent of them anyway.
"""

from __future__ import annotations

import collections
import re

# Bump when a printer's output format changes: every golden must then be re-accepted, and the
# golden header tells the reader why the whole expect/ directory changed at once.
NORMALISER_VERSION = 2

ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
MANGLE = re.compile(r"___torch_mangle_\d+")
ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+[\w.+-]+\.py(?::\d+(?::\d+)?)?")


def normalize(text: str) -> str:
    """The shared last pass: LF line ends, no trailing spaces, no addresses, paths or mangles."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = ADDRESS.sub("0x?", text)
    text = MANGLE.sub("", text)
    text = ABS_PATH.sub("<path>", text)
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


_OP = re.compile(r"= ([A-Za-z_][\w.:]*(?:<\w+>)?)[\[(]")


def op_counts(text: str) -> collections.Counter:
    """How often each op appears in a canonical printout (`aten::relu_`, `aten.relu.default`)."""
    return collections.Counter(m.group(1) for m in _OP.finditer(text))
