"""How a result set is named and loaded: asv's own loader, checked strictly.

A *result set* is one asv result file (one run: one commit, one environment, one machine) plus
the `benchmarks.json` that gives each benchmark its unit. Runs live in run records
(harness.core.records); `resolve(spec)` turns a name into a result file (see its docstring for
the forms: paths, `latest`, `baseline[:MACHINE]`, `nightly[:MACHINE]`, commits, run ids).

Everything wrong with the input raises `BadInput` (harness.core.exits), whose message names the
file or benchmark and says what to do: exit code 3.
"""

from __future__ import annotations

import math
import os
import pathlib
import sys

from harness.core import asvlog, provenance, records, settings, trust
from harness.core.exits import BadInput
from harness.core.files import write_json_atomic
from harness.verdict.resultset import Entry, ResultSet  # noqa: F401 (results.Entry, results.ResultSet)

SKIP_FILES = {"machine.json", "benchmarks.json"}


def results_root(override: str | os.PathLike | None = None) -> pathlib.Path:
    """The results root (asv/, baselines/, noise/, html/ below it), the one meaning of
    `--results-dir` on every command: the override, else $HARNESS_RESULTS_DIR, else the
    project's `results/` (harness.core.project finds the project from the working directory).
    The root may be a symbolic link (runners link results/ to a persistent disk): it is
    resolved here, once, and said on stderr; below it nothing is written or deleted through a
    link (harness.core.trust.inside)."""
    given = override or settings.RESULTS_DIR.get()
    if given:
        path = pathlib.Path(given)
    else:
        from harness.core.project import project_root

        path = project_root() / "results"
    path = pathlib.Path(os.path.abspath(path))
    real = pathlib.Path(os.path.realpath(path))
    if path.is_symlink() and str(path) not in _SAID_ROOTS:
        _SAID_ROOTS.add(str(path))
        print(
            f"harness: the results root {trust.shown(str(path), 300)} is a symbolic link to "
            f"{trust.shown(str(real), 300)}; using that folder (nothing below it is followed "
            "through a link)",
            file=sys.stderr,
        )
    return real


_SAID_ROOTS: set[str] = set()  # results roots that are links, said once per process


def asv_dir(root: pathlib.Path) -> pathlib.Path:
    """asv's own results directory under the results root."""
    return pathlib.Path(root) / "asv"


