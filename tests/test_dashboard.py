"""The dashboard from checked shapes only (harness.core.dashboard, records.rebuild_view): every
file `asv publish` reads is written from fields the harness checked; a record with a hostile
result file or machine.json is left out with one line and the view is built from the others;
a benchmark with a hostile name or field is left out alone. The slow tier publishes with
`harness nightly` and opens the pages in headless Chromium (tests/test_nightly.py's machinery).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from test_gate_support import write_set

from harness.core import dashboard, records
from harness.core.exits import BadInput

GOOD = "fusion.Chain.track_ratio"
OTHER = "fusion.Chain.track_ops"
UNITS = {GOOD: "ratio", OTHER: "ops"}
# what asv's page would run if it reached the page: it marks the body with the field's name
PAYLOAD = "<img src=x onerror=\"document.body.setAttribute('data-pwned','{}')\">"
HOSTILE_NAME = "fusion.Chain.track_x" + PAYLOAD.format("benchmark-name")
ASV_NAME = re.compile(r"[0-9a-f]{8}-.*\.json")


def payload(field: str) -> str:
    return PAYLOAD.format(field)


def make_record(
    root: pathlib.Path,
    machine: str,
    commit: str,
    values: dict,
    *,
    at: int = 0,
    date: int = 1,
    edit=None,
    second=None,
    machine_json: str | None = None,
    hostile_name: bool = False,
) -> pathlib.Path:
    """One run record of `machine` holding one asv result file (write_set); `edit(data)` changes
    its parsed JSON, `second(data)` makes a second result file from a copy, `machine_json`
    replaces asv's machine.json, `hostile_name` adds a benchmark named with markup."""
    now = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
    run_id = records.new_run_id(commit, None, now + datetime.timedelta(minutes=at))
    with records.writing(root, machine, run_id, {"commit": commit, "machine": machine}) as d:
        benches = dict(values)
        if hostile_name:
            benches[HOSTILE_NAME] = 1.0
        result = write_set(d / "asv", commit, benches, machine=machine, date=date, units=UNITS)
        data = json.loads(result.read_text())
        if second:
            other = json.loads(json.dumps(data))
            second(other)
            (result.parent / f"{commit[:8]}-second.json").write_text(json.dumps(other))
        if edit:
            edit(data)
        result.write_text(json.dumps(data))
        if machine_json is not None:
            (d / "asv" / machine / "machine.json").write_text(machine_json)
    return d.parent / run_id


