"""Environment drift (`harness check --against FILE`): this machine's fingerprint now against a
recorded one, every difference listed. The "it worked last month" question.

A recorded fingerprint comes from a run record (its fingerprint.json, read through
results.fingerprint_of: a run-record folder, a result JSON file, a run id, `latest`, `baseline`),
a bare fingerprint.json, or a golden's header (which records only the torch version; the command
reads it through harness.golden.store and passes it here).

A difference in what is installed or how torch computes (versions, CUDA, cuDNN, driver, device,
determinism and precision flags) fails the check; a difference in a run's settings (thread
counts, environment variables, OS release) is listed as information, since this process's
settings are not the run's.
"""

from __future__ import annotations

import pathlib

from harness.core import trust
from harness.core.exits import BadInput
from harness.core.findings import FAIL, INFO, PASS, Finding
from harness.verdict import results

NAME = "environment drift"
# what a fingerprint holds about the run rather than the environment (harness.runs.bench)
RUN_KEYS = {
    "machine_name",
    "run_id",
    "mode",
    "quick",
    "suites",
    "launch_method",
    "asv_wall_s",
    "inductor_cache",
    "seed",
    "commit",
}
SETTINGS = (
    "torch_threads",
    "torch_interop_threads",
    "python_hash_seed",
    "cpu_count",
    "env.",
    "os",
    "sizes",
)


def flatten(fp: dict, prefix: str = "") -> dict:
    """{"flags": {"cudnn.benchmark": x}} -> {"flags.cudnn.benchmark": x}."""
    out = {}
    for key, value in fp.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _looks_like_fingerprint(data: dict) -> bool:
    return "torch" in data and ("flags" in data or "torch_threads" in data)


def recorded_fingerprint(
    spec: str, root: pathlib.Path, machine: str | None = None
) -> tuple[dict, str]:
    """(fingerprint, where it came from) for a bare fingerprint JSON, or any run a gate argument
    names (results.resolve)."""
    path = pathlib.Path(spec)
    if path.is_file() and path.suffix == ".json":
        try:
            data = trust.loads(path.read_bytes(), str(path), "fingerprint")
        except (OSError, BadInput) as exc:
            raise BadInput(
                f"{path}: cannot read it as JSON ({exc}); give a fingerprint.json, a result "
                "file, a run-record folder or a golden (.expect)"
            ) from None
        if isinstance(data, dict) and _looks_like_fingerprint(data):
            return data, f"fingerprint {path}"
    result = results.resolve(spec, root, machine)
    rs = results.load(result)
    fp = results.fingerprint_of(rs)
    if fp is None:
        raise BadInput(
            f"{result}: this run has no saved fingerprint (an older run or a bare result "
            "file); give a run record, a fingerprint.json or a golden instead"
        )
    return fp, f"run {result}"


def _is_setting(key: str) -> bool:
    return key.startswith(SETTINGS)


def drift(
    recorded: dict, current: dict, source: str, only: tuple[str, ...] | None = None
) -> Finding:
    """One finding listing every difference; `only`: the keys the record holds at all (a golden
    header records only torch)."""
    rec, now = flatten(recorded), flatten(current)
    keys = [k for k in now if k not in RUN_KEYS and (only is None or k in only)]
    unrecorded = [k for k in keys if k not in rec]
    diffs = results.fingerprint_differences(rec, now, [k for k in keys if k in rec])
    failing = [d for d in diffs if not _is_setting(d[0])]
    rows = [
        {
            "setting": k,
            "recorded": r,
            "now": n,
            "kind": "setting" if _is_setting(k) else "environment",
        }
        for k, r, n in diffs
    ]
    details = {"source": source, "differences": rows, "not_recorded": unrecorded}
    scope = f"compared {len(keys) - len(unrecorded)} settings with {source}"
    if only is not None:
        scope += f" (it records only {', '.join(only)})"
    listed = "; ".join(f"{k}: {r} -> {n}" for k, r, n in diffs)
    if failing:
        return Finding(
            NAME,
            FAIL,
            f"{len(diffs)} differences ({scope}): {listed}",
            "install the recorded versions (e.g. pip install torch==<recorded>) and reset the "
            "flags, or re-record the golden/baseline if the change is intended",
            details,
        )
    if diffs:
        return Finding(
            NAME,
            INFO,
            f"same software and flags; run settings differ ({scope}): {listed}",
            details=details,
        )
    return Finding(
        NAME,
        PASS,
        f"no difference ({scope})"
        + (f"; not recorded there: {', '.join(unrecorded)}" if unrecorded else ""),
        details=details,
    )
