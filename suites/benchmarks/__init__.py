"""asv benchmark suites, one module per area: fusion, transfer, amp, dataloader, models.

The classes here only choose parameters and hand results to asv; the workloads live in
harness.measure.workloads and the measuring in harness.measure.timing (shared with
suites/test_benchmarks.py). Every `track_` benchmark sets `unit` to a key of
harness.verdict.metrics.UNITS (the gate's contract).
HARNESS_FULL=1 switches every suite to full sizes and grids; fast is the default.
"""
