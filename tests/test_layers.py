"""The package's imports flow one way: commands -> runs -> verdict -> golden | measure -> core.
Read from the source with `ast` (no import needed), so a violation is named with its file and line.

Floors, lowest first: core; golden and measure (which never import each other); verdict (judges:
it loads, compares and renders, and imports nothing from measure or runs); runs (everything
that starts processes to measure: asv, bench, ab, calibrate, merge, nightly, gpu-check); commands,
cli and the compatibility names on top. No import circles, relative imports count, and no job
reaches another through a `python -m harness.cli` subprocess: where a separate process is
needed for isolation it is a measuring worker (the instruction counter under valgrind, the
operator pass, distributed workers) or the runs layer's one worker entry point.
`python -m pytest tests/test_layers.py -q -s` prints the module-level import graph.
"""

from __future__ import annotations

import ast
import functools
import pathlib

import pytest

# one worker runs them all, so the package is parsed once (`_nodes`)
pytestmark = pytest.mark.xdist_group("layers")

PKG = pathlib.Path(__file__).resolve().parents[1] / "harness"

# what each floor may import from the harness (besides itself)
ALLOWED = {
    "core": set(),
    "golden": {"core"},
    "measure": {"core"},
    "verdict": {"core"},
    "runs": {"core", "golden", "measure", "verdict"},
    "commands": {"core", "golden", "measure", "verdict", "runs", "commands"},
    "top": {"core", "golden", "measure", "verdict", "runs", "commands"},
}
# `python -m MODULE` targets a harness process may start: workers, not commands
WORKERS = {
    "harness.measure.instructions",
    "harness.measure.profiles",
    "harness.measure.workloads.distributed",
    "harness.runs.worker",
    # the GPU kit proves this public entry point on the runner
    "harness.gate",
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ALLOWED and parts[1] != "top":
        return parts[1]
    return "top"  # harness, harness.cli, harness.zoo, harness.gate, harness.instructions, ...


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module a (possibly relative) `from ... import` names."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def _nodes(path: pathlib.Path) -> tuple[ast.AST, ...]:
    """Every node of a file's syntax tree: parsed once per session for all the checks here
    (the package is read by five of them; the tests share one worker, see `pytestmark`)."""
    return tuple(ast.walk(ast.parse(path.read_text(), str(path))))


def harness_imports(path: pathlib.Path, module: str | None = None) -> list[tuple[int, str]]:
    """(line, module) for every import of a harness module anywhere in the file (function-level
    imports count too: a lazy import is still a dependency; relative imports too)."""
    module = module or (module_name(path) if PKG in path.resolve().parents else "")
    found = []
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "harness"
            ]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, node, path.name == "__init__.py")
            if target.split(".")[0] == "harness":
                # `from harness.core import exits` imports harness.core.exits
                found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PKG.rglob("*.py")):
        graph[module_name(path)] = {m for _, m in harness_imports(path)}
    return graph


def _module_of(name: str, known: set[str]) -> str | None:
    """`harness.core.exits.BadInput` -> `harness.core.exits` (the longest known module)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return None


def module_graph() -> dict[str, set[str]]:
    """Module -> the harness modules (not names) it imports."""
    graph = import_graph()
    known = set(graph)
    return {
        m: {t for d in deps if (t := _module_of(d, known)) and t != m} for m, deps in graph.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_import_flows_downwards():
    violations = []
    for path in sorted(PKG.rglob("*.py")):
        src = layer_of(module_name(path))
        for line, target in harness_imports(path):
            dst = layer_of(target)
            if dst != src and dst not in ALLOWED[src]:
                violations.append(
                    f"{path.relative_to(PKG.parent)}:{line} ({src}) imports {target} ({dst})"
                )
    assert not violations, "imports that run up or sideways:\n" + "\n".join(violations)


def test_no_import_circles():
    assert cycles(module_graph()) == []


def test_no_job_reaches_another_through_the_cli():
    """`[sys.executable, "-m", X, ...]` in the package: X must be a worker, never harness.cli."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        for node in _nodes(path):
            if isinstance(node, (ast.List, ast.Tuple)):
                items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                for i, item in enumerate(items[:-1]):
                    target = items[i + 1]
                    if (
                        item == "-m"
                        and isinstance(target, str)
                        and target.startswith("harness")
                        and target not in WORKERS
                    ):
                        found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}: -m {target}")
    assert not found, "start a worker (or call the job in-process), not the CLI:\n" + "\n".join(
        found
    )


def test_layers_cover_the_package():
    """Every module sits in a known floor: a new top-level module must be a deliberate choice."""
    top = sorted(module_name(p) for p in PKG.glob("*.py"))
    assert top == [
        "harness",
        "harness.answers",
        "harness.cli",
        "harness.gate",
        "harness.instructions",
        "harness.zoo",
    ], top
    rooms = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert rooms == ["commands", "core", "golden", "measure", "runs", "verdict"], rooms


def test_the_checkers_see_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from harness.commands import gate\n")
    assert harness_imports(bad) == [(2, "harness.commands.gate")]
    assert layer_of("harness.commands.gate") not in ALLOWED["verdict"]
    rel = PKG / "verdict" / "_probe.py"  # a relative import is resolved against its package
    tree_line = "from ..runs import ab\n"
    probe = tmp_path / "probe.py"
    probe.write_text(tree_line)
    assert harness_imports(probe, "harness.verdict._probe") == [(1, "harness.runs.ab")]
    assert not rel.exists()
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_print_import_graph(capsys):
    graph = module_graph()
    with capsys.disabled():
        print("\nharness import graph (floor: module -> harness modules it imports)")
        for mod in sorted(graph, key=lambda m: (list(ALLOWED).index(layer_of(m)), m)):
            print(f"  {layer_of(mod):<8} {mod:<40} -> {', '.join(sorted(graph[mod])) or '-'}")
    # the graph is read, not assumed: edges the layout relies on are there
    assert "harness.verdict.compare" in graph["harness.verdict.gate"]
    assert "harness.runs.asv" in graph["harness.runs.bench"]
    assert not any(
        d.startswith("harness.commands")
        for m, deps in graph.items()
        if not m.startswith("harness.commands") and m != "harness.cli"
        for d in deps
    )


def test_every_imported_name_exists():
    """`from harness.x import name` anywhere (function-level imports too) names something x
    has: a lint fix that drops an "unused" re-export would break a lazy import elsewhere."""
    import importlib

    missing = []
    for root in (PKG, PKG.parent / "suites", PKG.parent / "tests"):
        for path in sorted(root.rglob("*.py")):
            for node in _nodes(path):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0):
                    continue
                if not (node.module or "").startswith("harness"):
                    continue
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if hasattr(module, alias.name):
                        continue
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"{path}:{node.lineno}: {node.module} has no {alias.name}")
    assert not missing, "\n".join(missing)
