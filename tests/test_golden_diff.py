"""The golden diff: renumbered-only lines are counted, substance is shown (harness.golden.diff)."""

from __future__ import annotations

import difflib
import random

import pytest
import torch
from torch import nn

from harness.golden import canonical, store
from harness.golden.diff import golden_diff, matched_pairs, pair_renames


def _changed(lines: list[str]) -> int:
    return sum(1 for x in lines if x[:1] in "+-" and not x.startswith(("+++", "---")))


def _plain_changed(a: str, b: str) -> int:
    return _changed(list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)))


class ViewChain(nn.Module):
    """One scope with many look-alike values: `view`, `sin`, `view`, `sin`..., some views
    `_unsafe_view` instead (what a torch release did to some LSTM views in AOT graphs)."""

    def __init__(self, n: int, unsafe=()):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.n, self.unsafe = n, set(unsafe)

    def forward(self, x):
        y = self.lin(x)
        for i in range(self.n):
            viewed = torch.ops.aten._unsafe_view(y, [2, 8]) if i in self.unsafe else y.view(2, 8)
            y = viewed.sin()
        return y


def _printout(model: nn.Module) -> str:
    exported = torch.export.export(model, (torch.randn(2, 8),))
    names, kinds = {}, {}
    for spec in exported.graph_signature.input_specs:
        names[spec.arg.name] = spec.target or spec.arg.name
        kinds[spec.arg.name] = "param" if spec.target else "input"
    return canonical.fx_graph_text(exported.graph_module, names, kinds)


def test_an_op_type_change_in_a_long_graph_shows_only_its_lines_and_direct_uses():
    before = _printout(ViewChain(60))
    after = _printout(ViewChain(60, unsafe={3, 10, 25}))
    plain = _plain_changed(before, after)
    diff = golden_diff(before, after, ("a", "b"), max_lines=10_000, context=0)
    # each changed view: its own line and the sin that uses it, before and after
    assert _changed(diff) == 3 * 2 * 2, "\n".join(diff)
    assert plain > 200  # every later view renumbered: past the 200-line cut of a mismatch
    assert diff[0].startswith("(108 lines differ only by renumbered values")
    added = [x for x in diff if x.startswith("+") and not x.startswith("+++")]
    assert all("_unsafe_view" in x for x in added), "\n".join(added)


def test_a_use_that_reads_another_existing_value_is_shown_not_called_a_rename():
    before = "a_1: f32[2] = sin(x)\na_2: f32[2] = cos(x)\nb: f32[2] = add(a_1, y)\n"
    after = "a_1: f32[2] = sin(x)\na_2: f32[2] = cos(x)\nb: f32[2] = add(a_2, y)\n"
    diff = golden_diff(before, after, ("a", "b"), max_lines=100)
    assert "-b: f32[2] = add(a_1, y)" in diff and "+b: f32[2] = add(a_2, y)" in diff
    assert not diff[0].startswith("(")


def test_a_consistent_renumbering_alone_is_no_diff_of_substance():
    before = "v_1 = view(x)\nv_2 = view(v_1)\nreturn (v_2)\n"
    after = "v_7 = view(x)\nv_8 = view(v_7)\nreturn (v_8)\n"
    found = pair_renames(before.splitlines(), after.splitlines())
    assert found.expected == after.splitlines()
    assert found.renames == {"v_1": "v_7", "v_2": "v_8"}
    diff = golden_diff(before, after, ("a", "b"), max_lines=100)
    assert diff == [
        "(3 lines differ only by renumbered values, not shown: 2 renames, "
        "e.g. v_1 -> v_7, v_2 -> v_8)"
    ]


def test_two_names_collapsing_into_one_is_not_a_rename():
    before = "p_1 = relu(x)\np_2 = relu(x)\nreturn (p_1, p_2)\n"
    after = "p_1 = relu(x)\np_1 = relu(x)\nreturn (p_1, p_1)\n"
    diff = golden_diff(before, after, ("a", "b"), max_lines=100)
    assert _changed(diff) >= 2 and "renumbered" not in diff[0]


def test_the_pairing_is_a_longest_common_subsequence():
    def lcs(a, b):
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i, x in enumerate(a):
            for j, y in enumerate(b):
                table[i + 1][j + 1] = (
                    table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
                )
        return table[-1][-1]

    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abc") for _ in range(rng.randint(0, 10))]
        b = [rng.choice("abc") for _ in range(rng.randint(0, 10))]
        pairs = matched_pairs(a, b)
        assert all(a[i] == b[j] for i, j in pairs)
        assert all(p < q for (p, _), (q, _) in zip(pairs, pairs[1:]))
        assert all(p < q for (_, p), (_, q) in zip(pairs, pairs[1:]))
        assert len(pairs) == lcs(a, b), (a, b)
    assert matched_pairs(list("aaaa"), list("bbbb"), max_edits=3) is None


@pytest.mark.parametrize("frontend", ["export", "aot"])
def test_a_mismatch_message_leads_with_the_renames_count(frontend, tmp_path):
    before = _printout(ViewChain(40))
    after = _printout(ViewChain(40, unsafe={5}))
    path = tmp_path / f"chain.{frontend}.expect"
    store.save(path, store.render(before, {"frontend": frontend, "model": "chain (small)"}))
    message = store.mismatch_message(store.read(path), after, "chain", "pytest --accept")
    assert "lines differ only by renumbered values" in message
    assert "+lin/_unsafe_view: f32[2, 8] = aten._unsafe_view.default" in message
    assert "diff cut here" not in message
