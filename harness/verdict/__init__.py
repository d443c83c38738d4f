"""Job 3, the verdict: load results (results), compare them row by row (metrics, compare), decide
and render the gate (gate), noise bands (calibrate), summaries and reports (summary, report), and
the nightly run (nightly). Imports harness.core and harness.measure (to run asv), never golden."""
