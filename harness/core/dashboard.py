"""What the asv view may hand to the published dashboard (docs/trust.md, "The dashboard").

asv's pages (asv 0.6.6, `asv/www/*.js`) build HTML by string concatenation from what `asv
publish` reads: a parameter panel's heading from every key of a result file's `params` and
`env_vars`, the navigation tree, links, element ids and headings from benchmark names and
pretty names, tooltips that render HTML from benchmark code and `machine.json`. `asv publish`
itself raises on a `machine.json` that is not an object, on benchmark parameters of the wrong
shape, on result values it cannot plot. Those files are rebuilt from run records, which other
machines may have written (harness.core.records.rebuild_view), so every file the view writes
is made here from values checked field by field (a whitelist of fields; nothing of the source
file is passed through):

- `benchmarks.json`: per benchmark `name` (dotted ASCII identifiers, at most MAX_NAME
  characters), `type`, `unit`, `version`, `param_names` (short plain text), `pretty_name`
  (plain text of at most MAX_NAME characters), `params` (lists of short plain text, quotes
  allowed: they are Python reprs; at most MAX_CASES combinations) and `code` (HTML-escaped, cut
  at MAX_CODE characters). A benchmark that fails is left out of the dashboard, named on one
  line; the records keep it.
- `<machine>/machine.json`: only asv's fields (MACHINE_FIELDS), short plain text, `machine`
  the record's own machine name; anything else in the file is dropped.
- result files: `commit_hash` (hex), `date` (a number), `env_name`, `python`, `params` and
  `env_vars` (keys in KEY/ENV_KEY form, values short plain text), and per benchmark the
  numbers asv plots (result, stats, samples) with its parameter lists; other columns
  (profiles, durations, start times) are dropped, and so are rows whose names are not benchmark
  names (NAME).

"Short plain text": a string of at most MAX_TEXT characters without control or format
characters and without `<`, `>`, `&`, a backtick, `"` or `'`. A record with a result file or
`machine.json` that fails is refused whole (BadInput naming the field): the view leaves it out
with one line and is built from the others. Nothing is escaped into a different value except
benchmark code (its tooltip renders HTML; escaped, it shows as the text it is).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys

from harness.core import escape, trust
from harness.core.exits import BadInput

MAX_NAME = 200  # characters of a benchmark name on the dashboard
MAX_TEXT = 120  # characters of one shown value: a parameter, a machine field, a unit
MAX_KEY = 64  # characters of a params / env_vars / machine.json key
MAX_FIELDS = 64  # keys of one result file's params or env_vars
MAX_CODE = 20_000  # characters of a benchmark's code shown in its tooltip
MAX_CASES = 10_000  # parameter combinations of one benchmark (asv walks every one)
MAX_MACHINE_BYTES = 16 * 1024  # one machine.json (asv writes ~200 bytes)
MAX_TIMESTAMP = 10**14  # milliseconds (year 5138): a date asv can still turn into a datetime
# a graph file of asv is named `<key>-<value>` per parameter: one path component
MAX_PATH_PART = 240  # bytes

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+", re.ASCII)
KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*", re.ASCII)  # a result file's params key
ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)  # an environment variable's name
COMMIT = re.compile(r"[0-9a-f]{7,64}", re.ASCII)
MACHINE_FIELDS = ("arch", "cpu", "machine", "num_cpu", "os", "ram")
_MARKUP = frozenset("<>&`")
_QUOTES = frozenset("\"'")
RESULT_API = 2  # asv's result file format
BENCHMARKS_API = 2
MACHINE_API = 1
# the per-benchmark columns the view writes (asv's names); stats_* as asv computes them
STATS = ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")
COLUMNS = ("result", "params", "version", *(f"stats_{s}" for s in STATS), "samples")
_DROPPED_COLUMNS = {"started_at", "duration", "profile"}
SOURCE = "harness_source_sha256"  # in a view's result file: the record's file it was made from


_SURELY_PLAIN = re.compile(r"[ !#-%(-;=?-_a-~]*")  # printable ASCII less <>&`"'


def why_not_text(value, what: str, *, limit: int = MAX_TEXT, quotes: bool = False) -> str:
    """Why `value` is not short plain text ("" when it is). `quotes`: `"` and `'` allowed."""
    if not isinstance(value, str):
        return f"{what} is not text"
    if len(value) > limit:
        return f"{what} is {len(value):,} characters, over the {limit} allowed"
    if _SURELY_PLAIN.fullmatch(value):
        return ""
    bad = sorted((_MARKUP if quotes else _MARKUP | _QUOTES).intersection(value))
    if bad:
        return f"{what} {trust.shown(value)} holds {' '.join(bad)} (HTML on asv's page)"
    if escape.visible(value) != value:
        return f"{what} {trust.shown(value)} holds a control character"
    return ""


def _text(value, what: str, **kw) -> str:
    why = why_not_text(value, what, **kw)
    if why:
        raise BadInput(why)
    return value


def _is_number(x, *, nan: bool = True, inf: bool = False) -> bool:
    """An int or float as JSON gives them (not a bool); NaN and infinities as asked."""
    kind = type(x)
    if kind is int:
        return True
    if kind is not float:
        return False
    return math.isfinite(x) or (nan if x != x else inf)


def _param_lists(value, what: str) -> tuple[tuple[str, ...], ...]:
    """Benchmark parameter values: a list of lists of short plain text (Python reprs)."""
    if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
        raise BadInput(f"{what} is not a list of lists")
    cases = 1
    for values in value:
        for v in values:
            _text(v, f"{what} value", quotes=True)
        cases *= len(values)
        if cases > MAX_CASES:
            raise BadInput(f"{what} make over {MAX_CASES:,} combinations")
    return tuple(tuple(values) for values in value)


def _cases(params: tuple[tuple[str, ...], ...]) -> int:
    return math.prod(len(values) for values in params)


# ---- benchmarks.json ----


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One benchmark of benchmarks.json as the dashboard may show it."""

    name: str
    params: tuple[tuple[str, ...], ...] = ()
    param_names: tuple[str, ...] = ()
    type: str | None = None
    unit: str | None = None
    version: str | None = None
    pretty_name: str | None = None
    code: str | None = None

    def to_json(self) -> dict:
        out = {
            "name": self.name,
            "params": [list(v) for v in self.params],
            "param_names": list(self.param_names),
        }
        for key in ("type", "unit", "version", "pretty_name"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.code is not None:
            out["code"] = escape.html(escape.cut(self.code, MAX_CODE))
        return out


def is_name(name) -> bool:
    """Whether `name` may name a benchmark on the dashboard: dotted ASCII identifiers."""
    return isinstance(name, str) and len(name) <= MAX_NAME and NAME.fullmatch(name) is not None


def benchmark(name, entry) -> Benchmark:
    """Benchmark `name` of a benchmarks.json, checked field by field (BadInput saying why)."""
    if not is_name(name):
        raise BadInput(f"name is not dotted identifiers of at most {MAX_NAME} characters")
    if not isinstance(entry, dict) or entry.get("name") != name:
        raise BadInput("its entry is not an object of that name")
    params = _param_lists(entry.get("params", []), "its params")
    names = entry.get("param_names", [])
    if not isinstance(names, list) or len(names) != len(params):
        raise BadInput("its param_names are not a list, one per params list")
    for n in names:
        _text(n, "a param name")
    fields = {}
    for key, limit in (("type", MAX_TEXT), ("unit", MAX_TEXT), ("pretty_name", MAX_NAME)):
        if entry.get(key) is not None:
            fields[key] = _text(entry[key], f"its {key}", limit=limit)
    version = entry.get("version")
    if version is not None:
        fields["version"] = _text(str(version) if _is_number(version) else version, "its version")
    code = entry.get("code")
    if code is not None and not isinstance(code, str):
        raise BadInput("its code is not text")
    return Benchmark(name, params, tuple(names), code=code, **fields)


def check_benchmarks(data: dict) -> tuple[dict[str, Benchmark], list[str]]:
    """The benchmarks of a benchmarks.json that pass, and the names of those that do not."""
    kept: dict[str, Benchmark] = {}
    left: list[str] = []
    for name, entry in data.items():
        if name == "version":
            continue
        try:
            kept[name] = benchmark(name, entry)
        except BadInput:
            left.append(name)
    return kept, left


def say_left_out(names: list[str]) -> None:
    """One line on stderr naming the benchmarks left out of the dashboard (if any)."""
    if not names:
        return
    names = list(dict.fromkeys(names))
    shown = ", ".join(escape.terminal(n, 60) for n in names[:3]) + (
        f" and {len(names) - 3} more" if len(names) > 3 else ""
    )
    print(
        f"harness: {len(names)} benchmark(s) left out of the dashboard data (their names or "
        f"fields could be read as markup; their rows stay in the run records): {shown}",
        file=sys.stderr,
    )


def benchmarks_json(kept: dict[str, Benchmark]) -> dict:
    """The view's benchmarks.json: asv's format version and each benchmark kept."""
    return {"version": BENCHMARKS_API, **{n: b.to_json() for n, b in sorted(kept.items())}}


def benchmarks(data: dict) -> dict:
    """The benchmarks.json the dashboard may show of `data`; the others named on one line."""
    kept, left = check_benchmarks(data)
    say_left_out(left)
    return benchmarks_json(kept)


# ---- machine.json ----


def machine_json(data: bytes | None, machine: str, where: str = "machine.json") -> bytes:
    """The view's machine.json for `machine` from the record's file (`data`; None when the
    record has none): asv's fields (MACHINE_FIELDS) as short plain text, `machine` the record's
    own. BadInput starting with `where` when the file is not a JSON object of those, is over
    MAX_MACHINE_BYTES, or names another machine."""
    out: dict = {"machine": machine}
    if data is not None:
        if len(data) > MAX_MACHINE_BYTES:
            raise BadInput(f"{where}: {len(data):,} bytes, over the {MAX_MACHINE_BYTES:,} allowed")
        found = trust.loads(data, where, "machine.json", nesting=2)
        if not isinstance(found, dict):
            raise BadInput(f"{where}: not a JSON object")
        for key in MACHINE_FIELDS:
            value = found.get(key)
            if value is None:
                continue
            if _is_number(value, nan=False):
                value = str(value)
            why = why_not_text(value, f"its {key}")
            if why:
                raise BadInput(f"{where}: {why}")
            out[key] = value
        if out["machine"] != machine:
            raise BadInput(
                f"{where}: names machine {trust.shown(out['machine'])}, its record "
                f"{trust.shown(machine)}"
            )
    out["version"] = MACHINE_API
    return (json.dumps(out, indent=4, sort_keys=True) + "\n").encode("utf-8")


# ---- result files ----


@dataclasses.dataclass(frozen=True)
class Row:
    """One benchmark's numbers in a result file: per parameter combination a value (a number,
    NaN for skipped, None for failed), asv's statistics and samples."""

    result: list | None
    params: tuple[tuple[str, ...], ...]
    version: str | None
    stats: dict[str, list | None]
    samples: list | None

    def to_json(self) -> list:
        return [
            self.result,
            [list(v) for v in self.params],
            self.version,
            *(self.stats.get(s) for s in STATS),
            self.samples,
        ]


@dataclasses.dataclass(frozen=True)
class ResultFile:
    """An asv result file as the dashboard may read it."""

    commit_hash: str
    env_name: str
    date: int | float
    python: str
    params: dict[str, str | None]
    env_vars: dict[str, str]
    rows: dict[str, Row]

    def to_json(self, source_sha256: str) -> bytes:
        """The file asv reads: rows of benchmarks named as benchmark names may be (NAME; asv
        skips the rows of benchmarks benchmarks.json does not list); `source_sha256` names the
        record's file it was made from (so the view knows its own files: records.foreign_files)."""
        data = {
            "commit_hash": self.commit_hash,
            "env_name": self.env_name,
            "date": self.date,
            "params": self.params,
            "python": self.python,
            "requirements": {},
            "env_vars": self.env_vars,
            "result_columns": list(COLUMNS),
            "results": {n: r.to_json() for n, r in self.rows.items() if is_name(n)},
            "durations": {},
            "version": RESULT_API,
            SOURCE: source_sha256,
        }
        return json.dumps(data, allow_nan=True).encode("utf-8")


def _numbers(value, what: str, n: int, *, inf: bool = False) -> list | None:
    """None, or a list of `n` entries each None or a number (NaN allowed, infinities if `inf`)."""
    if value is None:
        return None
    if type(value) is not list or len(value) != n:
        raise BadInput(f"{what} is not a list of {n}")
    for v in value:
        if v is not None and not _is_number(v, inf=inf):
            raise BadInput(f"{what} holds something other than numbers")
    return value


_STATS_COLUMNS = tuple((s, f"stats_{s}") for s in STATS)


def _row(columns: list[str], values) -> Row:
    """One row of a result file (BadInput saying which column fails; the caller names the row)."""
    if type(values) is not list or len(values) > len(columns):
        raise BadInput(f"is not a list of at most {len(columns)} columns")
    got = dict(zip(columns, values))
    params = _param_lists(got.get("params") or [], "params")
    n = _cases(params)
    result = _numbers(got.get("result"), "result", n)
    version = got.get("version")
    if version is not None:
        version = _text(str(version) if _is_number(version) else version, "version")
    stats = {s: _numbers(got.get(column), column, n, inf=True) for s, column in _STATS_COLUMNS}
    samples = got.get("samples")
    if samples is not None:
        if type(samples) is not list or len(samples) != n:
            raise BadInput(f"samples is not a list of {n}")
        for one in samples:
            if one is not None and not (type(one) is list and all(map(_is_number, one))):
                raise BadInput("samples hold something other than lists of numbers")
    return Row(result, params, version, stats, samples)


def _fields(value, what: str, key: re.Pattern, prefix: str = "") -> dict:
    """params or env_vars: at most MAX_FIELDS keys of `key`'s form, values short plain text
    (None kept: asv reads it as ''), `<prefix><key>-<value>` fit for one asv graph file name."""
    if not isinstance(value, dict):
        raise BadInput(f"its {what} is not an object")
    if len(value) > MAX_FIELDS:
        raise BadInput(f"its {what} has {len(value):,} keys, over the {MAX_FIELDS} allowed")
    out = {}
    for k, v in value.items():
        if not (isinstance(k, str) and len(k) <= MAX_KEY and key.fullmatch(k)):
            raise BadInput(
                f"its {what} key {trust.shown(k)} is not ASCII letters, digits and "
                f"{'_' if key is ENV_KEY else '_.+-'} of at most {MAX_KEY} characters"
            )
        if v is not None:
            _text(v, f"its {what} {k!r}")
            if len(f"{prefix}{k}-{v}".encode()) > MAX_PATH_PART:
                raise BadInput(f"its {what} {k!r} is too long for a graph file name")
        out[k] = v
    return out


def result_file(data, machine: str, where: str = "asv result file") -> ResultFile:
    """An asv result file (parsed JSON) of a record of `machine`, checked field by field:
    BadInput starting with `where`, naming the field that fails."""
    try:
        return _result_file(data, machine)
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None


def _result_file(data, machine: str) -> ResultFile:
    if not isinstance(data, dict):
        raise BadInput("is not a JSON object")
    if data.get("version") != RESULT_API:
        raise BadInput(f"is not asv's result format {RESULT_API}")
    commit = data.get("commit_hash")
    if not (isinstance(commit, str) and COMMIT.fullmatch(commit)):
        raise BadInput(f"its commit_hash {trust.shown(commit)} is not a hex commit")
    date = data.get("date")
    if not (_is_number(date, nan=False) and 0 <= date <= MAX_TIMESTAMP):
        raise BadInput("its date is not a time in milliseconds")
    env_name = _text(data.get("env_name"), "its env_name", limit=trust.MAX_NAME)
    python = _text(data.get("python"), "its python")
    params = _fields(data.get("params"), "params", KEY)
    if params.get("machine") != machine:
        raise BadInput(
            f"its params name machine {trust.shown(params.get('machine'))}, its record "
            f"{trust.shown(machine)}"
        )
    env_vars = _fields(data.get("env_vars") or {}, "env_vars", ENV_KEY, prefix="env-")
    columns = data.get("result_columns")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise BadInput("its result_columns are not a list of names")
    unknown = [c for c in columns if c not in COLUMNS and c not in _DROPPED_COLUMNS]
    if unknown and not all(c.startswith("stats_") for c in unknown):
        raise BadInput(f"its result_columns name {trust.shown(unknown[0])}, not asv's")
    results = data.get("results")
    if not isinstance(results, dict):
        raise BadInput("its results are not an object")
    rows = {}
    for name, values in results.items():
        try:
            rows[name] = _row(columns, values)
        except BadInput as exc:
            raise BadInput(f"its row {trust.shown(name)} {exc}") from None
    return ResultFile(commit, env_name, date, python, params, env_vars, rows)
