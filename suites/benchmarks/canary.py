"""Canary: a tiny eager pointwise chain whose regression the gate must catch.

`HARNESS_CANARY_EXTRA=1` appends one more pointwise op (an erf) to the chain: one more kernel
and about a fifth more time on the 2-core CI machines (docs/measurements.md, "The canary's clean
row"). That is the injected regression of the gate's end-to-end proof (tests/test_gate_e2e.py,
`harness calibrate --trials`). An erf, not another op of the chain's
kind: a sqrt added only ~10%, which a loaded shared runner read as 1.048, under the gate's 5%
threshold; the erf keeps the proof at several times the threshold. The chain runs on one thread
so that scheduler noise from the other core stays out of it.

Four views of the same chain:
- track_time: seconds per call. Honest, but between asv runs on a shared VM its median moves by
  up to 45%, so its calibrated noise band hides a 10% change;
- track_time_over_reference: per round, the chain's time over a fixed reference chain's time
  in the same rounds (timing.measure_paired): a paired ratio (unit "ratio", judged always).
  The reference here is the same ten torch ops, never switched: the canary tests the gate, not
  torch, so a yardstick of the same kind of work is right, and it cancels machine speed far
  better than a Python/NumPy one (figures: docs/measurements.md#the-measuring-rules);
- track_ops: aten ops per call, exact;
- track_instructions: instructions per call, counted by callgrind in a valgrind process of its
  own (harness.measure.instructions; ~1 min, most of it importing torch under valgrind); n/a
  where valgrind is missing. The extra op moves it by about two fifths (+41.6%).
"""

from harness.measure.workloads.instructions import InstructionWorkload

N = 1 << 16  # floats per tensor: ~0.4 ms per chain on one core
WARMUP = 50
SAMPLES = 400  # per-call samples per run (~0.15 s) for the gate's Mann-Whitney test; ab: its window
BUDGET_S = 2.0
INSTRUCTIONS_ROW = "canary.Canary.track_instructions"


def injected() -> bool:
    """Whether the regression is switched on: read once per setup, never inside the timed
    chain, where an environment lookup makes the paired row's two sides unlike work
    (docs/measurements.md, "The canary's clean row")."""
    from harness.core import settings

    return settings.CANARY_EXTRA.get()


def chain(x, extra: bool = False):
    # ten cheap pointwise ops, each one kernel; the optional eleventh (heavier) is the regression
    y = x.mul(1.0001).add(0.5).sin().mul(0.9).add(-0.1).cos().mul(1.1).add(0.2).abs().sqrt()
    if extra:
        y = y.erf()
    return y


def reference_chain(x):
    # the same ten ops, never changed by the switch: the yardstick for machine speed
    return x.mul(1.0001).add(0.5).sin().mul(0.9).add(-0.1).cos().mul(1.1).add(0.2).abs().sqrt()


def _setup():
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    return torch.rand(N)


def _instruction_call(folder):
    x, more = _setup(), injected()
    return lambda: chain(x, more)


# what track_instructions counts, read by the counting process (harness.measure.instructions)
INSTRUCTION_WORKLOADS = {"canary": InstructionWorkload("canary", _instruction_call)}


class Canary:
    """Not part of `harness bench`'s summaries; the gate's end-to-end proof runs it alone."""

    def setup(self):
        self.x = _setup()
        more = injected()
        # both sides read the same input: a copy at another address moved the clean row's
        # level between processes twice as much (docs/measurements.md)
        self.fn = lambda: chain(self.x, more)
        self.reference = lambda: reference_chain(self.x)

    def profile_targets(self):
        """What `harness bench --profile` (and full runs) profile: harness.measure.profiles."""
        return {"chain": self.fn, "reference": self.reference}

    def track_time(self):
        from harness.measure import timing

        return timing.asv_samples(
            timing.measure(self.fn, "cpu", warmup=WARMUP, samples=SAMPLES, budget_s=BUDGET_S)
        )

    track_time.unit = "seconds"

    def track_time_over_reference(self):
        from harness.measure import timing

        return timing.asv_samples(
            timing.measure_paired(
                self.fn, self.reference, "cpu", warmup=WARMUP, samples=SAMPLES, budget_s=BUDGET_S
            )
        )

    track_time_over_reference.unit = "ratio"

    def track_instructions(self):
        import sys

        from asv_runner.benchmarks.mark import SkipNotImplemented

        from harness.measure import instructions
        from harness.measure.workloads import NotApplicable

        counts = instructions.count_rows(
            [instructions.Target(INSTRUCTIONS_ROW, __file__, "canary")]
        )
        try:
            return instructions.row_value(counts, INSTRUCTIONS_ROW)
        except NotApplicable as exc:  # n/a, as a setup's NotImplementedError would be
            print(f"asv: skipped: {exc}", file=sys.stderr)
            raise SkipNotImplemented(str(exc)) from None

    track_instructions.unit = "instructions"
    track_instructions.timeout = 1800

    def track_ops(self):
        """Top-level aten ops per call (one kernel each): the deterministic side of the canary."""
        from harness.measure import timing

        return timing.ops_per_call(self.fn, "cpu")

    track_ops.unit = "ops"
