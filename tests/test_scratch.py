"""The run's scratch folders (harness.runs.scratch): one folder per run in the caller's TMPDIR,
handed to the run's processes as their TMPDIR and compile caches, removed at the end whatever
ended the run; a shared compile cache stays."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

from harness.core import processes, settings
from harness.core.exits import BadInput
from harness.runs import scratch as scratch_module
from harness.runs.scratch import RunScratch


@pytest.fixture
def caller_tmp(short_tmp, tmp_path, monkeypatch):
    # this test's own TMPDIR (tempfile caches the folder it chose: set that too); tmp_path is
    # made before, in pytest's own folder
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    return short_tmp


def test_one_folder_per_run_holds_every_scratch_folder_and_goes_at_the_end(caller_tmp):
    with RunScratch() as one, RunScratch() as two:
        assert one.root != two.root
        root = one.root
        assert root.parent == caller_tmp and two.root.parent == caller_tmp
        assert root.name.startswith("harness-run-")
        env = one.environment()
        assert env["TMPDIR"] == env["TEMP"] == env["TMP"] == str(root / "tmp")
        assert env["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor")
        assert env["TRITON_CACHE_DIR"] == str(root / "triton")
        assert env[settings.SCRATCH_DIR.name] == str(root / "harness")
        assert all(os.path.isdir(v) for v in env.values())
        assert one.folder("benchmarks") == root / "benchmarks" and (root / "benchmarks").is_dir()
        with pytest.raises(ValueError, match="fixed folders"):
            one.folder("tmp")
    assert list(caller_tmp.iterdir()) == []
    with pytest.raises(RuntimeError, match="outside its `with` block"):
        one.environment()


def test_what_a_child_process_writes_to_its_temporary_folder_lands_in_the_run_s(caller_tmp):
    with RunScratch() as run:
        made = subprocess.run(
            [sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp(prefix='asv-'))"],
            env={**os.environ, **run.environment()},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert os.path.dirname(made) == str(run.tmp)
        assert [p.name for p in caller_tmp.iterdir()] == [run.root.name]
    assert list(caller_tmp.iterdir()) == []


def test_removed_when_the_run_fails_or_sigterm_lands_in_the_removal(caller_tmp, monkeypatch):
    with pytest.raises(RuntimeError, match="asv failed"), RunScratch() as run:
        (run.tmp / "asv-forkserver-x").mkdir()  # what asv leaves when its grace runs out
        raise RuntimeError("asv failed")
    assert list(caller_tmp.iterdir()) == []

    real = scratch_module.shutil.rmtree
    calls = []

    def rmtree(path, **kw):
        calls.append(path)
        if len(calls) == 1:
            raise processes.Terminated  # SIGTERM landing in the cleanup: it is run again
        real(path, **kw)

    monkeypatch.setattr(scratch_module.shutil, "rmtree", rmtree)
    with pytest.raises(processes.Terminated), RunScratch() as run:
        (run.inductor / "kernel.so").write_text("x")
    assert len(calls) == 2 and list(caller_tmp.iterdir()) == []


def test_a_shared_compile_cache_is_used_and_kept(caller_tmp, tmp_path):
    shared = tmp_path / "shared-cache"
    with RunScratch(shared_cache=shared) as run:
        env = run.environment()
        assert env["TORCHINDUCTOR_CACHE_DIR"] == str(shared / "inductor")
        assert env["TRITON_CACHE_DIR"] == str(shared / "triton")
        assert env["TMPDIR"] == str(run.root / "tmp")  # the rest stays the run's own
        (shared / "inductor" / "kernel.so").write_text("x")
    assert list(caller_tmp.iterdir()) == []
    assert (shared / "inductor" / "kernel.so").is_file()


def test_a_tmpdir_too_long_for_a_socket_below_the_run_s_tmp_sends_the_run_to_a_short_one(
    tmp_path, monkeypatch
):
    # asv's forkserver socket: <run>/tmp/asv-forkserver-XXXXXXXX/socket, at most 107 characters
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert scratch_module.parent_folder() == pathlib.Path(scratch_module.SHORT_TEMP[0])
    with RunScratch() as run:
        socket = run.tmp / "asv-forkserver-abcdefgh" / "socket"
        assert len(str(socket)) <= scratch_module.SUN_PATH_MAX
    assert list(deep.iterdir()) == []
    monkeypatch.setattr(scratch_module, "SHORT_TEMP", (str(tmp_path / "missing"),))
    with pytest.raises(BadInput, match="set TMPDIR to a folder of at most 42 characters"):
        RunScratch().__enter__()
