"""harness: graph goldens, benchmarks and a regression gate for PyTorch.

The three jobs live in their own modules and import downwards only:

    env, zoo             -- shared ground: seeds, devices, fingerprints, the model registry
    capture, canonical,  -- job 1, graph goldens (pytest plugin in plugin.py)
    expect
    timing, workloads    -- job 2, benchmarks (asv suites in suites/benchmarks)
    gate, report         -- job 3, the regression gate and reports
    cli                  -- the `harness` command, on top of everything
"""

__version__ = "0.1.0"