def baselines_dir(root: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(root) / "baselines"


def _load_json(path: pathlib.Path, what: str) -> dict:
    """A JSON object from a results folder (its size, nesting and links checked: trust.load)."""
    try:
        data = trust.load(path, what)
    except FileNotFoundError:
        raise BadInput(f"{path}: {what} not found") from None
    except BadInput as exc:
        why = str(exc).removeprefix(f"{path}: ")
        raise BadInput(
            f"{path}: corrupt or truncated JSON, or not a plain file ({why}); rerun the "
            "benchmarks that wrote it or restore the file from git"
        ) from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object in {what}")
    return data


def find_benchmarks_json(result_file: pathlib.Path) -> pathlib.Path:
    """asv writes benchmarks.json at the top of results_dir; baselines keep a copy beside."""
    for d in (result_file.parent, result_file.parent.parent):
        if (d / "benchmarks.json").is_file():
            return d / "benchmarks.json"
    raise BadInput(
        f"{result_file}: no benchmarks.json beside it or one level up; asv writes it "
        "to results_dir on every run — copy it next to the result file"
    )


def _check_number(x, where: str) -> None:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        raise BadInput(f"{where}: not a number: {x!r}")
    if math.isnan(x) or math.isinf(x):
        raise BadInput(
            f"{where}: sample is {x} — the benchmark produced an invalid timing; fix it and rerun"
        )


def load(path: str | os.PathLike, benchmarks_json: str | os.PathLike | None = None) -> ResultSet:
    """Load one result file and check every value the gate will use: an asv result file (with
    asv's loader), or a pytest-benchmark save (harness.verdict.pytest_benchmark), told apart by
    content."""
    from harness.verdict import pytest_benchmark

    path = pathlib.Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: result file not found")
    data = _load_json(path, "result file")  # our message for corrupt JSON; asv's loader follows
    if pytest_benchmark.looks_like(data):
        return pytest_benchmark.load(path, data)
    rs = _load_asv(path, benchmarks_json)
    # a run record's, else those of the asv results folder the file lies in (calibrate's runs)
    rec = records.record_of(path)
    folder = rec.path if rec else path.parent.parent
    rs.instructions = records.read_instructions(folder)
    rs.not_counted = records.read_not_counted(folder)
    rs.facts = records.read_row_facts(folder)
    rs.dirty = provenance.of_record(rec.meta) if rec else None
    # run.json's types were checked when the record was read (records.check_meta)
    suites = rec.meta.get("suites") if rec else None
    rs.suites = tuple(suites) if isinstance(suites, list) else None
    benches = rec.meta.get("benches") if rec else None
    rs.benches = tuple(map(str, benches)) if isinstance(benches, list) and benches else None
    if rec and any(e.failed for e in rs.entries.values()):
        rs.errors = asvlog.read_failures(rec.path, records.ASV_LOG)
    rs.folder = folder
    if rec:
        quick, full = rec.meta.get("quick") is True, rec.meta.get("mode") == "full"
        rs.mode_flags = ("--quick",) * quick + ("--full",) * full + _threads_flag(rec.meta, full)
    from harness.verdict import answers

    answers.attach(rs)  # the answer checks' verdicts, as rows of their own
    return rs


def _threads_flag(meta: dict, full: bool) -> tuple[str, ...]:
    """`--threads N` where the run's thread count is not what its mode would pick anyway (1 in
    a fast or quick run; a full run's all cores differ between machines, so it is always said).
    run.json's "threads" only goes into a printed command: anything but a plain count is left
    out."""
    n = meta.get("threads")
    if type(n) is not int or not 1 <= n <= 4096 or (n == 1 and not full):
        return ()
    return ("--threads", str(n))


def param_names(rs: ResultSet) -> dict[str, list[str]]:
    """benchmark name -> its parameter names, from the run's benchmarks.json (empty where it
    cannot be read: a set without it was refused when loaded)."""
    try:
        data = _load_json(find_benchmarks_json(rs.path), "benchmarks.json")
    except BadInput:
        return {}
    return {
        k: [str(n) for n in v.get("param_names") or [] if isinstance(n, str)]
        for k, v in data.items()
        if isinstance(v, dict) and isinstance(v.get("param_names") or [], list)
    }


def load_listed(path: str | os.PathLike, run: str | os.PathLike) -> ResultSet | None:
    """`load` for a result file of a run met while listing many (history, report, the noise):
    a file that cannot be read (a benchmark its benchmarks.json lacks, a damaged file) leaves
    its run out with one line naming it and why (None), and the others go on. A run named
    directly (the gate's BASE or HEAD) is loaded with `load`: bad input, exit 3."""
    try:
        return load(path)
    except BadInput as exc:
        records.left_out(run, f"{str(exc).removeprefix(f'{path}: ')[:300]}; not used")
        return None


def same_runner(base: ResultSet, head: ResultSet) -> None:
    """An asv result and a pytest-benchmark save name and time their benchmarks differently:
    nothing in them lines up, so comparing them is bad input (exit 3), not a list of
    benchmarks missing on one side."""
    if base.runner != head.runner:
        raise BadInput(
            f"cannot compare results of different runners: base is {base.runner} "
            f"({base.path}), head is {head.runner} ({head.path}); gate two "
            f"{base.runner} results or two {head.runner} results"
        )


def _load_asv(path: pathlib.Path, benchmarks_json) -> ResultSet:
    from asv import util
    from asv.commands.compare import unroll_result
    from asv.results import Results

    bpath = pathlib.Path(benchmarks_json) if benchmarks_json else find_benchmarks_json(path)
    benchmarks = _load_json(bpath, "benchmarks.json")
    try:
        res = Results.load(str(path))
    except util.UserError as exc:
        raise BadInput(f"{path}: {exc}") from None
    except Exception as exc:  # asv trusts its files; a damaged one fails anywhere
        raise BadInput(f"{path}: malformed asv result file ({type(exc).__name__}: {exc})") from None
    machine = (res.params or {}).get("machine") if isinstance(res.params, dict) else None
    commit = res.commit_hash
    if not isinstance(machine, str) or not isinstance(commit, str) or not commit:
        raise BadInput(f"{path}: no machine name or commit hash in the result file")
    if not isinstance(res.env_name, str):
        raise BadInput(f"{path}: the asv environment name is not a string")

    entries: dict[str, Entry] = {}
    for key in sorted(res.get_all_result_keys()):
        info = benchmarks.get(key)
        if not isinstance(info, dict):
            raise BadInput(
                f"{path}: benchmark {key!r} is not in {bpath}; use the benchmarks.json "
                "written by the same asv run"
            )
        unit = info.get("unit")
        try:
            params = res.get_result_params(key) or []
            values = res.get_result_value(key, params)
            samples = res.get_result_samples(key, params)
            if not isinstance(values, list):
                values, samples = [values], [samples]
            rows = list(unroll_result(key, params, values, samples))
        except Exception as exc:
            raise BadInput(
                f"{path}: benchmark {key!r} is malformed ({type(exc).__name__}: {exc})"
            ) from None
        for name, value, samp in rows:
            where = f"{path}: benchmark {name!r}"
            if value is not None:
                if (
                    not isinstance(value, (int, float))
                    or isinstance(value, bool)
                    or math.isinf(value)
                ):
                    raise BadInput(f"{where}: result is {value!r}, not a number")
            if samp is not None:
                if not isinstance(samp, list):
                    raise BadInput(f"{where}: samples are not a list")
                if not samp:
                    raise BadInput(
                        f"{where}: empty sample list — the benchmark ran no iterations; rerun it"
                    )
                for x in samp:
                    _check_number(x, where)
                if value is not None and math.isnan(value):
                    raise BadInput(
                        f"{where}: result is NaN but it has samples; the file is "
                        "inconsistent — rerun the benchmark"
                    )
            entries[name] = Entry(
                name,
                unit,
                None if value is None else float(value),
                [float(x) for x in samp] if samp is not None else None,
                info.get("version"),
            )
    if not entries:
        raise BadInput(f"{path}: holds no benchmark results")
    return ResultSet(path, machine, res.commit_hash, res.env_name, res.date, entries)


def result_files(directory: pathlib.Path) -> list[pathlib.Path]:
    """asv result files in an asv machine directory (not machine.json)."""
    return sorted(p for p in directory.glob("*.json") if p.name not in SKIP_FILES)


def _legacy_newest(files: list[pathlib.Path]) -> pathlib.Path:
    """Newest of plain asv result files (a hand-made results tree): asv's `date`, then mtime;
    pytest-benchmark saves (`0001_<commit>_<date>.json`): the highest counter."""
    if all(p.name[:4].isdigit() and p.name[4:5] == "_" for p in files):
        return max(files, key=lambda p: p.name)

    def key(p):
        try:
            data = trust.load(p, "result file")
            date = data.get("date") if isinstance(data, dict) else None
        except (OSError, BadInput):
            date = None  # a corrupt file is reported when it is loaded, not skipped silently
        number = isinstance(date, (int, float)) and not isinstance(date, bool)
        return (date if number and math.isfinite(date) else 0, p.stat().st_mtime)

    return max(files, key=key)


def _pick_machine(names: list[str], where: pathlib.Path, machine: str | None, spec: str) -> str:
    if machine:
        return machine
    if len(names) == 1:
        return names[0]
    raise BadInput(
        f"{spec!r}: cannot tell which machine under {where} "
        f"(found: {', '.join(names) or 'none'}); pass --machine NAME"
    )


def _asv_machine_dirs(d: pathlib.Path) -> list[str]:
    return (
        sorted(p.name for p in d.iterdir() if (p / "machine.json").is_file()) if d.is_dir() else []
    )


def _newest_baseline(root: pathlib.Path, name: str, spec: str) -> pathlib.Path:
    """Baselines are copies of run records (newest wins); a plain asv tree there still works."""
    trust.check_machine(name, f"{spec!r}")
    d = baselines_dir(root) / name
    if d.is_symlink():
        raise BadInput(f"{d}: a symbolic link; refused (baselines are never read through links)")
    runs = []
    for p in sorted(d.iterdir()) if d.is_dir() else []:
        if p.is_symlink():
            records.left_out(p, "a symbolic link, not a baseline (never followed)")
        elif p.is_dir() and (p / records.RUN_JSON).is_file():
            runs.append(p)
    if runs:
        return records.load_record(runs[-1]).result_file()
    files = result_files(d) if d.is_dir() else []
    if not files:
        raise BadInput(
            f"{spec!r}: no baseline for machine {name!r} in {d}; record one with "
            "`harness nightly --save-baseline` on that machine and commit it"
        )
    return _legacy_newest(files)


def _newest_nightly(root: pathlib.Path, spec: str, machine: str | None) -> pathlib.Path:
    where = records.runs_dir(root)
    name = spec.partition(":")[2] or _pick_machine(records.machines(root), where, machine, spec)
    runs = [r for r in records.list_runs(root, name) if r.label == "nightly" and r.result_files()]
    if not runs:
        from harness.core.escape import shell  # the name may come from a folder's name

        raise BadInput(
            f"{spec!r}: no nightly run of machine {name!r} in {where}; run `harness nightly` "
            f"or pull one: `harness store pull --machine {shell(name)} --label nightly --last 1`"
        )
    return runs[-1].result_file()


def _by_commit(runs: list[records.RunRecord], prefix: str) -> list[records.RunRecord]:
    return [r for r in runs if r.commit.lower().startswith(prefix.lower())]


def resolve(spec: str, root: pathlib.Path, machine: str | None = None) -> pathlib.Path:
    """The asv result file a BASE or HEAD argument names (run records: harness.core.records):

    - a path: a run-record folder, a result JSON file (a run record's, or the asv view's, which
      maps back to its run), a folder of runs or a plain asv results folder (its newest result);
    - `latest`: the newest run record;
    - `baseline` or `baseline:<machine>`: the newest baseline copy of a run record;
    - `nightly` or `nightly:<machine>`: the newest run record labelled nightly;
    - `commit:<sha-prefix>` or a bare hex prefix (4+ characters): that commit's newest run;
      the whole prefix given is matched;
    - a run id or a unique prefix of one (`20261130T1745`).

    Resolving only reads: result files of the old layout (or a hand-made `asv run`) are found
    in place; the next command that writes results imports them as run records.
    """
    root = pathlib.Path(root)
    p = pathlib.Path(spec)
    if p.is_file():
        rec = records.record_for_view_file(root, p)
        return rec.result_file() if rec else p
    if p.is_dir():
        if (p / records.RUN_JSON).is_file():
            return records.load_record(p).result_file()
        runs = (
            [r for r in records.list_runs(p.parent.parent, p.name)]
            if p.parent.name == "runs"
            else []
        )
        if runs:
            return runs[-1].result_file()
        if (p / "machine.json").is_file() or result_files(p):
            files = result_files(p)
        else:
            files = result_files(p / _pick_machine(_asv_machine_dirs(p), p, machine, spec))
        if not files:
            raise BadInput(f"{p}: folder holds no asv result files or run records")
        return _legacy_newest(files)
    if "/" in spec or spec.endswith(".json"):
        raise BadInput(f"{spec}: result file or folder not found")
    if spec == "baseline" or spec.startswith("baseline:"):
        bdir = baselines_dir(root)
        names = sorted(d.name for d in bdir.iterdir() if d.is_dir()) if bdir.is_dir() else []
        name = spec.partition(":")[2] or _pick_machine(names, bdir, machine, spec)
        return _newest_baseline(root, name, spec)
    if spec == "nightly" or spec.startswith("nightly:"):
        return _newest_nightly(root, spec, machine)
    known = sorted(set(records.machines(root)) | set(records.foreign_machines(root)))
    name = _pick_machine(known, records.runs_dir(root), machine, spec)
    runs = records.named_runs(root, name)
    where = records.runs_dir(root) / name
    if not runs:
        raise BadInput(f"{spec!r}: no runs in {where}; run `harness bench` first")
    if spec == "latest":
        return runs[-1].result_file
    if spec.startswith("commit:"):
        prefix, by_run = spec[len("commit:") :], []
    else:
        prefix, by_run = spec, [r for r in runs if r.run_id.startswith(spec)]
    hexish = len(prefix) >= 4 and all(c in "0123456789abcdefABCDEF" for c in prefix)
    by_commit = _by_commit(runs, prefix) if hexish else []
    commits = sorted({r.commit for r in by_commit})
    if by_run and commits:
        raise BadInput(
            f"{spec!r} is both a run-id prefix and a commit prefix in {where}; write "
            f"commit:{spec} or a longer run id"
        )
    if by_run:
        if len(by_run) > 1:
            raise BadInput(
                f"{spec!r} matches several runs in {where}: "
                f"{', '.join(r.run_id for r in by_run[:6])}; give more of the run id"
            )
        return by_run[0].result_file
    if len(commits) > 1:
        raise BadInput(
            f"{spec!r} matches several commits in {where}: {', '.join(c[:12] for c in commits)}; "
            "give more of the hash"
        )
    if not commits:
        known = ", ".join(sorted({r.commit[:8] for r in runs})) or "none"
        raise BadInput(
            f"{spec!r}: no run of that commit (or run id) in {where} "
            f"(commits with runs: {known}; run ids look like {runs[-1].run_id})"
        )
    return by_commit[-1].result_file


# ---- the environment fingerprint saved with each run (harness.runs.bench) ----

# What the gate lists above its table when the two sides differ (not_comparable says which
# differences refuse the comparison).
FINGERPRINT_KEYS = (
    "torch",
    "torchvision",
    "cuda_build",
    "cudnn",
    "driver",
    "gpu",
    "cpu",
    "torch_threads",
    "python_hash_seed",
    "python",
    "commit",
    "sizes",
    "gpu_sm_max_mhz",
    "gpu_power_limit_w",
)


def fingerprint_of(rs: ResultSet) -> dict | None:
    """The fingerprint saved with this run, or None when there is none (an older run, or a bare
    result file): the one inside the file (pytest-benchmark's machine_info), else its run
    record's, else `fingerprint.json` beside the result file, else where the old layout kept it."""
    if rs.fingerprint is not None:
        _check_fingerprint(rs.fingerprint, rs.path)
        return rs.fingerprint
    rec = records.record_of(rs.path)
    candidates = ([rec.fingerprint_path] if rec else []) + [
        rs.path.parent / "fingerprint.json",
        records.legacy_fingerprint(rs.path),
    ]
    for path in candidates:
        if path.is_file() or path.is_symlink():
            fp = _load_json(path, "fingerprint")
            _check_fingerprint(fp, path)
            return fp
    return None


# fingerprint keys read as more than values to compare and show, and their types
_FINGERPRINT_KINDS = {"gpu_uuid": "text", "asv_wall_s": "number", "cuda_available": "flag"}


def _check_fingerprint(fp: dict, path) -> None:
    for key, kind in _FINGERPRINT_KINDS.items():
        value = fp.get(key)
        ok = (
            value is None
            or (kind == "text" and isinstance(value, str))
            or (kind == "flag" and isinstance(value, bool))
            or (
                kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool)
            )
        )
        if not ok:
            raise BadInput(
                f"{path}: fingerprint {key!r} is a JSON {type(value).__name__}, not a {kind}; "
                "refused (the record is damaged or not the harness's)"
            )