def _set(path: tuple, value):
    def edit(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


# hostile case -> (what make_record gets, a word the left-out line holds)
CASES = {
    "params key": (
        {"second": lambda d: d["params"].__setitem__(payload("params-key"), "1")},
        "params key",
    ),
    "params value": ({"edit": _set(("params", "cpu"), payload("params-value"))}, "params 'cpu'"),
    "env_vars key": ({"edit": _set(("env_vars",), {payload("env-key"): "1"})}, "env_vars key"),
    "env_vars value": (
        {"edit": _set(("env_vars",), {"OMP_NUM_THREADS": payload("env-value")})},
        "env_vars 'OMP_NUM_THREADS'",
    ),
    "machine.json not an object": ({"machine_json": "[1, 2]"}, "not a JSON object"),
    "machine.json with markup": (
        {"machine_json": json.dumps({"machine": "bad-cpu", "cpu": payload("machine-cpu")})},
        "its cpu",
    ),
    "machine.json oversize": (
        {"machine_json": json.dumps({"machine": "bad-cpu", "cpu": "x" * 20_000})},
        "bytes, over the 16,384 allowed",
    ),
    "machine.json long field": (
        {"machine_json": json.dumps({"machine": "bad-cpu", "os": "x" * 500})},
        "over the 120 allowed",
    ),
    "machine.json of another machine": (
        {"machine_json": json.dumps({"machine": "good-cpu"})},
        "names machine 'good-cpu'",
    ),
    "commit not hex": ({"edit": _set(("commit_hash",), payload("commit"))}, "commit_hash"),
    "date not a number": ({"edit": _set(("date",), payload("date"))}, "its date"),
    "result not a number": (
        {"edit": lambda d: d["results"][GOOD].__setitem__(0, [payload("result")])},
        "result holds something other than numbers",
    ),
    "row params not lists of text": (
        {"edit": lambda d: d["results"][GOOD].__setitem__(1, [[{"a": 1}]])},
        "params value is not text",
    ),
    "unknown column": (
        {"edit": lambda d: d["result_columns"].__setitem__(0, payload("column"))},
        "result_columns",
    ),
    "params naming another machine": (
        {"edit": _set(("params", "machine"), "good-cpu")},
        "params name machine 'good-cpu'",
    ),
}


def _view_files(folder: pathlib.Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_record_is_left_out_of_the_view_with_a_line(tmp_path, capsys, case):
    """The good record is written (to the view and the dashboard's copy), the hostile one is
    named on one line with the field that failed, and no byte of its payload is written."""
    root, copy = tmp_path / "results", tmp_path / "copy"
    kw, why = CASES[case]
    make_record(root, "good-cpu", "a" * 40, {GOOD: 1.0, OTHER: 3}, at=0)
    bad = make_record(root, "bad-cpu", "b" * 40, {GOOD: 2.0}, at=1, **kw)
    records.rebuild_view(root, copy_to=copy)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "left out" in line]
    assert len(lines) == 1 and bad.name in lines[0] and why in lines[0], err
    assert lines[0].endswith("not in the asv view or the dashboard")
    shown = _view_files(copy)
    assert sorted(shown) == sorted(
        ["benchmarks.json", "good-cpu/machine.json", shown_result(shown)]
    )
    assert not (root / "asv" / "bad-cpu").exists()
    assert "pwned" not in "".join(shown.values()) + "".join(_view_files(root / "asv").values())
    assert GOOD in json.loads(shown["benchmarks.json"])
    assert _view_files(root / "asv").keys() - {".harness-view.json"} == shown.keys()


def shown_result(files: dict) -> str:
    (name,) = [n for n in files if ASV_NAME.fullmatch(n.split("/")[-1])]
    return name


def test_what_the_view_writes_is_asvs_format_from_checked_fields(tmp_path):
    """A view result file loads in asv as its record's does, less what the pages never read
    (profiles, durations, start times, requirements); machine.json holds asv's fields only."""
    from asv.results import Results

    root, copy = tmp_path / "results", tmp_path / "copy"
    rec = make_record(
        root,
        "good-cpu",
        "a" * 40,
        {GOOD: [0.9, 1.0, 1.1], OTHER: 3},
        machine_json=json.dumps(
            {"machine": "good-cpu", "cpu": "Xeon(R) @ 2.2GHz", "num_cpu": 2, "extra": "<b>"}
        ),
        edit=_set(("env_vars",), {"OMP_NUM_THREADS": "1"}),
    )
    records.rebuild_view(root, copy_to=copy)
    (src,) = records.load_record(rec).result_files()
    view = copy / "good-cpu" / src.name
    mine, theirs = Results.load(str(view)), Results.load(str(src))
    assert mine.params == theirs.params and mine.env_vars == {"OMP_NUM_THREADS": "1"}
    for key in (GOOD, OTHER):
        assert mine.get_result_value(key, []) == theirs.get_result_value(key, [])
        assert mine.get_result_stats(key, []) == theirs.get_result_stats(key, [])
        assert mine.get_result_samples(key, []) == theirs.get_result_samples(key, [])
    machine = json.loads((copy / "good-cpu" / "machine.json").read_text())
    assert machine == {
        "machine": "good-cpu",
        "cpu": "Xeon(R) @ 2.2GHz",
        "num_cpu": "2",
        "version": 1,
    }
    assert (root / "asv" / "good-cpu" / src.name).read_bytes() == view.read_bytes()


def test_a_hostile_benchmark_is_left_out_alone(tmp_path, capsys):
    """A benchmark named with markup (or whose shown fields hold it) goes off the dashboard,
    one line naming it; its record's other benchmarks and rows stay."""
    root, copy = tmp_path / "results", tmp_path / "copy"
    make_record(root, "good-cpu", "a" * 40, {GOOD: 1.0}, hostile_name=True)
    records.rebuild_view(root, copy_to=copy)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 benchmark(s) left out of the dashboard" in err
    shown = _view_files(copy)
    assert "pwned" not in "".join(shown.values())
    result = json.loads(shown[shown_result(shown)])
    assert list(result["results"]) == [GOOD], "the hostile row is not written either"
    (run,) = records.list_runs(root)
    assert HOSTILE_NAME in json.loads((run.asv_dir / "benchmarks.json").read_text()), "unchanged"


def test_a_newer_hostile_record_does_not_hide_the_good_one(tmp_path, capsys):
    """The view is built as if the left-out record were not there: the older good run of the
    same machine, commit and environment is shown, the hostile newer one named."""
    root, copy = tmp_path / "results", tmp_path / "copy"
    make_record(root, "m-cpu", "a" * 40, {GOOD: 1.0}, at=0)
    bad = make_record(
        root, "m-cpu", "a" * 40, {GOOD: 9.0}, at=1, edit=_set(("params", "cpu"), "<b>")
    )
    records.rebuild_view(root, copy_to=copy)
    assert bad.name in capsys.readouterr().err
    shown = _view_files(copy)
    assert json.loads(shown[shown_result(shown)])["results"][GOOD][0] == [1.0]


def test_a_view_file_whose_state_was_not_written_is_not_imported_again(tmp_path):
    """A rebuild interrupted after writing a file but before its state: the file names the
    record file it was made from, so the next rebuild does not take it for a foreign result."""
    root = tmp_path / "results"
    make_record(root, "m-cpu", "a" * 40, {GOOD: 1.0})
    records.rebuild_view(root)
    (root / "asv" / records.VIEW_MANIFEST).unlink()
    view_file = next((root / "asv" / "m-cpu").glob("aaaaaaaa-*.json"))
    view_file.write_bytes(view_file.read_bytes())
    assert records.foreign_files(root) == []
    records.rebuild_view(root)
    assert len(records.list_runs(root)) == 1
    state = json.loads((root / "asv" / records.VIEW_MANIFEST).read_text())
    assert state["files"][f"m-cpu/{view_file.name}"]["adopted"] is False, "known as its own"
    # a file of the old layout (no such mark) is still foreign: imported, never dropped
    (root / "asv" / "m-cpu" / "bbbbbbbb-x.json").write_text(
        view_file.read_text().replace("a" * 40, "b" * 40).rsplit(', "harness_', 1)[0] + "}"
    )
    assert [f.name for f, _, _ in records.foreign_files(root)] == ["bbbbbbbb-x.json"]


def test_files_put_into_the_view_by_others_never_reach_the_dashboard(tmp_path, capsys):
    """The view never deletes a file it did not write (an old-layout result, a machine.json):
    such a file is imported as a record and checked like any record, and the dashboard's copy
    holds only what the rebuild wrote. A machine.json that is not an object in the view made
    `asv publish` raise for everyone."""
    root, copy = tmp_path / "results", tmp_path / "copy"
    make_record(root, "good-cpu", "a" * 40, {GOOD: 1.0})
    evil = root / "asv" / "evil-cpu"
    write_set(root / "asv", "c" * 40, {GOOD: 1.0}, machine="evil-cpu")
    (evil / "machine.json").write_text("[1, 2]")
    result = next(evil.glob("cccccccc-*.json"))
    data = json.loads(result.read_text())
    data["params"][payload("view")] = "1"
    result.write_text(json.dumps(data))
    records.rebuild_view(root, copy_to=copy)
    err = capsys.readouterr().err
    (imported,) = records.list_runs(root, "evil-cpu")
    assert f"left out '{imported.path}'" in err and "not a JSON object" in err
    assert sorted(p.relative_to(copy).parts[0] for p in copy.rglob("*.json")) == [
        "benchmarks.json",
        "good-cpu",
        "good-cpu",
    ]
    assert (evil / "machine.json").read_text() == "[1, 2]", "not deleted, not rewritten"
    assert "pwned" in result.read_text() and "pwned" not in "".join(_view_files(copy).values())


def test_a_forged_view_file_is_not_published(tmp_path):
    """A file in the view that claims to be made from a record's file (the view's own mark)
    is not imported, and not published either: the dashboard reads only what the rebuild wrote."""
    root, copy = tmp_path / "results", tmp_path / "copy"
    make_record(root, "good-cpu", "a" * 40, {GOOD: 1.0})
    records.rebuild_view(root)
    (made,) = (root / "asv" / "good-cpu").glob("aaaaaaaa-*.json")
    forged = json.loads(made.read_text())
    forged["params"][payload("forged")] = "1"
    (made.parent / "aaaaaaaa-forged.json").write_text(json.dumps(forged))
    assert records.foreign_files(root) == [], "it names a source a record holds"
    records.rebuild_view(root, copy_to=copy)
    assert sorted(_view_files(copy)) == sorted(
        ["benchmarks.json", "good-cpu/machine.json", f"good-cpu/{made.name}"]
    )
    assert "pwned" not in "".join(_view_files(copy).values())


# ---- the checks one by one ----


def _entry(name, **more):
    return {"name": name, "code": "def f(): return a < b", "params": [], "param_names": [], **more}


def test_the_dashboard_leaves_out_benchmarks_that_could_be_markup(capsys):
    data = {
        "version": 2,
        "fusion.A.track_x": _entry("fusion.A.track_x", timeout=60, unit="s"),
        "fusion.A.track_p": _entry(
            "fusion.A.track_p", params=[["'a'", '"b"']], param_names=["size"]
        ),
        "t.<script>alert(1)</script>": _entry("t.<script>alert(1)</script>"),
        "t.x\n::error::y": _entry("t.x\n::error::y"),
        "t.quote": _entry("t.quote", pretty_name='a" onmouseover="alert(1)'),
        "t.param": _entry("t.param", params=[["<img src=x onerror=alert(1)>"]]),
        "t.pname": _entry("t.pname", params=[["1"]], param_names=["<b>"]),
        "t.shape": _entry("t.shape", params=[["1"]], param_names=[]),
        "t.many": _entry("t.many", params=[list("0123456789")] * 5, param_names=list("abcde")),
        "t.other": _entry("t.wrong"),
        "t.long": _entry("t.long", unit="`x`"),
    }
    kept = dashboard.benchmarks(data)
    assert sorted(kept) == ["fusion.A.track_p", "fusion.A.track_x", "version"]
    assert kept["fusion.A.track_x"] == {
        "name": "fusion.A.track_x",
        "code": "def f(): return a &lt; b",
        "params": [],
        "param_names": [],
        "unit": "s",
    }, "a whitelist of fields: timeout is not written"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "9 benchmark(s) left out of the dashboard" in err
    assert "<script>" in err and "t.x\\n::error::y" in err, "named, escaped for the terminal"


def test_machine_json_keeps_asvs_fields_as_plain_text():
    got = json.loads(
        dashboard.machine_json(
            json.dumps({"machine": "vm-cpu", "cpu": "EPYC", "num_cpu": 8, "x y": "z"}).encode(),
            "vm-cpu",
        )
    )
    assert got == {"machine": "vm-cpu", "cpu": "EPYC", "num_cpu": "8", "version": 1}
    assert json.loads(dashboard.machine_json(None, "vm-cpu")) == {"machine": "vm-cpu", "version": 1}


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"[1, 2]", "not a JSON object"),
        (b'"x"', "not a JSON object"),
        (b"{", "does not parse"),
        (b"\xff", "not UTF-8"),
        (json.dumps({"machine": "vm-cpu", "cpu": "<img src=x>"}).encode(), "holds < >"),
        (json.dumps({"machine": "vm-cpu", "os": "a\u202eb"}).encode(), "control character"),
        (json.dumps({"machine": "vm-cpu", "ram": ["1"]}).encode(), "its ram is not text"),
        (json.dumps({"machine": "other"}).encode(), "names machine 'other'"),
        (json.dumps({"machine": "vm-cpu", "cpu": "x" * 121}).encode(), "over the 120 allowed"),
        (b" " * 20_000 + b"{}", "bytes, over the 16,384 allowed"),
        (b"[" * 100 + b"]" * 100, "nests deeper"),
    ],
)
def test_machine_json_that_fails_is_refused_naming_why(data, why):
    with pytest.raises(BadInput, match=re.escape(why)) as info:
        dashboard.machine_json(data, "vm-cpu", "asv/vm-cpu/machine.json")
    assert str(info.value).startswith("asv/vm-cpu/machine.json: ")


