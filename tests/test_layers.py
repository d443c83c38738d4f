"""The package's imports flow one way: commands -> jobs -> core. Read from the source with `ast`
(no import needed), so a violation is named with its file and line.

Layers, lowest first: core; golden and measure (which never import each other); verdict (may
run asv through measure, never golden); commands, cli and the compatibility names on top.
`python -m pytest tests/test_layers.py -q -s` prints the module-level import graph.
"""

from __future__ import annotations

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[1] / "harness"

# what each layer may import from the harness (besides itself)
ALLOWED = {
    "core": set(),
    "golden": {"core"},
    "measure": {"core"},
    "verdict": {"core", "measure"},
    "commands": {"core", "golden", "measure", "verdict", "commands"},
    "top": {"core", "golden", "measure", "verdict", "commands"},
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ALLOWED and parts[1] != "top":
        return parts[1]
    return "top"  # harness, harness.cli, harness.zoo, harness.gate


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def harness_imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) for every import of a harness module anywhere in the file (function-level
    imports count too: a lazy import is still a dependency)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "harness"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "harness":
                # `from harness.core import exits` imports harness.core.exits
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PKG.rglob("*.py")):
        graph[module_name(path)] = {m for _, m in harness_imports(path)}
    return graph


def test_every_import_flows_downwards():
    violations = []
    for path in sorted(PKG.rglob("*.py")):
        src = layer_of(module_name(path))
        for line, target in harness_imports(path):
            dst = layer_of(target)
            if dst != src and dst not in ALLOWED[src]:
                violations.append(f"{path.relative_to(PKG.parent)}:{line} ({src}) imports {target} ({dst})")
    assert not violations, "imports that run up or sideways:\n" + "\n".join(violations)


def test_layers_cover_the_package():
    """Every module sits in a known room: a new top-level module must be a deliberate choice."""
    top = sorted(module_name(p) for p in PKG.glob("*.py"))
    assert top == ["harness", "harness.cli", "harness.gate", "harness.zoo"], top
    rooms = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert rooms == ["commands", "core", "golden", "measure", "verdict"], rooms


def test_the_checker_sees_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from harness.commands import gate\n")
    assert harness_imports(bad) == [(2, "harness.commands.gate")]
    assert layer_of("harness.commands.gate") not in ALLOWED["verdict"]


def test_print_import_graph(capsys):
    with capsys.disabled():
        graph = import_graph()
        print("\nharness import graph (layer: module -> harness modules it imports)")
        for mod in sorted(graph, key=lambda m: (list(ALLOWED).index(layer_of(m)), m)):
            deps = sorted({".".join(d.split(".")[:3]) for d in graph[mod]} - {mod})
            print(f"  {layer_of(mod):<8} {mod:<34} -> {', '.join(deps) or '-'}")
    # the graph is read, not assumed: edges the layout relies on are there
    assert "harness.verdict.compare" in graph["harness.verdict.gate"]
    assert any(d.startswith("harness.measure.asv") for d in graph["harness.measure.bench"])
    assert not any(d.startswith("harness.commands") for m, deps in graph.items()
                   if not m.startswith("harness.commands") and m != "harness.cli" for d in deps)
