"""Run records: every benchmark run is written once and never rewritten.

    results/runs/<machine>/<run-id>/          <run-id> = 20261130T174512Z-<sha8>[-label]
        run.json                              what ran: run id, machine, commit, start, label, ...
        manifest.json                         every other file of the record, its sha256 and size
        fingerprint.json                      the environment (harness.core.env.fingerprint)
        asv/benchmarks.json                   asv's benchmark list (units, versions) of this run
        asv/<machine>/machine.json            asv's machine record
        asv/<machine>/<sha8>-<env>.json       asv's result file

A run is written into a hidden staging folder beside its final place and renamed into place
when it is complete, so a reader never sees half a run and a crashed run leaves only a folder
starting with `.staging-`. Its manifest is written last: a record is whole when every file it
lists is there with that content, its JSON files parse and its ids match its place
(`check_whole`; records written before manifests existed are listed by `listing`).

`results/asv/` is a *view* for asv's own tools (`asv publish`, `asv compare`): the newest run per
commit, environment and machine, copied there by `rebuild_view`. The view records what it wrote
in `results/asv/.harness-view.json`; a result file found there that the view did not write (the
old layout, or a hand-made `asv run`) is first imported as a run record, never dropped. Nothing in
`runs/` is changed by the view.

Records travel between machines (the results history, CI artifacts), so everything here is read
as input (docs/design.md, "Names in a record are checked"): names through harness.core.trust,
JSON through trust.load (size, nesting, no links), run.json and the per-row files with their
types checked. A record listed among a machine's runs that fails is left out with one line
(`left_out`), the others go on; one named directly, or a file read for a verdict, is bad input
naming it. Nothing is written, copied or deleted through a symbolic link or outside the results
root (trust.inside).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
from pathlib import Path

from harness.core import dashboard, trust
from harness.core.exits import BadInput
from harness.core.files import write_atomic, write_json_atomic

RUN_JSON = "run.json"
MANIFEST = "manifest.json"  # every other file of the record: {"files": {path: {sha256, bytes}}}
_MANIFEST_SCHEMA = 1
ASV_LOG = "asv.log"  # asv's whole output of the run
FINGERPRINT = "fingerprint.json"
INSTRUCTIONS = "instructions"  # folder of instruction-count records (harness.measure.instructions)
VIEW_MANIFEST = ".harness-view.json"
ASV_META = {"benchmarks.json", "machine.json"}
_LABEL = re.compile(r"^[A-Za-z0-9_.]+$")
STAGING = ".staging-"  # a run being written: .staging-<run id>-<pid of the writer>


@dataclasses.dataclass(frozen=True)
class RunRecord:
    path: Path
    meta: dict

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def machine(self) -> str:
        """run.json's "machine", else the folder the record lies in: both checked when the
        record was read (check_meta, _why_not_record), so a path built from it stays inside."""
        m = self.meta.get("machine")
        return m if isinstance(m, str) and m else self.path.parent.name

    @property
    def commit(self) -> str:
        return self.meta.get("commit", "")

    @property
    def label(self) -> str:
        return self.meta.get("label") or ""

    @property
    def asv_dir(self) -> Path:
        return self.path / "asv"

    def result_files(self) -> list[Path]:
        d = self.asv_dir / self.machine
        if not d.is_dir() or d.is_symlink() or self.asv_dir.is_symlink():
            return []
        return sorted(
            p
            for p in d.glob("*.json")
            if p.name not in ASV_META and trust.is_part(p.name) and not p.is_symlink()
        )

    def result_file(self) -> Path:
        files = self.result_files()
        if not files:
            raise BadInput(
                f"run record {self.path} holds no asv result file (asv saved nothing in "
                "that run); name another run"
            )
        return files[-1]

    @property
    def fingerprint_path(self) -> Path:
        return self.path / FINGERPRINT

    def instructions(self) -> dict[str, dict]:
        return read_instructions(self.path)


# `harness ab`: per row, the (base, head) central values of every pair of processes, kept in
# the head side's record (the verdict on raw and normalised rows comes from them)
AB_PAIRS = "ab-pairs.json"
_AB_SCHEMA = 1


def write_ab_pairs(staging: Path, base_run_id: str, values: dict, units: dict) -> None:
    """Into the head record while it is being written (records.writing)."""
    write_json_atomic(
        Path(staging) / AB_PAIRS,
        {
            "schema": _AB_SCHEMA,
            "base_run": base_run_id,
            "units": units,
            "pairs": {row: [list(p) for p in pairs] for row, pairs in values.items()},
        },
    )


def read_ab_pairs(run_dir: Path) -> dict | None:
    """{"base_run", "units", "pairs": {row: [[base, head], ...]}} of an ab head record, or None
    when it keeps none (or one of another schema); a damaged file is bad input naming it."""
    path = Path(run_dir) / AB_PAIRS
    data = _load(path, "ab pairs file")
    if data is None or data.get("schema") != _AB_SCHEMA:
        return None
    _check_types(data, {"base_run": "run id", "units": "object", "pairs": "object"}, path)
    for row, pairs in (data.get("pairs") or {}).items():
        if not (
            isinstance(pairs, list)
            and all(
                isinstance(p, list) and len(p) == 2 and all(_is("number", x) for x in p)
                for p in pairs
            )
        ):
            raise BadInput(
                f"{path}: the pairs of row {trust.shown(row)} are not [base, head] numbers; "
                "refused (rerun the ab run)"
            )
    return data


# Per timing row, what its measurement saw beyond the samples asv keeps (harness.measure.rowfacts):
# on CUDA the GPU and host time per call, the busy fraction, noise, clocks and dropped samples;
# on a CPU the ATen share. One file per row, written by the benchmark process that timed it.
ROW_FACTS = "row-facts"
_FACTS_SCHEMA = 1


def row_facts_file(run_dir: Path, row: str) -> Path:
    """Where a row's facts live: a file name made of the row's name, safe on any file system."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", row)[:120]
    digest = hashlib.sha256(row.encode()).hexdigest()[:10]
    return Path(run_dir) / ROW_FACTS / f"{safe}-{digest}.json"


def write_row_facts(run_dir: Path, row: str, facts: dict) -> None:
    """One row's facts into a record being written (a rerun of the row replaces its own file)."""
    write_json_atomic(row_facts_file(run_dir, row), {"schema": _FACTS_SCHEMA, "row": row, **facts})


# the facts readers use (harness.verdict.gpurows, report, advice): their types are checked
_FACT_KINDS = {
    "device": "text",
    "clock_note": "text",
    "throttles": "texts",
    **{
        k: "number"
        for k in (
            "busy",
            "aten_share",
            "noise",
            "gpu_s",
            "host_s",
            "time_s",
            "taken",
            "dropped_throttled",
            "kept_at_power_cap",
            "sm_clock_mhz",
        )
    },
}


def read_row_facts(run_dir: Path) -> dict[str, dict]:
    """row -> its facts, for every row a run record keeps facts of (empty when none). A file
    of another schema is left out with a line; a damaged one is bad input naming it (the gate
    judges GPU-time rows by these facts)."""
    out: dict[str, dict] = {}
    for path, data in _json_files(Path(run_dir) / ROW_FACTS, "row facts file"):
        if data.get("schema") != _FACTS_SCHEMA:
            left_out(
                path, f"row facts of schema {trust.shown(data.get('schema'))}, not {_FACTS_SCHEMA}"
            )
            continue
        row = data.pop("row", None)
        if not isinstance(row, str) or not row:
            raise BadInput(f'{path}: row facts name no row ("row" is not a string); refused')
        data.pop("schema")
        _check_types(data, _FACT_KINDS, path)
        sides = data.get("sides")
        if sides is not None:
            if not isinstance(sides, list) or not all(isinstance(x, dict) for x in sides):
                raise BadInput(f"{path}: 'sides' is not a list of objects; refused")
            for side in sides:
                _check_types(side, _FACT_KINDS, path)
        out[row] = data
    return out


