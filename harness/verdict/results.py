"""Where results live and how a result set is loaded: asv's own loader, checked strictly.

A *result set* is one asv result file (one commit, one environment, one machine) plus the
`benchmarks.json` that gives each benchmark its unit. `resolve(spec)` accepts:

- a path to an asv result file (`results/asv/<machine>/<sha8>-<env>.json`);
- a directory holding one machine's results (`results/asv/<machine>/` or a committed baseline
  `results/baselines/<machine>/`): its newest result file;
- `baseline` or `baseline:<machine>`: the committed baseline for that machine;
- `latest`: the newest result file in `results/asv/<machine>/`;
- a commit hash or prefix: that commit's result file in `results/asv/<machine>/`.

Everything wrong with the input raises `BadInput` (harness.core.exits), whose message names the
file or benchmark and says what to do: exit code 3.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib

from harness.core.exits import BadInput
from harness.core.files import write_json_atomic

SKIP_FILES = {"machine.json", "benchmarks.json"}


def results_root(override: str | os.PathLike | None = None) -> pathlib.Path:
    """The results root (asv/, baselines/, noise/, html/ below it), the one meaning of
    `--results-dir` on every command: the override, else $HARNESS_RESULTS_DIR, else the
    project's `results/` (harness.core.project finds the project from the working directory)."""
    given = override or os.environ.get("HARNESS_RESULTS_DIR")
    if given:
        return pathlib.Path(given).resolve()
    from harness.core.project import project_root

    return project_root() / "results"


def asv_dir(root: pathlib.Path) -> pathlib.Path:
    """asv's own results directory under the results root."""
    return pathlib.Path(root) / "asv"


def baselines_dir(root: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(root) / "baselines"


@dataclasses.dataclass
class Entry:
    """One benchmark (one parameter combination) of one result set."""

    name: str
    unit: str
    value: float | None  # None: failed; NaN: skipped (asv's markers)
    samples: list[float] | None

    @property
    def failed(self) -> bool:
        return self.value is None

    @property
    def skipped(self) -> bool:
        return self.value is not None and math.isnan(self.value)


@dataclasses.dataclass
class ResultSet:
    path: pathlib.Path
    machine: str
    commit: str
    env_name: str
    date: int | None
    entries: dict[str, Entry]

    @property
    def label(self) -> str:
        return f"{self.commit[:8]} ({self.path})"


def _load_json(path: pathlib.Path, what: str) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: {what} not found") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read {what}: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{path}: corrupt or truncated JSON ({exc}); rerun the benchmarks "
                       "that wrote it or restore the file from git") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object in {what}")
    return data


def find_benchmarks_json(result_file: pathlib.Path) -> pathlib.Path:
    """asv writes benchmarks.json at the top of results_dir; baselines keep a copy beside."""
    for d in (result_file.parent, result_file.parent.parent):
        if (d / "benchmarks.json").is_file():
            return d / "benchmarks.json"
    raise BadInput(f"{result_file}: no benchmarks.json beside it or one level up; asv writes it "
                   "to results_dir on every run — copy it next to the result file")


def _check_number(x, where: str) -> None:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        raise BadInput(f"{where}: not a number: {x!r}")
    if math.isnan(x) or math.isinf(x):
        raise BadInput(f"{where}: sample is {x} — the benchmark produced an invalid timing; "
                       "fix it and rerun")


