"""Which benchmarks a run holds, and how a suite set is split into shards for several CI runners.

Listing uses asv's own discovery (`asv.benchmarks.Benchmarks.discover`, the step `asv run` starts
with: the benchmark modules imported in a subprocess of the run's interpreter, under the run's
environment, since HARNESS_FULL changes the parameter grids). Nothing runs and nothing is saved.

The unit of a shard is one asv benchmark (`suite.Class.method`, all its parameter cases): asv
stores one duration per benchmark, and a benchmark's `setup_cache` runs once per process anyway.

The split must come out the same on every runner, so it depends only on
- the benchmark names (sorted), and
- the committed durations file `suites/durations.json` (seconds per benchmark, one section per
  mode: "quick", "fast", "full"; a project of its own overlays its `durations.json` on the
  packaged suites' file: harness.core.project.Suites), refreshed with `harness durations RUN...`;
never on a runner's own history. A benchmark missing from the file counts as the median of the
section's durations (DEFAULT_S when the section is empty). Shares are balanced greedily:
benchmarks longest first (ties by name) each into the currently lightest shard (ties: the lowest
shard number). The shards' union is every benchmark, and no benchmark is in two shards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import statistics
from pathlib import Path

from harness.core.exits import BadInput, RunnerFailed
from harness.core.files import write_json_atomic

DEFAULT_S = 10.0
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> tuple[int, int]:
    """'K/N' -> (K, N) with 1 <= K <= N."""
    m = _SHARD.match(text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise BadInput(
            f"--shard {text!r}: write K/N with 1 <= K <= N (e.g. --shard 1/2 and --shard 2/2 "
            "on two runners)"
        )
    return int(m.group(1)), int(m.group(2))


def mode_of(quick: bool, full: bool) -> str:
    """The durations section a run's split reads: quick runs, fast runs and full runs differ
    by orders of magnitude."""
    return "full" if full else ("quick" if quick else "fast")


def mode_of_record(meta: dict) -> str:
    """mode_of() for a run record's run.json (harness.runs.bench writes "quick" and "mode")."""
    return mode_of(bool(meta.get("quick")), meta.get("mode") == "full")


# ---- discovery ----


@contextlib.contextmanager
def _environ(env: dict):
    """asv's discovery passes os.environ to the subprocess it starts: set the run's, then
    restore. Its temporary folder here too (tempfile keeps the one it chose first)."""
    import tempfile

    saved, saved_tmp = dict(os.environ), tempfile.tempdir
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = env.get("TMPDIR") or saved_tmp
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        tempfile.tempdir = saved_tmp


def discover(config_path: Path, sha: str, env: dict) -> list[dict]:
    """Every benchmark asv finds under the config's benchmark_dir, as asv describes them
    (name, params, param_names, unit, version, ...), sorted by name."""
    from asv import environment, util
    from asv import repo as asv_repo
    from asv.benchmarks import Benchmarks
    from asv.config import Config

    from harness.runs import asv

    conf = Config.load(str(config_path))
    try:
        with _environ(env):
            envs = list(environment.get_environments(conf, [f"existing:{asv.python_launcher()}"]))
            found = Benchmarks.discover(conf, asv_repo.get_repo(conf), envs, [sha])
    except util.UserError as exc:
        raise RunnerFailed(
            f"asv could not import the benchmark suites in {conf.benchmark_dir} "
            f"({exc or 'see the asv output above'})"
        ) from None
    return [found[name] for name in sorted(found)]


def case_names(benchmark: dict) -> list[str]:
    """asv's full names of a benchmark's cases: `name(p1, p2)` per parameter combination, or
    the bare name of an unparameterised benchmark (what `--bench` regexes are searched in)."""
    import itertools

    if not benchmark.get("params"):
        return [benchmark["name"]]
    return [f"{benchmark['name']}({', '.join(p)})" for p in itertools.product(*benchmark["params"])]


def select(
    benchmarks: list[dict], suites: list[str], regexes: list[str] | None = None
) -> dict[str, list[str]]:
    """benchmark name -> its selected case names: benchmarks of the suites, then (when given)
    only cases some regex selects (harness.verdict.compare.selects: found in the full name, as
    asv's `--bench`, or in the name without parameters). A regex matching no case of these
    suites is bad input naming what it could have matched."""
    in_suites = [b for b in benchmarks if b["name"].split(".", 1)[0] in suites]
    cases = {b["name"]: case_names(b) for b in in_suites}
    if not regexes:
        return cases
    compiled = []
    for r in regexes:
        try:
            compiled.append((r, re.compile(r)))
        except re.error as exc:
            raise BadInput(f"--bench {r!r} is not a regular expression ({exc})") from None
    from harness.verdict.compare import could_match, selects

    every = [c for cs in cases.values() for c in cs]
    for r, _ in compiled:
        if not any(selects(r, c) for c in every):
            raise BadInput(
                f"--bench {r!r} matches no benchmark of the suites {', '.join(suites)}; "
                f"{could_match(every)}\n(`harness bench --list` prints them all)"
            )
    out = {}
    for name, cs in cases.items():
        kept = [c for c in cs if any(selects(r, c) for r, _ in compiled)]
        if kept:
            out[name] = kept
    return out