# Operator-level tables a run keeps (written by harness.measure.profiles):
PROFILES = "profiles.json"  # per workload, torch.profiler's top operators by self time
OP_COUNTS = "op-counts.json"  # per ops/kernels row, the operators behind its count
_PROFILE_SCHEMA = 1
_ROW = re.compile(r"^(?P<cls>[^.()]+\.[^.()]+)\.[^.()]+(?P<params>\(.*\))?$")
# where a pytest-benchmark save keeps the run's machine name and fingerprint: machine_info[KEY]
PYTEST_BENCHMARK_KEY = "harness"


def workload_of(row: str) -> str | None:
    """`suite.Class.method(params)` -> `suite.Class(params)` (the key in profiles.json)."""
    m = _ROW.match(row)
    return m["cls"] + (m["params"] or "") if m else None


def _read_table(path: Path, what: str, part: str, *, strict: bool = False) -> dict | None:
    """A run record's op-counts or profiles file, its shape checked (bad input naming it when
    damaged); None when the record has none, or (unless `strict`) one of another schema."""
    data = _load(path, what)
    if data is None:
        return None
    if data.get("schema") != _PROFILE_SCHEMA:
        why = f"{what} of schema {trust.shown(data.get('schema'))}, not {_PROFILE_SCHEMA}"
        if strict:
            raise BadInput(f"{path}: {why}; refused")
        left_out(path, why)
        return None
    if not isinstance(data.get(part), dict):
        raise BadInput(f"{path}: {what} holds no {part!r} object; refused")
    check = _check_op_count if part == "rows" else _check_profile
    for key, entry in data[part].items():
        if not isinstance(entry, dict):
            raise BadInput(f"{path}: entry {trust.shown(key)} is not an object; refused")
        check(entry, f"{path}: entry {trust.shown(key)}")
    if part == "workloads":
        _check_types(data, {"skipped": "object"}, path)
    return data


def _check_op_count(entry: dict, where: str) -> None:
    """{"unit", "total", "counts": {operator: count}} or {"error": text}."""
    _check_types(entry, {"unit": "text", "total": "number", "error": "text"}, where)
    counts = entry.get("counts")
    if counts is not None and not (
        isinstance(counts, dict)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in counts.values())
    ):
        raise BadInput(f"{where}: 'counts' are not whole numbers per operator; refused")


def _check_profile(entry: dict, where: str) -> None:
    """{label: SUMMARY | {"error": text}} or {"error": text} (harness.measure.profiles)."""
    for label, summary in entry.items():
        if label == "error":
            _check_types(entry, {"error": "text"}, where)
            continue
        if not isinstance(summary, dict):
            raise BadInput(f"{where}: target {trust.shown(label)} is not an object; refused")
        here = f"{where}, target {trust.shown(label)}"
        if "error" in summary:
            _check_types(summary, {"error": "text"}, here)
            continue
        totals = {"self_cpu_us": "number", "self_cuda_us": "number", "device": "text"}
        _check_types(summary, {**totals, "ops": "objects"}, here)
        _require(summary, ("self_cpu_us", "self_cuda_us", "ops"), here)
        for op in summary["ops"]:
            kinds = {"name": "text", "calls": "number", "self_cpu_us": "number"}
            _check_types(op, {**kinds, "self_cuda_us": "number"}, here)
            _require(op, tuple(kinds), here)


def read_op_counts(run_dir: Path) -> dict | None:
    """ROW -> {"unit", "total", "counts"} of a run record, or None when it stores none."""
    data = _read_table(Path(run_dir) / OP_COUNTS, "op counts file", "rows")
    return data["rows"] if data else None


def read_profiles(run_dir: Path) -> dict | None:
    """The run's profiles.json (harness.measure.profiles), or None when it stores none."""
    return _read_table(Path(run_dir) / PROFILES, "profiles file", "workloads")


def read_operator_file(run_dir: Path, name: str) -> dict | None:
    """The whole OP_COUNTS or PROFILES file of a record, checked, for `harness merge` to join;
    one of another schema is bad input there (it cannot be joined)."""
    what, part = {OP_COUNTS: ("op counts file", "rows"), PROFILES: ("profiles file", "workloads")}[
        name
    ]
    return _read_table(Path(run_dir) / name, what, part, strict=True)


# an instruction row's summary (harness.measure.callgrind.summarize, measure.instructions): the
# keys the gate, history and `harness ab` read, and their types
_SUMMARY_KINDS = {
    "per_call": "number",
    "fingerprint": "object",
    "functions": "objects",
    "functions_total": "number",
    "groups": "object",
    "layouts": "numbers",
    "tolerance": "number",
    "what": "text",
    "workload": "text",
    "times": "texts",
}
_FUNCTION_KINDS = {"function": "text", "group": "text", "self": "number", "inclusive": "number"}


def instruction_files(run_dir: Path) -> list[tuple[Path, dict]]:
    """(path, content) of every instruction-count file of a record (INSTRUCTIONS/<suite>.<Class>
    .json), each checked: a damaged one is bad input naming it (the gate judges these rows)."""
    out = []
    for path, data in _json_files(Path(run_dir) / INSTRUCTIONS, "instruction counts file"):
        _check_types(
            data,
            {
                "rows": "object",
                "fingerprint": "object",
                "not_counted": "object",
                "failed": "object",
            },
            path,
        )
        for row, summary in (data.get("rows") or {}).items():
            here = f"{path}: row {trust.shown(row)}"
            if not isinstance(summary, dict):
                raise BadInput(f"{here} is not an object; refused")
            _check_types(summary, _SUMMARY_KINDS, here)
            for f in summary.get("functions") or []:
                _check_types(f, _FUNCTION_KINDS, here)
                if f.get("function") is None or f.get("self") is None:
                    raise BadInput(f"{here}: a function entry lacks 'function' or 'self'; refused")
            if not all(_is("number", v) for v in (summary.get("groups") or {}).values()):
                raise BadInput(f"{here}: 'groups' are not numbers per group; refused")
        out.append((path, data))
    return out


def read_instructions(run_dir: Path) -> dict[str, dict]:
    """Every instruction row a run record keeps (INSTRUCTIONS/<suite>.<Class>.json, one per
    valgrind process): row -> its summary (per_call, groups, functions, ...) with the
    fingerprint of its valgrind process, and what the row's own count depends on besides (a
    compile row's inductor instruction set), under "fingerprint". Empty when it keeps none."""
    out: dict[str, dict] = {}
    for _, data in instruction_files(run_dir):
        for row, summary in (data.get("rows") or {}).items():
            own = summary.get("fingerprint") or {}
            out[row] = dict(summary, fingerprint={**(data.get("fingerprint") or {}), **own})
    return out


def read_not_counted(run_dir: Path) -> dict[str, str]:
    """Instruction rows a run did not count and why (a model that opted out, a row counted in
    full runs only, a row that failed): row -> reason."""
    out: dict[str, str] = {}
    for _, data in instruction_files(run_dir):
        for key in ("not_counted", "failed"):
            out.update({str(k): str(v) for k, v in (data.get(key) or {}).items()})
    return out


def _json_files(folder: Path, what: str):
    """(path, JSON object) of each file of a record's folder of per-row files, in name order.
    A folder or file that is a symbolic link, or a file that is not a JSON object, is bad
    input naming it."""
    folder = Path(folder)
    if folder.is_symlink():
        raise BadInput(
            f"{folder}: a symbolic link in a run record; refused (links are not followed)"
        )
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        yield path, trust.load_object(path, what)


