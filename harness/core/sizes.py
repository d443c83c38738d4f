"""How big each benchmark workload is, per device class and mode: the one table that the workloads
build from (harness.measure.workloads) and that the verdict reads to say what a figure was
measured on (harness.verdict.advice).

Every size function takes `full` (the mode: full sizes for nightly runs, else the fast CI sizes)
and the device the benchmark runs on, a torch.device or a string. A CUDA device (`cuda`,
`cuda:1`) gets the CUDA sizes; any other device gets the CPU sizes, including `mps` and `xpu`:
the CUDA sizes are chosen for a data-centre GPU's bandwidth and memory, not for those.

- CPU sizes keep one call within milliseconds on a shared CPU core (quick runs on 2 cores).
- CUDA sizes make each workload device-bound on a data-centre GPU (H200, A100): every call's GPU
  work far above the ~5-10 us a kernel launch costs, yet one call within ~1-20 ms on an H200 so
  a quick run stays short. The arithmetic per workload (bytes or FLOPs per call, expected time
  on an H200 and an A100, memory footprint) is in docs/gpu.md#cuda-sizes.

Zoo models carry their own configurations (harness.core.zoo: small, full and cuda);
`model_size` is the one rule for which one a benchmark on a device in a mode uses
(ModelSpec.benchmark_config applies it, and the overrides). Golden captures never come here:
they use a model's small configuration (its full one under --full) on every device.

Overrides: `HARNESS_SIZES` replaces sizes for one run, on any device and in any mode, as
`key=value` pairs separated by commas or a JSON object. Keys: a size function's name for a
number or a shape (`pointwise_elements=2^26`, `transfer_batch=32x3x224x224`), `NAME.FIELD` for a
field of a size that has several (`attention.seq=4096`), and `MODEL.FIELD` for a field of a zoo
model's benchmark configuration (`alexnet.batch=64`); a size function's name wins over a model
of the same name. A size function called with `overrides=None` reads this process's
HARNESS_SIZES; a report describing a recorded run passes that run's overrides instead.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
from collections.abc import Callable, Mapping

from harness.core import settings
from harness.core.exits import BadInput

CPU, CUDA = "cpu", "cuda"
SIZE_FUNCTIONS: dict[str, Callable] = {}  # name -> size function, in the order defined


def device_class(device) -> str:
    """ "cuda" for a CUDA device (a torch.device or a string such as "cuda:1"), else "cpu"."""
    kind = getattr(device, "type", device)
    if not isinstance(kind, str):
        raise TypeError(f"sizes need the benchmark's device (torch.device or str), got {device!r}")
    return CUDA if kind.split(":", 1)[0].strip().lower() == CUDA else CPU


def _size(fn):
    """A size function: `fn(full, device_class)` gives the table's value; the wrapper takes any
    device and applies the overrides (HARNESS_SIZES unless `overrides` is given)."""
    name = fn.__name__

    @functools.wraps(fn)
    def sized(full: bool, device, overrides: Mapping | None = None):
        return _apply(name, fn(bool(full), device_class(device)), active(overrides))

    SIZE_FUNCTIONS[name] = sized
    return sized


# ---- the table: CPU values as they always were; each CUDA value with its reason ----


@_size
def pointwise_elements(full: bool, device: str) -> int:
    """Floats in the fusion suite's `x.cos().cos()` input."""
    if device == CUDA:  # 2^26 fp32 = 256 MiB, 4x an H200's L2: each eager kernel ~0.13 ms
        return 1 << (28 if full else 26)
    return 1 << (22 if full else 20)


@_size
def norm_activation(full: bool, device: str) -> tuple[int, int]:
    """(rows, features) of the LayerNorm + GELU block's input."""
    if device == CUDA:  # 2^26 floats as the pointwise chain: memory-bound, 4x an H200's L2
        return (262144, 1024) if full else (65536, 1024)
    return (8192, 1024) if full else (256, 256)


@_size
def cross_entropy(full: bool, device: str) -> tuple[int, int]:
    """(rows, classes) of the compiled cross-entropy loss's logits."""
    if device == CUDA:  # an LLM-sized vocabulary: 6 passes over 524 MB of logits, ~0.8 ms (H200)
        return (16384, 32000) if full else (4096, 32000)
    return (4096, 32000) if full else (256, 1000)


@_size
def optimizer(full: bool, device: str) -> dict:
    """The many-parameters model an optimizer step updates (`layers` Linear width x width)."""
    if device == CUDA:  # 256 tensors, 134 M parameters: a fused Adam step moves 3.8 GB
        return {"layers": 256, "width": 1024} if full else {"layers": 128, "width": 1024}
    return {"layers": 256, "width": 256} if full else {"layers": 64, "width": 64}


@_size
def attention(full: bool, device: str) -> dict:
    """(batch, heads, sequence, head dim): fast keeps one call around 10 ms on a CPU core."""
    if device == CUDA:  # fp16, 137 GFLOP per call: ~0.3 ms fused on an H200, scores of 1 GB
        return (
            {"batch": 4, "heads": 16, "seq": 4096, "head_dim": 128}
            if full
            else {"batch": 8, "heads": 16, "seq": 2048, "head_dim": 64}
        )
    return (
        {"batch": 8, "heads": 16, "seq": 2048, "head_dim": 64}
        if full
        else {"batch": 2, "heads": 4, "seq": 256, "head_dim": 64}
    )


