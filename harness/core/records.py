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
from pathlib import Path

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
        return self.meta.get("machine") or self.path.parent.name

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
        return sorted(p for p in d.glob("*.json") if p.name not in ASV_META) if d.is_dir() else []

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
    """{"base_run", "units", "pairs": {row: [[base, head], ...]}} of an ab head record, or None."""
    try:
        data = json.loads((Path(run_dir) / AB_PAIRS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != _AB_SCHEMA:
        return None
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


def read_row_facts(run_dir: Path) -> dict[str, dict]:
    """row -> its facts, for every row a run record keeps facts of (empty when none)."""
    out: dict[str, dict] = {}
    for data in _json_files(Path(run_dir) / ROW_FACTS):
        if data.get("schema") == _FACTS_SCHEMA and data.get("row"):
            row = data.pop("row")
            data.pop("schema")
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


def _read_table(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == _PROFILE_SCHEMA else None


def read_op_counts(run_dir: Path) -> dict | None:
    """ROW -> {"unit", "total", "counts"} of a run record, or None when it stores none."""
    data = _read_table(Path(run_dir) / OP_COUNTS)
    return data.get("rows") if data and isinstance(data.get("rows"), dict) else None


def read_profiles(run_dir: Path) -> dict | None:
    """The run's profiles.json (harness.measure.profiles), or None when it stores none."""
    data = _read_table(Path(run_dir) / PROFILES)
    return data if data and isinstance(data.get("workloads"), dict) else None


def read_instructions(run_dir: Path) -> dict[str, dict]:
    """Every instruction row a run record keeps (INSTRUCTIONS/<suite>.<Class>.json, one per
    valgrind process): row -> its summary (per_call, groups, functions, ...) with the
    fingerprint of its valgrind process, and what the row's own count depends on besides (a
    compile row's inductor instruction set), under "fingerprint". Empty when it keeps none."""
    out: dict[str, dict] = {}
    for data in _json_files(Path(run_dir) / INSTRUCTIONS):
        if not isinstance(data.get("rows"), dict):
            continue
        for row, summary in data["rows"].items():
            if isinstance(summary, dict):
                own = summary.get("fingerprint") or {}
                out[row] = dict(summary, fingerprint={**(data.get("fingerprint") or {}), **own})
    return out


def read_not_counted(run_dir: Path) -> dict[str, str]:
    """Instruction rows a run did not count and why (a model that opted out, a row counted in
    full runs only, a row that failed): row -> reason."""
    out: dict[str, str] = {}
    for data in _json_files(Path(run_dir) / INSTRUCTIONS):
        for key in ("not_counted", "failed"):
            table = data.get(key)
            if isinstance(table, dict):
                out.update({str(k): str(v) for k, v in table.items()})
    return out


def _json_files(folder: Path):
    """The JSON objects of a record's folder of per-row files, in name order; a damaged or
    foreign file is no row (skipped)."""
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            yield data


def runs_dir(root: Path) -> Path:
    return Path(root) / "runs"


def view_dir(root: Path) -> Path:
    return Path(root) / "asv"


def new_run_id(commit: str, label: str | None = None, now: datetime.datetime | None = None) -> str:
    """`<UTC start time>-<sha8>-<6 hex>[-label]`: sorts by start time; the random part keeps two
    runs of one commit started in the same second (two CI jobs, two terminals) apart."""
    if label and not _LABEL.match(label):
        raise BadInput(f"run label {label!r} may hold only letters, digits, '_' and '.'")
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{commit[:8]}-{secrets.token_hex(3)}" + (
        f"-{label}" if label else ""
    )


def _read_meta(path: Path) -> dict | None:
    try:
        data = json.loads((path / RUN_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_record(path: Path) -> RunRecord:
    meta = _read_meta(path)
    if meta is None:
        raise BadInput(
            f"{path} is not a run record (no readable {RUN_JSON}); name a folder under "
            "results/runs/<machine>/"
        )
    return RunRecord(Path(path), meta)


def record_of(path: Path) -> RunRecord | None:
    """The run record a file or folder lies in, if any."""
    path = Path(path).resolve()
    for d in (path, *path.parents):
        if (d / RUN_JSON).is_file():
            meta = _read_meta(d)
            return RunRecord(d, meta) if meta is not None else None
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
    d = runs_dir(root)
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def list_runs(root: Path, machine: str | None = None) -> list[RunRecord]:
    """Every complete run record, oldest first (run ids sort by start time)."""
    out = []
    for m in [machine] if machine else machines(root):
        d = runs_dir(root) / m
        if not d.is_dir():
            continue
        for p in sorted(d.iterdir()):
            if p.is_dir() and not p.name.startswith("."):
                meta = _read_meta(p)
                if meta is not None:
                    out.append(RunRecord(p, meta))
    return sorted(out, key=lambda r: (r.run_id, r.machine))


@contextlib.contextmanager
def writing(root: Path, machine: str, run_id: str, meta: dict):
    """Yield a staging folder to write one run into; on exit it becomes runs/<machine>/<run_id>.

    A run that saved a result file is kept even when the code inside raised (half a suite is
    still data); a staging folder with no result is removed (the harness made it).
    """
    final = runs_dir(root) / machine / run_id
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
                elif info.st_size > trust.MAX_FILE_BYTES:
                    limit = trust.MAX_FILE_BYTES
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
        data = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # there but unreadable: check_whole names it
    return data if isinstance(data, dict) else {}


def check_whole(folder: Path, machine: str, run_id: str, manifest: dict | None = None) -> list[str]:
    """What keeps the record in `folder` from being whole, as `machine`/`run_id` (empty: whole):
    every file its manifest lists is there with that size and sha256 and nothing else is, its
    JSON files parse, run.json (and the manifest, the fingerprint where they say) name this run
    and machine. `manifest`: the listing kept elsewhere for a record that has none of its own.
    First, before any file is read: it holds plain files only, no link, every name within
    harness.core.trust's rules, within its size limits (a record from elsewhere is input)."""
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
    problems = []
    for key in ("run_id", "machine"):
        want = run_id if key == "run_id" else machine
        if key in manifest and manifest[key] != want:
            problems.append(f"{MANIFEST} names {key} {trust.shown(manifest[key])}, not {want!r}")
    have = _listing_of(found)
    for rel in sorted(set(files) - set(have)):
        problems.append(f"{named(rel)} is listed but missing")
    for rel in sorted(set(have) - set(files)):
        problems.append(f"{rel} is there but not listed")
    parsed = {}
    for rel in sorted(set(files) & set(have)):
        entry = files[rel] if isinstance(files[rel], dict) else {}
        if entry.get("sha256") != have[rel]["sha256"] or entry.get("bytes") != have[rel]["bytes"]:
            problems.append(f"{rel} differs from its listed size or sha256")
        elif rel.endswith(".json"):
            try:
                parsed[rel] = trust.loads((folder / rel).read_bytes(), rel)
            except OSError as exc:
                problems.append(f"{rel} cannot be read ({exc.strerror})")
            except BadInput as exc:
                problems.append(str(exc).removesuffix("; refused"))
    if RUN_JSON not in have:
        problems.append(f"no {RUN_JSON}")
    meta = None
    if RUN_JSON in have and not any(p.startswith(f"{RUN_JSON}:") for p in problems):
        try:
            meta = parsed.get(RUN_JSON) or trust.loads((folder / RUN_JSON).read_bytes(), RUN_JSON)
        except (OSError, BadInput) as exc:
            meta = str(exc).removesuffix("; refused")
        if not isinstance(meta, dict):
            problems.append(meta if isinstance(meta, str) else f"{RUN_JSON} is not a JSON object")
            meta = None
    for key, want in (("run_id", run_id), ("machine", machine)):
        if meta is not None and meta.get(key) not in (None, want):
            problems.append(f"{RUN_JSON} names {key} {trust.shown(meta.get(key))}, not {want!r}")
    if FINGERPRINT in have and not problems:
        data = parsed.get(FINGERPRINT)
        if isinstance(data, dict) and data.get("run_id") not in (None, run_id):
            problems.append(
                f"{FINGERPRINT} names run {trust.shown(data.get('run_id'))}, not {run_id!r}"
            )
    return problems


def copy_record(record: RunRecord, dest_parent: Path) -> Path:
    """A copy of a run record under `dest_parent` (baselines); never replaces an existing copy."""
    dest = Path(dest_parent) / record.run_id
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
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
        data = json.loads(result_file.read_text(encoding="utf-8"))
        started = data.get("started_at") if isinstance(data, dict) else None
        if isinstance(started, dict):
            stamps = [v for v in started.values() if isinstance(v, (int, float))]
    except (OSError, ValueError):
        pass
    seconds = min(stamps) / 1000 if stamps else result_file.stat().st_mtime
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


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
    known = _known_hashes(root) if known is None else known
    digest = _sha256(result_file)
    if digest in known:
        return None
    known.add(digest)
    try:
        commit = json.loads(result_file.read_text(encoding="utf-8")).get("commit_hash") or ""
    except (ValueError, AttributeError):
        commit = ""
    commit = commit if isinstance(commit, str) and commit else result_file.name.split("-")[0]
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
        machine_json = result_file.parent / "machine.json"
        if machine_json.is_file():
            shutil.copy2(machine_json, dest / "machine.json")
        if benchmarks_json and benchmarks_json.is_file():
            shutil.copy2(benchmarks_json, staging / "asv" / "benchmarks.json")
        if fingerprint and fingerprint.is_file():
            shutil.copy2(fingerprint, staging / FINGERPRINT)
    return load_record(runs_dir(root) / machine / run_id)


def _manifest(root: Path) -> dict:
    try:
        data = json.loads((view_dir(root) / VIEW_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def foreign_files(root: Path) -> list[tuple[Path, str, str]]:
    """Result files no run record holds yet: (file, machine, label) for those in the view that
    the view did not write (old layout, hand-made asv runs) and the old nightly archive in
    results/history/. Reads only: resolving a run name never writes (import_foreign does)."""
    root = Path(root)
    written = {
        k: v.get("sha256")
        for k, v in (_manifest(root).get("files") or {}).items()
        if isinstance(v, dict)
    }
    view = view_dir(root)
    candidates = []
    if view.is_dir():
        # a results folder that `harness calibrate` wrote keeps the per-row tables of its runs
        # beside its machine folders (instructions/, row-facts/): those are no machine's results
        own = {INSTRUCTIONS, ROW_FACTS}
        for mdir in sorted(p for p in view.iterdir() if p.is_dir() and p.name not in own):
            for f in sorted(mdir.glob("*.json")):
                if f.name in ASV_META:
                    continue
                rel = f"{mdir.name}/{f.name}"
                if written.get(rel) != _sha256(f):
                    candidates.append((f, mdir.name, "imported"))
    history = root / "history"
    if history.is_dir():
        for mdir in sorted(p for p in history.iterdir() if p.is_dir() and p.name != "baselines"):
            candidates += [(f, mdir.name, "imported.history") for f in sorted(mdir.glob("*.json"))]
    if candidates:  # the same content kept in a record already is not foreign
        known = _known_hashes(root)
        candidates = [c for c in candidates if _sha256(c[0]) not in known]
    return candidates


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
        try:
            commit = json.loads(f.read_text(encoding="utf-8")).get("commit_hash") or ""
        except (ValueError, AttributeError, OSError):
            commit = ""
        commit = commit if isinstance(commit, str) and commit else f.name.split("-")[0]
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


def rebuild_view(root: Path) -> Path:
    """Write results/asv/ from the run records: per machine, commit and asv environment the newest
    run's result file; benchmarks.json the union (newest wins). Returns the view folder."""
    root = Path(root)
    import_foreign(root)
    view = view_dir(root)
    newest: dict[str, RunRecord] = {}
    benchmarks: dict = {}
    # oldest first: later runs win, but a shard (part of a run) never hides a whole run or
    # the merged record of its shard set (harness merge)
    for rec in sorted(list_runs(root), key=lambda r: (not r.meta.get("shard"), r.run_id)):
        for f in rec.result_files():
            newest[f"{rec.machine}/{f.name}"] = rec
        bj = rec.asv_dir / "benchmarks.json"
        if bj.is_file():
            try:
                data = json.loads(bj.read_text(encoding="utf-8"))
                if isinstance(data, dict):
                    benchmarks.update(data)
            except ValueError:
                pass
    before = _manifest(root).get("files") or {}
    files = {}
    for rel, rec in sorted(newest.items()):
        src = rec.asv_dir / rel
        dest = view / rel
        data = src.read_bytes()
        # A file that was there before the view ever listed it (the old layout) is adopted, not
        # made: the view may refresh it but never deletes it.
        adopted = bool(before.get(rel, {}).get("adopted")) if rel in before else dest.is_file()
        if not dest.is_file() or dest.read_bytes() != data:
            write_atomic(dest, data)
        mj = rec.asv_dir / rec.machine / "machine.json"
        if mj.is_file():
            write_atomic(view / rec.machine / "machine.json", mj.read_bytes())
        files[rel] = {
            "run": rec.run_id,
            "sha256": hashlib.sha256(data).hexdigest(),
            "adopted": adopted,
        }
    if benchmarks:
        write_json_atomic(view / "benchmarks.json", benchmarks)
    # files this view made and no longer holds (their run was pruned) go; adopted ones stay
    for rel, entry in before.items():
        made = isinstance(entry, dict) and not entry.get("adopted")
        if rel not in files and made and (view / rel).is_file():
            (view / rel).unlink()
        elif rel not in files and not made and (view / rel).is_file():
            files[rel] = dict(entry, run=None)  # listed: never imported twice, never taken as made
    if files or view.is_dir():
        write_json_atomic(view / VIEW_MANIFEST, {"files": files})
    return view


def record_for_view_file(root: Path, path: Path) -> RunRecord | None:
    """The run a file in the asv view was copied from."""
    path = Path(path).resolve()
    view = view_dir(root).resolve()
    try:
        rel = path.relative_to(view).as_posix()
    except ValueError:
        return None
    entry = (_manifest(root).get("files") or {}).get(rel)
    if not isinstance(entry, dict):
        return None
    rec_path = runs_dir(root) / rel.split("/")[0] / str(entry.get("run"))
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


def prune_selection(
    run_ids: list[str], keep: int | None, older_than_days: float | None
) -> list[str]:
    """Of one machine's run ids (oldest first) those to prune: beyond the newest `keep` and/or
    started more than `older_than_days` ago (the rule of `harness prune`, here and on the
    results history)."""
    if keep is None and older_than_days is None:
        raise BadInput(
            "say what to prune: --keep N (newest runs kept per machine) and/or --older-than DAYS"
        )
    now = datetime.datetime.now(datetime.timezone.utc)
    out = []
    for i, run_id in enumerate(run_ids):
        beyond_keep = keep is not None and i < len(run_ids) - keep
        try:
            started = datetime.datetime.strptime(run_id[:16], "%Y%m%dT%H%M%SZ").replace(
                tzinfo=datetime.timezone.utc
            )
        except ValueError:
            continue  # not a run id the harness made: never a candidate
        old = (
            older_than_days is not None
            and (now - started).total_seconds() > older_than_days * 86400
        )
        if (keep is None or beyond_keep) and (older_than_days is None or old):
            out.append(run_id)
    return out


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
        d = runs_dir(root) / m
        for p in sorted(d.glob(STAGING + "*")) if d.is_dir() else []:
            tail = p.name.rsplit("-", 1)[-1]
            out.append(Unfinished(p, int(tail) if tail.isdigit() else None))
    return out


def remove_unfinished(item: Unfinished) -> None:
    """Delete a staging folder whose writer is gone (only `.staging-*` folders under runs/)."""
    if (
        item.running
        or not item.path.name.startswith(STAGING)
        or item.path.parent.parent.name != "runs"
    ):
        raise BadInput(f"{item.path} is not an abandoned staging folder; not removed")
    shutil.rmtree(item.path)


def remove(record: RunRecord) -> None:
    """Delete one run record (only folders holding run.json, under runs/)."""
    if not (record.path / RUN_JSON).is_file() or record.path.parent.parent.name != "runs":
        raise BadInput(f"{record.path} is not a run record under runs/; not removed")
    shutil.rmtree(record.path)
