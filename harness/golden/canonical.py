"""Canonical graph printouts: text that changes when the graph changes, and only then.

Raw printouts carry absolute paths, line numbers, memory addresses, `___torch_mangle_N` and SSA
numbers that shift with unrelated edits. The printers here write graphs themselves instead of
post-editing torch's text: values are named after state_dict entries (parameters, buffers) or
the input's argument name, every value carries its dtype and shape, and nothing else varies.

The text-level pass shared with the expect store lives in normalize.py (it must not need torch).
"""

from __future__ import annotations

import torch

from harness.golden.normalize import MANGLE as _MANGLE

_DTYPE_ABBR = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "b8",
    torch.complex64: "c64",
    torch.complex128: "c128",
}

# --------------------------------------------------------------------------------------------
# values


def tensor_type(dtype: torch.dtype, shape) -> str:
    dims = ", ".join(str(d) for d in shape)
    return f"{_DTYPE_ABBR.get(dtype, str(dtype).replace('torch.', ''))}[{dims}]"


def value_type(value) -> str | None:
    """dtype[shape] for a tensor-like (real, fake or metadata); tuples nest; None if unknown."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return tensor_type(value.dtype, value.shape)
    if hasattr(value, "dtype") and hasattr(value, "shape"):  # fx TensorMetadata
        return tensor_type(value.dtype, value.shape)
    if isinstance(value, (tuple, list)):
        parts = [value_type(v) or type(v).__name__ for v in value]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    if isinstance(value, (torch.SymInt, int)):
        return "int"
    if isinstance(value, (torch.SymFloat, float)):
        return "float"
    if isinstance(value, (torch.SymBool, bool)):
        return "bool"
    return type(value).__name__


def format_arg(arg, name_of) -> str:
    """One argument of an fx node, with nodes shown by their canonical names."""
    if isinstance(arg, torch.fx.Node):
        return name_of(arg)
    if isinstance(arg, (list, tuple)):
        inner = ", ".join(format_arg(a, name_of) for a in arg)
        if isinstance(arg, tuple):
            return f"({inner}{',' if len(arg) == 1 else ''})"
        return f"[{inner}]"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k!r}: {format_arg(v, name_of)}" for k, v in arg.items()) + "}"
    if isinstance(arg, (torch.dtype, torch.memory_format, torch.layout)):
        return str(arg)
    if isinstance(arg, torch.device):
        return f"device({str(arg)!r})"
    if isinstance(arg, slice):
        return (
            f"{format_arg(arg.start, name_of)}:{format_arg(arg.stop, name_of)}:"
            f"{format_arg(arg.step, name_of)}"
        )
    return repr(arg)


# --------------------------------------------------------------------------------------------
# fx graphs (fx.symbolic_trace, torch.export, dynamo, AOTAutograd)


def _fx_target(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    if node.op == "call_function":
        target = node.target
        if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            return str(target)
        return torch.fx.node._get_qualified_name(target)
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        module = gm.get_submodule(node.target)
        return f"{node.target}<{type(module).__name__}>"
    if node.op == "get_attr":
        return f"get_attr[{node.target}]"
    return node.op


def _fx_value(node: torch.fx.Node):
    meta = node.meta
    for key in ("val", "example_value", "tensor_meta"):
        if meta.get(key) is not None:
            return meta[key]
    return None


# --------------------------------------------------------------------------------------------
# local value names


class LocalNames:
    """Names values `<scope>/<op>`, numbered only among equal names: a one-op change renames
    one value, not every later one.

    Tracers number values per op across the whole graph (`relu_3`, `%41`), so swapping one
    ReLU for a GELU renamed every later ReLU and every line using one. Here a value's scope is
    the module whose parameter or buffer it consumes (`layer1.0.conv1`), else the scope of its
    most recently defined input (data flows through a block), else the previous value's scope.
    The counter then runs inside one scope, where a change stays local.
    """

    def __init__(self):
        self.taken: set[str] = set()
        self.scope: dict = {}  # value -> scope
        self.order: dict = {}  # value -> definition index
        self.previous = ""

    def reserve(self, value, name: str, scope: str = "") -> str:
        """A value that keeps the name it has (an input, a parameter): others must avoid it."""
        self.taken.add(name)
        self.define(value, scope)
        return name

    def define(self, value, scope: str) -> None:
        self.scope[value] = scope
        self.order[value] = len(self.order)

    def scope_of(self, inputs, param_scopes) -> str:
        if param_scopes:
            return param_scopes[0]
        known = [v for v in inputs if v in self.order]
        if known:
            return self.scope[max(known, key=self.order.__getitem__)]
        return self.previous

    def fresh(self, scope: str, op: str) -> str:
        base = f"{scope}/{op}" if scope else op
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        self.previous = scope
        return name


def module_of(path: str) -> str:
    """`layer1.0.conv1.weight` -> `layer1.0.conv1` (the module a state_dict entry belongs to)."""
    return path.rpartition(".")[0]


def _fx_op(node: torch.fx.Node) -> str:
    target = node.target
    if node.op == "call_method":
        return str(target)
    if isinstance(target, torch._ops.OpOverload):
        return target.overloadpacket.__name__
    name = getattr(target, "__name__", None)
    if callable(getattr(target, "name", None)) and not name:  # higher-order operators
        name = target.name()
    return str(name or node.name).rsplit(".", 1)[-1]


def fx_value_names(
    gm: torch.fx.GraphModule,
    names: dict[str, str] | None = None,
    kinds: dict[str, str] | None = None,
    scopes: dict[str, str] | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """Canonical name and scope of every node (by fx name). Placeholders keep the name given in
    `names` (state_dict key, argument name, or a forward value's name for AOT's saved values);
    parameters and buffers scope their module; `scopes` gives scopes of other named inputs."""
    names, kinds, scopes = names or {}, kinds or {}, scopes or {}
    local = LocalNames()
    out: dict[str, str] = {}
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        if node.op == "placeholder":
            name = names.get(node.name, node.name)
            param = kinds.get(node.name) in ("param", "buffer", "constant")
            scope = module_of(name) if param else scopes.get(node.name, "")
            out[node.name] = local.reserve(node, name, scope)
            continue
        if node.op in ("call_module", "get_attr"):
            # a module call or attribute is named by its path, which is local already
            scope = node.target if node.op == "call_module" else module_of(node.target)
            name, i = node.target, 1
            while name in local.taken:
                name, i = f"{node.target}_{i}", i + 1
            local.taken.add(name)
            local.previous = scope
        else:
            inputs = node.all_input_nodes
            params = [
                local.scope[n]
                for n in inputs
                if n.op == "placeholder" and kinds.get(n.name) in ("param", "buffer", "constant")
            ]
            params += [local.scope[n] for n in inputs if n.op == "get_attr"]
            scope = local.scope_of(inputs, params)
            name = local.fresh(scope, _fx_op(node))
        local.define(node, scope)
        out[node.name] = name
    return out, {n.name: local.scope[n] for n in local.scope}


def fx_graph_text(
    gm: torch.fx.GraphModule,
    names: dict[str, str] | None = None,
    kinds: dict[str, str] | None = None,
    scopes: dict[str, str] | None = None,
) -> str:
    """Print an fx graph: inputs first (`param`/`buffer`/`input`), then one line per node.

    `names` renames placeholders (placeholder name -> state_dict key or argument name); `kinds`
    labels them (default `input`); other values get local names (`LocalNames`).
    """
    kinds = kinds or {}
    canonical_names, _ = fx_value_names(gm, names, kinds, scopes)

    def name_of(node: torch.fx.Node) -> str:
        return canonical_names.get(node.name, node.name)

    lines = []
    for node in gm.graph.nodes:
        typ = value_type(_fx_value(node))
        typed = f"{name_of(node)}: {typ}" if typ else name_of(node)
        if node.op == "placeholder":
            lines.append(f"{kinds.get(node.name, 'input')} {typed}")
        elif node.op == "output":
            lines.append(f"return {format_arg(node.args[0], name_of)}")
        else:
            args = [format_arg(a, name_of) for a in node.args]
            args += [f"{k}={format_arg(v, name_of)}" for k, v in node.kwargs.items()]
            lines.append(f"{typed} = {_fx_target(node, gm)}({', '.join(args)})")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# TorchScript graphs


def _jit_attribute(node, name: str) -> str:
    kind = node.kindOf(name)
    value = getattr(node, kind)(name)
    if kind == "t":
        return f"Tensor<{tensor_type(value.dtype, value.shape)}>"
    if (
        kind == "i"
        and node.kind() == "prim::Constant"
        and isinstance(node.output().type(), torch._C.BoolType)
    ):
        return str(bool(value))  # TorchScript stores bools as ints
    if isinstance(value, str) or kind == "ival":
        return repr(value)
    return str(value)


def _jit_type(typ) -> str:
    if isinstance(typ, torch._C.TensorType):
        sizes, dtype = typ.sizes(), typ.dtype()
        if sizes is not None and dtype is not None:
            return tensor_type(dtype, sizes)
        return "Tensor"
    if isinstance(typ, torch._C.TupleType):
        parts = [_jit_type(t) for t in typ.elements()]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return _MANGLE.sub("", str(typ))


def jit_graph_text(
    graph: torch._C.Graph, input_names: list[str], state: dict, buffers: set[str] = frozenset()
) -> str:
    """Print an (inlined) TorchScript graph with canonical value names.

    The first graph input is the module; `prim::GetAttr` chains hanging off it are resolved to
    dotted state_dict paths and listed once as `param`/`buffer` lines, so attribute access order
    and module type mangling never appear. Other values get local names (`LocalNames`):
    `%features.0/_convolution`.
    """
    names: dict = {}
    attr_path: dict = {}  # jit Value -> dotted path from the module
    local = LocalNames()
    params: list[str] = []
    literals: set = set()
    body: list[str] = []

    inputs = list(graph.inputs())
    module_input, real_inputs = inputs[0], inputs[1:]
    attr_path[module_input] = ""
    for value, name in zip(real_inputs, input_names):
        names[value] = local.reserve(value, name)

    def name_of(value) -> str:
        return names.get(value, "%?")

    def emit(block, indent: str):
        for node in block.nodes():
            kind = node.kind()
            if kind == "prim::GetAttr":
                parent = attr_path.get(node.input())
                if parent is not None:
                    path = f"{parent}.{node.s('name')}" if parent else node.s("name")
                    out = node.output()
                    if isinstance(out.type(), torch._C.TensorType):
                        names[out] = local.reserve(out, path, module_of(path))
                        params.append(
                            f"{'buffer' if path in buffers else 'param'} {path}: "
                            f"{value_type(state.get(path)) or 'Tensor'}"
                        )
                    else:
                        attr_path[out] = path
                    continue
            # Constants and lists of constants are written inline where they are used, as a
            # reader would write them: `[4, 4]` rather than `%7` three lines up.
            if kind == "prim::Constant" and not isinstance(
                node.output().type(), torch._C.TensorType
            ):
                names[node.output()] = (
                    _jit_attribute(node, "value") if "value" in node.attributeNames() else "None"
                )
                literals.add(node.output())
                continue
            if kind == "prim::ListConstruct" and all(i in literals for i in node.inputs()):
                names[node.output()] = "[" + ", ".join(names[i] for i in node.inputs()) + "]"
                literals.add(node.output())
                continue
            ins = list(node.inputs())
            scope = local.scope_of(
                ins, [local.scope[i] for i in ins if i in local.scope and names.get(i) in state]
            )
            for out in node.outputs():
                names[out] = "%" + local.fresh(scope, kind.split("::", 1)[-1])
                local.define(out, scope)
            outs = ", ".join(f"{name_of(o)}: {_jit_type(o.type())}" for o in node.outputs())
            attrs = ", ".join(
                f"{a}={_jit_attribute(node, a)}" for a in sorted(node.attributeNames())
            )
            call = (
                f"{kind}[{attrs}]({', '.join(name_of(i) for i in ins)})"
                if attrs
                else f"{kind}({', '.join(name_of(i) for i in ins)})"
            )
            body.append(f"{indent}{outs} = {call}" if outs else f"{indent}{call}")
            for i, sub in enumerate(node.blocks()):
                body.append(f"{indent}  block{i}:")
                for param in sub.inputs():  # loop-carried values of a block
                    names[param] = "%" + local.fresh(scope, "arg")
                    local.define(param, scope)
                emit(sub, indent + "    ")
                body.append(f"{indent}    -> ({', '.join(name_of(o) for o in sub.outputs())})")

    emit(graph.block(), "")
    head = [f"input {names[v]}: {_jit_type(v.type())}" for v in real_inputs]
    # Listed in state_dict order: the module's own view, independent of attribute access order.
    order = {key: i for i, key in enumerate(state)}
    params = sorted(
        set(params), key=lambda line: (order.get(line.split()[1].rstrip(":"), len(order)), line)
    )
    tail = [f"return ({', '.join(name_of(o) for o in graph.outputs())})"]
    return "\n".join(head + params + body + tail) + "\n"
