"""Sanity bands: key ratios against the ranges PyTorch's own documents publish.

A measured ratio far outside what PyTorch reports for the same technique usually means the
set-up, not PyTorch: a model too small to keep the GPU busy (launch-bound: AMP and channels_last
gain nothing), a GPU without tensor cores, a CPU without the instructions a tutorial used. The
report (`harness report`) and the GPU proof kit (`harness gpu-check`) show each ratio beside its
published range and say "outside the published range: check the set-up" where it falls out. A
CUDA ratio whose GPU was busy less than half of a call on either side (its row facts) is not
judged against a band at all: the published figures are about device-bound work, so it reads
"not judged: launch-bound at this size (busy NN%)". A band never fails a run: it is a prompt to
look, not a gate.

Every ratio here is a *time* ratio as the harness reports it (lower is better): a published
speed-up S becomes the time ratio 1/S. The one table, with its sources:
"""

from __future__ import annotations

import dataclasses
import math

from harness.verdict import gpurows
from harness.verdict.results import ResultSet, fingerprint_of
from harness.verdict.summary import cases, value_of


@dataclasses.dataclass(frozen=True)
class Band:
    key: str
    device: str  # "cuda" or "cpu": where the published figure was measured
    low: float  # time ratio range (lower is better)
    high: float
    published: str  # the figure as the source states it
    source: str  # title and address of the source

    def judge(self, value: float | None) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "no value"
        if self.low <= value <= self.high:
            return "within the published range"
        return "outside the published range: check the set-up"

    @property
    def range_text(self) -> str:
        return f"{self.low:.3g} .. {self.high:.3g}"


AMP_RECIPE = (
    "PyTorch recipe 'Automatic Mixed Precision', "
    "https://pytorch.org/tutorials/recipes/recipes/amp_recipe.html"
)
MEMORY_FORMAT = (
    "PyTorch tutorial '(beta) Channels Last Memory Format in PyTorch', "
    "https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html"
)
PT2_ANNOUNCEMENT = "PyTorch 2.0 announcement, https://pytorch.org/get-started/pytorch-2.0/"
PIN_MEMORY = (
    "PyTorch tutorial 'A guide on good usage of non_blocking and pin_memory() in PyTorch', "
    "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html"
)

BANDS = (
    # "significant (2-3X) speedup" on tensor-core GPUs (Volta, Turing, Ampere): time 1/3 .. 1/2
    Band(
        "amp",
        "cuda",
        1 / 3,
        1 / 2,
        "2-3x faster training on tensor-core GPUs (Volta, Turing, Ampere)",
        AMP_RECIPE,
    ),
    # channels_last: 8%-35% across conv nets on Volta GPUs; time 1/1.35 .. 1/1.08
    Band(
        "channels_last",
        "cuda",
        1 / 1.35,
        1 / 1.08,
        "8-35% faster conv nets on Volta GPUs",
        MEMORY_FORMAT,
    ),
    # channels_last on Intel Ice Lake Xeon CPUs: 26%-76%; time 1/1.76 .. 1/1.26
    Band(
        "channels_last",
        "cpu",
        1 / 1.76,
        1 / 1.26,
        "26-76% faster conv nets on Ice Lake Xeon CPUs",
        MEMORY_FORMAT,
    ),
    # torch.compile training on A100 over 163 models: 43% faster on average, fp32 +21%,
    # AMP +51% (geometric means): time 1/1.51 .. 1/1.21
    Band(
        "compile_training",
        "cuda",
        1 / 1.51,
        1 / 1.21,
        "training 21% (fp32) to 51% (AMP) faster on A100, 43% on average over 163 models",
        PT2_ANNOUNCEMENT,
    ),
    # t.pin_memory().to(dev, non_blocking=True) "can be up to 2x slower" than a plain .to(dev):
    # pinning has its own cost, so pin-then-copy is slower than pageable, at most 2x
    Band(
        "pin_then_copy",
        "cuda",
        1.0,
        2.0,
        "pin_memory() then copy can be up to 2x slower than copying pageable memory",
        PIN_MEMORY,
    ),
)

LABELS = {
    "amp": "AMP / fp32 training-step time",
    "channels_last": "channels_last / contiguous time (conv nets)",
    "compile_training": "compiled / eager training-step time",
    "pin_then_copy": "pin-then-copy / pageable host-to-device copy time",
}