def _result(**more) -> dict:
    data = {
        "commit_hash": "a" * 40,
        "env_name": "existing-py_venv",
        "date": 1,
        "params": {"machine": "m", "python": "3.11", "cpu": None},
        "python": "3.11",
        "requirements": {},
        "env_vars": {},
        "result_columns": ["result", "params", "version", "started_at", "stats_ci_99_a"],
        "results": {"a.b": [[1.0, float("nan"), None], [["1", "'x'", "3"]], "v", 1, [0, 1, 2]]},
        "version": 2,
    }
    data.update(more)
    return data


def test_a_result_file_keeps_what_the_pages_read():
    got = dashboard.result_file(_result(), "m")
    assert got.params == {"machine": "m", "python": "3.11", "cpu": None}
    row = got.rows["a.b"]
    assert row.params == (("1", "'x'", "3"),) and row.stats["ci_99_a"] == [0, 1, 2]
    written = json.loads(got.to_json("f" * 64))
    result, params, version, ci_99_a, *_ = written["results"]["a.b"]
    assert result[0] == 1.0 and result[1] != result[1] and result[2] is None, "NaN stays NaN"
    assert (params, version, ci_99_a) == ([["1", "'x'", "3"]], "v", [0, 1, 2])
    assert "started_at" not in written["result_columns"] and written["version"] == 2
    assert written["harness_source_sha256"] == "f" * 64
    hostile = _result(results={"a.b": [[1.0]], "a.<b>": [[1.0]], "a": [[2.0]]})
    written = json.loads(dashboard.result_file(hostile, "m").to_json("f" * 64))
    assert list(written["results"]) == ["a.b"], "rows only of names a benchmark may have"


