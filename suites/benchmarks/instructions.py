"""Instructions per call: the CPU work of one call of each workload, counted by callgrind.

A shared runner moves wall time by tens of percent from one process to the next; it does not
move the instructions a call executes. So these rows catch the most common regression, the same
work getting slower (a slower kernel, more Python or dispatcher work, a slower compile), to about
1% on any runner, and the gate judges them always, as counters with a small relative tolerance.

The rows (harness.measure.workloads.instructions.rows): every registered model's inference and
training step (`<model>_inference`, `<model>_training_step`), its compile where it opts in
(`<model>_compile`), the built-in workloads in this repository, and in a project of its own the
INSTRUCTION_WORKLOADS of its benchmark modules (`<module>.<name>`). One valgrind process counts
every row of the run (setup_cache: asv would otherwise start one per row, ~45 s of importing
torch under valgrind each): harness.measure.instructions. What instruction counts do not see
(memory stalls, cache effects, GPU kernels, I/O) the timing rows of the other suites still
measure. Without valgrind every row is n/a, with the command that installs it.
"""

from harness.measure import instructions
from harness.measure.workloads import instructions as wl

_ROWS = wl.rows()


def _targets():
    return [instructions.Target(wl.row(r.key), r.source, r.name, r.key) for r in _ROWS]


class InstructionsPerCall:
    params = [[r.key for r in _ROWS]]
    param_names = ["workload"]
    timeout = instructions.TIMEOUT_S + 300

    def setup_cache(self):
        return instructions.count_rows(instructions.selected(_targets()))

    setup_cache.timeout = instructions.TIMEOUT_S + 300

    def setup(self, counts, workload):
        self.value = instructions.row_value(counts, wl.row(workload))

    def track_instructions(self, counts, workload):
        return self.value

    track_instructions.unit = "instructions"


# A project of its own with no model and no INSTRUCTION_WORKLOADS: asv cannot run a benchmark
# with an empty parameter list, so the class is left out there.
if not _ROWS:
    del InstructionsPerCall
