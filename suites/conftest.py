"""pytest-benchmark hooks for suites/test_benchmarks.py (harness.measure.pytest_bench).

A conftest rather than the `pytest11` plugin: the hooks exist only where pytest-benchmark is
installed (optionalhook), and they concern this suite's runs only.
"""

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Saved runs keep every per-call sample (as --benchmark-save-data), not only summary
    # statistics: `harness gate` tests the samples (Mann-Whitney) as it does asv's. Set before
    # pytest-benchmark's own (trylast) pytest_configure reads the option.
    if hasattr(config.option, "benchmark_save_data"):
        config.option.benchmark_save_data = True


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config, machine_info):
    from harness.measure.pytest_bench import update_machine_info

    update_machine_info(machine_info)
