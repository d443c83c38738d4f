"""`harness bisect GOOD BAD`: the search (with fake commits), classifying a commit by its rows,
bad input, and end to end on a scratch repository whose canary gains an op in one commit."""

from __future__ import annotations

import json
import math
import pathlib
import random
import subprocess
import sys

import pytest

from harness.cli import main
from harness.core import records
from harness.runs import bisect
from harness.runs.bisect import BAD, GOOD, SKIP, UNKNOWN
from harness.verdict import compare

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ---- the search, with fake commits ----


def fake(n: int, culprit: int, odd: dict[int, str] | None = None):
    """n commits c0..c{n-1} (the last is BAD); commits from `culprit` on are bad; `odd` maps
    an index to skip or unknown. Returns (commits, classify, asked)."""
    commits = [f"c{i}" for i in range(n)]
    asked: list[str] = []

    def classify(c: str) -> str:
        asked.append(c)
        i = int(c[1:])
        if odd and i in odd:
            return odd[i]
        return BAD if i >= culprit else GOOD

    return commits, classify, asked


@pytest.mark.parametrize("n", [1, 2, 3, 5, 15, 16, 33])
def test_the_culprit_is_named_within_a_binary_search_s_steps(n):
    for culprit in range(n):
        commits, classify, asked = fake(n, culprit)
        found = bisect.search(commits, classify)
        assert found.first_bad == f"c{culprit}" and found.range == [f"c{culprit}"]
        assert found.stopped == bisect.FOUND
        assert len(asked) <= bisect.most_steps(n) <= math.ceil(math.log2(n + 1)) + 1, (
            culprit,
            asked,
        )
        assert commits[-1] not in asked, "BAD is known bad: never measured as a step"
        assert len(set(asked)) == len(asked), "no commit is measured twice"


def test_sixteen_commits_take_at_most_ceil_log2_16_plus_one_steps():
    # GOOD is the first of 16 commits, so the search runs over the 15 after it
    worst = max(len(_asked(15, c)) for c in range(15))
    assert worst <= math.ceil(math.log2(16)) + 1
    assert bisect.most_steps(15) == 4


def _asked(n, culprit):
    commits, classify, asked = fake(n, culprit)
    bisect.search(commits, classify)
    return asked


def test_a_skipped_neighbour_gives_the_right_answer_or_the_two_commit_range():
    for culprit in range(1, 10):
        for broken in (culprit - 1, culprit + 1):
            if not 0 <= broken < 9:  # BAD itself (index 9) is known bad, never skipped
                continue
            commits, classify, asked = fake(10, culprit, {broken: SKIP})
            found = bisect.search(commits, classify)
            if found.first_bad is not None:
                assert found.first_bad == f"c{culprit}"
            else:
                assert found.stopped == bisect.HIDDEN
                assert sorted(found.range) == sorted([f"c{culprit}", f"c{broken}"])


def test_skips_that_hide_the_answer_leave_the_range_between_last_good_and_first_bad():
    commits, classify, asked = fake(8, 4, {2: SKIP, 3: UNKNOWN, 4: SKIP})
    found = bisect.search(commits, classify)
    assert found.first_bad is None and found.stopped == bisect.HIDDEN
    assert found.range == ["c2", "c3", "c4", "c5"]  # c1 good, c5 bad
    assert ("c1", GOOD) in found.measured and ("c5", BAD) in found.measured


def test_unknown_commits_never_yield_a_wrong_commit():
    rng = random.Random(29)
    for _ in range(400):
        n = rng.randint(1, 20)
        culprit = rng.randrange(n)
        odd = {i: rng.choice((SKIP, UNKNOWN)) for i in range(n - 1) if rng.random() < 0.35}
        commits, classify, _ = fake(n, culprit, odd)
        found = bisect.search(commits, classify)
        assert f"c{culprit}" in found.range, (n, culprit, odd, found)
        if found.first_bad is not None:
            assert found.first_bad == f"c{culprit}"
        else:
            assert len(found.range) > 1


def test_an_exhausted_budget_reports_the_narrowed_range():
    commits, classify, asked = fake(16, 11)
    ticks = iter([False, False, True])
    found = bisect.search(commits, classify, out_of_time=lambda: next(ticks))
    assert found.stopped == bisect.BUDGET and found.first_bad is None
    assert len(asked) == 2 and "c11" in found.range
    assert len(found.range) < len(commits) / 2  # narrowed by the two steps