def not_comparable(base: ResultSet, head: ResultSet) -> list[str]:
    """Why timings of these two runs mean nothing side by side (another device model, another
    CPU thread count for CPU runs, another machine name); empty if comparable.
    Software versions are listed by environment_differences, never a reason here: comparing them
    is the point of nightlies, baselines and `harness ab`."""
    why = []
    if base.machine != head.machine:
        why.append(f"machine name {base.machine!r} vs {head.machine!r}")
    fb, fh = fingerprint_of(base), fingerprint_of(head)
    if fb and fh:
        for key, what in (("gpu", "GPU model"), ("cpu", "CPU model")):
            if fb.get(key) != fh.get(key):
                why.append(f"{what} {fb.get(key)!r} vs {fh.get(key)!r}")
        cpu_run = not fb.get("cuda_available") and not fh.get("cuda_available")
        if cpu_run and fb.get("torch_threads") != fh.get("torch_threads"):
            why.append(f"CPU threads {fb.get('torch_threads')} vs {fh.get('torch_threads')}")
    return why


def environment_differences(base: ResultSet, head: ResultSet) -> list[tuple[str, str, str]]:
    """(setting, base value, head value) for every fingerprint setting that differs, and the
    working tree where either side measured uncommitted code (harness.core.provenance)."""
    return _fingerprint_rows(base, head) + _tree_rows(base, head)


