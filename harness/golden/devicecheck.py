"""Graph goldens on a device (the GPU proof kit, `harness gpu-check`).

For every zoo model and front end: capture on the device, run the captured program there on a
second seeded input against eager on the same device, and diff the device printout against the
CPU printout of the same torch in the same process. Where they differ (a `device('cuda:0')`
constant, a cuDNN-only op) the device printout is a *candidate variant*: written to
`<tree>/cuda/<id>.expect` for review, and committed under `expect/cuda/` it is what the pytest
plugin compares with on that device (harness.golden.store.lookup).

Committed goldens are compared only when they were recorded with this torch; otherwise the case
says "not compared: torch X vs Y" (a runner rarely has the pinned torch), which is not a failure.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from harness.core import tolerances
from harness.golden import store

# Decomposed ops may pick other GPU kernels than eager's (TF32 is off while checking):
# (rtol, atol) per device type, from the package's one table (harness.core.tolerances)
TOLERANCE = {k: (t.rtol, t.atol) for k, t in tolerances.CAPTURED.items()}
_DEVICE_NAME = re.compile(r"device\('cuda(:\d+)?'\)|device\(type='cuda'(, index=\d+)?\)")
MAX_DIFF_LINES = 60


@dataclasses.dataclass
class CaseResult:
    model: str
    frontend: str
    status: str  # "same", "device names only", "differs", "failed", "skipped"
    semantic: str  # "ok", "mismatch: ...", "no program", "not run"
    max_abs_diff: float | None = None
    committed: str = ""  # against the committed golden (or variant)
    diff: list[str] = dataclasses.field(default_factory=list)
    error: str = ""
    capture: str = ""  # how the device capture ran, where not plain (capture.CaptureMode.note)

    @property
    def golden_id(self) -> str:
        return f"{self.model}.{self.frontend}"

    @property
    def failed(self) -> bool:
        return self.status == "failed" or self.semantic.startswith("mismatch")


def only_device_names_differ(cpu_text: str, device_text: str) -> bool:
    """True when the two printouts are equal once CUDA device names read `device('cpu')`."""
    return _DEVICE_NAME.sub("device('cpu')", device_text) == cpu_text


def classify(cpu_text: str, device_text: str) -> str:
    if cpu_text == device_text:
        return "same"
    return "device names only" if only_device_names_differ(cpu_text, device_text) else "differs"


def against_committed(golden: store.GoldenFile | None, text: str, torch_version: str) -> str:
    """What the committed golden says about this printout, without failing on a torch change."""
    if golden is None:
        return "no committed golden"
    if golden.torch_version != torch_version:
        return f"not compared: torch {golden.torch_version} vs {torch_version}"
    return "matches" if golden.body == text else "differs from committed"


def _semantic(
    name: str, frontend: str, program, size: str, device: str
) -> tuple[str, float | None]:
    import torch
    import torch.utils._pytree as pytree

    from harness.core.zoo import get_model
    from harness.golden.capture import on_device

    if program is None:
        return "no program", None
    spec = get_model(name)
    eager = on_device(spec.build(size), device)
    inputs = on_device(spec.inputs(size, check=True), device)
    with torch.no_grad():
        expected = pytree.tree_leaves(eager(*inputs))
        got = pytree.tree_leaves(program(*inputs))
    if len(got) != len(expected):
        return f"mismatch: {len(got)} outputs, eager gives {len(expected)}", None
    rtol, atol = TOLERANCE[torch.device(device).type]
    worst = 0.0
    for g, e in zip(got, expected):
        g = g.detach()
        worst = max(worst, float((g.float() - e.float()).abs().max()) if g.numel() else 0.0)
        if g.shape != e.shape or not torch.allclose(g, e, rtol=rtol, atol=atol):
            return (
                f"mismatch: max |captured - eager| = {worst:.3g} (rtol {rtol}, atol {atol})",
                worst,
            )
    return "ok", worst


def check_case(
    name: str, frontend: str, device: str, size: str, committed_dir: Path | None
) -> tuple[CaseResult, str, str]:
    """One model under one front end; returns the result and the CPU and device printouts."""
    from harness.golden.capture import CaptureError, capture_model

    try:
        cpu = capture_model(name, frontend, size).text
        dev = capture_model(name, frontend, size, device)
    except NotImplementedError as exc:
        return CaseResult(name, frontend, "skipped", "not run", error=str(exc)), "", ""
    except CaptureError as exc:
        return CaseResult(name, frontend, "failed", "not run", error=str(exc)), "", ""
    try:
        semantic, worst = _semantic(name, frontend, dev.program, size, device)
    except Exception as exc:  # the captured program failed on the device: that is the finding
        semantic, worst = (
            f"mismatch: running it raised {type(exc).__name__}: {str(exc)[:200]}",
            None,
        )
    result = CaseResult(name, frontend, classify(cpu, dev.text), semantic, worst, capture=dev.mode)
    if result.status != "same":
        result.diff = store.unified_diff(cpu, dev.text, f"{name}.{frontend} on cpu")[
            :MAX_DIFF_LINES
        ]
    if committed_dir is not None:
        golden_id = f"{name}.{frontend}"
        path = store.lookup(committed_dir, golden_id, device, store.torch_lane())
        try:
            golden = store.read(path)
        except store.GoldenError as exc:
            result.committed = f"unreadable: {exc}"
        else:
            result.committed = against_committed(golden, dev.text, store.torch_version())
            if not store.is_reference(committed_dir, path):
                variant = path.relative_to(committed_dir)
                result.committed += f" (variant {variant})"
    return result, cpu, dev.text


def write_tree(
    tree: Path, result: CaseResult, cpu_text: str, device_text: str, device: str, size: str
) -> None:
    """This runner's goldens: the CPU printout as `<id>.expect`, the device printout as the
    variant `<device>/<id>.expect` where it differs. HARNESS_EXPECT_DIR=<tree> then runs the
    pytest suite on this runner's torch, and `<tree>/<device>/` holds the candidates to review."""
    fields = {"frontend": result.frontend, "model": f"{result.model} ({size})"}
    store.save(store.golden_path(tree, result.golden_id), store.render(cpu_text, fields))
    if device_text != cpu_text:
        variant = store.variant_path(tree, result.golden_id, device)
        store.save(variant, store.render(device_text, {**fields, "device": device}))


def run(
    device: str,
    size: str,
    committed_dir: Path | None,
    tree: Path | None,
    models: list[str] | None = None,
    log=print,
) -> list[CaseResult]:
    """Every (model, front end) case on `device`, float32 kept float32 (no TF32) on a GPU."""
    import torch

    from harness.core.zoo import model_names
    from harness.golden.capture import FRONTENDS

    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    results = []
    try:
        for name in models or model_names():
            for frontend in FRONTENDS:
                result, cpu_text, dev_text = check_case(name, frontend, device, size, committed_dir)
                results.append(result)
                log(
                    f"{result.golden_id:<22} {result.status:<18} semantic {result.semantic}"
                    + (f"; committed: {result.committed}" if result.committed else "")
                    + (f"; {result.error}" if result.error else "")
                    + (f"; {result.capture}" if result.capture else "")
                )
                if tree is not None and cpu_text:
                    write_tree(tree, result, cpu_text, dev_text, device, size)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
    return results