def load(path: str | os.PathLike, benchmarks_json: str | os.PathLike | None = None) -> ResultSet:
    """Load one asv result file with asv's loader and check every value the gate will use."""
    from asv import util
    from asv.commands.compare import unroll_result
    from asv.results import Results

    path = pathlib.Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: result file not found")
    bpath = pathlib.Path(benchmarks_json) if benchmarks_json else find_benchmarks_json(path)
    benchmarks = _load_json(bpath, "benchmarks.json")
    _load_json(path, "result file")  # our message for corrupt JSON; asv's loader follows
    try:
        res = Results.load(str(path))
    except util.UserError as exc:
        raise BadInput(f"{path}: {exc}") from None
    except Exception as exc:  # asv trusts its files; a damaged one fails anywhere
        raise BadInput(f"{path}: malformed asv result file ({type(exc).__name__}: {exc})") from None
    machine = (res.params or {}).get("machine")
    if not isinstance(machine, str) or not res.commit_hash:
        raise BadInput(f"{path}: no machine name or commit hash in the result file")

    entries: dict[str, Entry] = {}
    for key in sorted(res.get_all_result_keys()):
        info = benchmarks.get(key)
        if not isinstance(info, dict):
            raise BadInput(f"{path}: benchmark {key!r} is not in {bpath}; use the benchmarks.json "
                           "written by the same asv run")
        unit = info.get("unit")
        try:
            params = res.get_result_params(key) or []
            values = res.get_result_value(key, params)
            samples = res.get_result_samples(key, params)
            if not isinstance(values, list):
                values, samples = [values], [samples]
            rows = list(unroll_result(key, params, values, samples))
        except Exception as exc:
            raise BadInput(f"{path}: benchmark {key!r} is malformed ({type(exc).__name__}: {exc})") from None
        for name, value, samp in rows:
            where = f"{path}: benchmark {name!r}"
            if value is not None:
                if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isinf(value):
                    raise BadInput(f"{where}: result is {value!r}, not a number")
            if samp is not None:
                if not isinstance(samp, list):
                    raise BadInput(f"{where}: samples are not a list")
                if not samp:
                    raise BadInput(f"{where}: empty sample list — the benchmark ran no iterations; "
                                   "rerun it")
                for x in samp:
                    _check_number(x, where)
                if value is not None and math.isnan(value):
                    raise BadInput(f"{where}: result is NaN but it has samples; the file is "
                                   "inconsistent — rerun the benchmark")
            entries[name] = Entry(name, unit, None if value is None else float(value),
                                  [float(x) for x in samp] if samp is not None else None)
    if not entries:
        raise BadInput(f"{path}: holds no benchmark results")
    return ResultSet(path, machine, res.commit_hash, res.env_name, res.date, entries)


def result_files(directory: pathlib.Path) -> list[pathlib.Path]:
    """asv result files in a machine directory (not machine.json). Fingerprints live outside
    asv's results directory (harness.measure.bench.fingerprint_path), so nothing else is here."""
    return sorted(p for p in directory.glob("*.json") if p.name not in SKIP_FILES)


def newest(files: list[pathlib.Path]) -> pathlib.Path:
    """The result file with the newest commit date (asv's `date`), then modification time."""
    def key(p):
        try:
            with open(p, encoding="utf-8") as f:
                date = json.load(f).get("date") or 0
        except (OSError, ValueError):
            date = 0  # a corrupt file is reported when it is loaded, not skipped silently
        return (date, p.stat().st_mtime)
    return max(files, key=key)


def _machine_dirs(root: pathlib.Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if (p / "machine.json").is_file()) if root.is_dir() else []


def _pick_machine(root: pathlib.Path, machine: str | None, spec: str) -> str:
    if machine:
        return machine
    names = _machine_dirs(root)
    if len(names) == 1:
        return names[0]
    raise BadInput(f"{spec!r}: cannot tell which machine under {root} "
                   f"(found: {', '.join(names) or 'none'}); pass --machine NAME")


