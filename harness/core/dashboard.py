"""What the asv view may hand to the published dashboard (docs/design.md, "Rendering what
records say").

asv's page builds HTML by string concatenation from the view's `benchmarks.json` (a benchmark's
name goes into the navigation tree, links, element ids and headings; its code into a tooltip
that renders HTML) and from each machine's `machine.json` (a tooltip that renders HTML). Those
files are rebuilt from run records, which other machines may have written
(harness.core.records.rebuild_view), so before they are written:

- a benchmark is kept only if its name is what asv makes of a Python benchmark, dotted ASCII
  identifiers (`fusion.PointwiseChain.track_compiled_over_eager`), at most MAX_NAME
  characters, and no text the page shows of it (pretty name, parameter names and values, unit,
  type) holds a control character, `<`, `>`, `&` or a backtick (names, parameter names, unit,
  type and pretty name no quotes either); any other benchmark is left out of the dashboard,
  named on one line of stderr (its rows stay in the run records: gate, history and report read
  those);
- a benchmark's code is HTML-escaped (the tooltip then shows it as text, `<` included);
- machine.json keeps keys that are identifiers, its text values HTML-escaped.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from harness.core import escape

MAX_NAME = 200  # characters of a benchmark name on the dashboard
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+", re.ASCII)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_MARKUP = set("<>&`")  # never in text the page shows
_QUOTES = set("\"'")  # also never in text the page puts into attributes or ids
STRICT = ("name", "pretty_name", "param_names", "unit", "type")


def _plain(value, quotes_too: bool) -> bool:
    """Whether every string in `value` (nested lists and objects too) is text the page can show
    as it is."""
    if isinstance(value, str):
        bad = _MARKUP | _QUOTES if quotes_too else _MARKUP
        return escape.visible(value) == value and not bad.intersection(value)
    if isinstance(value, list):
        return all(_plain(v, quotes_too) for v in value)
    if isinstance(value, dict):
        return all(_plain(k, True) and _plain(v, quotes_too) for k, v in value.items())
    return value is None or isinstance(value, (bool, int, float))


def why_left_out(name, entry) -> str:
    """Why benchmark `name` of a benchmarks.json stays off the dashboard ("" when it may go)."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > MAX_NAME:
        return f"name is not dotted identifiers of at most {MAX_NAME} characters"
    if not isinstance(entry, dict) or entry.get("name") != name:
        return "its entry is not an object of that name"
    for key, value in entry.items():
        if key == "code":
            if not isinstance(value, str):
                return "its code is not text"
            continue
        if not _plain(value, quotes_too=key in STRICT):
            return f"its {escape.terminal(key, 40)} could be read as markup"
    return ""


def benchmarks(data: dict) -> dict:
    """The benchmarks.json the dashboard may show: asv's format version, and each benchmark
    that passes why_left_out, its code HTML-escaped. The others are named on one line."""
    kept: dict = {}
    left: list[str] = []
    for name, entry in data.items():
        if name == "version":
            if isinstance(entry, int) and not isinstance(entry, bool):
                kept[name] = entry
            continue
        if why_left_out(name, entry):
            left.append(name)
            continue
        kept[name] = dict(entry, code=escape.html(entry["code"])) if "code" in entry else entry
    if left:
        shown = ", ".join(escape.terminal(n, 60) for n in left[:3]) + (
            f" and {len(left) - 3} more" if len(left) > 3 else ""
        )
        print(
            f"harness: {len(left)} benchmark(s) left out of the dashboard data (their names or "
            f"fields could be read as markup; their rows stay in the run records): {shown}",
            file=sys.stderr,
        )
    return kept


def machine_json(path: os.PathLike | str) -> bytes:
    """The machine.json at `path` as the dashboard may show it: keys that are identifiers, text
    values HTML-escaped, numbers as they are; anything else dropped (a file that is not a JSON
    object gives `{}`)."""
    try:
        found = json.loads(Path(path).read_bytes().decode("utf-8"))
    except (ValueError, RecursionError):
        found = None
    out = {}
    for key, value in found.items() if isinstance(found, dict) else ():
        if not (isinstance(key, str) and _KEY.fullmatch(key) and len(key) <= 100):
            continue
        if isinstance(value, str):
            out[key] = escape.html(value)
        elif value is None or isinstance(value, (bool, int, float)):
            out[key] = value
    return (json.dumps(out, indent=4, sort_keys=True) + "\n").encode("utf-8")
