"""Commands that pull go on (docs/trust.md, "Commands that pull, and rendering"): with one
hostile record in the results history beside good ones, `nightly`, `history`, `report`, `noise`
and `gate` with `--pull` use the records they could pull, name the refused one in one line on
stderr and in their --json and --markdown outputs, and exit with their own result;
`harness store pull` itself still exits 3. A history git cannot reach leaves each of them
working on the records already here (said in one line), except the gate's BASE and HEAD, which
must be the history's (exit 5)."""

from __future__ import annotations

import json

import pytest
from render_support import markdown_problems, terminal_problems
from store_support import (
    MACHINE,
    bare_repo,
    folder_tree,
    graft,
    harness,
    spec_tree,
    url,
    write_record,
)

from harness.core import records, settings

# the refused record's line, as the store says it (harness.core.store)
REFUSED = "in the history holds an entry named '..'"


# the tests over `fleet` share one worker, so the history it makes is made once
pytestmark = [
    pytest.mark.xdist_group("pull-goes-on"),
    pytest.mark.usefixtures("light_git_spawns", "own_store_settings"),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A history of 8 good records of MACHINE (an exact counter: 10 in the first 4, 11 in the
    last 4, a step) and one hostile record among them (a folder named '..' in it); returns
    (the remote's URL, the good records, the hostile one)."""
    tmp = tmp_path_factory.mktemp("fleet")
    bare = bare_repo(tmp / "history.git")
    made = tmp / "made" / "results"
    good = [write_record(made, i, ops=10 if i <= 4 else 11) for i in range(1, 9)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(settings.PROJECT.name, "")
        code, _, err = harness("store", "push", "--remote", url(bare), "--results-dir", str(made))
    assert code == 0, err
    bad = write_record(tmp / "bad" / "results", 5, ops=10, run_id=None, label="x")
    tree = folder_tree(bare, bad.path, extra=[("040000", "..", spec_tree(bare, {"x": b"x"}))])
    graft(bare, (["runs", MACHINE, bad.run_id], "040000", tree))
    return url(bare), good, bad


def _said_once(err: str, command: str, bad) -> str:
    """The one summary line naming the refused record."""
    lines = [line for line in err.split("\n") if "the pull refused" in line]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"harness {command}: went on without 1 item(s) the pull refused")
    assert f"{MACHINE}/{bad.run_id} {REFUSED}" in lines[0]
    return lines[0]


def _pulled_here(root, good) -> None:
    assert {r.run_id for r in records.list_runs(root, MACHINE)} == {r.run_id for r in good}


@pytest.mark.slow  # the second tier: ~5 s of the default tier's budget under load
def test_store_pull_itself_still_exits_3(fleet, tmp_path):
    remote, good, bad = fleet
    root = tmp_path / "results"
    code, out, err = harness(
        "store", "pull", "--remote", remote, "--results-dir", str(root), "--machine", MACHINE
    )
    assert code == 3 and "pulled 8 run(s)" in out and f"{MACHINE}/{bad.run_id} {REFUSED}" in err
    _pulled_here(root, good)


def test_history_pull_goes_on_and_names_the_refused_record(fleet, tmp_path, monkeypatch):
    remote, good, bad = fleet
    monkeypatch.setenv(settings.STORE_REMOTE.name, remote)
    root = tmp_path / "results"
    js, md = tmp_path / "h.json", tmp_path / "h.md"
    code, out, err = harness(
        "history", "--pull", "--results-dir", str(root), "--machine", MACHINE,
        "--json", str(js), "--markdown", str(md),
    )  # fmt: skip
    assert code == 1, err  # its own result: the counter's step is new
    _said_once(err, "history", bad)
    _pulled_here(root, good)
    assert "canary.Canary.track_ops" in out and "1 new step(s)" in out
    data = json.loads(js.read_text())
    assert data["exit_code"] == 1 and len(data["pull"]["refused"]) == 1
    assert f"{MACHINE}/{bad.run_id} {REFUSED}" in data["pull"]["refused"][0]
    assert data["pull"]["failed"] is None and len(data["pull"]["runs"]) == 8
    text = md.read_text()
    assert text.startswith("**The pull refused 1 item(s)**; this goes on without them: ")
    assert bad.run_id in text.split("\n")[0] and not markdown_problems(text)
    assert not terminal_problems(out + err)


@pytest.mark.slow  # the second tier: ~6 s of the default tier's budget under load
def test_noise_pull_goes_on(fleet, tmp_path, monkeypatch):
    remote, good, bad = fleet
    monkeypatch.setenv(settings.STORE_REMOTE.name, remote)
    root = tmp_path / "results"
    js, md = tmp_path / "n.json", tmp_path / "n.md"
    code, out, err = harness(
        "noise", "--pull", "--results-dir", str(root), "--machine", MACHINE,
        "--json", str(js), "--markdown", str(md),
    )  # fmt: skip
    assert code == 0, err
    _said_once(err, "noise", bad)
    _pulled_here(root, good)
    assert "noise between runs: 8 clean fast run(s) of m1-cpu" in out
    assert f"{MACHINE}/{bad.run_id} {REFUSED}" in json.loads(js.read_text())["pull"]["refused"][0]
    text = md.read_text()
    assert text.startswith("**The pull refused 1 item(s)**") and bad.run_id in text
    assert not markdown_problems(text)


def test_report_pull_goes_on(fleet, tmp_path, monkeypatch):
    remote, good, bad = fleet
    monkeypatch.setenv(settings.STORE_REMOTE.name, remote)
    root = tmp_path / "results"
    code, out, err = harness(
        "report", "--pull", "--results-dir", str(root), "--machine", MACHINE,
        "--out", str(tmp_path / "report"),
    )  # fmt: skip
    assert code == 0, err
    _said_once(err, "report", bad)
    _pulled_here(root, good)
    text = (tmp_path / "report" / "report.md").read_text()
    assert good[-1].commit[:8] in text.split("\n")[0], "the newest good run is reported"
    assert "**The pull refused 1 item(s)**" in text and bad.run_id in text
    assert not markdown_problems(text)


def test_nightly_pull_goes_on_to_its_own_result(fleet, tmp_path, monkeypatch):
    from harness.runs import nightly

    remote, good, bad = fleet
    monkeypatch.setenv(settings.STORE_REMOTE.name, remote)
    monkeypatch.setattr(nightly, "publish", lambda root, html_dir: 0)
    monkeypatch.setattr(nightly, "vendor_dashboard", lambda html: [])
    root = tmp_path / "results"
    steps = tmp_path / "steps.md"
    code, out, err = harness(
        "nightly", "--pull", "--skip-bench", "--results-dir", str(root), "--machine", MACHINE,
        "--steps-markdown", str(steps),
    )  # fmt: skip
    # its own result: the history's new step (1); a refusal alone would have been exit 3
    assert code == 1, err
    _said_once(err, "nightly", bad)
    _pulled_here(root, good)
    assert "dashboard published" in out
    text = steps.read_text()
    assert text.startswith("**The pull refused 1 item(s)**") and bad.run_id in text
    assert not markdown_problems(text)


@pytest.mark.slow  # the second tier: ~4 s of the default tier's budget under load
def test_gate_pull_goes_on_without_a_refused_record_of_the_noise(fleet, tmp_path, monkeypatch):
    remote, good, bad = fleet
    monkeypatch.setenv(settings.STORE_REMOTE.name, remote)
    root = tmp_path / "results"
    write_record(root, 20, ops=11)  # this pull request's run: the newest here
    js, md = tmp_path / "g.json", tmp_path / "g.md"
    code, out, err = harness(
        "gate", good[-1].run_id, "latest", "--pull", "--results-dir", str(root),
        "--machine", MACHINE, "--json", str(js), "--markdown", str(md),
    )  # fmt: skip
    assert code == 0, err  # the same counter on both sides: a pass, not 3
    _said_once(err, "gate", bad)
    here = {r.run_id for r in records.list_runs(root, MACHINE)}
    assert {r.run_id for r in good} <= here and bad.run_id not in here
    assert "noise between runs learned from 7 clean fast run(s)" in out  # the base aside
    data = json.loads(js.read_text())
    assert data["exit"] == 0 and bad.run_id in data["pull"]["refused"][0]
    text = md.read_text()
    assert text.startswith("**The pull refused 1 item(s)**") and not markdown_problems(text)


def test_gate_pull_of_a_refused_base_is_bad_input_naming_why(fleet, tmp_path, monkeypatch):
    remote, good, bad = fleet
    monkeypatch.setenv(settings.STORE_REMOTE.name, remote)
    root = tmp_path / "results"
    write_record(root, 20, ops=11)
    code, out, err = harness(
        "gate", bad.run_id, "latest", "--pull", "--results-dir", str(root),
        "--machine", MACHINE, "--no-history-noise",
    )  # fmt: skip
    assert code == 3
    assert f"gate --pull {bad.run_id}: the history's record was refused" in err
    assert REFUSED in err.split("error:")[1]
    assert not (records.runs_dir(root) / MACHINE / bad.run_id).exists()


def test_a_history_git_cannot_reach_leaves_the_records_here(tmp_path, monkeypatch):
    """git fails (exit 5 for `store pull`): a --pull command says so in one line and works on
    the local records, exit its own result; the gate's BASE named by run id is 5."""
    monkeypatch.setenv(settings.STORE_REMOTE.name, url(tmp_path / "nowhere.git"))
    root = tmp_path / "results"
    mine = [write_record(root, i, ops=10) for i in range(1, 4)]
    js = tmp_path / "h.json"
    code, out, err = harness(
        "history", "--pull", "--results-dir", str(root), "--machine", MACHINE, "--json", str(js)
    )
    assert code == 0, err
    (line,) = [x for x in err.split("\n") if "failed" in x]
    assert line.startswith(
        "harness history: the pull from the results history failed, so this works on the "
        "records already here only: git could not fetch"
    )
    assert "history: m1-cpu, 3 runs" in out
    assert json.loads(js.read_text())["pull"]["failed"].startswith("git could not fetch")
    code, _, err = harness(
        "gate", mine[0].run_id, mine[-1].run_id, "--pull", "--results-dir", str(root),
        "--machine", MACHINE,
    )  # fmt: skip
    assert code == 5 and "git could not fetch" in err