def band_for(key: str, device: str) -> Band | None:
    """The published band for a ratio on a device kind ("cuda" or "cpu"), or None."""
    for band in BANDS:
        if band.key == key and band.device == device:
            return band
    return None


@dataclasses.dataclass
class Measured:
    key: str
    case: str
    value: float
    facts: tuple = ()  # the row facts of the entries the ratio comes from (harness.verdict.gpurows)

    @property
    def launch_bound(self) -> bool:
        return any(gpurows.launch_bound(f) for f in self.facts)

    @property
    def busy_text(self) -> str:
        """The busy fractions of every side, in the ratio's order (numerator first)."""
        busy = [b for f in self.facts for b in gpurows.busy_values(f) if b is not None]
        return "/".join(f"{b:.0%}" for b in busy)


def device_of(rs: ResultSet) -> str:
    """ "cuda" when the run's fingerprint (else its machine name, `<host>-<GPU>`) names a GPU."""
    fp = fingerprint_of(rs)
    if fp is not None and "cuda_available" in fp:
        return "cuda" if fp.get("cuda_available") else "cpu"
    return "cpu" if rs.machine.endswith("-cpu") else "cuda"


def _pairs(
    rs: ResultSet, benchmark: str, index: int, on: str, off: str
) -> list[tuple[tuple, float, tuple]]:
    """(other params, value(on) / value(off), both sides' facts) for a parameter at `index`
    switched on vs off."""
    by = {params: e for params, e in cases(rs, benchmark)}
    out = []
    for params, e in sorted(by.items()):
        if len(params) <= index or params[index] != on or not value_of(e):
            continue
        base = by.get(params[:index] + (off,) + params[index + 1 :])
        if base is not None and value_of(base):
            facts = (rs.facts.get(e.name), rs.facts.get(base.name))
            out.append((params[:index] + params[index + 1 :], value_of(e) / value_of(base), facts))
    return out


def measured(rs: ResultSet) -> list[Measured]:
    """Every ratio of the result set that has a published band somewhere."""
    out = []
    for params, e in cases(rs, "amp.AutocastOverFp32.track_autocast_over_fp32"):
        if value_of(e) is not None:
            out.append(Measured("amp", ", ".join(params), value_of(e), (rs.facts.get(e.name),)))
    for suite in ("models.Inference.track_inference_time", "models.TrainingStep.track_step_time"):
        for params, r, facts in _pairs(rs, suite, 2, "True", "False"):
            case = f"{suite.split('.')[1]} {', '.join(params)}"
            out.append(Measured("channels_last", case, r, facts))
    e = rs.entries.get("fusion.SmallModelTrainingStep.track_compiled_over_eager")
    if e is not None and value_of(e) is not None:
        case = "SmallModelTrainingStep (zoo MLP)"
        out.append(Measured("compile_training", case, value_of(e), (rs.facts.get(e.name),)))
    bench = "transfer.HostToDeviceCopy.track_copy_time"
    for params, r, facts in _pairs(rs, bench, 0, "'pin_then_copy'", "'pageable'"):
        out.append(Measured("pin_then_copy", ", ".join(params), r, facts))
    return out


def rows(items: list[Measured], device: str) -> list[tuple[str, str, str, str, str, str]]:
    """(ratio, case, measured, published range, verdict, source) for the report's table."""
    out = []
    for m in items:
        band = band_for(m.key, device)
        if band is None:
            out.append(
                (
                    LABELS[m.key],
                    m.case,
                    f"{m.value:.3g}",
                    "none published for " + device,
                    "not judged",
                    "",
                )
            )
            continue
        if m.launch_bound:
            verdict = f"not judged: {gpurows.LAUNCH_BOUND_VERDICT} (busy {m.busy_text})"
        else:
            verdict = band.judge(m.value)
        out.append(
            (
                LABELS[m.key],
                m.case,
                f"{m.value:.3g}",
                f"{band.range_text} ({band.published})",
                verdict,
                band.source,
            )
        )
    return out


def judge_figure(key: str, value: float | None, device: str) -> dict:
    """A band verdict as JSON for the GPU proof kit's summary.json."""
    band = band_for(key, device)
    if band is None:
        return {"band": None, "verdict": f"no published range for {key} on {device}"}
    return {
        "band": [round(band.low, 4), round(band.high, 4)],
        "published": band.published,
        "source": band.source,
        "verdict": band.judge(value),
    }
