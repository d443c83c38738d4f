"""`harness check`: each silent-bug check catches a deliberately broken model or dataset (and
names the cause), passes the correct one, and passes every zoo model; exit codes 0/1/3."""

from __future__ import annotations

import itertools
import json
import re
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from harness.cli import main
from harness.core import exits, user_models, zoo
from harness.core.env import fingerprint
from harness.measure import checks, datachecks

X = (torch.randn(4, 6, generator=torch.Generator().manual_seed(0)),)


def _one(findings, check):
    (found,) = [f for f in findings if f.check == check]
    return found


# ---- models: broken and correct --------------------------------------------------------------


class DropoutBug(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return F.dropout(self.fc(x), 0.5)  # training=True whatever the mode: the classic bug


class Correct(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn, self.drop = nn.Linear(6, 6), nn.BatchNorm1d(6), nn.Dropout(0.5)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.drop(self.bn(self.fc(x))))


class IgnoresTraining(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.drop = nn.Linear(6, 3), nn.Dropout(0.5)

    def forward(self, x):
        return F.dropout(self.fc(x), self.drop.p, training=False)  # the module is never used


class BatchStatsInEval(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn = nn.Linear(6, 6), nn.BatchNorm1d(6, track_running_stats=False)

    def forward(self, x):
        return self.bn(self.fc(x))


class ForcesGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(6, 3)

    def forward(self, x):
        with torch.enable_grad():
            return self.inner(x)


class NoDeterministicOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        out = self.fc(x)
        # put_ has no deterministic implementation (CPU too): raises under deterministic algorithms
        return out + torch.zeros(out.numel()).put_(
            torch.tensor([0, 0]), torch.tensor([1.0, 2.0])
        ).view_as(out)


_STEP = itertools.count(1)


class StateOutsideModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(x) * next(_STEP)  # a global counter: no two runs start from the same state


def test_dropout_in_eval_is_caught_and_named():
    found = checks.eval_determinism(DropoutBug(), X)
    assert found.failed
    assert "native_dropout" in found.reason or "bernoulli" in found.reason, found.reason
    assert "training=self.training" in found.reason and "training=self.training" in found.fix
    assert checks.eval_determinism(Correct(), X).status == checks.PASS


def test_train_eval_that_do_not_differ_is_caught():
    found = checks.train_eval_differ(IgnoresTraining().eval(), X)
    assert found.failed and "ignores self.training" in found.reason and "drop" in found.reason
    assert checks.train_eval_differ(Correct().eval(), X).status == checks.PASS
    assert checks.train_eval_differ(nn.Linear(6, 3).eval(), X).status == checks.NA


def test_batch_norm_on_batch_statistics_in_eval_is_caught():
    found = checks.batchnorm_running_stats(BatchStatsInEval().eval(), X, batch=4)
    assert found.failed
    assert "native_batch_norm" in found.reason and "in module 'bn'" in found.reason, found.reason
    assert checks.batchnorm_running_stats(Correct().eval(), X, batch=4).status == checks.PASS


def test_forward_forcing_grad_is_caught_with_its_module():
    found = checks.no_autograd_in_inference(ForcesGrad(), X)
    assert found.failed and "torch.no_grad()" in found.reason and "'inner'" in found.reason
    assert checks.no_autograd_in_inference(Correct(), X).status == checks.PASS


def test_op_without_deterministic_implementation_is_named():
    target = torch.tensor([0, 1, 2, 0])
    found = checks.reproducibility(NoDeterministicOp(), X, target, zoo.ModelSpec.loss)
    assert found.failed and found.details["op"] == "put_", found.reason
    assert not torch.are_deterministic_algorithms_enabled()  # the setting is put back
    assert checks.reproducibility(Correct(), X, target, zoo.ModelSpec.loss).status == checks.PASS


def test_unreproducible_training_step_is_caught():
    found = checks.reproducibility(
        StateOutsideModule(), X, torch.tensor([0, 1, 2, 0]), zoo.ModelSpec.loss
    )
    assert found.failed and "different parameters" in found.reason


@pytest.mark.parametrize(
    "name",
    [
        "alexnet",
        "gru",
        "mlp",
        pytest.param("resnet18", marks=pytest.mark.slow),
        "transformer",
        "word_lm",
    ],
)  # resnet18: the second tier (~9 s under load)
def test_every_zoo_model_passes(name):
    assert name in zoo.model_names()
    found = checks.check_model(zoo.get_model(name))
    assert [f.check for f in found] == [
        "eval determinism",
        "train/eval differ",
        "batch norm in eval",
        "no autograd in inference",
        "reproducibility",
    ]
    assert not [f for f in found if f.failed], [f.reason for f in found if f.failed]
    assert _one(found, "reproducibility").status == checks.PASS


def test_zoo_list_is_complete():
    """The parametrisation above names every built-in model (a new one must be added there)."""
    builtin = [n for n in zoo.model_names() if zoo.get_model(n).origin == zoo.BUILTIN_ORIGIN]
    assert builtin == ["alexnet", "gru", "mlp", "resnet18", "transformer", "word_lm"]


# ---- datasets: broken and correct ------------------------------------------------------------

DATASETS = textwrap.dedent("""
    import numpy as np
    import torch
    from torchvision.transforms import v2


    class Images(torch.utils.data.Dataset):
        def __init__(self, transform):
            self.transform = transform
            g = torch.Generator().manual_seed(0)
            self.images = [
                torch.randint(0, 256, (3, 48, 64), dtype=torch.uint8, generator=g)
                for _ in range(4)
            ]

        def __len__(self):
            return len(self.images)

        def __getitem__(self, i):
            return self.transform(self.images[i]), i


    def good():
        return Images(
            v2.Compose([v2.RandomResizedCrop((32, 32), antialias=True), v2.RandomHorizontalFlip()])
        )


    def resize_int():
        return Images(v2.Compose([v2.Resize(32, antialias=True), v2.RandomHorizontalFlip()]))


    class SeedInGetitem(Images):
        def __getitem__(self, i):
            torch.manual_seed(i)  # the bug: every epoch, every worker draws the same crop
            return super().__getitem__(i)


    def seeded():
        return SeedInGetitem(v2.RandomResizedCrop((32, 32), antialias=True))


    class GeneratorInInit(Images):
        def __init__(self):
            super().__init__(None)
            self.rng = np.random.default_rng(0)  # the bug: copied with its state into every worker

        def __getitem__(self, i):
            return self.images[i].float() + float(self.rng.normal()), i


    def generator_in_init():
        return GeneratorInInit()


    def loader():
        return torch.utils.data.DataLoader(good(), batch_size=2, num_workers=1, pin_memory=True)
""")


@pytest.fixture
def data_module(tmp_path, monkeypatch):
    (tmp_path / "mydata.py").write_text(DATASETS)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "mydata.py"


def _dataset(path, factory):
    return getattr(user_models.load_module(str(path), "test"), factory)()


@pytest.mark.parametrize(
    "factory, cause, aspect",
    [
        ("seeded", "torch.manual_seed(0) at mydata.py:", checks.PASS),  # a seed inside __getitem__
        ("generator_in_init", "self.rng (numpy.random._generator.Generator)", checks.NA),
    ],
    ids=["seed-inside-getitem", "generator-made-in-init"],
)
def test_frozen_augmentation_is_caught_with_its_cause(data_module, factory, cause, aspect):
    found = datachecks.check_dataset(_dataset(data_module, factory), "ds")
    for check in ("augmentation across epochs", "augmentation across workers"):
        f = _one(found, check)
        assert f.failed and cause in f.reason, f.reason
    assert _one(found, "shape over aspect ratios").status == aspect


def test_resize_with_one_int_is_caught(data_module):
    found = datachecks.check_dataset(_dataset(data_module, "resize_int"), "ds")
    f = _one(found, "shape over aspect ratios")
    assert f.failed and "Resize(size=32) with one int" in f.reason and "Resize((H, W))" in f.fix, (
        f.reason
    )
    assert f.details["shapes"]["64x96"] != f.details["shapes"]["96x64"]
    assert _one(found, "augmentation across epochs").status == checks.PASS  # the flip still varies


def test_correct_pipeline_and_loader_settings_pass(data_module):
    found = datachecks.check_dataset(_dataset(data_module, "loader"), "ds")
    assert [f.status for f in found] == ["pass", "pass", "pass", "info"], [f.reason for f in found]
    settings = _one(found, "loader settings").details
    assert settings["num_workers"] == 1 and settings["pin_memory"] is True


def test_the_harness_synthetic_dataset_passes():
    found = datachecks.check_dataset(datachecks.own_loader(), "ds")
    assert not [f for f in found if f.failed], [f.reason for f in found]
    assert [f.status for f in found] == ["pass", "pass", "pass", "info"], [f.reason for f in found]
    assert _one(found, "loader settings").details["num_workers"] == 2


# ---- the command -----------------------------------------------------------------------------

USER_MODEL = textwrap.dedent("""
    import torch
    import torch.nn.functional as F
    from torch import nn
    from harness.zoo import register_model


    class Leaky(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return F.dropout(self.fc(x), 0.5)


    register_model(
        "leaky",
        build=lambda cfg: Leaky(),
        inputs=lambda cfg, g: (torch.randn(4, 6, generator=g),),
        small={"batch": 4, "num_classes": 3},
        full={"batch": 4, "num_classes": 3},
    )
""")


def test_cli_flags_a_users_model_with_dropout_in_eval(
    tmp_path, monkeypatch, capsys, clean_registry
):
    (tmp_path / "leaky.py").write_text(USER_MODEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_MODELS", "leaky.py")
    out = tmp_path / "findings.json"
    assert main(["check", "leaky", "--json", str(out)]) == exits.REGRESSION
    text = capsys.readouterr().out
    assert "model leaky" in text and "FAIL" in text and "training=self.training" in text
    data = json.loads(out.read_text())
    assert data["schema"] == 1 and data["passed"] is False and data["exit_code"] == 1
    (subject,) = data["subjects"]
    assert subject["kind"] == "model" and subject["name"] == "leaky"
    assert (
        subject["findings"][0]["check"] == "eval determinism"
        and subject["findings"][0]["status"] == "FAIL"
    )


def test_cli_passes_a_correct_model_and_exits_0(capsys):
    assert main(["check", "mlp"]) == exits.PASS
    assert "all pass" in capsys.readouterr().out


def test_cli_unknown_model_is_bad_input_naming_the_known_ones(capsys):
    assert main(["check", "nosuch"]) == exits.BAD_INPUT
    err = capsys.readouterr().err
    assert "unknown model 'nosuch'" in err and "alexnet" in err and "HARNESS_MODELS" in err


def _reasons(path) -> str:
    """Every reason in a --json file, one string (the printed table wraps its lines)."""
    return " ".join(
        f["reason"] for s in json.loads(path.read_text())["subjects"] for f in s["findings"]
    )


def test_cli_dataset_with_resize_int_and_seeded_getitem_fail(data_module, capsys):
    out = data_module.parent / "findings.json"
    assert (
        main(["check", "--dataset", "mydata.py:resize_int", "--json", str(out)]) == exits.REGRESSION
    )
    assert "Resize(size=32) with one int" in _reasons(out)
    assert "FAIL" in capsys.readouterr().out
    assert main(["check", "--dataset", "mydata.py:seeded", "--json", str(out)]) == exits.REGRESSION
    assert "__getitem__ sets a fixed seed: torch.manual_seed(0) at mydata.py:" in _reasons(out)
    assert main(["check", "--dataset", "mydata.py:good"]) == exits.PASS


@pytest.mark.parametrize(
    "spec,says",
    [
        ("mydata.py", "write MODULE:FACTORY"),
        ("mydata.py:nothing", "has no callable 'nothing'"),
        ("missing.py:good", "no such file"),
    ],
)
def test_cli_bad_dataset_is_bad_input(data_module, capsys, spec, says):
    assert main(["check", "--dataset", spec]) == exits.BAD_INPUT
    assert says in capsys.readouterr().err


def test_cli_against_lists_every_difference(tmp_path, capsys):
    recorded = fingerprint()
    same = tmp_path / "same.json"
    same.write_text(json.dumps(recorded))
    assert main(["check", "--against", str(same)]) == exits.PASS
    assert "no difference" in capsys.readouterr().out

    recorded.update(torch="2.0.0", numpy="1.0.0")
    recorded["flags"]["deterministic_algorithms"] = not recorded["flags"][
        "deterministic_algorithms"
    ]
    recorded["torch_threads"] = 99
    old = tmp_path / "fingerprint.json"
    old.write_text(json.dumps(recorded))
    out = tmp_path / "drift.json"
    assert main(["check", "--against", str(old), "--json", str(out)]) == exits.REGRESSION
    text = capsys.readouterr().out
    for row in (
        r"torch +2\.0\.0 +\S+ +environment",
        r"numpy +1\.0\.0 +\S+ +environment",
        r"torch_threads +99 +\d+ +setting",
    ):
        assert re.search(row, text), (row, text)
    assert "torch: 2.0.0 -> " in _reasons(out)
    (subject,) = json.loads(out.read_text())["subjects"]
    settings = {d["setting"]: d["kind"] for d in subject["findings"][0]["details"]["differences"]}
    assert settings == {
        "torch": "environment",
        "numpy": "environment",
        "torch_threads": "setting",
        "flags.deterministic_algorithms": "environment",
    }


def test_cli_against_a_golden_compares_its_torch_version(tmp_path, capsys):
    from harness.golden import store

    golden = tmp_path / "m.jit.expect"
    golden.write_text(
        store.render("graph\n", {"frontend": "jit", "model": "m (small)", "torch": "1.13.0"})
    )
    out = tmp_path / "drift.json"
    assert main(["check", "--against", str(golden), "--json", str(out)]) == exits.REGRESSION
    assert re.search(r"torch +1\.13\.0 +" + re.escape(torch.__version__), capsys.readouterr().out)
    assert "torch: 1.13.0 -> " + torch.__version__ in _reasons(
        out
    ) and "it records only torch" in _reasons(out)
    assert main(["check", "--against", str(tmp_path / "nothing.json")]) == exits.BAD_INPUT


def test_cli_against_a_run_reads_its_recorded_fingerprint(tmp_path, capsys):
    from test_gate_support import draw, write_set

    root = tmp_path / "results"
    write_set(root / "asv", "aaaaaaaa11", {"a.time": draw(5)})
    recorded = dict(fingerprint(), torch="2.9.0", commit="aaaaaaaa11")
    (root / "fingerprints" / "m1-cpu").mkdir(parents=True)
    (root / "fingerprints" / "m1-cpu" / "aaaaaaaa.json").write_text(json.dumps(recorded))
    out = tmp_path / "drift.json"
    assert (
        main(["check", "--against", "latest", "--results-dir", str(root), "--json", str(out)])
        == exits.REGRESSION
    )
    (subject,) = json.loads(out.read_text())["subjects"]
    differences = subject["findings"][0]["details"]["differences"]
    assert [d["setting"] for d in differences] == ["torch"] and differences[0][
        "recorded"
    ] == "2.9.0"
    assert "run " in subject["findings"][0]["details"]["source"]  # read through the run record
