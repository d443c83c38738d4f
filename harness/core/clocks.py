"""GPU clocks and throttling, read through NVML (nvidia-ml-py, the `gpu` extra).

A GPU time moves with the SM clock: an idle GPU ramps up from a few hundred MHz, and a hot or
power-capped one slows down. So the GPU timing path (harness.measure.gputime) reads the clock
after every sample through a `ClockReader`, drops samples taken while a thermal or power limit is
active, and records what it could not check where NVML is missing. The reader is passed in, so
tests inject a device's readings instead of a GPU.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

# NVML's clocks-event reasons (nvmlClocksEventReason*): bit -> what slowed the clock. GPU idle
# (0x1) is not a slowdown of work; the application-clocks setting (0x2) is the clock policy.
IDLE = 0x1
APPLICATION_CLOCKS = 0x2
POWER_CAP = 0x4
THROTTLES = {
    POWER_CAP: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake",
}
LOCKED, UNLOCKED, UNKNOWN = "locked", "unlocked", "unknown"
# A sample taken at the power cap is kept while its SM clock holds this share of the card's
# maximum, as NVBench keeps samples above 75% of the clock: device-bound work on a data-centre GPU
# runs at its power limit by design, and dropping all of it would leave such a row unmeasured.
POWER_CAP_CLOCK_SHARE = 0.75


@dataclasses.dataclass(frozen=True)
class ClockSample:
    """One reading: SM clock, the clock-event reasons (idle bit removed), temperature, power."""

    sm_mhz: int | None
    reasons: int = 0
    temperature_c: int | None = None
    power_w: float | None = None

    @property
    def throttles(self) -> list[str]:
        """The thermal and power limits active at this reading."""
        return [name for bit, name in THROTTLES.items() if self.reasons & bit]

    def dropping(self, floor_mhz: float | None) -> list[str]:
        """The limits that make a sample taken at this reading unfit to keep: every thermal or
        power limit but the power cap, and the power cap where the SM clock fell below
        `floor_mhz` (or either is unknown)."""
        held = (
            self.reasons & POWER_CAP
            and floor_mhz is not None
            and self.sm_mhz is not None
            and self.sm_mhz >= floor_mhz
        )
        return [t for t in self.throttles if not (held and t == THROTTLES[POWER_CAP])]


def power_cap_floor(identity: GpuIdentity) -> float | None:
    """The SM clock below which a power-capped sample is dropped (None: the maximum is unknown,
    so every power-capped sample is)."""
    if not identity.sm_max_mhz:
        return None
    return POWER_CAP_CLOCK_SHARE * identity.sm_max_mhz


@dataclasses.dataclass(frozen=True)
class GpuIdentity:
    """What the run's fingerprint records of the card: which physical card and its clock policy."""

    uuid: str | None
    clock_policy: str  # locked, unlocked or unknown
    sm_max_mhz: int | None = None
    power_limit_w: float | None = None


class ClockReader(Protocol):
    available: bool
    why: str  # when not available: what could not be checked, and how to fix it

    def sample(self) -> ClockSample: ...

    def identity(self) -> GpuIdentity: ...


class NoClocks:
    """No NVML here (a CPU, or nvidia-ml-py not installed): nothing is checked, and rows say so."""

    available = False

    def __init__(self, why: str):
        self.why = why

    def sample(self) -> ClockSample:
        return ClockSample(None)

    def identity(self) -> GpuIdentity:
        return GpuIdentity(None, clock_policy(None, None, 0))  # unknown, unless declared


class NvmlClocks:
    """The card behind a torch CUDA device, found by UUID (CUDA_VISIBLE_DEVICES renumbers
    devices, NVML does not)."""

    available = True
    why = ""

    def __init__(self, pynvml, handle, uuid: str | None):
        self._nvml, self._handle, self._uuid = pynvml, handle, uuid

    def sample(self) -> ClockSample:
        n, h = self._nvml, self._handle
        return ClockSample(
            _quiet(lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            (_quiet(lambda: _event_reasons(n, h)) or 0) & ~IDLE,
            _quiet(lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            _quiet(lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0),
        )

    def identity(self) -> GpuIdentity:
        n, h = self._nvml, self._handle
        return GpuIdentity(
            self._uuid,
            clock_policy(
                _quiet(lambda: n.nvmlDeviceGetApplicationsClock(h, n.NVML_CLOCK_SM)),
                _quiet(lambda: n.nvmlDeviceGetDefaultApplicationsClock(h, n.NVML_CLOCK_SM)),
                (_quiet(lambda: _event_reasons(n, h)) or 0) & ~IDLE,
            ),
            _quiet(lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
            _quiet(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
        )


def clock_policy(app_mhz: int | None, default_app_mhz: int | None, reasons: int) -> str:
    """locked when the SM clock is pinned: application clocks set away from their default, or the
    application-clocks reason active (`nvidia-smi -lgc` shows there); unlocked otherwise; unknown
    without readings. A declared policy (HARNESS_GPU_CLOCK_POLICY) wins over this."""
    from harness.core import settings

    declared = settings.GPU_CLOCK_POLICY.get()
    if declared:
        if declared not in (LOCKED, UNLOCKED):
            from harness.core.exits import BadInput

            raise BadInput(
                f"{settings.GPU_CLOCK_POLICY.name} must be {LOCKED!r} or {UNLOCKED!r}, "
                f"got {declared!r}"
            )
        return declared
    if app_mhz is None and not reasons:
        return UNKNOWN
    if reasons & APPLICATION_CLOCKS or (app_mhz and default_app_mhz and app_mhz != default_app_mhz):
        return LOCKED
    return UNLOCKED


def _event_reasons(n, h) -> int:
    # nvidia-ml-py renamed "throttle" to "event" reasons; older ones have only the first name
    getter = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return int((getter or n.nvmlDeviceGetCurrentClocksThrottleReasons)(h))


def _quiet(read):
    """One NVML reading, None where this card or driver does not support it."""
    try:
        return read()
    except Exception:
        return None


def reader_for(device) -> ClockReader:
    """The clock reader of a torch device: NVML's for a CUDA device where nvidia-ml-py imports
    and finds the card, else NoClocks saying why."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return NoClocks(f"not a CUDA device ({device.type}): no GPU clock")
    try:
        import pynvml
    except ImportError:
        return NoClocks(
            "nvidia-ml-py not installed: SM clock and throttling not checked "
            "(pip install 'harness[gpu]' or nvidia-ml-py)"
        )
    try:
        pynvml.nvmlInit()
        index = device.index if device.index is not None else torch.cuda.current_device()
        uuid = torch_uuid(index)
        handle = (
            pynvml.nvmlDeviceGetHandleByUUID(uuid)
            if uuid
            else pynvml.nvmlDeviceGetHandleByIndex(index)
        )
    except Exception as exc:  # no driver access (a container without NVML), an unknown card
        return NoClocks(f"NVML could not read this GPU ({type(exc).__name__}: {exc})")
    return NvmlClocks(pynvml, handle, uuid)


def torch_uuid(index: int) -> str | None:
    """The card's UUID as NVML spells it (`GPU-xxxxxxxx-...`), from torch's device properties."""
    import torch

    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
