"""`harness merge RUN...`: the shard runs of one machine and one commit become one run record.

Each CI runner of a shard matrix writes its own run record (`harness bench --shard K/N`). The
merged record is a new run record (records are never rewritten: the sources stay as they are)
holding one asv result file with every benchmark of the sources, the union of their
benchmarks.json, their machine.json and a fingerprint, so `asv publish`, `asv compare`,
`harness gate` and `harness report` read it as one run. Its run.json lists the sources under
`merged_from`; the asv view (records.rebuild_view) shows the merged record for that commit, not
a shard, and `harness history` counts the merged record, not its sources again.

Refused (bad input, exit 3), nothing written:
- a source that is not a run record under its machine's name: its run.json and its asv result
  file must name the same machine (a checked machine name, harness.core.trust), which is where
  the merged record goes; a source holding a symbolic link; a damaged result, benchmarks,
  instruction, op-count or profile file (named);
- sources of different machines, commits or asv environments, or run in different modes;
- a benchmark present in two sources (named, with both runs);
- shards K/N of different splits, one shard twice, or (unless `partial`) a shard missing;
- environments that are not comparable (device model, CPU threads), unless
  `allow_env_change`; software differences (torch, CUDA, ...) are printed and recorded.
"""

from __future__ import annotations

import pathlib
import shutil
import tempfile

from harness.core import provenance, records, trust
from harness.core.exits import BadInput
from harness.core.files import write_json_atomic
from harness.verdict.results import (
    environment_differences,
    fingerprint_of,
    load,
    not_comparable,
    resolve,
)

# What every shard of one run must share (run.json), beyond machine and commit.
SAME_META = ("mode", "quick", "threads", "sizes")


def _sources(specs: list[str], root: pathlib.Path, machine: str | None) -> list[records.RunRecord]:
    if not specs:
        raise BadInput("name the shard runs to merge (run-record folders, run ids, ...)")
    out, seen = [], set()
    for spec in specs:
        rec = records.record_of(resolve(spec, root, machine))
        if rec is None:
            raise BadInput(
                f"{spec!r} is not a run record (a bare asv result file); merge the run "
                "records `harness bench --shard K/N` wrote under results/runs/<machine>/"
            )
        if rec.path in seen:
            raise BadInput(f"{spec!r} names run {rec.run_id} a second time; name each shard once")
        links = trust.links_in(rec.path)
        if links:
            raise BadInput(
                f"run {rec.path} holds a symbolic link ({links[0].relative_to(rec.path)}); "
                "refused (a merge never copies a link's target)"
            )
        seen.add(rec.path)
        out.append(rec)
    return out


def _check_machine(rec: records.RunRecord, rs) -> None:
    """The merged record goes under its sources' machine name: the run record's (checked when it
    was read), which its asv result file must name too (never a path taken from that file)."""
    trust.check_machine(rec.machine, str(rec.path))
    if rs.machine != rec.machine:
        raise BadInput(
            f"{rs.path}: the asv result file names machine {trust.shown(rs.machine)}, its run "
            f"record {trust.shown(rec.machine)}; refused (merge runs that `harness bench` wrote)"
        )


def _check_same(recs, sets, allow_env_change: bool, log) -> None:
    first, fs = recs[0], sets[0]
    for rec, rs in zip(recs[1:], sets[1:]):
        pair = f"{first.run_id} and {rec.run_id}"
        if rs.machine != fs.machine:
            raise BadInput(
                f"runs {pair} are of different machines ({fs.machine!r}, {rs.machine!r}); "
                "merge shards of one machine (shard runners of one hardware class pass "
                "the same --machine)"
            )
        if rs.commit != fs.commit:
            raise BadInput(
                f"runs {pair} are of different commits ({fs.commit[:12]}, {rs.commit[:12]}); "
                "merge the shards of one commit"
            )
        if rs.env_name != fs.env_name:
            raise BadInput(
                f"runs {pair} ran in different asv environments ({fs.env_name!r}, "
                f"{rs.env_name!r}); merge shards run the same way"
            )
        for key in SAME_META:
            if rec.meta.get(key) != first.meta.get(key):
                raise BadInput(
                    f"runs {pair} differ in {key} ({first.meta.get(key)!r} vs "
                    f"{rec.meta.get(key)!r}); shards of one run use the same options"
                )
        why = not_comparable(fs, rs)
        if why and not allow_env_change:
            raise BadInput(
                f"runs {pair} are not comparable: {'; '.join(why)}; "
                "pass --allow-env-change to merge them anyway"
            )
        for key, a, b in environment_differences(fs, rs):
            log(f"harness merge: note: {key} differs: {a} ({first.run_id}) vs {b} ({rec.run_id})")