@pytest.mark.parametrize(
    ("more", "why"),
    [
        ({"params": {"machine": "m", "<b>": "1"}}, "params key '<b>'"),
        ({"params": {"machine": "m", "a b": "1"}}, "params key 'a b'"),
        ({"params": {"machine": "m", "k" * 65: "1"}}, "at most 64 characters"),
        ({"params": {"machine": "m", "cpu": "a&b"}}, "holds &"),
        ({"params": {"machine": "m", "cpu": "it's"}}, "holds '"),
        ({"params": {"machine": "m", "cpu": 3}}, "params 'cpu' is not text"),
        ({"params": {"machine": "m", "cpu": "x" * 121}}, "over the 120 allowed"),
        ({"params": {"machine": "m", **{f"k{i}": "1" for i in range(64)}}}, "over the 64"),
        ({"params": {"machine": "other"}}, "params name machine 'other'"),
        ({"params": []}, "params is not an object"),
        ({"env_vars": {"A-B": "1"}}, "env_vars key 'A-B'"),
        ({"env_vars": {"A": "<script>"}}, "env_vars 'A'"),
        ({"env_vars": {"A": "x\ny"}}, "control character"),
        ({"commit_hash": "../x"}, "commit_hash"),
        ({"date": "<b>"}, "its date"),
        ({"date": 1e300}, "its date"),
        ({"env_name": "<b>"}, "env_name"),
        ({"python": ["3"]}, "python is not text"),
        ({"version": 1}, "result format 2"),
        ({"result_columns": ["result", "<b>"]}, "result_columns name '<b>'"),
        ({"results": []}, "results are not an object"),
        ({"results": {"a.b": [["x"], []]}}, "result holds something other than numbers"),
        ({"results": {"a.b": [[1.0, 2.0], []]}}, "result is not a list of 1"),
        ({"results": {"a.b": [[1.0], [], None, None, [float("inf")]]}}, None),
        ({"results": {"a.b": [[float("inf")], []]}}, "other than numbers"),
        ({"results": {"a.b": [[1.0], [["<b>"]]]}}, "params value '<b>'"),
        ({"results": {"a.b": [[1.0], [[1]]]}}, "params value is not text"),
        ({"results": {"a.b": [[1.0], [], "<v>"]}}, "version '<v>'"),
        ({"results": {"a.b": [[1.0], [], None, None, ["x"]]}}, "stats_ci_99_a"),
        ({"results": {"a.b": "x"}}, "not a list of at most"),
        ({"results": {"a.b": [[1.0], [list("0123456789")] * 5]}}, "over 10,000 combinations"),
    ],
)
def test_a_result_file_field_that_fails_is_refused_naming_it(more, why):
    if why is None:  # infinite statistics are asv's own (too few samples): kept
        dashboard.result_file(_result(**more), "m")
        return
    with pytest.raises(BadInput, match=re.escape(why)) as info:
        dashboard.result_file(_result(**more), "m", "asv/m/x.json")
    assert str(info.value).startswith("asv/m/x.json: ")


