"""Sanity bands: key ratios against the ranges PyTorch's own documents publish.

A measured ratio far outside what PyTorch reports for the same technique usually means the
set-up, not PyTorch: a model too small to keep the GPU busy (launch-bound: AMP and channels_last
gain nothing), a GPU without tensor cores, a CPU without the instructions a tutorial used. The
report (`harness report`) and the GPU proof kit (`harness gpu-check`) show each ratio beside its
published range and say "outside the published range: check the set-up" where it falls out. A
CUDA ratio whose GPU was busy less than half of a call on either side (its row facts) is not
judged against a band at all: the published figures are about device-bound work, so it reads
"not judged: launch-bound at this size (busy NN%)". A band is held only against the figure it is
about: a paired ratio (both sides timed in the same rounds of one process), or, where no paired
row measures it, two separate timings named as such in the table; and only against a model of
the kind the figure is about (Band.kinds against the kind a model declares with
`register_model(..., kind=...)`, harness.core.zoo.KINDS): the channels_last figures are about conv
nets, so a model declared otherwise, or declaring no kind, is listed and not judged. A band never
fails a run: it is a prompt to look, not a gate.

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
    # the kinds of model the figure is about (harness.core.zoo.KINDS); empty: any model
    kinds: tuple[str, ...] = ()

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
        ("conv",),
    ),
    # channels_last on Intel Ice Lake Xeon CPUs: 26%-76%; time 1/1.76 .. 1/1.26
    Band(
        "channels_last",
        "cpu",
        1 / 1.76,
        1 / 1.26,
        "26-76% faster conv nets on Ice Lake Xeon CPUs",
        MEMORY_FORMAT,
        ("conv",),
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


PAIRED = "paired: both sides timed in the same rounds of one process"


@dataclasses.dataclass
class Measured:
    key: str
    case: str
    value: float
    facts: tuple = ()  # the row facts of the entries the ratio comes from (harness.verdict.gpurows)
    figure: str = PAIRED  # what the number is: a paired row, or which separate timings
    model: str | None = None  # the zoo model the case measures, where it measures one

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


def _model(param: str) -> str:
    return param.strip("'\"")


# The paired rows (timing.measure_paired) behind each band: both sides timed in alternating
# rounds of one process, so the machine's speed cancels. Two raw timings from separate
# processes differ by the machine's drift between them (30-55% on a shared runner) and are
# held against a band only where no paired row measures the figure, named as such.
AMP_ROW = "amp.AutocastOverFp32.track_autocast_over_fp32"
CHANNELS_LAST_ROW = "models.ChannelsLastOverContiguous.track_channels_last_over_contiguous"
COMPILE_ROW = "fusion.SmallModelTrainingStep.track_compiled_over_eager"
COPY_ROW = "transfer.HostToDeviceCopy.track_copy_time"


def measured(rs: ResultSet) -> list[Measured]:
    """Every ratio of the result set that has a published band somewhere."""
    out = []
    for params, e in cases(rs, AMP_ROW):
        if value_of(e) is not None:
            model = _model(params[0]) if params else None
            facts = (rs.facts.get(e.name),)
            out.append(Measured("amp", ", ".join(params), value_of(e), facts, model=model))
    for params, e in cases(rs, CHANNELS_LAST_ROW):
        if value_of(e) is not None:
            model = _model(params[0]) if params else None
            facts = (rs.facts.get(e.name),)
            out.append(
                Measured("channels_last", ", ".join(params), value_of(e), facts, model=model)
            )
    e = rs.entries.get(COMPILE_ROW)
    if e is not None and value_of(e) is not None:
        case = "SmallModelTrainingStep (zoo MLP)"
        facts = (rs.facts.get(e.name),)
        out.append(Measured("compile_training", case, value_of(e), facts, model="mlp"))
    separate = (
        "two timings from separate processes: HostToDeviceCopy.track_copy_time "
        "pin_then_copy over pageable (no paired row measures it)"
    )
    for params, r, facts in _pairs(rs, COPY_ROW, 0, "'pin_then_copy'", "'pageable'"):
        out.append(Measured("pin_then_copy", ", ".join(params), r, facts, separate))
    return out


def registered_kind(model: str) -> str | None:
    """The kind a registered model declares (harness.core.zoo; load the project's models
    first); None when it declares none or is not registered here."""
    import sys

    zoo = sys.modules.get("harness.core.zoo")
    spec = zoo._REGISTRY.get(model) if zoo else None
    return spec.kind if spec else None


def out_of_scope(band: Band, m: Measured, kind_of=registered_kind) -> str:
    """Why a band's figure does not apply to this case's model ("" where it does)."""
    if not band.kinds or m.model is None:
        return ""
    kind = kind_of(m.model)
    if kind in band.kinds:
        return ""
    about = " or ".join(map(repr, band.kinds))
    if kind is None:
        return (
            f"not judged: the published range is about models of kind {about}; {m.model} "
            f"declares no kind (register_model(..., kind={band.kinds[0]!r}) if it is one)"
        )
    return (
        f"not judged: the published range is about models of kind {about}; {m.model} is "
        f"declared {kind!r}"
    )


HEADERS = ("ratio", "case", "measured", "figure", "published range (time ratio)", "verdict")
HEADERS += ("source",)


def rows(items: list[Measured], device: str, kind_of=registered_kind) -> list[tuple]:
    """(ratio, case, measured, figure, published range, verdict, source) for the report's
    table. A band is held only against a model of the kind its figure is about
    (`kind_of(model)`, default: the registry's declared kind)."""
    out = []
    for m in items:
        band = band_for(m.key, device)
        if band is None:
            out.append(
                (
                    LABELS[m.key],
                    m.case,
                    f"{m.value:.3g}",
                    m.figure,
                    "none published for " + device,
                    "not judged",
                    "",
                )
            )
            continue
        if m.launch_bound:
            verdict = f"not judged: {gpurows.LAUNCH_BOUND_VERDICT} (busy {m.busy_text})"
        else:
            verdict = out_of_scope(band, m, kind_of) or band.judge(m.value)
        out.append(
            (
                LABELS[m.key],
                m.case,
                f"{m.value:.3g}",
                m.figure,
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