def _load(path: Path, what: str) -> dict | None:
    """A JSON object a record keeps (trust.load: size, nesting, links), None when absent."""
    try:
        return trust.load_object(path, what)
    except FileNotFoundError:
        return None


def _is(kind: str, x) -> bool:
    """Whether `x` is of `kind` (None, absent, is every kind)."""
    if x is None:
        return True
    if kind == "number":
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    if kind == "numbers":
        return isinstance(x, list) and all(x is not None and _is("number", i) for i in x)
    if kind == "text":
        return isinstance(x, str)
    if kind == "texts":
        return isinstance(x, list) and all(isinstance(i, str) for i in x)
    if kind == "flag":
        return isinstance(x, bool)
    if kind == "object":
        return isinstance(x, dict)
    if kind == "objects":
        return isinstance(x, list) and all(isinstance(i, dict) for i in x)
    if kind == "run id":
        return trust.is_run_id(x)
    if kind == "machine name":
        return trust.is_machine(x)
    raise ValueError(kind)


_KIND_TEXT = {
    "number": "a number",
    "numbers": "a list of numbers",
    "text": "a string",
    "texts": "a list of strings",
    "flag": "true or false",
    "object": "an object",
    "objects": "a list of objects",
    "run id": f"a run id ({trust.RUN_ID_RULE})",
    "machine name": f"a machine name ({trust.MACHINE_RULE})",
}


def _check_types(data: dict, kinds: dict[str, str], where) -> None:
    """Bad input naming `where` and the key when a key of `data` is not of its kind."""
    for key, kind in kinds.items():
        if key in data and not _is(kind, data[key]):
            named = kind in ("run id", "machine name") and isinstance(data[key], str)
            got = trust.shown(data[key]) if named else f"a JSON {type(data[key]).__name__}"
            raise BadInput(
                f"{where}: {key!r} is not {_KIND_TEXT[kind]} (got {got}); refused (the "
                "record is damaged or not the harness's)"
            )


def _require(data: dict, keys: tuple[str, ...], where) -> None:
    missing = [k for k in keys if data.get(k) is None]
    if missing:
        raise BadInput(
            f"{where}: no {', '.join(map(repr, missing))}; refused (the record is damaged)"
        )


_told: set[str] = set()


def left_out(path, why: str) -> None:
    """Say on stderr, once per process, that a record or file was left out and why (the others
    go on). The name is shown escaped: it may come from elsewhere."""
    line = f"harness: left out {trust.shown(str(path), 300)}: {why}"
    if line not in _told:
        _told.add(line)
        print(line, file=sys.stderr)


def runs_dir(root: Path) -> Path:
    return Path(root) / "runs"


def view_dir(root: Path) -> Path:
    return Path(root) / "asv"


_LABEL_MAX = 100  # characters of a run label (a run id stays within trust.MAX_NAME)


def new_run_id(commit: str, label: str | None = None, now: datetime.datetime | None = None) -> str:
    """`<UTC start time>-<sha8>-<6 hex>[-label]`: sorts by start time; the random part keeps two
    runs of one commit started in the same second (two CI jobs, two terminals) apart. The commit
    part keeps only ASCII letters and digits (a commit hash read from an asv file may be
    anything), so the id is always a run id by trust.RUN_ID_RULE."""
    if label and (not _LABEL.match(label) or len(label) > _LABEL_MAX):
        raise BadInput(
            f"run label {trust.shown(label)} may hold only letters, digits, '_' and '.' "
            f"(at most {_LABEL_MAX})"
        )
    now = now or datetime.datetime.now(datetime.timezone.utc)
    sha = re.sub(r"[^A-Za-z0-9]", "", commit if isinstance(commit, str) else "")[:8]
    return f"{now:%Y%m%dT%H%M%SZ}-{sha}-{secrets.token_hex(3)}" + (f"-{label}" if label else "")


# run.json keys that code reads, and their types (a key may be absent or null)
_META_KINDS = {
    **{
        k: "text"
        for k in (
            "run_id",
            "commit",
            "label",
            "started",
            "finished",
            "shard",
            "mode",
            "launch_method",
            "operator_pass",
            "imported_from",
            "imported_sha256",
        )
    },
    "machine": "machine name",
    **{k: "flag" for k in ("quick", "dirty", "complete", "profiled")},
    "suites": "texts",
    "benches": "texts",
    "merged_from": "objects",
    "worktree": "object",
    "ab": "object",
    "bisect": "object",
}
_MERGED_FROM_KINDS = {
    "run_id": "run id",
    "shard": "text",
    "cases": "number",
    "asv_wall_s": "number",
}
_WORKTREE_KINDS = {
    "diff_sha256": "text",
    "diff_sha256_of_sources": "texts",
    "changed": "texts",
    "untracked": "texts",
    "changed_total": "number",
    "untracked_total": "number",
}
_BISECT_KINDS = {"role": "text", "against": "run id"}


def check_meta(meta, where) -> dict:
    """A run.json's content, its types checked (bad input naming `where` otherwise)."""
    if not isinstance(meta, dict):
        raise BadInput(f"{where}: {RUN_JSON} is not a JSON object; refused")
    _check_types(meta, _META_KINDS, where)
    for src in meta.get("merged_from") or []:
        _check_types(src, _MERGED_FROM_KINDS, f"{where}: merged_from")
    _check_types(meta.get("worktree") or {}, _WORKTREE_KINDS, f"{where}: worktree")
    _check_types(meta.get("bisect") or {}, _BISECT_KINDS, f"{where}: bisect")
    return meta


def _why_not_record(path: Path, meta: dict) -> str:
    """Why the record in `path` may not be used under the machine it names ("" when it may):
    run.json's machine is the folder's where the record lies in runs/<machine>/ or
    baselines/<machine>/, and without one the folder's name is a machine name."""
    named, folder = meta.get("machine"), path.parent.name
    if named:
        if path.parent.parent.name in ("runs", "baselines") and named != folder:
            return (
                f"{RUN_JSON} names machine {trust.shown(named)} but the record lies in "
                f"{trust.shown(folder)}/"
            )
        return ""
    return trust.why_not_machine(folder)


def _load_meta(path: Path) -> dict:
    """run.json of the record in `path`, checked (trust.load, check_meta, _why_not_record)."""
    where = Path(path) / RUN_JSON
    meta = check_meta(trust.load(where, RUN_JSON), where)
    why = _why_not_record(Path(path), meta)
    if why:
        raise BadInput(f"{path}: {why}; refused")
    return meta


def _read_meta(path: Path) -> dict | None:
    """run.json as a JSON object, None when it is missing or unreadable (check_whole)."""
    try:
        data = trust.load(Path(path) / RUN_JSON, RUN_JSON)
    except (OSError, BadInput):
        return None
    return data if isinstance(data, dict) else None


def load_record(path: Path) -> RunRecord:
    path = Path(path)
    if path.is_symlink():
        raise BadInput(
            f"{path}: a symbolic link, not a run record; refused (links are not followed)"
        )
    if not (path / RUN_JSON).is_file():
        raise BadInput(
            f"{path} is not a run record (no readable {RUN_JSON}); name a folder under "
            "results/runs/<machine>/"
        )
    return RunRecord(path, _load_meta(path))


def record_of(path: Path) -> RunRecord | None:
    """The run record a file or folder lies in, if any (bad input when its run.json is
    damaged)."""
    path = Path(path).resolve()
    for d in (path, *path.parents):
        if (d / RUN_JSON).is_file():
            return RunRecord(d, _load_meta(d))
    return None


