"""Job 3, the verdict: load results (results, resultset, pytest_benchmark), compare them row by
row (metrics, compare, between), decide and render the gate (gate), history and what changed
(history, operators, functions), summaries and reports (summary, report, machines, bands), advice
and drift. It only judges: it imports harness.core alone, never measure, golden or runs."""
