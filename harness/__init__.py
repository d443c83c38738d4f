"""harness: graph goldens, benchmarks and a regression gate for PyTorch.

One house, three rooms, imports flowing one way (checked by tests/test_layers.py):

    cli, commands/     the `harness` command: argument wiring and printing, on top of everything
    golden/            job 1, graph goldens: capture, canonical printers, expect store,
                       pytest plugin
    measure/           job 2, benchmarks: workloads, timing, the asv runner
    verdict/           job 3, the verdict: results, comparison, gate, calibrate, report, nightly
    core/              shared ground: exit codes, settings, project root, seeds/devices/fingerprint,
                       atomic files, units, tables, dynamo counters, the model zoo

golden and measure import only core; verdict imports core and measure (to run asv); commands
import any of them; nothing imports commands. `harness.zoo` and `harness.gate` are compatibility
names for users: old import paths that keep working.
"""

__version__ = "0.1.0"
