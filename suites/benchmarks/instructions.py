"""Instructions per call: the CPU work of one call of each workload, counted by callgrind.

A shared runner moves wall time by tens of percent from one process to the next; it does not
move the instructions a call executes. So these rows catch the most common regression, the same
work getting slower (a slower kernel, more Python or dispatcher work), to about 1% on any runner,
and the gate judges them always, as counters with a small relative tolerance.

One valgrind process counts every workload of the run (setup_cache: asv would otherwise start
one per row, ~45 s of importing torch under valgrind each): harness.measure.instructions. The
workloads are harness.measure.workloads.instructions. What instruction counts do not see (memory
stalls, cache effects, GPU kernels, I/O) the timing rows of the other suites still measure.
Without valgrind every row is n/a, with the command that installs it.
"""

from harness.measure import instructions
from harness.measure.workloads import instructions as wl


class InstructionsPerCall:
    params = [list(wl.WORKLOADS)]
    param_names = ["workload"]
    timeout = instructions.TIMEOUT_S + 300

    def setup_cache(self):
        names = instructions.selected(list(wl.WORKLOADS))
        return instructions.count_rows(
            [instructions.Target(wl.row(n), wl.__name__, n) for n in names]
        )

    setup_cache.timeout = instructions.TIMEOUT_S + 300

    def setup(self, counts, workload):
        self.value = instructions.row_value(counts, wl.row(workload))

    def track_instructions(self, counts, workload):
        return self.value

    track_instructions.unit = "instructions"
