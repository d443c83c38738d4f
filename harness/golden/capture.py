"""The five capture front ends. Each turns (model, example inputs) into a `Capture`: the canonical
printout plus, where the front end yields one, a runnable program for the semantic check.

Front ends run the model in eval mode on the seeded inputs from the zoo. Dynamo runs with its
default configuration, so graph breaks a user would meet show up in the golden.

One exception (capture_mode): the aot front end captures a recurrent model (an nn.RNNBase inside)
on CUDA with cuDNN switched off. With cuDNN on, nn.RNNBase flattens its weights for cuDNN, reading
data pointers that AOTAutograd's fake tensors do not have, and eager cuDNN RNN refuses a backward
in eval mode. With it off, CUDA traces the LSTM/GRU decomposition the CPU traces (torch's Python
decompositions of aten.lstm/gru, whose only device branch is the CPU's mkldnn), so the printout is
the CPU's, up to device names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import warnings
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from harness.core.names import FRONTENDS  # named in core: the plugin needs them without torch
from harness.golden import canonical
from harness.golden.normalize import normalize

FRONTEND_HELP = {
    "jit": "TorchScript trace, the flat inlined graph",
    "fx": "torch.fx.symbolic_trace, shapes from ShapeProp",
    "export": "torch.export.export, ATen graph",
    "dynamo": "every graph torch.compile captures, with graph breaks",
    "aot": "AOTAutograd forward and backward graphs",
}


class CaptureError(RuntimeError):
    """A model raised while a front end captured it."""


@dataclasses.dataclass
class Capture:
    frontend: str
    text: str  # canonical printout, normalised
    program: (
        Callable | None
    )  # runs like the model, or None if the front end yields nothing runnable
    mode: str = ""  # how the capture ran where it differs from plain (CaptureMode.note)


@dataclasses.dataclass(frozen=True)
class CaptureMode:
    """The backend settings a front end captures (and its program runs) under."""

    cudnn: bool = True
    note: str = ""  # why, for reports; empty for a plain capture

    @contextlib.contextmanager
    def applied(self):
        if self.cudnn:
            yield
            return
        # the one flag alone: torch.backends.cudnn.flags() would also reset TF32 and the others
        saved = torch.backends.cudnn.enabled
        torch.backends.cudnn.enabled = False
        try:
            yield
        finally:
            torch.backends.cudnn.enabled = saved

    def wrap(self, program: Callable | None) -> Callable | None:
        """The captured program, run under the same settings (a retrace sees what the capture
        saw)."""
        if program is None or self.cudnn:
            return program

        def run(*args, **kwargs):
            with self.applied():
                return program(*args, **kwargs)

        return run


PLAIN = CaptureMode()
RNN_WITHOUT_CUDNN = CaptureMode(
    cudnn=False,
    note="cuDNN off for the capture (recurrent model on CUDA: the aot front end records the "
    "LSTM/GRU decomposition, as on the CPU)",
)


def capture_mode(model, frontend: str, device) -> CaptureMode:
    """How `frontend` captures `model` on `device` (a torch.device or its name). Only aot on CUDA
    with an nn.RNNBase inside differs: cuDNN off (see the module's docstring). Convolution and
    batch-norm models keep cuDNN: their CUDA printouts differ from the CPU's for real."""
    if frontend != "aot" or torch.device(device).type != "cuda":
        return PLAIN
    if isinstance(model, torch.nn.Module) and any(
        isinstance(m, torch.nn.RNNBase) for m in model.modules()
    ):
        return RNN_WITHOUT_CUDNN
    return PLAIN


def device_of(model, inputs) -> torch.device:
    """Where a capture runs: the device of the model's first parameter or buffer, else of the
    first input tensor, else the CPU."""
    tensors = []
    if isinstance(model, torch.nn.Module):
        tensors += [next(model.parameters(), None), next(model.buffers(), None)]
    tensors += pytree.tree_leaves(inputs)
    for t in tensors:
        if isinstance(t, torch.Tensor):
            return t.device
    return torch.device("cpu")


def input_names(model: torch.nn.Module, inputs: tuple, flatten: bool = True) -> list[str]:
    """Names of the forward arguments, flattened: `x`, or `input`, `hidden[0]`, `hidden[1]`."""
    forward = model.forward if isinstance(model, torch.nn.Module) else model
    params = [
        p
        for p in inspect.signature(forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    names = []
    for i, arg in enumerate(inputs):
        base = params[i].name if i < len(params) else f"arg{i}"
        if not flatten:
            names.append(base)
            continue
        leaves, _ = pytree.tree_flatten_with_path(arg)
        for path, _ in leaves:
            names.append(
                base + "".join(f"[{k.idx}]" if hasattr(k, "idx") else f"[{k.key!r}]" for k in path)
            )
    return names


@contextlib.contextmanager
def _quiet():
    # Capturing is the point here: the deprecation and tracer warnings are expected noise.
    with warnings.catch_warnings(), quiet_trace_log():
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def quiet_trace_log():
    """Keep torch's structured-trace logger (`torch.__trace`) to its own handler while capturing.

    torch emits one empty DEBUG record per compile event to that logger whenever it has any
    handler; pytest's log capture attaches its handlers to it, so a failing capture test printed
    hundreds of empty `DEBUG torch.__trace` lines (708 of 1040 lines in one report). Only the
    handlers others attached are set aside, and only for the duration: TORCH_TRACE still works.
    """
    trace_log = logging.getLogger("torch.__trace")
    foreign = [h for h in trace_log.handlers if not type(h).__module__.startswith("torch")]
    for handler in foreign:
        trace_log.removeHandler(handler)
    try:
        yield
    finally:
        for handler in foreign:
            trace_log.addHandler(handler)


def _quietly(program: Callable) -> Callable:
    """A captured program that compiles on its first call, run with the trace log kept quiet."""

    def run(*args, **kwargs):
        with quiet_trace_log():
            return program(*args, **kwargs)

    return run


def _jit(model, inputs):
    traced = torch.jit.trace(model, inputs, check_trace=False)
    graph = traced.inlined_graph
    buffers = {name for name, _ in model.named_buffers()}
    # TorchScript keeps tuple arguments whole, so inputs are named by argument, not flattened.
    args = input_names(model, inputs, flatten=False)
    text = canonical.jit_graph_text(graph, args, model.state_dict(), buffers)
    return text, traced


def _fx(model, inputs):
    from torch.fx.passes.shape_prop import ShapeProp

    gm = torch.fx.symbolic_trace(model)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) == len(inputs):  # ShapeProp wants the forward's own arguments
        ShapeProp(gm).propagate(*inputs)
    return canonical.fx_graph_text(gm), gm


def _export(model, inputs):
    ep = torch.export.export(model, inputs)
    sig = ep.graph_signature
    names, kinds = {}, {}
    for arg, fqn in sig.inputs_to_parameters.items():
        names[arg], kinds[arg] = fqn, "param"
    for arg, fqn in sig.inputs_to_buffers.items():
        names[arg], kinds[arg] = fqn, "buffer"
    for arg, fqn in sig.inputs_to_lifted_tensor_constants.items():
        names[arg], kinds[arg] = fqn, "constant"
    return canonical.fx_graph_text(ep.graph_module, names, kinds), ep.module()


def _state_names(model, inputs) -> dict[int, tuple[str, str]]:
    """id(tensor) -> (name, kind) for parameters, buffers and flattened inputs: how a graph's
    inputs are told apart by what they are, not by the name a tracer made up for them."""
    names = {}
    if isinstance(model, torch.nn.Module):
        names.update({id(t): (n, "param") for n, t in model.named_parameters()})
        names.update({id(t): (n, "buffer") for n, t in model.named_buffers()})
    for name, value in zip(input_names(model, inputs), pytree.tree_leaves(inputs)):
        names[id(value)] = (name, "input")
    return names


def dynamo_graphs(model, inputs) -> tuple[list[tuple], dict[str, int]]:
    """Run `torch.compile` on a module or function with a recording backend. Returns each graph
    with its placeholder names and kinds, and the graph-break reasons (first line of each -> how
    often). Dynamo's own counters are the source of truth: `explain` reports -1 breaks for a
    frame it skips whole."""
    from harness.core.dynamo import compile_and_count

    known = _state_names(model, inputs)
    graphs = []

    def record(gm, example_inputs):
        # Dynamo hands the real tensors in placeholder order: match them to state_dict names.
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        names, kinds = {}, {}
        for node, value in zip(placeholders, example_inputs):
            if id(value) in known:
                names[node.name], kinds[node.name] = known[id(value)]
        graphs.append((gm, names, kinds))

    _, breaks = compile_and_count(model, inputs, record)
    return graphs, breaks


def _dynamo(model, inputs):
    graphs, breaks = dynamo_graphs(model, inputs)
    parts = [f"graphs: {len(graphs)}", f"graph_breaks: {sum(breaks.values())}"]
    parts += [f"break: {reason} (x{count})" for reason, count in sorted(breaks.items())]
    for i, (gm, names, kinds) in enumerate(graphs):
        parts.append(f"\ngraph {i}:")
        parts.append(canonical.fx_graph_text(gm, names, kinds).rstrip("\n"))
    program = _quietly(torch.compile(model, backend="eager"))
    return "\n".join(parts) + "\n", program


def _aot(model, inputs):
    from functorch.compile import aot_module, make_boxed_func

    graphs: dict[str, torch.fx.GraphModule] = {}

    def recorder(kind):
        def compiler(gm, example_inputs):
            graphs[kind] = gm
            return make_boxed_func(gm.forward)

        return compiler

    compiled = aot_module(model, fw_compiler=recorder("forward"), bw_compiler=recorder("backward"))
    outputs = compiled(*inputs)
    grads = [
        o for o in pytree.tree_leaves(outputs) if isinstance(o, torch.Tensor) and o.requires_grad
    ]
    if grads:  # the backward graph is compiled on the first backward call
        torch.autograd.backward([g.float().sum() for g in grads])
    model.zero_grad(set_to_none=True)
    # aot_module feeds parameters, then buffers, then the flattened inputs, as primals_1..N.
    order = [(n, "param") for n, _ in model.named_parameters()]
    order += [(n, "buffer") for n, _ in model.named_buffers()]
    order += [(n, "input") for n in input_names(model, inputs)]
    names = {f"primals_{i + 1}": name for i, (name, _) in enumerate(order)}
    kinds = {f"primals_{i + 1}": kind for i, (_, kind) in enumerate(order)}
    parts, scopes = [], {}
    for which in ("forward", "backward"):
        if which in graphs:
            gm = graphs[which]
            # The backward graph's other inputs are the activations the forward saved for it,
            # under the forward's node names: they keep the forward's canonical names.
            labels = {
                n.name: kinds.get(n.name, "tangent" if n.name.startswith("tangents_") else "saved")
                for n in gm.graph.nodes
                if n.op == "placeholder"
            }
            parts.append(f"{which}:")
            parts.append(canonical.fx_graph_text(gm, names, labels, scopes))
            if which == "forward":
                forward_names, scopes = canonical.fx_value_names(gm, names, labels)
                names = {**forward_names, **names}
    return "\n".join(parts), _quietly(compiled)


_CAPTURERS = {"jit": _jit, "fx": _fx, "export": _export, "dynamo": _dynamo, "aot": _aot}


def capture(model: torch.nn.Module, inputs: tuple, frontend: str, label: str = "model") -> Capture:
    """Capture `model` with one front end. `label` names the model in error messages."""
    if frontend not in _CAPTURERS:
        raise ValueError(f"unknown front end {frontend!r}; choose from {', '.join(FRONTENDS)}")
    mode = capture_mode(model, frontend, device_of(model, inputs))
    try:
        with _quiet(), mode.applied():
            text, program = _CAPTURERS[frontend](model, inputs)
    except Exception as exc:
        failure = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        with mode.applied():  # the diagnosis runs the model as the capture did
            backward = eager_backward_error(model, inputs) if frontend == "aot" else None
        if backward:
            raise CaptureError(
                f"{label}: the model's backward itself fails in eager mode ({backward}), so the "
                f"aot front end, which records the backward graph, cannot capture it ({failure}). "
                f"Fix the model's backward first; declare unsupported={{'aot': 'why'}} only if the "
                "model is never trained."
            ) from exc
        raise CaptureError(
            f"{label}: the {frontend} front end failed: {failure}. If this front end cannot "
            f"support the model, declare it with register_model(..., "
            f"unsupported={{{frontend!r}: 'why'}})."
        ) from exc
    text = normalize(text)
    return Capture(frontend, text, mode.wrap(program), mode.note)


def eager_backward_error(model: torch.nn.Module, inputs: tuple) -> str | None:
    """Why a plain eager forward + backward of the model fails, or None if it works."""
    try:
        outputs = model(*inputs)
        grads = [
            o
            for o in pytree.tree_leaves(outputs)
            if isinstance(o, torch.Tensor) and o.requires_grad
        ]
        if grads:
            torch.autograd.backward([g.float().sum() for g in grads])
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        if isinstance(model, torch.nn.Module):
            model.zero_grad(set_to_none=True)
    return None


def cases() -> list[tuple[str, str, str | None]]:
    """Every (model, front end) pair of the zoo, with the reason it is skipped or None: every
    registered model, or only a project's own (harness.core.user_models.suite_models)."""
    from harness.core.user_models import suite_models
    from harness.core.zoo import get_model

    out = []
    for model in suite_models():
        unsupported = get_model(model).unsupported
        for frontend in FRONTENDS:
            reason = unsupported.get(frontend)
            out.append(
                (
                    model,
                    frontend,
                    f"{model} does not support {frontend}: {reason}" if reason else None,
                )
            )
    return out


def on_device(obj, device):
    """A model, or a tree of inputs (the LSTM's hidden state is a tuple), moved to `device`."""
    if device is None or str(device) == "cpu":
        return obj
    if isinstance(obj, torch.nn.Module):
        return obj.to(device)
    return pytree.tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, obj)


def capture_model(
    name: str, frontend: str, size: str = "small", device: str | None = None
) -> Capture:
    """Capture a zoo model by name, built and fed exactly as the goldens expect (on the CPU, or
    moved to `device` after the seeded build, so weights and inputs are the same everywhere)."""
    from harness.core.zoo import get_model

    spec = get_model(name)
    if frontend in spec.unsupported:
        raise NotImplementedError(
            f"{name} does not support the {frontend} front end: {spec.unsupported[frontend]}"
        )
    where = "" if device in (None, "cpu") else f" on {device}"
    return capture(
        on_device(spec.build(size), device),
        on_device(spec.inputs(size), device),
        frontend,
        label=f"model {name!r} ({size}){where}",
    )