def merged_into_others(runs: list[RunRecord]) -> set[str]:
    """Run ids (`machine/run-id`) of shard runs that a merged record among `runs` holds
    (`harness merge`): a history counts the merged record, not its parts again."""
    return {
        f"{r.machine}/{src.get('run_id')}"
        for r in runs
        for src in r.meta.get("merged_from") or []
        if isinstance(src, dict)
    }


def machines(root: Path) -> list[str]:
    """The machine folders of runs/: a folder that is a symbolic link, or whose name is not a
    machine name, is left out with a line."""
    d = runs_dir(root)
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.iterdir()):
        if p.is_symlink():
            left_out(p, "a symbolic link in runs/, not followed")
        elif p.is_dir():
            why = trust.why_not_machine(p.name)
            if why:
                left_out(p, why)
            else:
                out.append(p.name)
    return out


def list_runs(root: Path, machine: str | None = None) -> list[RunRecord]:
    """Every complete run record, oldest first (run ids sort by start time). A record that
    cannot be used is left out with a line naming it (refused_runs says why), never followed
    through a link."""
    out = []
    for m in [machine] if machine else machines(root):
        found, refused = _scan(root, m)
        out += found
        for path, why in refused:
            left_out(path, why)
    return sorted(out, key=lambda r: (r.run_id, r.machine))


def refused_runs(root: Path, machine: str | None = None) -> list[tuple[Path, str]]:
    """(folder, why) of every folder under runs/<machine>/ that list_runs leaves out."""
    out = []
    for m in [machine] if machine else machines(root):
        out += _scan(root, m)[1]
    return out


def _scan(root: Path, machine: str) -> tuple[list[RunRecord], list[tuple[Path, str]]]:
    trust.check_machine(machine, str(runs_dir(root)))
    d = runs_dir(root) / machine
    if d.is_symlink():
        return [], [(d, "a symbolic link in runs/, not followed")]
    if not d.is_dir():
        return [], []
    found, refused = [], []
    with os.scandir(d) as entries:  # the entries' types without a stat each
        entries = sorted(entries, key=lambda e: e.name)
    for entry in entries:
        p = d / entry.name
        if entry.name.startswith("."):
            continue  # a run being written (STAGING), or not the harness's
        if entry.is_symlink():
            refused.append((p, "a symbolic link, not a run record (never followed)"))
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            meta = _load_meta(p)
        except FileNotFoundError:
            continue  # no run.json: not a record
        except BadInput as exc:
            refused.append((p, str(exc).removeprefix(f"{p}: ").replace(f"{p}{os.sep}", "")))
            continue
        why = trust.why_not_run_id(p.name)
        if why:
            refused.append((p, why))
        else:
            found.append(RunRecord(p, meta))
    return found, refused


@contextlib.contextmanager
def writing(root: Path, machine: str, run_id: str, meta: dict):
    """Yield a staging folder to write one run into; on exit it becomes runs/<machine>/<run_id>.

    A run that saved a result file is kept even when the code inside raised (half a suite is
    still data); a staging folder with no result is removed (the harness made it).
    """
    trust.check_machine(machine, "a run record's machine")
    trust.check_run_id(run_id, "a run record's id")
    # inside the results root with no link on the way (runs/ and runs/<machine> included)
    final = trust.inside(root, f"runs/{machine}/{run_id}")
    if final.exists():
        raise BadInput(f"run record {final} already exists; run records are never overwritten")
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f"{STAGING}{run_id}-{os.getpid()}"
    staging.mkdir()
    ok = False
    try:
        yield staging
        ok = True
    finally:
        has_result = (
            any(p.name not in ASV_META for p in (staging / "asv" / machine).glob("*.json"))
            if (staging / "asv" / machine).is_dir()
            else False
        )
        if has_result:
            meta = dict(
                meta,
                run_id=run_id,
                machine=machine,
                complete=ok,
                finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            )
            write_json_atomic(staging / RUN_JSON, meta)
            write_manifest(staging, machine, run_id)
            os.rename(staging, final)
        else:
            shutil.rmtree(staging, ignore_errors=True)


# ---- a record's manifest, and what makes a record whole ----


def listing(folder: Path) -> dict[str, dict]:
    """Every file of a record folder but its manifest: relative path -> {"sha256", "bytes"}.
    Plain files only, read in pieces; a symbolic link is never followed (check_whole names it)."""
    return _listing_of(_record_files(Path(folder))[0])