def asv_regexes(selection: dict[str, list[str]], benchmarks: list[dict]) -> list[str]:
    """Anchored exact `--bench` regexes for asv that select exactly these cases: a whole
    benchmark as `^name$` / `^name\\(`, a subset of its cases one by one."""
    full = {b["name"]: case_names(b) for b in benchmarks}
    out = []
    for name, cases in sorted(selection.items()):
        if cases == [name]:
            out.append(f"^{re.escape(name)}$")
        elif cases == full.get(name):
            out.append(f"^{re.escape(name)}\\(")
        else:
            out += [f"^{re.escape(c)}$" for c in cases]
    return out


# ---- durations and the split ----


def load_durations(path: Path, mode: str) -> dict[str, float]:
    """Seconds per benchmark for `mode` from the committed durations file; a missing file is
    an empty table (every benchmark then counts the default)."""
    if not path.is_file():
        return {}
    data = _read(path, "restore it from git or refresh it with `harness durations RUN`")
    modes = data.get("modes", {}) if isinstance(data, dict) else None
    section = modes.get(mode, {}) if isinstance(modes, dict) else None
    if not isinstance(section, dict):
        raise BadInput(
            f"{path}: section modes.{mode} is not an object; "
            "refresh it with `harness durations RUN`"
        )
    out = {}
    for name, s in section.items():
        if not isinstance(s, (int, float)) or isinstance(s, bool) or not s >= 0:
            raise BadInput(f"{path}: duration of {name!r} ({mode}) is {s!r}, not seconds >= 0")
        out[name] = float(s)
    return out


def _read(path: Path, fix: str):
    """The durations file's JSON (a project's own file: a link to it is fine; nesting and
    encoding checked, trust.loads); bad input naming it."""
    from harness.core import trust

    try:
        return trust.loads(path.read_bytes(), str(path), "durations file")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the durations file ({exc.strerror}); {fix}") from None
    except BadInput as exc:
        raise BadInput(f"{exc}; corrupt durations file: {fix}") from None


def default_seconds(durations: dict[str, float]) -> float:
    """What a benchmark missing from the durations file counts: the median of the known ones."""
    return statistics.median(durations.values()) if durations else DEFAULT_S


def predicted(names: list[str], durations: dict[str, float]) -> dict[str, float]:
    fallback = default_seconds(durations)
    return {n: durations.get(n, fallback) for n in names}


def split(names: list[str], durations: dict[str, float], n: int) -> list[list[str]]:
    """N shares balanced by duration: longest first (ties by name) into the lightest shard
    (ties: the lowest number). Each share is returned sorted by name."""
    seconds = predicted(sorted(set(names)), durations)
    shards: list[list[str]] = [[] for _ in range(n)]
    load = [0.0] * n
    for name in sorted(seconds, key=lambda x: (-seconds[x], x)):
        i = min(range(n), key=lambda j: (load[j], j))
        shards[i].append(name)
        load[i] += seconds[name]
    return [sorted(s) for s in shards]


def durations_of(result_file: Path) -> dict[str, float]:
    """Seconds per benchmark that asv measured in one run (its result file's `duration`
    column: the benchmark's whole time in its process, all cases)."""
    from asv.results import Results

    try:
        res = Results.load(str(result_file))
        names = list(res.get_all_result_keys())
        durations = getattr(res, "duration", None)
    except Exception as exc:  # asv trusts its files; a damaged one fails anywhere
        raise BadInput(
            f"{result_file}: malformed asv result file ({type(exc).__name__}: {exc})"
        ) from None
    out = {}
    for name in names:
        d = durations.get(name) if isinstance(durations, dict) else None
        if isinstance(d, (int, float)) and not isinstance(d, bool) and 0 <= d < float("inf"):
            out[name] = round(float(d), 2)
    return out


def overlaid(paths: list[Path], mode: str) -> tuple[dict[str, float], Path]:
    """One mode's durations from several files, later files overriding earlier ones, and the
    file to name as their source (the last that exists)."""
    durations: dict[str, float] = {}
    for path in paths:
        durations.update(load_durations(path, mode))
    return durations, next((p for p in reversed(paths) if p.is_file()), paths[-1])


# the packaged suites whose cases are the registered models: a project's differ from the zoo's
OVER_MODELS = ("models", "instructions")


def project_durations(found, mode: str) -> tuple[dict[str, float], Path]:
    """The durations a project's runs are planned with (`found`: its
    harness.core.project.Suites): its durations files overlaid, except that in a project of its
    own the packaged file's entries of the suites over the registered models (OVER_MODELS) are
    left out: they timed the built-in zoo, and there those suites cover the project's models
    (its own file may record them)."""
    paths = found.durations_files()
    if not found.own_project:
        return overlaid(paths, mode)
    packaged = {
        k: v
        for k, v in load_durations(paths[0], mode).items()
        if k.split(".", 1)[0] not in OVER_MODELS
    }
    own, source = overlaid(paths[1:], mode)
    return {**packaged, **own}, source