def test_result_samples_are_lists_of_numbers():
    columns = ["result", "params", "samples"]
    ok = _result(result_columns=columns, results={"a.b": [[1.0], [], [[1.0, 2.0]]]})
    assert dashboard.result_file(ok, "m").rows["a.b"].samples == [[1.0, 2.0]]
    bad = _result(result_columns=columns, results={"a.b": [[1.0], [], [["<b>"]]]})
    with pytest.raises(BadInput, match="samples"):
        dashboard.result_file(bad, "m")


# ---- end to end: `harness nightly` publishes, headless Chromium opens the pages ----


def _publish_raw(project: pathlib.Path, results: pathlib.Path, html: pathlib.Path) -> None:
    """asv publish of `results` as it is (no harness checks): the control that shows the
    payloads run on this Chromium when nothing stops them."""
    from harness.runs import asv, nightly

    with asv.config(project, results, html_dir=html, publish=True) as config:
        proc = subprocess.run(
            asv.publish_command(config),
            env=asv.environment(),
            capture_output=True,
            text=True,
            cwd=project,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    nightly.vendor_dashboard(html)


# one record per hostile field, each on a machine of its own, all on the newest commit
PAGE_CASES = {
    "params-key": {"second": lambda d: d["params"].__setitem__(payload("params-key"), "1")},
    "params-value": {"edit": _set(("params", "cpu"), payload("params-value"))},
    "env-key": {"edit": _set(("env_vars",), {payload("env-key"): "1"})},
    "env-value": {"edit": _set(("env_vars",), {"OMP_NUM_THREADS": payload("env-value")})},
    "machine-markup": {"machine_json": {"cpu": payload("machine-markup")}},
    "machine-not-object": {"machine_json": [1, 2]},
}
PAGES = {"summary grid": "", "summary list": "#summarylist", "graph": f"#{GOOD}"}


def _page_records(root: pathlib.Path, shas: list[str], cases: list[str]) -> dict[str, pathlib.Path]:
    """Good runs of `good-cpu` over `shas` (GOOD doubles halfway: a regression for the
    regressions page), a benchmark named with markup in the newest, and one record per case."""
    for i, sha in enumerate(shas):
        values = {GOOD: 1.0 if i < len(shas) // 2 else 2.0, OTHER: 3}
        make_record(
            root, "good-cpu", sha, values, at=i, date=i + 1, hostile_name=i == len(shas) - 1
        )
    bad = {}
    for n, case in enumerate(cases):
        kw = dict(PAGE_CASES[case])
        machine = f"bad-{case}"
        if "machine_json" in kw:
            mj = kw["machine_json"]
            kw["machine_json"] = json.dumps(
                {"machine": machine, **mj} if isinstance(mj, dict) else mj
            )
        bad[case] = make_record(root, machine, shas[-1], {GOOD: 5.0}, at=10 + n, date=9, **kw)
    return bad


@pytest.fixture(scope="module")
def hostile_dashboard(tmp_path_factory, history):
    """`harness nightly --skip-bench` over good records and one hostile record per field."""
    from harness.core import settings

    root = tmp_path_factory.mktemp("hostile") / "results"
    bad = _page_records(root, history.shas, list(PAGE_CASES))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(settings.PROJECT.name, str(history.path))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "nightly",
                "--skip-bench",
                "--results-dir",
                str(root),
                "--machine",
                "good-cpu",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ),
        )
    return root, bad, proc