def _listing_of(files) -> dict[str, dict]:
    out = {}
    for rel, path, _ in sorted(files):
        if rel != MANIFEST:
            digest, size = hashlib.sha256(), 0
            with open(path, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
                    size += len(chunk)
            out[rel] = {"sha256": digest.hexdigest(), "bytes": size}
    return out


def _record_files(folder: Path) -> tuple[list[tuple[str, str, int]], list[str]]:
    """Every plain file of a record folder ('/'-separated path, path, size), walked without
    following any link, and what a record from elsewhere may not hold that this one does
    (links, special files, names outside harness.core.trust's rules, files past its limits)."""
    import stat

    from harness.core import trust

    files, odd, total = [], [], 0
    limit = trust.max_file_bytes()
    if Path(folder).is_symlink():
        return [], ["is a symbolic link"]
    for top, dirs, names in os.walk(folder):
        base = os.path.relpath(top, folder).replace(os.sep, "/")
        below = []
        for name in sorted(dirs + names):
            path = os.path.join(top, name)
            rel = name if base == "." else f"{base}/{name}"
            why = trust.why_not_record_path(rel)
            try:
                info = os.lstat(path)
            except OSError as exc:
                odd.append(f"cannot read {trust.shown(rel)} ({exc.strerror})")
                continue
            if stat.S_ISLNK(info.st_mode):
                odd.append(why or f"holds a symbolic link {trust.shown(rel)}")
            elif stat.S_ISDIR(info.st_mode):
                odd.extend([why] if why else [])
                below += [] if why else [name]  # a folder named wrongly is not walked into
            elif not stat.S_ISREG(info.st_mode):
                odd.append(why or f"holds {trust.shown(rel)}, which is not a plain file")
            else:
                files.append((rel, path, info.st_size))
                total += info.st_size
                if why:
                    odd.append(why)
                elif info.st_size > limit:
                    odd.append(f"{rel} is {info.st_size:,} bytes, over the allowed {limit:,}")
        dirs[:] = below
    if len(files) > trust.MAX_RECORD_FILES:
        odd.append(f"holds {len(files):,} files, over the allowed {trust.MAX_RECORD_FILES:,}")
    if total > trust.MAX_RECORD_BYTES:
        odd.append(f"holds {total:,} bytes, over the allowed {trust.MAX_RECORD_BYTES:,}")
    return files, odd


def manifest_of(folder: Path, machine: str, run_id: str) -> dict:
    return {
        "schema": _MANIFEST_SCHEMA,
        "run_id": run_id,
        "machine": machine,
        "files": listing(folder),
    }


def write_manifest(folder: Path, machine: str, run_id: str) -> None:
    write_json_atomic(Path(folder) / MANIFEST, manifest_of(folder, machine, run_id))


def read_manifest(folder: Path) -> dict | None:
    """The record's own manifest, or None when it has none (written before manifests existed)."""
    try:
        data = trust.load(Path(folder) / MANIFEST, MANIFEST)
    except FileNotFoundError:
        return None
    except (OSError, BadInput):
        return {}  # there but unreadable: check_whole names it
    return data if isinstance(data, dict) else {}


def check_whole(folder: Path, machine: str, run_id: str, manifest: dict | None = None) -> list[str]:
    """What keeps the record in `folder` from being whole, as `machine`/`run_id` (empty: whole):
    every file its manifest lists is there with that size and sha256 and nothing else is, its
    JSON files parse, run.json and the manifest name this run and machine (and the fingerprint
    this run, where it names one: a record names itself, so one tree cannot stand under many
    ids), and every benchmark an asv result file names is in the benchmarks.json beside it (as
    the readers require). `manifest`: the listing kept elsewhere for a record that has none of
    its own. First, before any file is read: it holds plain files only, no link, every name
    within harness.core.trust's rules, within its size limits (a record from elsewhere is
    input). JSON files are parsed one at a time and only what is checked is kept (a record
    within the limits costs the memory of its largest file, not of all of them)."""
    from harness.core import trust

    def named(rel) -> str:  # a name the manifest gave, fit for a message
        return rel if not trust.why_not_record_path(rel) else trust.shown(rel)

    folder = Path(folder)
    found, odd = _record_files(folder)
    if odd:
        return list(dict.fromkeys(odd))
    try:
        own = trust.load(folder / MANIFEST, MANIFEST)
    except FileNotFoundError:
        own = None
    except BadInput:
        own = {}  # there but unreadable: named below
    manifest = (own if isinstance(own, dict) else {}) if own is not None else manifest
    if manifest is None:
        return [f"lists no files (no {MANIFEST} in it, none kept for it)"]
    files = manifest.get("files")
    if manifest.get("schema") != _MANIFEST_SCHEMA or not isinstance(files, dict):
        return [f"{MANIFEST} is unreadable or of an unknown schema"]
    problems = [
        _names_itself(MANIFEST, manifest, key, want)
        for key, want in (("run_id", run_id), ("machine", machine))
    ]
    problems = [p for p in problems if p]
    have = _listing_of(found)
    for rel in sorted(set(files) - set(have)):
        problems.append(f"{named(rel)} is listed but missing")
    for rel in sorted(set(have) - set(files)):
        problems.append(f"{rel} is there but not listed")
    same = []
    for rel in sorted(set(files) & set(have)):
        entry = files[rel] if isinstance(files[rel], dict) else {}
        if entry.get("sha256") != have[rel]["sha256"] or entry.get("bytes") != have[rel]["bytes"]:
            problems.append(f"{rel} differs from its listed size or sha256")
        elif rel.endswith(".json"):
            same.append(rel)
    if RUN_JSON not in have:
        problems.append(f"no {RUN_JSON}")
    # every JSON file parsed, one at a time; benchmarks.json first, so that each asv result
    # file is checked against its benchmark names as soon as it is read, then dropped
    facts = _JsonFacts()
    for rel in sorted(same, key=lambda r: (r.rsplit("/", 1)[-1] != "benchmarks.json", r)):
        try:  # the text, not the bytes too, held while it is parsed
            data = trust.loads(trust.read_text(folder / rel, rel), rel)
        except OSError as exc:
            problems.append(f"{rel} cannot be read ({exc.strerror})")
            continue
        except BadInput as exc:
            problems.append(str(exc).removesuffix("; refused"))
            continue
        problems += facts.take(rel, data)
        del data
    if RUN_JSON in facts.seen:  # (else named above: missing, unlisted, changed or unparsed)
        if facts.meta is None:
            problems.append(f"{RUN_JSON} is not a JSON object")
        else:
            for key, want in (("run_id", run_id), ("machine", machine)):
                problems.append(_names_itself(RUN_JSON, facts.meta, key, want))
    problems = [p for p in problems if p]
    if not problems and facts.fingerprint_run not in (None, run_id):
        problems.append(
            f"{FINGERPRINT} names run {trust.shown(facts.fingerprint_run)}, not {run_id!r}"
        )
    return problems


def _names_itself(what: str, data: dict, key: str, want: str) -> str:
    """Why `data` (run.json or a manifest) does not name `want` as its `key` ("" when it does)."""
    from harness.core import trust

    if key not in data:
        return f"{what} names no {key} (a record names its own run id and machine)"
    if data[key] != want:
        return f"{what} names {key} {trust.shown(data[key])}, not {want!r}"
    return ""


class _JsonFacts:
    """What check_whole keeps of a record's JSON files while it reads them one by one: run.json's
    ids, the fingerprint's run id, each benchmarks.json's benchmark names."""

    def __init__(self):
        self.seen: set[str] = set()
        self.meta: dict | None = None
        self.fingerprint_run = None
        self.benchmarks: dict[str, set[str]] = {}  # folder of a benchmarks.json -> names

    def take(self, rel: str, data) -> list[str]:
        """Keep what is checked of one parsed file; what is wrong with it already."""
        self.seen.add(rel)
        folder, _, name = rel.rpartition("/")
        if rel == RUN_JSON:
            if isinstance(data, dict):
                self.meta = {k: data[k] for k in ("run_id", "machine") if k in data}
        elif rel == FINGERPRINT:
            if isinstance(data, dict) and data.get("run_id") is not None:
                self.fingerprint_run = data.get("run_id")
        elif name == "benchmarks.json" and folder.split("/")[0] == "asv":
            self.benchmarks[folder] = set(data) if isinstance(data, dict) else set()
        elif folder.startswith("asv/") and folder.count("/") == 1 and name not in ASV_META:
            return self._result_file(rel, folder, data)
        return []

    def _result_file(self, rel: str, folder: str, data) -> list[str]:
        """An asv result file (asv/<machine>/<file>.json) names only benchmarks of the
        benchmarks.json beside it or one level up, as the readers look for it (a pytest-
        benchmark save, which has none, is not an asv result file)."""
        from harness.core import trust

        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, dict):
            return []
        parent = folder.rpartition("/")[0]
        known = self.benchmarks.get(folder, self.benchmarks.get(parent))
        if known is None:
            return [f"{rel} has no benchmarks.json beside it or one level up"]
        stray = sorted(k for k in results if k not in known)
        if stray:
            more = f" and {len(stray) - 1} more" if len(stray) > 1 else ""
            return [
                f"{rel} names benchmark {trust.shown(stray[0])}{more}, which its "
                "benchmarks.json lacks"
            ]
        return []


def copy_record(record: RunRecord, dest_parent: Path) -> Path:
    """A copy of a run record under `dest_parent` (baselines); never replaces an existing copy."""
    trust.check_run_id(record.run_id, str(record.path))
    links = trust.links_in(record.path)
    if links:
        raise BadInput(
            f"{record.path}: holds a symbolic link ({links[0]}); refused (a copy would take "
            "the link's target)"
        )
    Path(dest_parent).mkdir(parents=True, exist_ok=True)
    dest = trust.inside(dest_parent, record.run_id)
    if dest.exists():
        return dest
    tmp = dest.parent / f".staging-{record.run_id}-{os.getpid()}"
    shutil.copytree(record.path, tmp)
    os.rename(tmp, dest)
    return dest


# ---- importing results of the old layout, and anything else asv wrote itself ----


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _known_hashes(root: Path) -> set[str]:
    """Contents already kept in some run record (so nothing is imported twice)."""
    known = set()
    for r in list_runs(root):
        if r.meta.get("imported_sha256"):
            known.add(r.meta["imported_sha256"])
        known.update(_sha256(f) for f in r.result_files())
    return known


def _start_of(result_file: Path) -> datetime.datetime:
    """When an old result's run started: asv's earliest `started_at`, else the file's mtime."""
    stamps = []
    try:
        data = trust.load(result_file, "asv result file")
        started = data.get("started_at") if isinstance(data, dict) else None
        if isinstance(started, dict):
            stamps = [v for v in started.values() if _is("number", v)]
    except (OSError, BadInput):
        pass  # the file's own time; loading it names what is wrong
    try:
        return datetime.datetime.fromtimestamp(min(stamps) / 1000, datetime.timezone.utc)
    except (ValueError, OverflowError, OSError):  # none, or out of range
        return datetime.datetime.fromtimestamp(result_file.stat().st_mtime, datetime.timezone.utc)


