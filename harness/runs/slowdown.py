"""Test-only: a scratch benchmark folder that wraps a real workload and can slow it by a fraction.

Used by `harness calibrate --trials N --slowdown F --workload NAME` (the gate's proof on the real
suites) and by its tests; never part of `harness bench`: the module is
written into a scratch folder, suites/benchmarks is untouched, and the switch it reads
(HARNESS_TEST_SLOWDOWN) does nothing anywhere else.

NAME is one of the fusion workloads `pointwise_chain` or `training_step` (the zoo MLP's training
step; suites/benchmarks/fusion.py), or a zoo model name (its inference and training steps, small
size, no channels_last: suites/benchmarks/models.py `Inference` and `TrainingStep`, and
`CompiledOverEager` of that model).
Several NAMEs share one scratch folder, one wrapper module per real suite, so one run (or one
`harness ab` job) times them all: a trial costs one process start per suite, not per workload.
The wrapper subclasses the real suite's class, loaded from its file, so the rows keep their
real names and code.

The slowdown: with HARNESS_TEST_SLOWDOWN=F, each call of the slowed callable is followed by
busy CPU work of F times that callable's own CPU time, measured once per process (the fastest
of at least CALIBRATION_CALLS calls and CALIBRATION_S seconds of them, by thread CPU time,
taken during its first call: the quantity the paired rows and ab's raw rows estimate, so F is
the slowdown they should see, not more) and then fixed: every timed call does the same extra
work, i.e. F more work than the workload does. CPU time,
not wall time: a fixed wall-clock wait is not stretched by the neighbours the way the workload's
own work is, while extra CPU work is preempted like real work (figures:
docs/measurements.md#the-gates-proof-on-real-workloads).
HARNESS_TEST_SLOWDOWN_SIDE picks what slows: `all` (default: every call, eager and compiled
alike, as a slower machine or a slower shared op would) or `compiled` (an inductor regression:
the paired compiled/eager ratio sees it; a zoo model's plain `Inference` rows stay unslowed).
The wait is pure Python, so the exact op counters never see it: only timing rows can catch it.
"""

from __future__ import annotations

import pathlib

from harness.core import settings
from harness.core.exits import BadInput
from harness.core.project import suites

SWITCH = settings.TEST_SLOWDOWN.name
SIDE_SWITCH = settings.TEST_SLOWDOWN_SIDE.name
FUSION_CLASSES = {"pointwise_chain": "PointwiseChain", "training_step": "SmallModelTrainingStep"}
FUSION_WORKLOADS = tuple(FUSION_CLASSES)
SIDES = ("all", "compiled")
CALIBRATION_CALLS = 20  # at least this many calls...
CALIBRATION_S = 0.2  # ...and this much of their CPU time: the fastest of 20 calls of a 60 us
# model was ~1.3 times its fastest of a whole window, so a 5% slowdown read 1.07 under ab
CALIBRATION_MAX_CALLS = 5000

_COMMON = '''"""Test-only wrapper of {real} (written by harness.runs.slowdown; not a user suite)."""
import importlib.util
import os
import time

_spec = importlib.util.spec_from_file_location("_real_{module}_suite", {real!r})
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
setup = _real.setup
FRACTION = float(os.environ.get({switch!r}) or 0)
SIDE = os.environ.get({side_switch!r}) or "all"


def _wait(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _fastest(fn):
    """The fastest thread CPU time of at least {calls} calls of fn and {seconds} s of them."""
    cpu = []
    while len(cpu) < {max_calls} and (len(cpu) < {calls} or sum(cpu) < {seconds}):
        t0 = time.thread_time()
        fn()
        cpu.append(time.thread_time() - t0)
    return min(cpu)


def slowed(fn):
    """fn, then FRACTION x fn's own CPU time of busy CPU work on the calling thread. The call's
    CPU time (time.thread_time: quick runs use one thread) is measured once, during the first
    call (always an untimed warm-up: measure(), the profiler's op count). The wait spins until
    the thread's CPU clock has advanced that much, so the neighbours stretch it exactly as they
    stretch the call's own work. An empty wait's own cost (its clock reads, ~1 us, a tenth of
    the extra for a 50 us model at 5%) is taken off, so the whole wait is the fraction."""
    extra = []

    def call():
        out = fn()
        if not extra:
            fn()  # the first call may have compiled: one more before measuring
            floor = _fastest(lambda: _wait(0.0))
            extra.append(max(0.0, FRACTION * _fastest(fn) - floor))
            return out
        _wait(extra[0])
        return out
    return call
'''

