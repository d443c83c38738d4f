"""The answer check of torch.compile pairs and of a project's own pairs: the compiled side is a
copy of one starting state, a compiled forward that takes another path is WRONG, a failed compile
is fail_to_run, `register_model(compile=...)`, which models a project's quick run compiles, the
public names (harness.answers) and the example `harness init` writes. Fast tests use dynamo's
"eager" backend (dynamo traces, nothing goes to inductor); the proof in a project of its own,
with inductor, is the slow test at the end."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from harness.cli import main
from harness.core import answerfacts, exits, records, settings, zoo
from harness.core.answerfacts import EXACT, FAIL_TO_RUN, NOT_APPLICABLE, SAME, WRONG
from harness.measure import answers, rowfacts, timing
from harness.measure.workloads import NotApplicable
from harness.measure.workloads import models as wl

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
ROW = "models.CompiledOverEager.track_compiled_over_eager('{}')"


@pytest.fixture
def eager_backend(monkeypatch):
    monkeypatch.setattr(wl, "BACKEND", "eager")
    yield
    import torch._dynamo

    torch._dynamo.reset()


class ResidualMLP(nn.Module):
    """Four residual blocks; under torch.compile a hand-written "fast path" skips the last one
    (libraries write such paths with torch.compiler.is_compiling())."""

    def __init__(self, width: int, num_classes: int, skip_when_compiled: bool = True):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(4)
        )
        self.head = nn.Linear(width, num_classes)
        self.skip = skip_when_compiled

    def forward(self, x):
        blocks = self.blocks
        if self.skip and torch.compiler.is_compiling():
            blocks = blocks[:3]
        for block in blocks:
            x = x + block(x)
        return self.head(x)


def _register(name: str, skip: bool = True, **kw):
    return zoo.register_model(
        name,
        build=lambda cfg: ResidualMLP(cfg["width"], cfg["num_classes"], skip),
        inputs=lambda cfg, gen: (torch.randn(cfg["batch"], cfg["width"], generator=gen),),
        small={"batch": 4, "width": 16, "num_classes": 10},
        full={"batch": 8, "width": 32, "num_classes": 10},
        kind="mlp",
        **kw,
    )


def _check(new, reference):
    answer, error = answers.check(answers.declared(new, reference), new, reference)
    assert error is None
    return answer


def _storage(module: nn.Module) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in [*module.parameters(), *module.buffers()]}


@pytest.mark.parametrize("build", [wl.build_compiled_pair, wl.build_compiled_training_pair])
def test_the_compiled_side_is_a_copy_of_one_starting_state(build, eager_backend):
    compiled, eager = build("mlp", CPU)
    inner = compiled.model._orig_mod  # torch.compile's wrapper around the compiled side's copy
    assert not _storage(inner) & _storage(eager.model)
    ours, theirs = inner.state_dict(), eager.model.state_dict()
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)  # one starting state


def test_a_compiled_forward_that_takes_another_path_is_wrong(eager_backend, clean_registry):
    _register("fastpath")
    answer = _check(*wl.build_compiled_pair("fastpath", CPU))
    assert answer.status == WRONG and answer.output == "output"
    assert "RMSE against float64" in answer.reason  # judged by the float64 rule, not allclose
    assert answer.fp64_error > 10 * answer.fp64_error_reference
    assert answer.value > 1 and answer.what == wl.INFERENCE_WHAT
    _register("plain", skip=False)
    clean = _check(*wl.build_compiled_pair("plain", CPU))
    assert clean.status == SAME and clean.value <= 1


def test_the_training_step_pair_compares_loss_gradients_and_parameters(
    eager_backend, clean_registry
):
    clean = _check(*wl.build_compiled_training_pair("mlp", CPU))  # dropout and batch norm
    params = len(list(zoo.get_model("mlp").build().parameters()))
    assert clean.status == SAME and clean.outputs == 1 + 2 * params
    assert "bernoulli" in _pair_what("mlp")  # the dropout it draws is named
    _register("fastpath")
    wrong = _check(*wl.build_compiled_training_pair("fastpath", CPU))
    # the skipped block's parameters get no gradient on the compiled side: named
    assert wrong.status == WRONG and "grad blocks.3.0.weight" in wrong.reason, wrong.reason


def _pair_what(model: str) -> str:
    new, reference = wl.build_compiled_training_pair(model, CPU)
    return answers.declared(new, reference).what


def test_a_failed_compile_is_fail_to_run_with_the_error(tmp_path, monkeypatch):
    def no_compiler(gm, example_inputs):
        raise RuntimeError("no C++ compiler: install g++")

    monkeypatch.setattr(wl, "BACKEND", no_compiler)
    monkeypatch.setenv(settings.RUN_RECORD.name, str(tmp_path))
    compiled, eager = wl.build_compiled_pair("mlp", CPU)
    row = ROW.format("mlp")
    with pytest.raises(Exception, match="no C\\+\\+ compiler"):  # the row fails
        timing.measure_paired(compiled, eager, samples=2, warmup=1, answer=None)
    facts = records.read_row_facts(tmp_path)  # and its answer row says why: never a skip
    assert not facts  # outside asv there is no row name: nothing is written
    with pytest.raises(Exception, match="no C\\+\\+ compiler"):
        answers.before_timing(compiled, eager, "cpu", row=row)
    stored = records.read_row_facts(tmp_path)[answerfacts.answer_row(row)]["answer"]
    assert stored["status"] == FAIL_TO_RUN, stored
    # dynamo's "backend=... raised:" line and the error it announces
    assert "raised: RuntimeError: no C++ compiler: install g++" in stored["reason"], stored
    import torch._dynamo

    torch._dynamo.reset()


def test_register_model_compile_option(clean_registry):
    assert zoo.get_model("mlp").compile is True  # every model is compiled by default
    assert _register("later", compile="full").compile_opt_out() == ""
    why = "data-dependent shapes: dynamo recompiles every call"
    assert _register("never", compile=why).compile_opt_out() == why
    for bad in (False, "", "  ", 1):
        with pytest.raises(ValueError, match="compile= is True"):
            _register("bad", compile=bad)


def test_a_model_that_opts_out_is_na_with_its_reason(tmp_path, monkeypatch, clean_registry):
    why = "data-dependent shapes: dynamo recompiles every call"
    _register("never", compile=why)
    monkeypatch.setenv(settings.RUN_RECORD.name, str(tmp_path))
    monkeypatch.setattr(rowfacts, "current_row", lambda: ROW.format("never"))
    for build in (wl.build_compiled_pair, wl.build_compiled_training_pair):
        with pytest.raises(NotApplicable, match=why):
            build("never", CPU)
    stored = records.read_row_facts(tmp_path)[answerfacts.answer_row(ROW.format("never"))]
    assert stored["answer"]["status"] == NOT_APPLICABLE and why in stored["answer"]["reason"]


def _suite(monkeypatch, full: bool):
    monkeypatch.setenv(settings.FULL.name, "1" if full else "0")
    spec = importlib.util.spec_from_file_location(
        "_models_suite", ROOT / "suites" / "benchmarks" / "models.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TWO_MORE = """