def test_a_classification_outside_the_four_is_an_error():
    with pytest.raises(ValueError, match="maybe"):
        bisect.search(["a", "b", "c"], lambda c: "maybe")


# ---- a commit classified by its rows against GOOD's ----


def row(name, verdict, unit="ops", note=""):
    return compare.Row(name, unit, 10, 11, 1.1, verdict, note)


def test_rows_classify_a_commit_in_the_direction_the_ends_moved():
    decide = bisect.decisive(
        [row("s.A.ops", compare.REGRESSION), row("s.A.time", compare.OK, "seconds")]
    )
    assert decide == {"s.A.ops": bisect.WORSE}
    c = bisect.classify_rows
    assert c([row("s.A.ops", compare.OK)], decide)[0] == GOOD
    assert c([row("s.A.ops", compare.REGRESSION)], decide)[0] == BAD
    assert c([row("s.A.ops", compare.IMPROVED)], decide)[0] == UNKNOWN  # moved the other way
    assert c([row("s.A.ops", compare.UNKNOWN, "seconds")], decide)[0] == UNKNOWN
    assert c([row("s.A.ops", compare.CHANGED)], decide)[0] == UNKNOWN
    assert c([row("s.A.ops", compare.FAILED)], decide)[0] == SKIP
    assert c([], decide) == (SKIP, "A.ops missing")
    # two deciding rows: one bad is enough (the commit holds a change); one failed is a skip
    both = {"s.A.ops": bisect.WORSE, "s.B.ops": bisect.WORSE}
    assert c([row("s.A.ops", compare.OK), row("s.B.ops", compare.REGRESSION)], both)[0] == BAD
    assert c([row("s.A.ops", compare.OK), row("s.B.ops", compare.FAILED)], both)[0] == SKIP
    assert c([row("s.A.ops", compare.OK), row("s.B.ops", compare.OK)], both)[0] == GOOD


def test_timing_rows_are_checked_against_both_ends():
    # BAD's raw time is twice GOOD's: the boundary is their geometric midpoint, 1.41
    T, P = "c.C.track_time", "c.C.track_time_over_reference"
    decide, levels = {T: bisect.WORSE}, {T: 2.0}

    def c(verdict, bounds, unit="seconds"):
        return bisect.classify_rows([row(T, verdict, unit)], decide, levels, {T: bounds})[0]

    assert c(compare.OK, (0.99, 1.01)) == GOOD
    assert c(compare.REGRESSION, (1.6, 2.5)) == BAD
    assert c(compare.REGRESSION, (1.18, 3.9)) == UNKNOWN  # straddles the midpoint
    assert c(compare.UNKNOWN, (0.99, 1.01)) == UNKNOWN  # ab's UNKNOWN stays unknown
    # ab's false DIFFERENT on identical code (seen on the loaded VM) is not the ends' change
    assert c(compare.IMPROVED, (0.68, 0.94)) == GOOD
    assert c(compare.REGRESSION, (1.02, 1.08)) == GOOD
    # an improvement between the ends: mirrored
    better = {T: bisect.BETTER}
    rows = [row(T, compare.IMPROVED, "seconds")]
    assert bisect.classify_rows(rows, better, {T: 0.5}, {T: (0.45, 0.55)})[0] == BAD
    assert bisect.classify_rows(rows, better, {T: 0.5}, {T: (0.9, 1.1)})[0] == GOOD
    # two timing rows that disagree leave the commit unknown, never bad
    two = {T: bisect.WORSE, P: bisect.WORSE}
    rows = [row(T, compare.REGRESSION, "seconds"), row(P, compare.OK, "ratio")]
    both = bisect.classify_rows(rows, two, {T: 2.0, P: 2.0}, {T: (1.8, 2.2)})
    assert both[0] == UNKNOWN and both[1].startswith("rows disagree")
    # an exact counter that moved decides: the commit holds the change
    mixed = {"c.C.track_ops": bisect.WORSE, T: bisect.WORSE}
    rows = [row("c.C.track_ops", compare.REGRESSION), row(T, compare.OK, "seconds")]
    assert bisect.classify_rows(rows, mixed, {T: 2.0}, {T: (0.95, 1.05)})[0] == BAD


def test_counters_and_instruction_counts_take_one_process_timing_rows_take_pairs():
    assert bisect.one_process_decides("ops") and bisect.one_process_decides("instructions")
    for unit in ("seconds", "ratio", "relative", "bytes"):
        assert not bisect.one_process_decides(unit), unit