def _commit_of(result_file: Path) -> str:
    """The commit an asv result file names (its `commit_hash`), else its name's first part."""
    try:
        data = trust.load(result_file, "asv result file")
    except (OSError, BadInput):
        data = None
    commit = data.get("commit_hash") if isinstance(data, dict) else None
    return commit if isinstance(commit, str) and commit else result_file.name.split("-")[0]


def import_result(
    root: Path,
    result_file: Path,
    machine: str,
    benchmarks_json: Path | None,
    fingerprint: Path | None,
    label: str = "imported",
    known: set[str] | None = None,
) -> RunRecord | None:
    """Copy one asv result file (with its benchmarks.json and fingerprint) into a new run record.
    The source is left where it is. Returns None when that exact file is kept already. `known`:
    the contents kept so far (_known_hashes), read once by a caller importing many files and
    extended here."""
    trust.check_machine(machine, str(result_file))
    if result_file.is_symlink():
        raise BadInput(f"{result_file}: a symbolic link; not imported (links are not followed)")
    known = _known_hashes(root) if known is None else known
    digest = _sha256(result_file)
    if digest in known:
        return None
    known.add(digest)
    commit = _commit_of(result_file)
    run_id = new_run_id(commit, label, _start_of(result_file))
    while (runs_dir(root) / machine / run_id).exists():
        run_id += "_"
    meta = {
        "commit": commit,
        "started": run_id.split("-")[0],
        "label": label,
        "imported_from": str(result_file),
        "imported_sha256": digest,
    }
    with writing(root, machine, run_id, meta) as staging:
        dest = staging / "asv" / machine
        dest.mkdir(parents=True)
        shutil.copy2(result_file, dest / result_file.name)
        # beside it, what it came with: plain files only (a link's target is not copied in)
        for src, to in (
            (result_file.parent / "machine.json", dest / "machine.json"),
            (benchmarks_json, staging / "asv" / "benchmarks.json"),
            (fingerprint, staging / FINGERPRINT),
        ):
            if src and src.is_file() and not src.is_symlink():
                shutil.copy2(src, to)
    return load_record(runs_dir(root) / machine / run_id)


def _view_state(root: Path) -> dict[str, dict]:
    """The view's own state file (VIEW_MANIFEST), read as input like any other: rel -> entry
    for entries naming a file the view may hold (`<machine>/<file>.json`, both names checked,
    "run" a run id or null). Other entries, and a damaged file (read as empty), are ignored
    with a line: never deleted or written through."""
    path = view_dir(root) / VIEW_MANIFEST
    try:
        data = trust.load_object(path, "asv view state file")
    except FileNotFoundError:
        return {}
    except BadInput as exc:
        left_out(path, f"{str(exc).removeprefix(f'{path}: ')} (read as empty)")
        return {}
    files = data.get("files")
    if not isinstance(files, dict):
        if files is not None:
            left_out(path, "'files' is not an object (read as empty)")
        return {}
    out = {}
    for rel, entry in files.items():
        why = _why_not_view_file(rel)
        if not why and not isinstance(entry, dict):
            why = "its entry is not an object"
        if not why and not (entry.get("run") is None or trust.is_run_id(entry.get("run"))):
            why = trust.why_not_run_id(entry.get("run"))
        if why:
            left_out(f"{path}: entry {trust.shown(rel)}", f"{why}; ignored")
            continue
        out[rel] = {
            "run": entry.get("run"),
            "sha256": entry.get("sha256") if isinstance(entry.get("sha256"), str) else None,
            "adopted": entry.get("adopted") is True,
        }
    return out


def _why_not_view_file(rel) -> str:
    """Why `rel` may not name a result file of the view ("" when it may): `<machine>/<file>`."""
    parts = rel.split("/") if isinstance(rel, str) else []
    if len(parts) != 2:
        return f"{trust.shown(rel)} is not <machine>/<file>.json"
    machine, name = parts
    if not trust.is_part(name) or not name.endswith(".json"):
        return f"file name {trust.shown(name)} is not {trust.PART_RULE}, ending in .json"
    return trust.why_not_machine(machine)


def _result_files_in(folder: Path, label: str) -> list[tuple[Path, str, str]]:
    """(file, machine, label) of the asv result files in `folder`'s machine folders (the view,
    results/history/): folders and files that are links, or whose names are not the formats,
    are left out with a line; so is a file over trust.max_file_bytes()."""
    # a results folder that `harness calibrate` wrote keeps the per-row tables of its runs
    # beside its machine folders (instructions/, row-facts/): those are no machine's results
    own = {INSTRUCTIONS, ROW_FACTS, "baselines"}
    out = []
    for mdir in sorted(folder.iterdir()):
        if mdir.name in own or mdir.name.startswith("."):
            continue
        if mdir.is_symlink():
            left_out(mdir, "a symbolic link, not followed")
            continue
        if not mdir.is_dir():
            continue
        why = trust.why_not_machine(mdir.name)
        if why:
            left_out(mdir, why)
            continue
        for f in sorted(mdir.glob("*.json")):
            if f.name in ASV_META or f.name.startswith("."):
                continue
            if f.is_symlink():
                left_out(f, "a symbolic link, not followed")
            elif not trust.is_part(f.name):
                left_out(f, f"file name is not {trust.PART_RULE}")
            elif f.is_file() and f.stat().st_size > trust.max_file_bytes():
                left_out(f, f"over the {trust.max_file_bytes():,} bytes allowed")
            elif f.is_file():
                out.append((f, mdir.name, label))
    return out


def foreign_files(root: Path) -> list[tuple[Path, str, str]]:
    """Result files no run record holds yet: (file, machine, label) for those in the view that
    the view did not write (old layout, hand-made asv runs) and the old nightly archive in
    results/history/. Reads only: resolving a run name never writes (import_foreign does)."""
    root = Path(root)
    written = {k: v["sha256"] for k, v in _view_state(root).items()}
    view = view_dir(root)
    candidates = []
    if view.is_dir() and not view.is_symlink():
        for f, machine, label in _result_files_in(view, "imported"):
            if written.get(f"{machine}/{f.name}") != _sha256(f):
                candidates.append((f, machine, label))
    history = root / "history"
    if history.is_dir() and not history.is_symlink():
        candidates += _result_files_in(history, "imported.history")
    if candidates:  # the same content kept in a record already is not foreign
        known = _known_hashes(root)
        candidates = [
            c for c in candidates if _sha256(c[0]) not in known and _made_from(c[0]) not in known
        ]
    return candidates


_MADE_FROM = re.compile(rb'"' + dashboard.SOURCE.encode() + rb'": "([0-9a-f]{64})"\}\s*\Z')


def _made_from(view_file: Path) -> str:
    """The sha256 of the record's file a view file was made from, as the view wrote it at the
    file's end ("" for any other file): a view file whose state entry was not written (a
    rebuild interrupted) is not foreign when a record still holds its source."""
    with open(view_file, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 200))
        m = _MADE_FROM.search(f.read())
    return m.group(1).decode() if m else ""


def legacy_fingerprint(result_file: Path) -> Path:
    """Where the old layout kept a view file's fingerprint: ROOT/fingerprints/<machine>/<sha8>.json
    beside ROOT/asv/<machine>/<sha8>-<env>.json."""
    result_file = Path(result_file)
    machine_dir = result_file.parent
    return (
        machine_dir.parent.parent
        / "fingerprints"
        / machine_dir.name
        / f"{result_file.name[:8]}.json"
    )