register_model(
    "later",
    build=lambda cfg: TinyCNN(cfg["width"], cfg["num_classes"]),
    inputs=lambda cfg, gen: (torch.randn(2, 3, 8, 8, generator=gen),),
    small={"batch": 2, "width": 4, "num_classes": 10},
    full={"batch": 2, "width": 4, "num_classes": 10},
    compile="full",
)
register_model(
    "never",
    build=lambda cfg: TinyCNN(cfg["width"], cfg["num_classes"]),
    inputs=lambda cfg, gen: (torch.randn(2, 3, 8, 8, generator=gen),),
    small={"batch": 2, "width": 4, "num_classes": 10},
    full={"batch": 2, "width": 4, "num_classes": 10},
    compile="a reason of its own",
)
"""


def test_quick_runs_of_a_project_compile_every_model(tmp_path, monkeypatch, clean_registry):
    made = tmp_path / "proj"
    assert main(["init", str(made)]) == exits.PASS
    with open(made / "models.py", "a") as f:
        f.write(TWO_MORE)
    monkeypatch.setenv(settings.PROJECT.name, str(made))
    monkeypatch.setenv(settings.OWN_MODELS.name, "1")
    quick = _suite(monkeypatch, full=False)
    # compile="full" models are left out of quick runs; an opted-out one keeps its n/a row
    assert quick.CompiledOverEager.params == (["never", "tiny_cnn"],)
    assert not hasattr(quick, "CompiledTrainingStepOverEager")  # full runs only
    full = _suite(monkeypatch, full=True)
    assert full.CompiledOverEager.params == (["later", "never", "tiny_cnn"],)
    assert full.CompiledTrainingStepOverEager.params == (["later", "never", "tiny_cnn"],)
    # this repository: the word LM in quick runs, as before; every zoo model in full runs
    monkeypatch.delenv(settings.OWN_MODELS.name)
    here = _suite(monkeypatch, full=False)
    assert here.CompiledOverEager.params == (["word_lm"],)
    assert not hasattr(here, "CompiledTrainingStepOverEager")
    assert _suite(monkeypatch, full=True).CompiledTrainingStepOverEager.params[0] == (
        zoo.model_names()
    )


def test_the_public_short_forms():
    torch.manual_seed(0)
    model = nn.Linear(64, 32)
    x = torch.randn(16, 64)
    with torch.no_grad():
        w, b = model.weight.clone(), model.bias.clone()

    def by_hand():  # the same function, summed in another order: not bit-identical
        return torch.addmm(b, x, w.t()) + 0.0

    def forward():
        with torch.no_grad():
            return model(x)

    def inference_mode():
        with torch.inference_mode():
            return model(x)

    seen = []
    record = answers.record
    try:
        answers.record = lambda answer, row=None: seen.append(answer)
        from harness.answers import allclose, exact, float64_forward

        timing.measure_paired(inference_mode, forward, samples=2, warmup=1, answer=exact("same"))
        fp64 = float64_forward(model, x)
        timing.measure_paired(by_hand, forward, samples=2, warmup=1, answer=allclose("a", fp64))
        off = allclose("b", fp64)
        timing.measure_paired(lambda: by_hand() * 1.01, forward, samples=2, warmup=1, answer=off)
    finally:
        answers.record = record
    assert [a.status for a in seen] == [SAME, SAME, WRONG]
    assert seen[0].rule == EXACT and "RMSE against float64" in seen[2].reason
    assert fp64().dtype == torch.float64 and model.weight.dtype == torch.float32


def test_the_example_benchmark_declares_its_answer(tmp_path, monkeypatch, clean_registry):
    made = tmp_path / "proj"
    assert main(["init", str(made)]) == exits.PASS
    monkeypatch.syspath_prepend(str(made))
    monkeypatch.delitem(sys.modules, "models", raising=False)
    spec = importlib.util.spec_from_file_location("_example", made / "benchmarks" / "tiny_cnn.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    calls = []
    monkeypatch.setattr(
        timing, "measure_paired", lambda fn, base, *a, **kw: calls.append((fn, base, kw)) or [1.0]
    )
    bench = example.Inference()
    bench.setup()
    bench.track_inference_mode_over_no_grad()
    ((fn, base, kw),) = calls
    answer, error = answers.check(kw["answer"], fn, base)
    assert error is None and answer.status == SAME and answer.rule == EXACT
    monkeypatch.delitem(sys.modules, "models", raising=False)


# --------------------------------------------------------------------------------------------
# the proof in a project of its own (slow tier)

FASTPATH = '''

class ResidualMLP(nn.Module):
    """Four residual blocks; the compiled "fast path" skips the last one (unless the commit
    that fixed it is simulated: FASTPATH_FIXED=1)."""

    def __init__(self, width: int, num_classes: int):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(4)
        )
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        fixed = os.environ.get("FASTPATH_FIXED") == "1"
        blocks = self.blocks[:3] if torch.compiler.is_compiling() and not fixed else self.blocks
        for block in blocks:
            x = x + block(x)
        return self.head(x)


register_model(
    "fastpath",
    build=lambda cfg: ResidualMLP(cfg["width"], cfg["num_classes"]),
    inputs=lambda cfg, gen: (torch.randn(cfg["batch"], cfg["width"], generator=gen),),
    small={"batch": 4, "width": 32, "num_classes": 10},
    full={"batch": 32, "width": 256, "num_classes": 10},
    kind="mlp",
)
'''


@pytest.mark.slow  # three quick runs, each two cold inductor compiles: ~4-8 minutes on 2 cores
def test_a_projects_quick_run_records_the_wrong_compiled_answer(tmp_path):
    proj = tmp_path / "myproject"
    proj.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HARNESS_") and k not in ("CI", "PYTHONPATH")
    }
    env.update(GIT_AUTHOR_NAME="t", GIT_COMMITTER_NAME="t")
    env.update(GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_EMAIL="t@t")
    harness = str(Path(sys.executable).parent / "harness")

    def run(*cmd):
        return subprocess.run(
            cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=1200, check=False
        )

    assert run("git", "init", "-q").returncode == 0
    assert run(harness, "init").returncode == 0
    with open(proj / "models.py", "a") as f:
        f.write("\nimport os\n" + FASTPATH)  # registered the documented way
    assert run("git", "add", "-A").returncode == 0
    assert run("git", "commit", "-qm", "a model with a compiled fast path").returncode == 0
    ran = run(
        harness,
        *("bench", "--quick", "--machine", "e2e", "--suite", "models", "--suite", "tiny_cnn"),
        *("--bench", "CompiledOverEager", "--bench", "inference_mode_over_no_grad"),
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    (record,) = (proj / "results" / "runs" / "e2e").iterdir()
    facts = records.read_row_facts(record)

    def answer(row):
        return answerfacts.Answer.from_facts(facts[answerfacts.answer_row(row)]["answer"], row)

    wrong = answer(ROW.format("fastpath"))
    assert wrong.status == WRONG and wrong.output == "output", wrong
    assert "RMSE against float64" in wrong.reason and wrong.value > 1
    assert wrong.fp64_error > 10 * wrong.fp64_error_reference  # the error, beside eager's
    assert wrong.reproduce and (record / wrong.reproduce).is_file()
    kept = torch.load(record / wrong.reproduce, weights_only=True)
    assert set(kept["new"]) == {"output"} and kept["inputs"]  # reproducible without the harness
    clean = answer(ROW.format("tiny_cnn"))
    assert clean.status == SAME and clean.value <= 1, clean
    example = answer("tiny_cnn.Inference.track_inference_mode_over_no_grad")
    assert example.status == SAME and example.rule == EXACT
    # the timing rows are there as before: the check ran outside the samples
    for model in ("fastpath", "tiny_cnn"):
        assert ROW.format(model) in ran.stdout

    # the gate: the wrong run against a clean run of the same project exits 1, naming the
    # model, the output and the error; the single-run form too; two clean runs gate clean
    env["FASTPATH_FIXED"] = "1"
    cleans = []
    for label in ("clean1", "clean2"):
        ok = run(
            harness,
            "bench",
            "--quick",
            "--machine",
            "e2e",
            "--label",
            label,
            "--suite",
            "models",
            "--bench",
            "CompiledOverEager",
        )
        assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
        cleans.append(
            next(
                p.name
                for p in (proj / "results/runs/e2e").iterdir()
                if p.name.endswith(label) or label in p.name
            )
        )
    gate = run(harness, "gate", cleans[0], record.name, "--bench", "CompiledOverEager")
    text = gate.stdout + gate.stderr
    assert gate.returncode == exits.REGRESSION, text[-4000:]
    line = next(x for x in text.splitlines() if "answer_compiled_over_eager('fastpath')" in x)
    assert "WRONG" in line and "output" in line and "RMSE" in line, line
    assert "answer_compiled_over_eager('tiny_cnn')" in text
    single = run(harness, "answers", record.name)
    assert single.returncode == exits.REGRESSION, single.stdout[-3000:] + single.stderr[-2000:]
    assert "fastpath" in single.stdout and "WRONG" in single.stdout
    same = run(harness, "gate", cleans[0], cleans[1], "--bench", "answer_")
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-2000:]
    assert run(harness, "answers", cleans[1]).returncode == 0