# ---- bad input ----


def test_bad_revisions_are_bad_input(capsys, tmp_path, in_history):
    args = ["--suite", "canary", "--bench", "track_ops", "--results-dir", str(tmp_path)]
    assert main(["bisect", "no-such-rev", "HEAD", *args]) == 3
    assert "GOOD 'no-such-rev' is not a commit" in capsys.readouterr().err
    assert main(["bisect", "HEAD", "HEAD~2", *args]) == 3
    assert "is not an ancestor of BAD" in capsys.readouterr().err
    assert main(["bisect", "HEAD", "HEAD", *args]) == 3
    assert "the same commit" in capsys.readouterr().err
    assert main(["bisect", sys.executable, "HEAD", *args]) == 3  # an interpreter has no commits
    assert "compare two interpreters with `harness ab`" in capsys.readouterr().err
    assert main(["bisect", "HEAD~1", "HEAD", "--suite", "canary"]) == 3  # --bench is required
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_a_bench_regex_matching_nothing_is_bad_input_naming_what_it_could_match(
    capsys, tmp_path, in_history
):
    code = main(
        ["bisect", "HEAD~1", "HEAD", "--suite", "canary", "--bench", "NoSuchRow"]
        + ["--results-dir", str(tmp_path)]
    )
    assert code == 3
    assert "canary.Canary.track_ops" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


# ---- end to end: a scratch repository ----

EXTRA_OP = "    y = y.sqrt()  # bisect test: the regression\n"
BREAK = "    raise RuntimeError('bisect test: a broken commit')\n"
CHAIN_RETURN = "    if extra:\n"


@pytest.fixture
def scratch_repo(checkout_clone):
    """make(path, n, culprit, broken=None): a clone of this checkout with n commits on top of
    its HEAD (the first of them GOOD): commit `culprit` appends an op to the canary's chain;
    commit `broken` (before the culprit) makes the chain raise, and the culprit repairs it.
    Returns the n shas."""

    def make(path: pathlib.Path, n: int, culprit: int, broken: int | None = None) -> list[str]:
        def git(*args):
            return subprocess.run(
                ["git", *args], cwd=path, check=True, capture_output=True, text=True
            ).stdout.strip()

        checkout_clone(path)
        canary = path / "suites" / "benchmarks" / "canary.py"
        clean = canary.read_text()
        assert clean.count(CHAIN_RETURN) == 1
        shas = []
        for i in range(n):
            if i == culprit:
                canary.write_text(clean.replace(CHAIN_RETURN, EXTRA_OP + CHAIN_RETURN))
            elif i == broken:
                canary.write_text(clean.replace(CHAIN_RETURN, BREAK + CHAIN_RETURN))
            (path / "bisect-scratch.txt").write_text(f"{i}\n")
            git("add", "-A")
            message = f"scratch commit {i}" + (" adds an op" if i == culprit else "")
            git("commit", "-q", "-m", message)
            shas.append(git("rev-parse", "HEAD"))
        return shas

    return make


def in_repo(monkeypatch, repo):
    """Work in the scratch repository; --project sets the checkout for the whole process, so
    the setting is put back after the test."""
    from harness.core import settings

    monkeypatch.chdir(repo)
    monkeypatch.setenv(settings.PROJECT.name, str(repo))


def bisect_cli(repo, root, shas, tmp_path, capsys):
    out = tmp_path / "bisect.json"
    code = main(
        ["bisect", shas[0], shas[-1], "--suite", "canary", "--bench", "track_ops"]
        + ["--project", str(repo), "--results-dir", str(root), "--machine", "bisect-cpu"]
        + ["--json", str(out), "--markdown", str(tmp_path / "bisect.md")]
    )
    return code, capsys.readouterr(), json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.xdist_group("bisect-canary")
