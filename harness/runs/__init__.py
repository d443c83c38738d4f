"""The runs layer: everything that starts processes to measure, between the jobs and the commands.

One asv runner (asv: config, machine record, run and publish command lines), `harness bench`
(bench: one run into a new run record), sharding (shard), `harness ab` (ab: both sides in
pairs of processes, interleave: a pair's processes taking turns row by row, rowworker: one
side's process), calibration and the gate's proofs (calibrate, slowdown), merging shard
runs (merge), the nightly job (nightly) and the GPU proof kit (gpucheck). They use measure (what
runs and how it is timed) and verdict (how results are judged); verdict never imports them.
"""