def import_foreign(root: Path) -> list[RunRecord]:
    """Import the foreign result files (foreign_files) as run records; sources are never
    removed. The writers call it (through rebuild_view), never a reader."""
    root = Path(root)
    view = view_dir(root)
    candidates = foreign_files(root)
    known = _known_hashes(root) if candidates else set()  # read every record once, not per file
    imported = []
    for f, machine, label in candidates:
        rec = import_result(
            root, f, machine, view / "benchmarks.json", legacy_fingerprint(f), label, known
        )
        if rec:
            imported.append(rec)
    return imported


@dataclasses.dataclass(frozen=True)
class Named:
    """What a run name can resolve to: a run record, or a foreign result file read in place."""

    run_id: str
    commit: str
    machine: str
    result_file: Path
    fingerprint_path: Path


def named_runs(root: Path, machine: str, *, skip_merged: bool = False) -> list[Named]:
    """A machine's runs, oldest first, for resolving names and reading histories: its run records
    and, read in place, the foreign result files not imported yet (run ids made from their start
    times). `skip_merged`: leave out shard runs a merged record holds (they count once, merged)."""
    runs = list_runs(root, machine)
    merged = merged_into_others(runs) if skip_merged else set()
    out = [
        Named(r.run_id, r.commit, r.machine, r.result_file(), r.fingerprint_path)
        for r in runs
        if r.result_files() and f"{r.machine}/{r.run_id}" not in merged
    ]
    for f, m, label in foreign_files(root):
        if m != machine:
            continue
        commit = _commit_of(f)
        out.append(
            Named(
                f"{_start_of(f):%Y%m%dT%H%M%SZ}-{commit[:8]}-{label}",
                commit,
                m,
                f,
                legacy_fingerprint(f),
            )
        )
    return sorted(out, key=lambda n: n.run_id)


def foreign_machines(root: Path) -> list[str]:
    return sorted({m for _, m, _ in foreign_files(root)})


@dataclasses.dataclass(frozen=True)
class _ViewInput:
    """What the view takes from one record, checked (harness.core.dashboard)."""

    benchmarks: dict[str, dashboard.Benchmark]  # the entries of its benchmarks.json that pass
    left_out: list[str]  # names of its benchmarks that do not
    results: dict[str, bytes]  # per asv result file (its name in asv/<machine>/), the view's
    machine_json: bytes  # the view's machine.json for its machine


def _read_result(path: Path, where: str) -> tuple[bytes, object]:
    """A record's asv result file: its bytes and parsed JSON (size and nesting checked); bad
    input starting with `where`."""
    size = path.stat().st_size
    if size > trust.MAX_FILE_BYTES:
        raise BadInput(f"{where}: {size:,} bytes, over the {trust.MAX_FILE_BYTES:,} allowed")
    raw = path.read_bytes()
    return raw, trust.loads(raw, where, "asv result file")