_FUSION = """

class {cls}(_real.{cls}):
    # left out to keep a trial short (~1 min per run on two loaded cores): compile times and raw
    # seconds are not judged without a calibrated band, and the counters cannot see a busy wait
    track_compile_time = track_graph_breaks = track_eager_time = track_compiled_time = None
    track_ops_per_call_eager = track_ops_per_call_compiled = None

    def setup(self):
        super().setup()
        if FRACTION:
            case, make_call = self.case, self.case.make_call
            # compiled() hands make_call the torch.compile wrapper, eager() the target itself
            case.make_call = lambda target: (
                make_call(target) if SIDE == "compiled" and target is case.target
                else slowed(make_call(target))
            )
"""

_INFERENCE = """

class _WholeStepSlowed:
    # the model's step, self.fn, slowed on every call (a whole-model slowdown only)
    params = ({models!r}, [False], [False])

    def setup(self, *params):
        super().setup(*params)
        if FRACTION and SIDE == "all":
            self.fn = slowed(self.fn)


class Inference(_WholeStepSlowed, _real.Inference):
    pass


class TrainingStep(_WholeStepSlowed, _real.TrainingStep):
    pass


class CompiledOverEager(_real.CompiledOverEager):
    params = ({models!r},)

    def setup(self, *params):
        super().setup(*params)
        if FRACTION:
            self.compiled = slowed(self.compiled)
            if SIDE == "all":
                self.eager = slowed(self.eager)
"""


def module_for(workload: str) -> str:
    """The real suite module a workload's wrapper imports."""
    return "fusion" if workload in FUSION_WORKLOADS else "models"


def modules_for(workloads: list[str]) -> list[str]:
    """The real suite modules the wrappers of `workloads` import, in order, once each."""
    return sorted({module_for(w) for w in workloads})


def check_workload(workload: str) -> None:
    from harness.core.zoo import model_names

    if workload not in FUSION_WORKLOADS and workload not in model_names():
        raise BadInput(
            f"unknown workload {workload!r} for --slowdown; choose "
            f"{', '.join(FUSION_WORKLOADS)} (fusion) or a zoo model (its inference and "
            f"training steps): {', '.join(model_names())}"
        )


def write_suite(
    project: pathlib.Path, workloads: list[str] | str, work: pathlib.Path
) -> pathlib.Path:
    """A scratch benchmark folder under `work` holding the wrappers of `workloads` (one module per
    real suite); returns it."""
    workloads = [workloads] if isinstance(workloads, str) else list(dict.fromkeys(workloads))
    if not workloads:
        raise BadInput("--slowdown needs at least one --workload")
    for w in workloads:
        check_workload(w)
    bench = work / f"benchmarks-{'-'.join(workloads)}"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "__init__.py").write_text("")
    for module in modules_for(workloads):
        real = suites(project).builtin / f"{module}.py"
        text = _COMMON.format(
            real=str(real),
            module=module,
            switch=SWITCH,
            side_switch=SIDE_SWITCH,
            calls=CALIBRATION_CALLS,
            seconds=CALIBRATION_S,
            max_calls=CALIBRATION_MAX_CALLS,
        )
        mine = [w for w in workloads if module_for(w) == module]
        if module == "fusion":
            for w in mine:
                text += _FUSION.format(cls=FUSION_CLASSES[w])
        else:
            text += _INFERENCE.format(models=mine)
        (bench / f"{module}.py").write_text(text)
    return bench


def environment(fraction: float, side: str = "all") -> dict[str, str]:
    """The slowed side's extra environment."""
    if side not in SIDES:
        raise BadInput(f"unknown slowed side {side!r}; choose {', '.join(SIDES)}")
    return {SWITCH: repr(fraction), SIDE_SWITCH: side}