@_size
def transfer_batch(full: bool, device: str) -> tuple[int, ...]:
    """The image batch a host-to-device copy moves."""
    if device == CUDA:  # 38.5 MB of float32 images: ~0.8 ms over PCIe 5 pinned, ~80x a launch
        return (256, 3, 224, 224) if full else (64, 3, 224, 224)
    return (64, 3, 224, 224) if full else (8, 3, 64, 64)


TRANSFER_COPIES_PER_CALL = 4  # copy_then_compute: batches copied and used in one timed call


@_size
def dataloader(full: bool, device: str) -> dict:
    """Dataset length, image side and timed epochs of the DataLoader benchmarks."""
    if device == CUDA:  # 224 px JPEGs as a GPU pipeline decodes; 8 batches of 16 per epoch
        return (
            {"length": 1024, "image": 224, "epochs": 3}
            if full
            else {"length": 128, "image": 224, "epochs": 2}
        )
    return (
        {"length": 1024, "image": 224, "epochs": 3}
        if full
        else {"length": 64, "image": 64, "epochs": 2}
    )


@_size
def loop_steps(full: bool, device: str) -> int:
    """Training steps in one timed call of the loss-logging loop."""
    if device == CUDA:  # as on CPU: each step of the CUDA model configs is already ~4-5 ms
        return 16 if full else 4
    return 16 if full else 4


@_size
def bandwidth_elements(full: bool, device: str) -> int:
    """Elements per tensor of the memory-bandwidth workloads (fusion.MemoryBandwidth), each of
    which holds 3-5 such tensors."""
    if device == CUDA:  # 2^26 fp32 = 256 MiB, 4x an H200's 60 MB L2 and 6x an A100's 40 MB
        return 1 << (28 if full else 26)
    # fast 2^25 fp32 = 128 MiB, 4x the 32 MiB L3 of the CI machines; full 2^27 = 512 MiB
    return 1 << (27 if full else 25)


# ---- zoo models: which configuration a benchmark uses ----


def model_size(full: bool, device) -> str:
    """The zoo configuration a benchmark uses: on CUDA the model's `cuda` one in every mode (it is
    device-bound and one call stays short, so quick and nightly runs time the same workload); on
    any other device `full` in full runs, else `small`."""
    if device_class(device) == CUDA:
        return "cuda"
    return "full" if full else "small"


def with_model_overrides(model: str, cfg: Mapping, overrides: Mapping | None = None) -> dict:
    """Zoo model `model`'s configuration `cfg` with its `MODEL.FIELD` overrides applied, each
    checked against `cfg` (ModelSpec.benchmark_config). A model named like a size function gets
    none: the size function's name wins."""
    mine = {} if model in SIZE_FUNCTIONS else _model_fields(model, active(overrides))
    for field, value in mine.items():
        check_model_field(model, field, value, cfg)
    return {**cfg, **mine}


def model_keys(overrides: Mapping | None = None) -> dict[str, dict]:
    """{model: {field: value}} of the `MODEL.FIELD` keys (those that name no size function)."""
    out: dict[str, dict] = {}
    for key, value in active(overrides).items():
        model, _, field = key.partition(".")
        if model not in SIZE_FUNCTIONS:
            out.setdefault(model, {})[field] = value
    return out


def unknown_model(model: str, field: str, models: list[str]) -> BadInput:
    """The error for `model.field` where `model` is neither a size function nor registered."""
    return _bad(
        f"unknown key {f'{model}.{field}'!r}: {model!r} is neither a size name "
        f"({', '.join(_size_keys())}) nor a zoo model ({', '.join(models)})"
    )


def check_model_field(model: str, field: str, value, cfg: Mapping) -> None:
    """`model.field=value` fits configuration `cfg`: a field of it, of its type."""
    key = f"{model}.{field}"
    if field not in cfg:
        raise _bad(f"key {key!r}: model {model!r} has the fields {', '.join(sorted(cfg))}")
    kind = type(cfg[field])
    if kind is bool:
        if not isinstance(value, bool):
            raise _bad(f"key {key!r}: {value!r} is not true or false")
    elif kind is int:
        _check_count(key, value)
    elif not isinstance(value, kind):
        raise _bad(f"key {key!r}: {value!r} is not a {kind.__name__}")


@dataclasses.dataclass(frozen=True)
class Sizing:
    """The sizes one run used: its mode, device class and overrides (None: this process's
    HARNESS_SIZES). A report describes a recorded run with the run's own."""

    full: bool
    device: str = CPU
    overrides: Mapping | None = None

    def of(self, size_function: Callable):
        return size_function(self.full, self.device, self.overrides)

    def model_size(self) -> str:
        return model_size(self.full, self.device)


# ---- overrides (HARNESS_SIZES) ----

