"""Writers of real asv result sets for the gate tests (asv's own Results.save), no tests here."""

from __future__ import annotations

import json
import pathlib
import random

from asv.results import Results
from asv.runner import BenchmarkResult

ENV = "existing-py_venv_bin_python"


def write_set(
    root: pathlib.Path,
    commit: str,
    benches: dict,
    machine: str = "m1-cpu",
    date: int = 1,
    units: dict | None = None,
) -> pathlib.Path:
    """Write an asv results tree under `root` (benchmarks.json, <machine>/machine.json and one
    result file) and return the result file.

    `benches` maps name -> samples list (timings), a number (scalar), None (failed) or
    float('nan') (skipped). Units default to "seconds" for sample lists, else "kernels".
    """
    units = units or {}
    root.mkdir(parents=True, exist_ok=True)
    bjson = root / "benchmarks.json"
    known = json.loads(bjson.read_text()) if bjson.exists() else {"version": 2}
    mdir = root / machine
    mdir.mkdir(exist_ok=True)
    (mdir / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    res = Results({"machine": machine, "python": "3.11"}, {}, commit, date, "3.11", ENV, {})
    for name, data in benches.items():
        unit = units.get(name) or ("seconds" if isinstance(data, list) else "kernels")
        known[name] = {
            "name": name,
            "unit": unit,
            "type": "track",
            "version": "1",
            "params": [],
            "param_names": [],
        }
        if isinstance(data, list):
            br = BenchmarkResult([None], [data], [1], 0, "", None)
            if data:
                br = BenchmarkResult([sorted(data)[len(data) // 2]], [data], [1], 0, "", None)
        else:
            br = BenchmarkResult([data], [None], [None], 0 if data is not None else 1, "", None)
        res.add_result(known[name], br, record_samples=True)
    res.save(str(root))
    bjson.write_text(json.dumps(known))
    return root / res._filename


def draw(
    n: int, mean: float = 1e-3, cv: float = 0.03, seed: int = 0, scale: float = 1.0
) -> list[float]:
    """n per-iteration timings from one distribution (lognormal-ish, positive)."""
    rng = random.Random(seed)
    return [mean * scale * max(0.5, rng.gauss(1.0, cv)) for _ in range(n)]