def _tree_rows(base: ResultSet, head: ResultSet) -> list[tuple[str, str, str]]:
    def state(rs: ResultSet) -> str:
        return {True: "dirty (uncommitted changes)", False: "clean"}.get(rs.dirty, "not recorded")

    return [("working tree", state(base), state(head))] if base.dirty or head.dirty else []


def _fingerprint_rows(base: ResultSet, head: ResultSet) -> list[tuple[str, str, str]]:
    fb, fh = fingerprint_of(base), fingerprint_of(head)
    if fb is None or fh is None:
        missing = [side for side, fp in (("base", fb), ("head", fh)) if fp is None]
        return (
            [
                (
                    "fingerprint",
                    "missing" if fb is None else "saved",
                    "missing" if fh is None else "saved",
                )
            ]
            if missing
            else []
        )
    return fingerprint_differences(fb, fh)


def fingerprint_differences(
    fb: dict, fh: dict, keys=FINGERPRINT_KEYS
) -> list[tuple[str, str, str]]:
    """(setting, base value, head value) for each of `keys` whose values differ (`harness check
    --against` passes every key of both fingerprints)."""
    return [(k, str(fb.get(k)), str(fh.get(k))) for k in keys if fb.get(k) != fh.get(k)]


# ---- noise bands (written by `harness calibrate`, read by the gate) ----