@pytest.mark.slow
@pytest.mark.xdist_group("dashboard-pages")  # one worker builds the fixture for both
def test_nightly_publishes_for_the_good_records_whatever_one_record_holds(hostile_dashboard):
    """A machine.json that is not an object made `asv publish` raise (nightly exit 5, no
    dashboard for anyone): now each hostile record is named on a line, the others published."""
    root, bad, proc = hostile_dashboard
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    index = json.loads((root / "html" / "index.json").read_text())
    assert index["params"]["machine"] == ["good-cpu"]
    assert set(index["benchmarks"]) == {GOOD, OTHER}
    for case, path in bad.items():
        assert f"left out '{path}'" in proc.stderr, case
    assert "1 benchmark(s) left out of the dashboard" in proc.stderr
    regressions = json.loads((root / "html" / "regressions.json").read_text())["regressions"]
    assert [r[0] for r in regressions] == [GOOD], "the regressions page has a row to render"
    published = "".join(p.read_text() for p in (root / "html").rglob("*.json"))
    assert "pwned" not in published + (root / "html" / "regressions.xml").read_text()


def _pages(html: pathlib.Path, pages: dict[str, str]) -> dict[str, str]:
    """Each page's DOM after its scripts ran, served over HTTP (test_nightly's Chromium)."""
    from test_nightly import _dump_dom, _serve

    if not (html / "vendor" / "jquery-3.3.1.min.js").exists():
        pytest.skip(
            "dashboard scripts not vendored: apt-get install -y libjs-jquery libjs-jquery-flot "
            "libjs-bootstrap libjs-jquery-stupidtable"
        )
    server = _serve(html)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        return {page: _dump_dom(base + where) for page, where in pages.items()}
    finally:
        server.shutdown()