def _merged_json(files: list[pathlib.Path], recs) -> dict:
    """One asv result file (format version 2) with every source's benchmarks; columns are
    aligned by name in case two asv versions wrote them in another order."""
    datas = [trust.load_object(f, "asv result file") for f in files]
    for f, data in zip(files, datas):
        _check_result_shape(f, data)
    out = dict(datas[0])
    columns = list(out["result_columns"])
    owner: dict[str, str] = {}
    results, durations = {}, {}
    for data, rec in zip(datas, recs):
        if data.get("version") != out.get("version"):
            raise BadInput(
                f"{rec.path}: asv result format {data.get('version')} differs from "
                f"{out.get('version')}; rerun the shards with one asv version"
            )
        cols = data["result_columns"]
        for name, row in data.get("results", {}).items():
            if name in owner:
                raise BadInput(
                    f"benchmark {name!r} is in two shards: {owner[name]} and {rec.run_id}; "
                    "each benchmark must run in exactly one shard (use one durations file "
                    "and one N on every runner)"
                )
            owner[name] = rec.run_id
            by_col = dict(zip(cols, row))
            results[name] = [by_col.get(c) for c in columns]
        for key, value in (data.get("durations") or {}).items():
            durations[key] = max(durations.get(key, 0.0), float(value))
    out["results"] = dict(sorted(results.items()))
    out["durations"] = durations
    return out


def _check_result_shape(path: pathlib.Path, data: dict) -> None:
    """What _merged_json reads of an asv result file, beyond what asv's loader checked."""
    columns, results = data.get("result_columns"), data.get("results")
    durations = data.get("durations")
    if not (isinstance(columns, list) and all(isinstance(c, str) for c in columns)):
        raise BadInput(f"{path}: 'result_columns' is not a list of names; refused")
    if not isinstance(results, dict) or not all(isinstance(r, list) for r in results.values()):
        raise BadInput(f"{path}: 'results' is not an object of rows; refused")
    if durations is not None and not (
        isinstance(durations, dict)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in durations.values())
    ):
        raise BadInput(f"{path}: 'durations' are not seconds per benchmark; refused")


def _check_shard_set(recs, partial: bool) -> None:
    """Shards K/N named in run.json: one N, each K once, and (unless `partial`) all of them."""
    shards = [r.meta.get("shard") for r in recs]
    if not any(shards):
        return
    parts = {}
    for rec, text in zip(recs, shards):
        k, _, n = str(text or "").partition("/")
        if not text:
            raise BadInput(
                f"run {rec.run_id} is not a shard run (no --shard) but the others are; "
                "merge the shards of one sharded run"
            )
        if (k, n) in parts:
            raise BadInput(
                f"runs {parts[(k, n)]} and {rec.run_id} are both shard {text}; name one of them"
            )
        parts[(k, n)] = rec.run_id
    ns = sorted({n for _, n in parts})
    if len(ns) > 1:
        raise BadInput(
            f"the runs come from different splits ({', '.join('N=' + n for n in ns)}); "
            "merge the shards of one split"
        )
    if not ns[0].isdigit():
        raise BadInput(
            f"run.json of {', '.join(parts.values())} says shard {ns[0]!r}, not K/N; "
            "merge runs that `harness bench --shard K/N` wrote"
        )
    missing = [f"{k}/{ns[0]}" for k in range(1, int(ns[0]) + 1) if (str(k), ns[0]) not in parts]
    if missing and not partial:
        raise BadInput(
            f"shard{'s' * (len(missing) > 1)} {', '.join(missing)} not named: the merged "
            "run would lack their benchmarks; name every shard, or pass --partial"
        )