def test_bisect_names_the_commit_that_added_an_op_and_resumes(
    tmp_path, capsys, monkeypatch, scratch_repo
):
    repo, root = tmp_path / "repo", tmp_path / "results"
    shas = scratch_repo(repo, 6, culprit=3)
    in_repo(monkeypatch, repo)
    code, captured, data = bisect_cli(repo, root, shas, tmp_path, capsys)
    assert code == 0, captured.out + captured.err
    line = next(x for x in captured.out.splitlines() if x.startswith("first bad commit:"))
    assert shas[3][:12] in line and "adds an op" in line
    assert data["first_bad"]["commit"] == shas[3] and data["range"] == [shas[3]]
    assert data["first_bad"]["parent"]["commit"] == shas[2]
    (ops,) = data["first_bad"]["rows"]
    assert (ops["name"], ops["base"], ops["head"]) == ("canary.Canary.track_ops", 10, 11)
    assert any("aten::sqrt +1" in x for x in data["first_bad"]["explanation"])
    assert data["first_bad"]["environment"]["torch"]
    measured = [m["commit"] for m in data["measured"]]
    assert len(measured) <= math.ceil(math.log2(6)) + 1
    assert not set(measured) & {shas[0], shas[-1]}
    assert "first bad commit:" in (tmp_path / "bisect.md").read_text()
    # every measured commit is a run record labelled with the bisect
    label = f"bisect.{shas[0][:8]}.{shas[-1][:8]}"
    kept = records.list_runs(root, "bisect-cpu")
    assert {r.commit for r in kept} == {shas[0], shas[-1], *measured}
    assert all(r.label == label and r.meta["bisect"]["good"] == shas[0] for r in kept)
    # no worktree is left behind
    trees = subprocess.run(
        ["git", "worktree", "list"], cwd=repo, capture_output=True, text=True
    ).stdout
    assert len(trees.splitlines()) == 1
    # a rerun measures nothing again: every record is found and reused
    code, captured, again = bisect_cli(repo, root, shas, tmp_path, capsys)
    assert code == 0 and again["first_bad"]["commit"] == shas[3]
    assert all(m["reused"] for m in again["measured"]) and again["ends"]["reused"]
    assert len(records.list_runs(root, "bisect-cpu")) == len(kept)
    # the records are ordinary runs: history reads every one of them
    hist = tmp_path / "history.json"
    main(["history", "--results-dir", str(root), "--machine", "bisect-cpu", "--json", str(hist)])
    assert json.loads(hist.read_text())["machines"][0]["runs"] == len(kept)


@pytest.mark.slow
@pytest.mark.xdist_group("bisect-canary")
def test_a_broken_commit_next_to_the_culprit_gives_it_or_the_two_commit_range(
    tmp_path, capsys, monkeypatch, scratch_repo
):
    repo, root = tmp_path / "repo", tmp_path / "results"
    shas = scratch_repo(repo, 6, culprit=3, broken=2)
    in_repo(monkeypatch, repo)
    code, captured, data = bisect_cli(repo, root, shas, tmp_path, capsys)
    verdicts = {m["commit"]: m["verdict"] for m in data["measured"]}
    assert verdicts.get(shas[2]) in (None, SKIP), verdicts  # never guessed good or bad
    if data["first_bad"] is not None:
        assert code == 0 and data["first_bad"]["commit"] == shas[3]
    else:
        assert code == 6, captured.out + captured.err
        assert sorted(data["range"]) == sorted([shas[2], shas[3]])
        assert shas[2][:12] in captured.out and shas[3][:12] in captured.out


# ---- the whole bisect with a fake measurer: what each outcome of the ends and steps means ----


class FakeBisect:
    """Stands in for bisect.Bisect: the ends' rows and each commit's verdict are given."""

    ends_rows: list = []
    verdicts: dict = {}

    def __init__(
        self, project, root, good, bad, spec, *, pairs, budget_s=None, log=print, started=None
    ):
        self.good, self.bad, self.spec, self.root, self.pairs = good, bad, spec, root, pairs
        self.paired = False
        self.ends_ = None

    def ends(self):
        self.ends_ = bisect.Ends(
            None, None, self.ends_rows, bisect.decisive(self.ends_rows), False, 0
        )
        return self.ends_

    def classify(self, commit):
        return bisect.Step(commit, self.verdicts.get(commit, GOOD), "fake", None, None)

    def out_of_time(self):
        return False

    def spent(self):
        return 1.0


def fake_run(monkeypatch, history, ends_rows, verdicts=None):
    from harness.runs.spec import RunSpec

    shas = history.shas
    monkeypatch.setattr(FakeBisect, "ends_rows", ends_rows)
    monkeypatch.setattr(FakeBisect, "verdicts", verdicts or {})
    monkeypatch.setattr(bisect, "Bisect", FakeBisect)
    monkeypatch.setattr(bisect, "_explained", lambda project, b, commits, found, steps: {})
    result = bisect.run(
        history.path,
        history.path / "results",
        shas[0],
        shas[-1],
        RunSpec(machine="m", suites=("canary",), benches=("track_ops",)),
        pairs=bisect.ab.Pairs(),
        log=lambda msg: None,
    )
    return shas, result