_EXAMPLE = "pointwise_elements=2^26,transfer_batch=32x3x224x224,attention.seq=4096,alexnet.batch=64"


def active(overrides: Mapping | None = None) -> Mapping:
    """`overrides`, or this process's HARNESS_SIZES parsed and checked when None."""
    if overrides is not None:
        return overrides
    return _parsed(settings.SIZES.raw() or "")


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> Mapping:
    return types.MappingProxyType(check_sizes(parse(text)))


def parse(text: str) -> dict:
    """HARNESS_SIZES text -> {key: value}, keys flattened (`attention.seq`); values are ints,
    shapes (tuples of ints), booleans or floats. Only the form is checked here."""
    text = (text or "").strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise _bad(f"is not a valid JSON object ({exc})", form=True) from None
        if not isinstance(data, dict):
            raise _bad("must be a JSON object or key=value pairs", form=True)
        out = {}
        for key, value in data.items():
            if isinstance(value, dict):
                out.update({f"{key}.{k}": _json_value(f"{key}.{k}", v) for k, v in value.items()})
            else:
                out[key] = _json_value(key, value)
        return out
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise _bad(f"has {item!r}, which is not key=value", form=True)
        out[key.strip()] = _text_value(key.strip(), value.strip())
    return out


def _json_value(key: str, value):
    if isinstance(value, list) and value and all(_is_int(v) for v in value):
        return tuple(value)
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _text_value(key, value)
    raise _bad(f"key {key!r}: {value!r} is not a number, a shape or true/false")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _text_value(key: str, value: str):
    if re.fullmatch(r"\d+", value):
        return int(value)
    m = re.fullmatch(r"2\s*(?:\^|\*\*)\s*(\d+)", value)
    if m:
        return 1 << int(m[1])
    if re.fullmatch(r"\d+(x\d+)+", value):
        return tuple(int(v) for v in value.split("x"))
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return float(value)
    except ValueError:
        raise _bad(
            f"key {key!r}: {value!r} is not a number (67108864 or 2^26), a shape (64x3x224x224) "
            "or true/false"
        ) from None


def check_sizes(overrides: dict) -> dict:
    """Check the keys that name size functions (name, field and value shape); `MODEL.FIELD` keys
    are checked where the model's configuration is read (ModelSpec.benchmark_config), or all at
    once by harness.core.zoo.check_size_overrides. Returns `overrides`."""
    for key, value in overrides.items():
        head, dot, field = key.partition(".")
        if head not in SIZE_FUNCTIONS:
            if not dot or not head or not field or "." in field:
                raise _bad(
                    f"unknown key {key!r}; size names: {', '.join(_size_keys())}; or "
                    "MODEL.FIELD for a zoo model (e.g. alexnet.batch)"
                )
            continue
        default = SIZE_FUNCTIONS[head].__wrapped__(False, CPU)
        if isinstance(default, dict):
            if not dot or field not in default:
                raise _bad(
                    f"key {key!r}: {head} has the fields "
                    f"{', '.join(f'{head}.{f}' for f in default)}"
                )
            _check_count(key, value)
        elif dot:
            raise _bad(f"key {key!r}: {head} is one value; write {head}=VALUE")
        elif isinstance(default, tuple):
            if not (
                isinstance(value, tuple)
                and len(value) == len(default)
                and all(v > 0 for v in value)
            ):
                shape = "x".join(["N"] * len(default))
                raise _bad(f"key {key!r}: {value!r} is not a shape {shape} of positive numbers")
        else:
            _check_count(key, value)
    return overrides


def _check_count(key: str, value) -> None:
    if not (_is_int(value) and value > 0):
        raise _bad(f"key {key!r}: {value!r} is not a positive whole number")


def override_text(overrides: Mapping | None = None) -> str | None:
    """The overrides as canonical `key=value` text (sorted keys), None without any: what a run's
    fingerprint records, so that runs with different sizes are not compared silently."""
    over = active(overrides)
    if not over:
        return None
    return ",".join(f"{key}={_format(over[key])}" for key in sorted(over))


def _format(value) -> str:
    if isinstance(value, tuple):
        return "x".join(map(str, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _size_keys() -> list[str]:
    out = []
    for name, fn in SIZE_FUNCTIONS.items():
        default = fn.__wrapped__(False, CPU)
        out += [f"{name}.{f}" for f in default] if isinstance(default, dict) else [name]
    return out


def _model_fields(name: str, over: Mapping) -> dict:
    prefix = name + "."
    return {k[len(prefix) :]: v for k, v in over.items() if k.startswith(prefix)}


def _apply(name: str, value, over: Mapping):
    if isinstance(value, dict):
        return {**value, **_model_fields(name, over)}
    return over.get(name, value)


def _bad(what: str, form: bool = False) -> BadInput:
    """Bad input naming HARNESS_SIZES; `form`: the text is not pairs at all (show an example)."""
    how = (
        f"Write key=value pairs separated by commas (or a JSON object), e.g. {_EXAMPLE}"
        if form
        else "Fix or unset it"
    )
    return BadInput(f"{settings.SIZES.name} {what}. {how} (docs/gpu.md#cuda-sizes).")
