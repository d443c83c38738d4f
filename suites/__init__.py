"""The graph suite and the asv suites; installed as the package harness.suites."""
