"""A year of nights in a results history, measured (docs/measurements.md, "The results history
in git"): copies of one real run record (each with a commit and run id of its own, one a day, every
measured float perturbed by N(0, 2%), its own manifest) pushed one per night by a runner that
keeps its records, to a bare repository with uploadpack.allowFilter; then the last 30 pulled
into a fresh results root, and for comparison a full mirror clone. Bytes are the pack data git
received (GIT_TRACE_PACKFILE); times are each command's wall time.

    ./dev bench --results-dir /tmp/real/results          # one real run record
    .venv/bin/python tests/measure_store_history.py /tmp/real/results/runs/MACHINE/RUN /tmp/year

Two versions of the harness under the same load (a change's cost): `--against DIR` with an
older version's `harness` package in DIR; pushes and pulls alternate between the two.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness.core import records


def copies(src: Path, dest: Path, nights: int) -> list[Path]:
    rng = random.Random(44)
    machine = src.parent.name
    old_commit = json.loads((src / records.RUN_JSON).read_text())["commit"]

    def perturb(x):
        if isinstance(x, float) and math.isfinite(x):
            return x * (1 + rng.gauss(0, 0.02))
        if isinstance(x, list):
            return [perturb(v) for v in x]
        if isinstance(x, dict):
            return {k: perturb(v) for k, v in x.items()}
        return x

    start = datetime.datetime(2025, 12, 5, 2, 17, tzinfo=datetime.timezone.utc)
    out = []
    for k in range(nights):
        commit = f"{rng.getrandbits(160):040x}"
        when = start + datetime.timedelta(days=k, seconds=rng.randint(0, 600))
        run_id = records.new_run_id(commit, "nightly", when)
        final = records.runs_dir(dest) / machine / run_id
        tmp = final.parent / f"{records.STAGING}{run_id}"
        shutil.copytree(src, tmp)
        (tmp / records.MANIFEST).unlink(missing_ok=True)
        for f in sorted(tmp.rglob("*.json")):
            rel = f.relative_to(tmp).as_posix()
            if rel == "asv/benchmarks.json" or f.name == "machine.json":
                continue  # the suite's description and the machine: the same every night
            data = json.loads(f.read_text())
            if rel == records.RUN_JSON:
                finished = when + datetime.timedelta(minutes=3)
                data.update(run_id=run_id, commit=commit, label="nightly", started=run_id[:16])
                data["finished"] = finished.isoformat(timespec="seconds")
            elif rel == records.FINGERPRINT:
                data.update(run_id=run_id, commit=commit)
            else:
                data = perturb(data)
                if rel.startswith("asv/"):
                    data["commit_hash"] = commit
                    f.unlink()
                    f = f.with_name(commit[:8] + f.name[8:])
            f.write_text(json.dumps(data, indent=1, sort_keys=True))
        log = tmp / records.ASV_LOG
        if log.is_file():
            log.write_text(log.read_text().replace(old_commit[:8], commit[:8]) + f"({run_id})\n")
        records.write_manifest(tmp, machine, run_id)
        tmp.rename(final)
        out.append(final)
    return out


def git_out(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("record", type=Path, help="a real run record folder")
    parser.add_argument("work", type=Path, help="a new folder for everything made here")
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--last", type=int, default=30)
    parser.add_argument(
        "--against",
        type=Path,
        metavar="DIR",
        help="another version of the harness (a folder holding its `harness` package, e.g. "
        "`git archive BASE harness | tar -x -C DIR`): each night's push and each pull run "
        "with both, in alternating order, each on a history and runner of its own, so that "
        "the two are timed under the same load",
    )
    parser.add_argument("--pulls", type=int, default=1, help="pulls timed per version")
    args = parser.parse_args()
    work = args.work.resolve()
    if work.exists():
        sys.exit(f"{work} exists; name a new folder")
    runs = copies(args.record.resolve(), work / "nights", args.nights)
    machine = runs[0].parent.name
    harness = str(Path(sys.executable).with_name("harness"))
    here = str(Path(__file__).resolve().parents[1])
    versions = {"this": here} | ({"against": str(args.against.resolve())} if args.against else {})

    def run(argv, code, trace=None):
        env = dict(os.environ, PYTHONPATH=code)  # that version's harness package wins
        env.update({"GIT_TRACE_PACKFILE": str(trace)} if trace else {})
        t = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work)
        if done.returncode != 0:
            sys.exit(f"{argv}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        return time.perf_counter() - t, trace.stat().st_size if trace and trace.exists() else 0

    figures = {}
    for name in versions:
        hist = work / name / "history.git"
        subprocess.run(["git", "init", "-q", "--bare", str(hist)], check=True)
        for key, value in (("uploadpack.allowFilter", "true"), ("gc.autoDetach", "false")):
            subprocess.run(["git", "-C", str(hist), "config", key, value], check=True)
        figures[name] = {"push_s": [], "pull_s": []}
    order = list(versions)
    for k, rec in enumerate(runs):
        for name in order if k % 2 == 0 else order[::-1]:
            runner = work / name / "runner" / "results"
            shutil.copytree(rec, records.runs_dir(runner) / machine / rec.name)
            url = f"file://{work / name / 'history.git'}"
            argv = [harness, "store", "push", "--remote", url, "--results-dir", str(runner)]
            figures[name]["push_s"].append(run(argv, versions[name])[0])
    for name in versions:
        subprocess.run(["git", "-C", str(work / name / "history.git"), "gc", "--quiet"], check=True)
    for k in range(args.pulls):
        for name in order if k % 2 == 0 else order[::-1]:
            pulled = work / name / f"pulled{k}" / "results"
            url = f"file://{work / name / 'history.git'}"
            pull = [harness, "store", "pull", "--remote", url, "--results-dir", str(pulled)]
            pull += ["--machine", machine, "--last", str(args.last)]
            seconds, part = run(pull, versions[name], work / name / f"pull{k}.pack")
            figures[name]["pull_s"].append(seconds)
            figures[name]["pull_bytes"] = part
            got = [r.run_id for r in records.list_runs(pulled)]
            assert got == [r.name for r in runs[-args.last :]], (
                "the pull did not bring the last runs"
            )
    out = {}
    for name in versions:
        hist, f = work / name / "history.git", figures[name]
        whole_s, whole = run(
            ["git", "clone", "-q", "--mirror", f"file://{hist}", str(work / name / "mirror.git")],
            here, work / name / "mirror.pack",
        )  # fmt: skip
        out[name] = {
            "code": versions[name],
            "nights": len(runs),
            "record_bytes_median": statistics.median(
                sum(f.stat().st_size for f in r.rglob("*") if f.is_file()) for r in runs
            ),
            "push_s_median": round(statistics.median(f["push_s"]), 3),
            "push_s_max": round(max(f["push_s"]), 2),
            "history_commits": int(git_out(hist, "rev-list", "--count", "refs/harness/results")),
            "history_bytes_after_gc": sum(
                p.stat().st_size for p in (hist / "objects").rglob("*") if p.is_file()
            ),
            "whole_history_received_bytes": whole,
            "whole_history_clone_s": round(whole_s, 2),
            f"pull_last{args.last}_received_bytes": f["pull_bytes"],
            f"pull_last{args.last}_s_median": round(statistics.median(f["pull_s"]), 3),
            f"pull_last{args.last}_s": [round(x, 2) for x in f["pull_s"]],
            "share_of_whole": round(f["pull_bytes"] / whole, 4),
        }  # fmt: skip
    if args.against:
        this, base = figures["this"], figures["against"]
        pairs = [a / b for a, b in zip(this["push_s"], base["push_s"])]
        out["this_over_against"] = {
            "push_median_ratio": round(statistics.median(pairs), 3),
            "push_medians_ratio": round(
                statistics.median(this["push_s"]) / statistics.median(base["push_s"]), 3
            ),
            "pull_medians_ratio": round(
                statistics.median(this["pull_s"]) / statistics.median(base["pull_s"]), 3
            ),
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
