"""Host-to-device copies: pageable vs pinned memory, non_blocking, uint8-then-convert vs float32.
CUDA only: on a CPU machine every case is skipped (n/a) with the reason.

The three comparisons are paired rows (both copies timed in the same rounds); HostToDeviceCopy
keeps the raw copy time and its reference-normalised companion."""

from harness.measure import timing
from harness.measure.threads import fix_threads
from harness.measure.workloads import device
from harness.measure.workloads import transfer as wl


def setup(*params):
    """asv runs a module-level setup before every benchmark's own: the run's fixed thread count."""
    fix_threads()


class HostToDeviceCopy:
    params = (list(wl.MEMORY), [False, True], list(wl.PAYLOADS))
    param_names = ["host_memory", "non_blocking", "payload"]

    def setup(self, memory, non_blocking, payload):
        self.dev = device()
        self.copy = wl.build(memory, non_blocking, payload, self.dev)

    def profile_targets(self, *params):
        """What full runs profile per operator (harness.measure.profiles)."""
        return {"copy": self.copy}

    def track_copy_time(self, memory, non_blocking, payload):
        return timing.asv_samples(timing.measure(self.copy, self.dev))

    track_copy_time.unit = "seconds"

    def track_copy_time_over_reference(self, memory, non_blocking, payload):
        return timing.asv_samples(timing.measure_over_reference(self.copy, self.dev))

    track_copy_time_over_reference.unit = "relative"


class PinnedOverPageable:
    """Paired (timing.measure_paired): a copy from pinned memory over the same copy from pageable
    memory."""

    params = ([False, True], list(wl.PAYLOADS))
    param_names = ["non_blocking", "payload"]

    def setup(self, non_blocking, payload):
        self.dev = device()
        self.pinned = wl.build("pinned", non_blocking, payload, self.dev)
        self.pageable = wl.build("pageable", non_blocking, payload, self.dev)

    def profile_targets(self, *params):
        return {"pinned": self.pinned, "pageable": self.pageable}

    def track_pinned_over_pageable(self, non_blocking, payload):
        return timing.asv_samples(timing.measure_paired(self.pinned, self.pageable, self.dev))

    track_pinned_over_pageable.unit = "ratio"


class Uint8ThenConvertOverFloat32:
    """Paired (timing.measure_paired): sending uint8 and converting on the device over sending
    float32."""

    params = (list(wl.MEMORY),)
    param_names = ["host_memory"]

    def setup(self, memory):
        self.dev = device()
        self.uint8 = wl.build(memory, True, "uint8", self.dev)
        self.float32 = wl.build(memory, True, "float32", self.dev)

    def profile_targets(self, *params):
        return {"uint8": self.uint8, "float32": self.float32}

    def track_uint8_over_float32(self, memory):
        return timing.asv_samples(timing.measure_paired(self.uint8, self.float32, self.dev))

    track_uint8_over_float32.unit = "ratio"


class NonBlockingOverBlocking:
    """Paired (timing.measure_paired): copies made with non_blocking=True over the same copies made
    blocking, each batch used on the device right after its copy (see
    transfer.copy_then_compute)."""

    params = (["pageable", "pinned"],)
    param_names = ["host_memory"]

    def setup(self, memory):
        self.dev = device()
        self.non_blocking = wl.copy_then_compute(memory, True, self.dev)
        self.blocking = wl.copy_then_compute(memory, False, self.dev)

    def track_non_blocking_over_blocking(self, memory):
        return timing.asv_samples(timing.measure_paired(self.non_blocking, self.blocking, self.dev))

    track_non_blocking_over_blocking.unit = "ratio"