def test_ends_that_do_not_differ_are_exit_0_and_said_so(monkeypatch, history):
    _, r = fake_run(monkeypatch, history, [row("c.C.track_ops", compare.OK)])
    assert r.code == 0 and "no difference between GOOD and BAD" in r.message
    assert r.steps == [] and r.first_bad is None
    assert bisect.as_json(r)["first_bad"] is None and bisect.as_json(r)["range"] == []


def test_ends_left_unknown_are_exit_6_with_the_whole_range(monkeypatch, history):
    shas, r = fake_run(monkeypatch, history, [row("c.C.track_time", compare.UNKNOWN, "seconds")])
    assert r.code == 6 and "UNKNOWN" in r.message
    assert [d["commit"] for d in r.range] == shas[1:]


def test_a_selection_failing_at_an_end_is_bad_input(monkeypatch, history):
    from harness.core.exits import BadInput

    with pytest.raises(BadInput, match="must run at both ends"):
        fake_run(monkeypatch, history, [row("c.C.track_ops", compare.FAILED)])


def test_a_found_commit_is_exit_0_an_unknown_neighbour_leaves_a_range_exit_6(monkeypatch, history):
    ends = [row("c.C.track_ops", compare.REGRESSION)]
    shas, r = fake_run(monkeypatch, history, ends, {})  # every commit before BAD is good
    assert r.code == 0 and r.message.startswith(f"first bad commit: {shas[-1]}")
    assert bisect.as_json(r)["range"] == [shas[-1]]
    shas, r = fake_run(monkeypatch, history, ends, {shas[2]: UNKNOWN})
    assert r.code == 6 and r.first_bad is None
    assert bisect.as_json(r)["range"] == shas[2:] and bisect.as_json(r)["first_bad"] is None
    assert shas[2][:12] in bisect.render(r) and "hide the first bad one" in bisect.render(r)


def test_nightly_hints_say_when_both_nights_ran_one_commit(tmp_path):
    import types

    from harness.runs import nightly
    from tests.test_history import OPS, write_runs

    root = tmp_path / "results"
    write_runs(root, [{OPS: 10}] * 2)
    runs = records.list_runs(root, "m1-cpu")
    step = types.SimpleNamespace(benchmark=OPS, last_before=runs[0].run_id, run_id=runs[0].run_id)
    (line,) = nightly.bisect_hints(root, "m1-cpu", [step])
    assert "both nights ran commit" in line and "harness bisect" not in line
    step.run_id = runs[1].run_id
    (line,) = nightly.bisect_hints(root, "m1-cpu", [step])
    assert line.startswith(f"to find the commit: harness bisect {runs[0].commit} {runs[1].commit}")


# ---- records of a bisect: found again by its key; a commit that cannot be measured is skipped ----


def test_a_rerun_finds_the_bisect_s_records_and_skips_what_cannot_be_measured(
    tmp_path, monkeypatch
):
    from harness.core.exits import RunnerFailed
    from harness.runs import ab
    from harness.runs.spec import RunSpec
    from tests.test_gate_support import write_set

    good, bad, mid, other = "a" * 40, "b" * 40, "c" * 40, "d" * 40
    spec = RunSpec(machine="m1-cpu", suites=("canary",), benches=("track_ops",))
    b = bisect.Bisect(ROOT, tmp_path, good, bad, spec, pairs=ab.Pairs(), log=lambda m: None)

    def record(commit, ops, role, key=None, against=None, base_run=None):
        run_id = records.new_run_id(commit, b.label)
        meta = {"commit": commit, "bisect": {**(key or b.key), "role": role, "against": against}}
        with records.writing(tmp_path, "m1-cpu", run_id, meta) as staging:
            write_set(staging / "asv", commit, {"canary.Canary.track_ops": ops}, units={})
            if base_run:
                records.write_ab_pairs(staging, base_run, {}, {})
        return run_id

    g = record(good, 10, "good")
    record(bad, 11, "bad", base_run=g)
    record(mid, 11, "step", against=g)
    record(other, 10, "step", key={**b.key, "benches": ["track_time"]}, against=g)

    def no_measuring(*args, **kw):
        raise RunnerFailed("asv saved nothing (a build that breaks)")

    monkeypatch.setattr(ab, "run", no_measuring)
    ends = b.ends()
    assert ends.reused and ends.decide == {"canary.Canary.track_ops": bisect.WORSE}
    assert b.paired is False  # an exact counter decides: one process a commit
    step = b.classify(mid)
    assert (step.verdict, step.reused, step.base.run_id) == (BAD, True, g)
    # the record of `other` belongs to another selection: it is measured, which fails: skip
    step = b.classify(other)
    assert step.verdict == SKIP and step.record is None and "a build that breaks" in step.why