def resolve(spec: str, root: pathlib.Path, machine: str | None = None) -> pathlib.Path:
    """The result file a BASE or HEAD argument names (see the module docstring)."""
    p = pathlib.Path(spec)
    if p.is_file():
        return p
    if p.is_dir():
        if (p / "machine.json").is_file() or result_files(p):
            files = result_files(p)
        else:
            files = result_files(p / _pick_machine(p, machine, spec))
        if not files:
            raise BadInput(f"{p}: directory holds no asv result files")
        return newest(files)
    if "/" in spec or spec.endswith(".json"):
        raise BadInput(f"{spec}: result file or directory not found")
    if spec == "baseline" or spec.startswith("baseline:"):
        name = spec.partition(":")[2] or _pick_machine(baselines_dir(root), machine, spec)
        d = baselines_dir(root) / name
        files = result_files(d) if d.is_dir() else []
        if not files:
            raise BadInput(f"no committed baseline for machine {name!r} in {d}; record one with "
                           f"`harness nightly --save-baseline` on that machine and commit it")
        return newest(files)
    adir = asv_dir(root)
    name = _pick_machine(adir, machine, spec)
    files = result_files(adir / name)
    if spec == "latest":
        if not files:
            raise BadInput(f"no results in {adir / name}; run `harness bench` first")
        return newest(files)
    matches = [f for f in files if f.name.split("-")[0].startswith(spec[:8].lower())]
    commits = sorted({f.name.split("-")[0] for f in matches})
    if not matches:
        known = ", ".join(sorted({f.name.split("-")[0] for f in files})) or "none"
        raise BadInput(f"{spec!r}: no result file for that commit in {adir / name} "
                       f"(commits with results: {known})")
    if len(commits) > 1 or len(matches) > 1:
        raise BadInput(f"{spec!r} matches several result files in {adir / name}: "
                       f"{', '.join(f.name for f in matches)}; pass the file path")
    return matches[0]


# ---- the environment fingerprint saved with each run (harness.measure.bench) ----

# What the gate lists above its table when the two sides differ (DECISIONS §2).
FINGERPRINT_KEYS = ("torch", "torchvision", "cuda_build", "cudnn", "driver", "gpu", "cpu",
                    "torch_threads", "python", "commit")


def fingerprint_of(rs: ResultSet) -> dict | None:
    """The fingerprint saved with this run, or None when there is none (an older run, or a bare
    result file): `fingerprint.json` beside the result file, else ROOT/fingerprints/<machine>/."""
    candidates = [rs.path.parent / "fingerprint.json",
                  rs.path.parent.parent.parent / "fingerprints" / rs.machine / f"{rs.commit[:8]}.json"]
    for path in candidates:
        if path.is_file():
            return _load_json(path, "fingerprint")
    return None


def environment_differences(base: ResultSet, head: ResultSet) -> list[tuple[str, str, str]]:
    """(setting, base value, head value) for every fingerprint setting that differs."""
    fb, fh = fingerprint_of(base), fingerprint_of(head)
    if fb is None or fh is None:
        missing = [side for side, fp in (("base", fb), ("head", fh)) if fp is None]
        return [("fingerprint", "missing" if fb is None else "saved",
                 "missing" if fh is None else "saved")] if missing else []
    return [(k, str(fb.get(k)), str(fh.get(k))) for k in FINGERPRINT_KEYS if fb.get(k) != fh.get(k)]


# ---- noise bands (written by `harness calibrate`, read by the gate) ----

def noise_path(root: pathlib.Path, machine: str) -> pathlib.Path:
    return root / "noise" / f"{machine}.json"


def load_noise(path: pathlib.Path) -> dict[str, float]:
    """benchmark name -> relative noise band; a missing file means no bands yet (empty)."""
    if not path.exists():
        return {}
    data = _load_json(path, "noise-band file")
    out = {}
    for name, rec in (data.get("benchmarks") or {}).items():
        band = rec.get("band") if isinstance(rec, dict) else None
        if not isinstance(band, (int, float)) or isinstance(band, bool) or not math.isfinite(band) or band < 0:
            raise BadInput(f"{path}: benchmark {name!r} has no valid `band`; rerun "
                           "`harness calibrate` for it or delete its entry")
        out[name] = float(band)
    return out


def save_noise(path: pathlib.Path, machine: str, records: dict[str, dict]) -> None:
    """Merge new per-benchmark records into the file: other benchmarks' bands are kept."""
    data = _load_json(path, "noise-band file") if path.exists() else {}
    data["machine"] = machine
    data.setdefault("benchmarks", {}).update(records)
    write_json_atomic(path, data)