def noise_path(root: pathlib.Path, machine: str) -> pathlib.Path:
    """RESULTS/noise/<machine>.json; the machine name is checked (it may come from a result
    file: asv's params.machine)."""
    trust.check_machine(machine, "noise bands")
    return root / "noise" / f"{machine}.json"


def load_noise(path: pathlib.Path) -> dict[str, float]:
    """benchmark name -> relative noise band; a missing file means no bands yet (empty)."""
    if not path.exists():
        return {}
    data = _load_json(path, "noise-band file")
    benchmarks = data.get("benchmarks")
    if benchmarks is not None and not isinstance(benchmarks, dict):
        raise BadInput(f"{path}: 'benchmarks' is not an object; rerun `harness calibrate`")
    out = {}
    for name, rec in (benchmarks or {}).items():
        band = rec.get("band") if isinstance(rec, dict) else None
        if (
            not isinstance(band, (int, float))
            or isinstance(band, bool)
            or not math.isfinite(band)
            or band < 0
        ):
            raise BadInput(
                f"{path}: benchmark {name!r} has no valid `band`; rerun "
                "`harness calibrate` for it or delete its entry"
            )
        out[name] = float(band)
    return out


def save_noise(path: pathlib.Path, machine: str, records: dict[str, dict]) -> None:
    """Merge new per-benchmark records into the file: other benchmarks' bands are kept."""
    data = {}
    if path.exists():
        load_noise(path)  # checked first: a damaged file is named, never written over
        data = _load_json(path, "noise-band file")
    data["machine"] = machine
    data.setdefault("benchmarks", {}).update(records)
    write_json_atomic(path, data)