def test_the_budget_stops_before_a_step_that_would_overrun_it():
    from harness.runs import ab
    from harness.runs.spec import RunSpec

    now = [0.0]
    b = bisect.Bisect(
        ROOT,
        ROOT / "results",
        "a" * 40,
        "b" * 40,
        RunSpec(machine="m"),
        pairs=ab.Pairs(),
        budget_s=100,
        clock=lambda: now[0],
    )
    b.longest_s = 30.0
    now[0] = 60.0
    assert not b.out_of_time() and b.remaining() == 40.0
    now[0] = 75.0
    assert b.out_of_time() and b.remaining() == 25.0


@pytest.mark.slow
@pytest.mark.xdist_group("bisect-canary")
def test_sigterm_mid_bisect_leaves_no_worktree_and_the_rerun_resumes(
    tmp_path, short_tmp, capsys, monkeypatch, scratch_repo
):
    """As a CI timeout does: SIGTERM while a commit is being measured. Exit 143, no worktree and
    nothing new in the caller's TMPDIR; the rerun reuses the ends and the commit measured before,
    and measures only the rest."""
    import os
    import signal
    import sys
    import time

    repo, root = tmp_path / "repo", tmp_path / "results"
    shas = scratch_repo(repo, 5, culprit=2)  # steps: shas[2] (bad), then shas[1] (good)
    scratch = short_tmp  # short enough for the sockets below a run's folder in it
    argv = ["bisect", shas[0], shas[-1], "--suite", "canary", "--bench", "track_ops"]
    argv += ["--results-dir", str(root), "--machine", "bisect-cpu"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *argv],
        cwd=repo,
        env=dict(os.environ, TMPDIR=str(scratch)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def kept():
        folder = root / "runs" / "bisect-cpu"
        return (
            [p for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []
        )

    def trees():
        out = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True)
        return len(out.stdout.splitlines())

    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None:
        if len(kept()) >= 3 and trees() > 1:  # the ends and one step kept, the next being measured
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read()
    done_before = {records.load_record(p).commit for p in kept()}
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert trees() == 1, "a worktree outlived the interrupted bisect"
    assert list(scratch.iterdir()) == []  # the worktrees' and the runs' folders included
    assert len(done_before) == 3 and {shas[0], shas[-1]} < done_before

    out = tmp_path / "again.json"
    in_repo(monkeypatch, repo)
    code = main(["bisect", *argv[1:], "--project", str(repo), "--json", str(out)])
    data = json.loads(out.read_text())
    assert code == 0 and data["first_bad"]["commit"] == shas[2], capsys.readouterr()
    assert data["ends"]["reused"]
    reused = {m["commit"] for m in data["measured"] if m["reused"]}
    assert reused == done_before - {shas[0], shas[-1]}
    assert len(data["measured"]) == len(reused) + 1  # only the interrupted commit again


@pytest.mark.slow  # the second tier: over 5 s of the default tier's 3-minute budget under load
def test_suites_the_selection_matches_nothing_of_are_left_out(
    monkeypatch, tmp_path, capsys, in_history
):
    # every commit would otherwise pay one asv process per such suite only to find nothing
    seen = {}

    def fake(project, root, good, bad, spec, **kw):
        seen["suites"] = spec.suites
        r = bisect.Result(0, {"commit": good}, {"commit": bad}, 1, None, [], None, "no difference")
        return r

    monkeypatch.setattr(bisect, "run", fake)
    argv = ["bisect", "HEAD~1", "HEAD", "--suite", "canary", "--suite", "transfer"]
    argv += ["--bench", r"^canary\.Canary\.track_ops$", "--results-dir", str(tmp_path)]
    assert main(argv) == 0
    assert seen["suites"] == ("canary",)