def _operator_files(recs) -> dict[str, dict]:
    """The shards' per-operator counts, profile summaries (harness.measure.profiles) and
    instruction counts, joined (relative path in the record -> content): each shard's operator
    pass covered only its own benchmarks. Read and checked before anything is written (a
    damaged file is bad input naming it)."""
    from harness.measure import profiles

    out = {}
    for name, part in ((profiles.OP_COUNTS, "rows"), (profiles.PROFILES, "workloads")):
        datas = [d for r in recs if (d := records.read_operator_file(r.path, name)) is not None]
        if datas:
            joined = {**datas[0], part: {k: v for d in datas for k, v in d[part].items()}}
            if part == "workloads":
                joined["skipped"] = {
                    k: v for d in datas for k, v in (d.get("skipped") or {}).items()
                }
            out[name] = joined
    # instruction counts: one file per valgrind process, named by suite and class; a class split
    # over shards (a --bench selection) has its rows joined
    counted: dict[str, dict] = {}
    for rec in recs:
        for path, data in records.instruction_files(rec.path):
            if not trust.is_part(path.name):
                raise BadInput(f"{path}: file name is not {trust.PART_RULE}; refused")
            have = counted.setdefault(path.name, {**data, "rows": {}})
            have["rows"].update(data.get("rows") or {})
    for name, data in counted.items():
        out[f"{records.INSTRUCTIONS}/{name}"] = data
    return out


def merge(
    specs: list[str],
    root: pathlib.Path,
    *,
    machine: str | None = None,
    label: str | None = None,
    partial: bool = False,
    allow_env_change: bool = False,
    log=print,
) -> records.RunRecord:
    """Write the merged run record under `root`; returns it."""
    recs = _sources(specs, root, machine)
    files = [r.result_file() for r in recs]
    sets = [load(f) for f in files]  # asv's loader, checked strictly: a damaged shard is exit 3
    for rec, rs in zip(recs, sets):
        _check_machine(rec, rs)
    _check_same(recs, sets, allow_env_change, log)
    merged = _merged_json(files, recs)  # a benchmark in two runs is named here
    _check_shard_set(recs, partial)
    operator_files = _operator_files(recs)
    first, rs = recs[0], sets[0]
    where = first.machine  # a checked name: the sources' run records' and result files' machine
    run_id = records.new_run_id(rs.commit, label or "merged")
    while (records.runs_dir(root) / where / run_id).exists():
        run_id += "_"
    suites = sorted({s for r in recs for s in r.meta.get("suites", [])})
    sources = [
        {
            "run_id": r.run_id,
            "shard": r.meta.get("shard"),
            "cases": len(s.entries),
            "asv_wall_s": (fingerprint_of(s) or {}).get("asv_wall_s"),
        }
        for r, s in zip(recs, sets)
    ]
    meta = {
        "commit": rs.commit,
        "started": min(r.meta.get("started") or r.run_id[:16] for r in recs),
        "label": label or "merged",
        "suites": suites,
        "merged_from": sources,
        **{k: first.meta.get(k) for k in (*SAME_META, "launch_method")},
        **provenance.merged_meta([r.meta for r in recs]),
    }
    fp = dict(fingerprint_of(rs) or {})
    fp.update(
        run_id=run_id,
        suites=suites,
        merged_from=[s["run_id"] for s in sources],
        asv_wall_s=round(sum(s["asv_wall_s"] or 0 for s in sources), 1),
    )
    with tempfile.TemporaryDirectory(prefix="harness-merge-") as tmp:
        # built and read back aside first: a record in runs/ is never one that fails to load
        asv_dir = pathlib.Path(tmp) / "asv"
        (asv_dir / where).mkdir(parents=True)
        benchmarks = {}
        for r in recs:
            bj = r.asv_dir / "benchmarks.json"
            if bj.is_file():
                benchmarks.update(trust.load_object(bj, "asv benchmarks.json"))
        write_json_atomic(asv_dir / "benchmarks.json", benchmarks)
        mj = first.asv_dir / where / "machine.json"
        if mj.is_file():  # a plain file: _sources refused records holding links
            shutil.copy2(mj, asv_dir / where / "machine.json")
        write_json_atomic(asv_dir / where / files[0].name, merged)
        load(asv_dir / where / files[0].name)
        # each shard's row facts (device facts, answer checks): a merged run's answers are its
        # shards' (a damaged file is bad input naming it, as records.read_row_facts says)
        row_facts = {row: f for r in recs for row, f in records.read_row_facts(r.path).items()}
        with records.writing(root, where, run_id, meta) as staging:
            shutil.copytree(asv_dir, staging / "asv")
            write_json_atomic(staging / records.FINGERPRINT, fp)
            for rel, data in operator_files.items():
                write_json_atomic(staging / rel, data)
            for row, facts in row_facts.items():
                records.write_row_facts(staging, row, facts)
    return records.load_record(records.runs_dir(root) / where / run_id)