@pytest.mark.skipif(
    shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
    reason="headless Chromium not installed (Debian: apt-get install -y chromium; .ci/run "
    "installs it)",
)
@pytest.mark.slow
@pytest.mark.xdist_group("dashboard-pages")
def test_no_payload_runs_on_any_page_in_headless_chromium(hostile_dashboard, history, tmp_path):
    """The summary grid and list, a graph and the regressions page render the good records and
    run no payload (each would mark the body with its field's name). The control: the same
    params-key record published by asv as it is runs its payload on this Chromium."""
    root, bad, proc = hostile_dashboard
    assert proc.returncode == 0, proc.stderr[-2000:]
    doms = _pages(root / "html", {**PAGES, "regressions": "#regressions"})
    for page, dom in doms.items():
        assert "Can not determine continental origin" not in dom, f"{page}: scripts did not load"
        assert "data-pwned" not in dom, f"{page}: a payload ran"
    assert "Chain.track_ratio" in doms["summary grid"] and OTHER in doms["summary list"]
    assert '<canvas class="flot-base"' in doms["graph"], "no graph drawn"
    assert f">{GOOD}<" in doms["regressions"], "the regression is listed"
    # the control: asv publish of the raw files (one good run, the params-key record)
    raw = tmp_path / "raw"
    for rec in (next(iter(records.list_runs(root, "good-cpu"))).path, bad["params-key"]):
        shutil.copytree(rec / "asv", raw, dirs_exist_ok=True)
    _publish_raw(history.path, raw, tmp_path / "html")
    control = _pages(tmp_path / "html", {"summary list": "#summarylist", "graph": f"#{GOOD}"})
    for page, dom in control.items():
        assert 'data-pwned="params-key"' in dom, f"{page}: the control's payload did not run"
