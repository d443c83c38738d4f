"""A golden diff that keeps substance visible when values are only renumbered.

Local names (`rnn/view_6`) are numbered among equal names, so when some ops of a scope change
type (`view` -> `_unsafe_view`), every later value of the old type is renumbered and the lines
that define or use it differ in nothing but that number. Such lines are paired here and counted
as renames, not listed; the rest is shown as a unified diff.

A line counts as renamed only when the renaming is consistent over the whole printout: lines are
paired on their text with the numbers stripped from names, every name of a paired line is
matched with the name at the same place in its partner, and a name that would map to two
different names (or two names onto one) is a change in substance, not a rename. So a use that
now reads another value (`add(x_1, y)` -> `add(x_2, y)` while both still exist) is shown.
"""

from __future__ import annotations

import dataclasses
import difflib
import re

# A numbered name ends in `_<digits>` after a letter or `_`-free stem: getitem_3, %rnn/view_6.
_NUMBER = re.compile(r"(?<=[A-Za-z_])_\d+$")
# Past this many inserted or deleted lines (in the numbers-stripped text) pairing falls back to
# difflib's matching blocks: the exact search costs O((N+M)D).
MAX_EDITS = 2000
# Punctuation and spaces split a line into names and literals; the separators are kept.
_SPLIT = re.compile(r"([\s,()\[\]{}=:]+)")
# A line's defined name ends at its type (`: `), its value (` = `) or a closing `:`.
_DEFINED = re.compile(r": | = |:$")


def _tokens(line: str) -> list[str]:
    return _SPLIT.split(line)


def _key(tokens: list[str]) -> tuple[str, ...]:
    return tuple(_NUMBER.sub("", t) for t in tokens)


@dataclasses.dataclass
class Renames:
    """What the pairing found: the expected text with renamed-only lines replaced by their
    partners (so a plain diff shows only substance), and the renames themselves."""

    expected: list[str]
    renamed_lines: int
    renames: dict[str, str]  # old name -> new name, identities left out


def matched_pairs(a: list, b: list, max_edits: int = MAX_EDITS) -> list[tuple[int, int]] | None:
    """Index pairs of a longest common subsequence of `a` and `b` (Myers' O((N+M)D) greedy
    algorithm), or None past `max_edits`. A true LCS, not difflib's longest-block heuristic:
    in a chain of look-alike lines (view, sin, view, sin...) the blocks are ambiguous, and only
    the longest common subsequence lines each value up with itself."""
    n, m = len(a), len(b)
    v = {1: 0}
    trace = []
    for d in range(min(n + m, max_edits) + 1):
        trace.append(dict(v))
        for k in range(-d, d + 1, 2):
            x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m)
    return None


def _backtrack(trace: list[dict], n: int, m: int) -> list[tuple[int, int]]:
    """Walk Myers' saved frontiers back from the end, collecting the diagonal (matched) steps."""
    pairs = []
    x, y = n, m
    for d in range(len(trace) - 1, -1, -1):
        v, k = trace[d], x - y
        prev_k = k + 1 if k == -d or (k != d and v[k - 1] < v[k + 1]) else k - 1
        prev_x = v[prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x, y = x - 1, y - 1
            pairs.append((x, y))
        x, y = prev_x, prev_y
    pairs.reverse()
    return pairs


def _defined(line: str) -> str:
    """What a line defines (`rnn/view_6`, `param encoder.weight`, `%a`), else the line itself."""
    return _DEFINED.split(line.strip(), maxsplit=1)[0]


def _pairs(a: list, b: list) -> list[tuple[int, int]]:
    pairs = matched_pairs(a, b)
    if pairs is None:  # too different to pair exactly in good time: difflib's blocks will do
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        blocks = matcher.get_matching_blocks()
        pairs = [(block.a + i, block.b + i) for block in blocks for i in range(block.size)]
    return pairs


def pair_renames(expected: list[str], actual: list[str]) -> Renames:
    a_tok = [_tokens(line) for line in expected]
    b_tok = [_tokens(line) for line in actual]
    a_key, b_key = [_key(t) for t in a_tok], [_key(t) for t in b_tok]
    # Lines are first lined up by the name they define: names of ops whose count did not change
    # keep their numbers, and anchor the rest. Between anchors, lines are paired on their text
    # with numbers stripped (a renumbered `view_7` -> `view_6`).
    anchors = _pairs([_defined(x) for x in expected], [_defined(x) for x in actual])
    pairs = []
    ends = [*anchors, (len(expected), len(actual))]
    i0 = j0 = 0
    for i1, j1 in ends:
        gap = _pairs(a_key[i0:i1], b_key[j0:j1])
        pairs += [(i0 + i, j0 + j) for i, j in gap]
        if i1 < len(expected):
            pairs.append((i1, j1))
        i0, j0 = i1 + 1, j1 + 1
    pairs = [(i, j) for i, j in pairs if a_key[i] == b_key[j]]  # an anchor whose text changed
    forward: dict[str, set[str]] = {}
    backward: dict[str, set[str]] = {}
    for i, j in pairs:
        for old, new in zip(a_tok[i], b_tok[j]):
            forward.setdefault(old, set()).add(new)
            backward.setdefault(new, set()).add(old)

    def consistent(old: str, new: str) -> bool:
        return forward[old] == {new} and backward[new] == {old}

    out = list(expected)
    renamed = 0
    renames: dict[str, str] = {}
    for i, j in pairs:
        if expected[i] == actual[j]:
            continue
        moved = [(o, n) for o, n in zip(a_tok[i], b_tok[j]) if o != n]
        if all(consistent(o, n) for o, n in moved):
            out[i] = actual[j]
            renamed += 1
            renames.update(moved)
    return Renames(out, renamed, renames)


def golden_diff(
    expected: str, actual: str, labels: tuple[str, str], max_lines: int, context: int = 2
) -> list[str]:
    """Unified diff of the lines that changed in substance, cut after `max_lines`, led by one
    line counting the lines that differ only by renamed values."""
    a, b = expected.splitlines(), actual.splitlines()
    found = pair_renames(a, b)
    diff = list(difflib.unified_diff(found.expected, b, *labels, lineterm="", n=context))
    if len(diff) > max_lines:
        more = len(diff) - max_lines
        diff = diff[:max_lines] + [f"... diff cut here: {more} more lines not shown"]
    if found.renamed_lines:
        examples = ", ".join(f"{o} -> {n}" for o, n in list(found.renames.items())[:3])
        diff.insert(
            0,
            f"({found.renamed_lines} lines differ only by renumbered values, not shown: "
            f"{len(found.renames)} renames, e.g. {examples})",
        )
    return diff