def _checked_benchmarks(path: Path, checked: dict) -> tuple[dict, list[str]]:
    """dashboard.check_benchmarks of a record's benchmarks.json ({} when it has none); `checked`
    keeps the outcome per content, as most records of a history hold the same file."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return {}, []
    if size > trust.MAX_FILE_BYTES:
        raise BadInput(f"{path}: {size:,} bytes, over the {trust.MAX_FILE_BYTES:,} allowed")
    raw = path.read_bytes()
    key = hashlib.sha256(raw).digest()
    if key not in checked:
        listed = trust.loads(raw, str(path), "asv benchmarks.json")
        if not isinstance(listed, dict):
            raise BadInput(f"{path}: asv benchmarks.json is not a JSON object; refused")
        checked[key] = dashboard.check_benchmarks(listed)
    return checked[key]


def _view_input(rec: RunRecord, checked: dict) -> _ViewInput:
    """What the view takes from a record: its benchmarks.json's entries, its result files and
    machine.json, every field checked (harness.core.dashboard). Bad input, naming the file and
    the field, when anything under its asv/ is a symbolic link (the view would copy the target),
    a file is damaged, or a result file or machine.json fails a check: the record is then left
    out of the view whole. A benchmark that fails is left out alone (`left_out`)."""
    links = trust.links_in(rec.asv_dir) if os.path.lexists(rec.asv_dir) else []
    if links:
        raise BadInput(f"holds a symbolic link ({links[0].relative_to(rec.path)})")
    kept, left = _checked_benchmarks(rec.asv_dir / "benchmarks.json", checked)
    where = f"asv/{rec.machine}/machine.json"
    mj = rec.asv_dir / rec.machine / "machine.json"
    data = None
    if mj.is_file():
        size = mj.stat().st_size
        if size > dashboard.MAX_MACHINE_BYTES:
            raise BadInput(
                f"{where}: {size:,} bytes, over the {dashboard.MAX_MACHINE_BYTES:,} allowed"
            )
        data = mj.read_bytes()
    machine_json = dashboard.machine_json(data, rec.machine, where)
    results = {}
    for f in rec.result_files():
        where = f"asv/{rec.machine}/{f.name}"
        raw, parsed = _read_result(f, where)
        result = dashboard.result_file(parsed, rec.machine, where)
        results[f.name] = result.to_json(hashlib.sha256(raw).hexdigest())
    return _ViewInput(kept, left, results, machine_json)


def rebuild_view(root: Path, *, copy_to: Path | None = None) -> Path:
    """Write results/asv/ from the run records: per machine, commit and asv environment the newest
    run's result file; benchmarks.json the union over the runs shown (newest wins). Returns the
    view folder.

    Every file is written from the fields harness.core.dashboard checked, never copied: a record
    whose result file or machine.json fails is left out whole with a line (the view is built as
    if it were not there), a benchmark whose fields fail is left out of benchmarks.json (one
    line names them all). Every destination is checked to lie inside the results root with no
    link on the way (trust.inside), its folder taken from the record's checked machine name; a
    record that cannot be placed so is left out with a line, the rest is built.

    `copy_to`: a new folder that receives the same files and nothing else (`harness nightly`
    publishes from it: the view may also hold files it did not write, which it never deletes)."""
    root = Path(root)
    import_foreign(root)
    view = view_dir(root)
    newest: dict[str, tuple[RunRecord, bytes]] = {}  # rel -> its record, the view's file
    machine_json: dict[str, bytes] = {}  # per machine, its newest record's (in the view)
    shown: dict[str, dashboard.Benchmark] = {}
    left: list[str] = []
    checked: dict = {}  # benchmarks.json content -> its check (_checked_benchmarks)
    used: list[_ViewInput] = []
    runs = sorted(list_runs(root), key=lambda r: (not r.meta.get("shard"), r.run_id))
    # newest first: the newest good run of each machine, commit and environment is shown, but a
    # shard (part of a run) never hides a whole run or the merged record of its shard set
    # (harness merge); a run whose files newer good runs all show is not read at all
    for rec in reversed(runs):
        if {f"{rec.machine}/{f.name}" for f in rec.result_files()} <= newest.keys():
            continue
        try:
            got = _view_input(rec, checked)
        except BadInput as exc:
            left_out(rec.path, f"{exc}; not in the asv view or the dashboard")
            continue
        for name, data in got.results.items():
            newest.setdefault(f"{rec.machine}/{name}", (rec, data))
        machine_json.setdefault(rec.machine, got.machine_json)
        used.append(got)
    for got in reversed(used):  # benchmarks.json: the union of the runs shown, newest wins
        shown.update(got.benchmarks)
        left += got.left_out
    dashboard.say_left_out([n for n in left if n not in shown])
    before = _view_state(root)
    files = {}
    written: dict[str, bytes] = {}  # rel under asv/ -> what was written (for copy_to)
    for rel, (rec, data) in sorted(newest.items()):
        try:
            dest = trust.inside(root, f"asv/{rel}")
        except BadInput as exc:
            left_out(rec.path, f"{exc}; not in the asv view")
            continue
        # A file that was there before the view ever listed it (the old layout) is adopted, not
        # made: imported into a record first (import_foreign), never rewritten or deleted; the
        # dashboard gets the checked rendition all the same (copy_to). One the view made whose
        # state entry was lost names its source (_made_from): not adopted.
        adopted = (
            before[rel]["adopted"] if rel in before else dest.is_file() and not _made_from(dest)
        )
        if adopted and dest.is_file():
            sha = _sha256(dest)
        else:
            if not dest.is_file() or dest.read_bytes() != data:
                write_atomic(dest, data)
            sha = hashlib.sha256(data).hexdigest()
        written[rel] = data
        files[rel] = {"run": rec.run_id, "sha256": sha, "adopted": adopted}
    for machine in sorted({rel.split("/")[0] for rel in written}):
        rel = f"{machine}/machine.json"
        try:
            dest = trust.inside(root, f"asv/{rel}")
        except BadInput as exc:
            left_out(view / machine, f"{exc}; its machine.json not written")
            continue
        if not dest.is_file() or dest.read_bytes() != machine_json[machine]:
            write_atomic(dest, machine_json[machine])
        written[rel] = machine_json[machine]
    listing = json.dumps(dashboard.benchmarks_json(shown), indent=2, sort_keys=True) + "\n"
    if shown:
        write_atomic(trust.inside(root, "asv/benchmarks.json"), listing)
    written["benchmarks.json"] = listing.encode("utf-8")  # asv publish needs one, even empty
    # files this view made and no longer holds (their run was pruned) go; adopted ones stay
    for rel, entry in before.items():
        if rel in files:
            continue
        try:
            target = trust.inside(root, f"asv/{rel}")
        except BadInput as exc:
            left_out(view / VIEW_MANIFEST, f"{exc}; not removed")
            continue
        if not target.is_file():
            continue
        if entry["adopted"]:
            files[rel] = dict(entry, run=None)  # listed: never imported twice, never taken as made
        else:
            target.unlink()
    if files or view.is_dir():
        write_json_atomic(trust.inside(root, f"asv/{VIEW_MANIFEST}"), {"files": files})
    if copy_to is not None:
        for rel, data in written.items():
            write_atomic(trust.inside(copy_to, rel), data)
    return view


def record_for_view_file(root: Path, path: Path) -> RunRecord | None:
    """The run a file in the asv view was copied from."""
    path = Path(path).resolve()
    view = view_dir(root).resolve()
    try:
        rel = path.relative_to(view).as_posix()
    except ValueError:
        return None
    entry = _view_state(root).get(rel)
    if not entry or not entry["run"]:
        return None
    rec_path = runs_dir(root) / rel.split("/")[0] / entry["run"]
    return load_record(rec_path) if (rec_path / RUN_JSON).is_file() else None


# ---- pruning: the only deletion, asked for explicitly ----


def plan_prune(
    root: Path, keep: int | None, older_than_days: float | None, machine: str | None = None
) -> list[RunRecord]:
    """Run records that `harness prune` would remove: beyond the newest `keep` per machine and/or
    started more than `older_than_days` ago. Baselines (copies elsewhere) are never candidates."""
    prune_selection([], keep, older_than_days)  # says what is missing before looking
    out = []
    for m in [machine] if machine else machines(root):
        runs = {r.run_id: r for r in list_runs(root, m)}
        out += [runs[i] for i in prune_selection(list(runs), keep, older_than_days)]
    return out


def _started(run_id: str) -> datetime.datetime | None:
    """The start time a run id begins with (YYYYmmddTHHMMSSZ), None when it names none; read
    without strptime, which costs ten times as much over a million ids."""
    t = run_id[:16]
    if len(t) != 16 or t[8] != "T" or t[15] != "Z" or not (t[:8] + t[9:15]).isdigit():
        return None
    try:
        return datetime.datetime(
            int(t[:4]), int(t[4:6]), int(t[6:8]), int(t[9:11]), int(t[11:13]), int(t[13:15]),
            tzinfo=datetime.timezone.utc,
        )  # fmt: skip
    except ValueError:
        return None


def prune_selection(
    run_ids: list[str], keep: int | None, older_than_days: float | None
) -> list[str]:
    """Of one machine's run ids (oldest first) those to prune: beyond the newest `keep` and/or
    started more than `older_than_days` ago (the rule of `harness prune`, here and on the
    results history)."""
    return list(pruned_of(run_ids, keep, older_than_days))


def pruned_of(run_ids, keep: int | None, older_than_days: float | None):
    """prune_selection, one run id at a time (`run_ids` any sequence: a million ids of the
    results history need not be held at once); BadInput at once when the rule says nothing."""
    if keep is None and older_than_days is None:
        raise BadInput(
            "say what to prune: --keep N (newest runs kept per machine) and/or --older-than DAYS"
        )
    return _pruned_of(run_ids, keep, older_than_days)


def _pruned_of(run_ids, keep: int | None, older_than_days: float | None):
    now = datetime.datetime.now(datetime.timezone.utc)
    for i, run_id in enumerate(run_ids):
        beyond_keep = keep is not None and i < len(run_ids) - keep
        started = _started(run_id)
        if started is None:
            continue  # not a run id the harness made: never a candidate
        old = (
            older_than_days is not None
            and (now - started).total_seconds() > older_than_days * 86400
        )
        if (keep is None or beyond_keep) and (older_than_days is None or old):
            yield run_id


@dataclasses.dataclass(frozen=True)
class Unfinished:
    """A staging folder: a run being written, or one whose writer was killed (never a run)."""

    path: Path
    pid: int | None

    @property
    def running(self) -> bool:
        from harness.core.processes import alive

        return self.pid is not None and alive(self.pid)


def unfinished(root: Path, machine: str | None = None) -> list[Unfinished]:
    """Every staging folder under runs/ (or one machine's), oldest name first."""
    out = []
    for m in [machine] if machine else machines(root):
        trust.check_machine(m, str(runs_dir(root)))
        d = runs_dir(root) / m
        if d.is_symlink():
            left_out(d, "a symbolic link in runs/, not followed")
            continue
        for p in sorted(d.glob(STAGING + "*")) if d.is_dir() else []:
            if p.is_symlink():  # not a folder the harness made: never removed through
                left_out(p, "a symbolic link named like a staging folder, not followed")
                continue
            run_id, _, tail = p.name.removeprefix(STAGING).rpartition("-")
            if not trust.is_run_id(run_id):  # STAGING<run id>-<pid> is what the harness makes
                left_out(p, "named like a staging folder but not one the harness makes; kept")
                continue
            out.append(Unfinished(p, int(tail) if tail.isdigit() else None))
    return out


def _own(path: Path, what: str) -> None:
    """Bad input unless `path` lies in runs/<machine>/ with no symbolic link from the results
    root on (runs/ itself included)."""
    runs = path.parent.parent
    if path.is_symlink() or path.parent.is_symlink() or runs.is_symlink() or runs.name != "runs":
        raise BadInput(
            f"{path} is not {what} under runs/ (or is reached through a link); not removed"
        )


def remove_unfinished(item: Unfinished) -> None:
    """Delete a staging folder whose writer is gone (only `.staging-*` folders under runs/)."""
    if item.running or not item.path.name.startswith(STAGING):
        raise BadInput(f"{item.path} is not an abandoned staging folder; not removed")
    _own(item.path, "an abandoned staging folder")
    shutil.rmtree(item.path)


def remove(record: RunRecord) -> None:
    """Delete one run record (only folders holding run.json, under runs/, not through links)."""
    _own(record.path, "a run record")
    if not (record.path / RUN_JSON).is_file():
        raise BadInput(f"{record.path} is not a run record under runs/; not removed")
    shutil.rmtree(record.path)
