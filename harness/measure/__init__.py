"""Job 2, benchmarks: what runs (workloads), how it is measured (timing), and how asv runs the
suites in suites/benchmarks (asv, bench). Imports only harness.core."""