def update_durations(path: Path, mode: str, measured: dict[str, float], source: list[str]) -> dict:
    """Merge measured seconds into the file's section for `mode`; other benchmarks and modes are
    kept (a run of one suite refreshes that suite only). Returns the new content."""
    data = {}
    if path.is_file():
        data = _read(path, "restore it from git first")
    modes = data.get("modes", {}) if isinstance(data, dict) else None
    if not isinstance(modes, dict) or not isinstance(data.get("sources", {}), dict):
        raise BadInput(
            f"{path} is not a durations file (a JSON object of modes); name another with --out"
        )
    if not isinstance(modes.get(mode, {}), dict):
        raise BadInput(f"{path}: section modes.{mode} is not an object; restore it from git first")
    data["about"] = (
        "seconds per asv benchmark, per mode; read by `harness bench --shard K/N` to "
        "balance shards; refresh with `harness durations RUN...` and commit"
    )
    data.setdefault("modes", {}).setdefault(mode, {}).update(measured)
    data["modes"][mode] = dict(sorted(data["modes"][mode].items()))
    data.setdefault("sources", {})[mode] = source
    write_json_atomic(path, data)
    return data


# ---- what one runner runs ----


@dataclasses.dataclass
class Plan:
    """The benchmarks a `harness bench` invocation selects, and their shares."""

    benchmarks: list[dict]  # everything asv discovered (all suites)
    selection: dict[str, list[str]]  # selected benchmark -> its selected case names
    seconds: dict[str, float]  # predicted seconds per selected benchmark
    shards: list[list[str]]  # every share (one share when not sharded)
    shard: tuple[int, int] | None
    durations_file: Path
    mode: str
    known: int = 0  # selected benchmarks that the durations file names
    default_s: float = DEFAULT_S  # what each of the others counts
    durations: dict = dataclasses.field(default_factory=dict)  # the durations file's table

    def durations_note(self) -> str:
        """Where the predicted seconds come from, for the log."""
        return (
            f"{self.mode} durations from {self.durations_file}: "
            f"{self.known} of {len(self.selection)} "
            f"benchmarks measured, the others count {self.default_s:g} s"
        )

    @property
    def chosen(self) -> list[str]:
        """The benchmarks this runner runs (its share, or all)."""
        return self.shards[self.shard[0] - 1] if self.shard else sorted(self.selection)

    def predicted_s(self, names: list[str]) -> float:
        return round(sum(self.seconds[n] for n in names), 1)

    def asv_benches(self) -> list[str]:
        return asv_regexes({n: self.selection[n] for n in self.chosen}, self.benchmarks)

    def as_json(self) -> dict:
        return {
            "mode": self.mode,
            "durations_file": str(self.durations_file),
            "durations_known": self.known,
            "default_s": self.default_s,
            "shard": f"{self.shard[0]}/{self.shard[1]}" if self.shard else None,
            "benchmarks": self.chosen,
            "predicted_s": self.predicted_s(self.chosen),
            "all_benchmarks": sorted(self.selection),
            "shards": [
                {
                    "shard": f"{i + 1}/{len(self.shards)}",
                    "benchmarks": s,
                    "predicted_s": self.predicted_s(s),
                }
                for i, s in enumerate(self.shards)
            ],
        }


def plan(
    project: Path,
    spec,
    *,
    sha: str,
    regexes: list[str] | None = None,
    shard: tuple[int, int] | None = None,
    durations_file: Path | None = None,
) -> Plan:
    """Discover (asv), select (the spec's suites, --bench) and split (durations) without running
    anything. `spec`: the run's harness.runs.spec.RunSpec."""
    from harness.core.project import suites as project_suites
    from harness.runs import asv
    from harness.runs.scratch import RunScratch

    found = project_suites(project)
    suites = list(spec.suites)
    with RunScratch() as scratch:
        env = {**spec.environment(scratch), **found.environment()}
        # a project of its own: its modules beside the installed harness's suites
        folder = (
            asv.benchmark_subset(project, list(found.modules()), scratch.folder("benchmarks"))
            if found.own_project
            else None
        )
        with asv.config(project, scratch.folder("asv"), benchmark_dir=folder) as config:
            benchmarks = discover(config, sha, env)
    selection = select(benchmarks, suites, regexes)
    mode = spec.mode
    # the suites' own file (a checkout's), or the package's overlaid by a project's own
    durations, path = (
        overlaid([Path(durations_file)], mode) if durations_file else project_durations(found, mode)
    )
    names = sorted(selection)
    shards = split(names, durations, shard[1]) if shard else [names]
    return Plan(
        benchmarks,
        selection,
        predicted(names, durations),
        shards,
        shard,
        path,
        mode,
        sum(n in durations for n in names),
        default_seconds(durations),
        durations,
    )
