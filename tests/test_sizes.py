"""Benchmark sizes per device class and mode (harness.core.sizes), the zoo's CUDA configurations,
the HARNESS_SIZES override, and goldens that keep the small configuration on every device.
No CUDA code runs: the size functions take the device, so "cuda" is only a name here."""

import sys

import pytest
import torch
from torch import nn

from harness import cli
from harness.core import exits, sizes, zoo
from harness.core.exits import BadInput

CUDA_NAMES = ("cuda", "cuda:1", "CUDA", torch.device("cuda", 0))
CPU_NAMES = ("cpu", torch.device("cpu"), "mps", "xpu", "meta")

# The CPU table as it was before sizes took a device: CPU results, goldens and the `./dev bench`
# budget rest on these values, so they must not move.
CPU_TABLE = {
    "pointwise_elements": (1 << 20, 1 << 22),
    "norm_activation": ((256, 256), (8192, 1024)),
    "cross_entropy": ((256, 1000), (4096, 32000)),
    "optimizer": ({"layers": 64, "width": 64}, {"layers": 256, "width": 256}),
    "attention": (
        {"batch": 2, "heads": 4, "seq": 256, "head_dim": 64},
        {"batch": 8, "heads": 16, "seq": 2048, "head_dim": 64},
    ),
    "transfer_batch": ((8, 3, 64, 64), (64, 3, 224, 224)),
    "dataloader": (
        {"length": 64, "image": 64, "epochs": 2},
        {"length": 1024, "image": 224, "epochs": 3},
    ),
    "loop_steps": (4, 16),
    "bandwidth_elements": (1 << 25, 1 << 27),  # bandwidth.FAST_NUMEL, FULL_NUMEL before
}
H200_L2 = 60 * 2**20
GB = 1e9


@pytest.fixture(autouse=True)
def _no_override(monkeypatch):
    monkeypatch.delenv("HARNESS_SIZES", raising=False)
    monkeypatch.delenv("HARNESS_FULL", raising=False)


def test_every_size_function_is_in_the_cpu_table():
    assert set(sizes.SIZE_FUNCTIONS) == set(CPU_TABLE)


@pytest.mark.parametrize("name", sorted(CPU_TABLE))
@pytest.mark.parametrize("device", CPU_NAMES, ids=str)
def test_cpu_sizes_are_unchanged_and_other_devices_get_them(name, device):
    fast, full = CPU_TABLE[name]
    fn = sizes.SIZE_FUNCTIONS[name]
    assert fn(False, device) == fast and fn(True, device) == full


@pytest.mark.parametrize("device", CUDA_NAMES, ids=str)
def test_cuda_devices_get_the_cuda_sizes(device):
    assert sizes.device_class(device) == sizes.CUDA
    differ = {n for n, fn in sizes.SIZE_FUNCTIONS.items() if fn(False, device) != CPU_TABLE[n][0]}
    # loop_steps: as on CPU, each step of the CUDA model configurations is already device-bound
    assert differ == set(CPU_TABLE) - {"loop_steps"}


def test_device_class_needs_a_device():
    with pytest.raises(TypeError, match="device"):
        sizes.pointwise_elements(False, None)


def test_cuda_quick_sizes_are_device_bound_and_fit_a_40_gb_gpu():
    """The issue's figures, and the arithmetic of docs/gpu.md#cuda-sizes in its coarsest form:
    every memory-bound input several times an H200's L2, every footprint far below 40 GB."""
    f = {name: fn(False, "cuda") for name, fn in sizes.SIZE_FUNCTIONS.items()}
    assert f["pointwise_elements"] >= 1 << 26
    assert f["transfer_batch"] == (64, 3, 224, 224)
    rows, dim = f["norm_activation"]
    logits, classes = f["cross_entropy"]
    for fp32_elements in (f["pointwise_elements"], rows * dim, logits * classes):
        assert 4 * fp32_elements >= 4 * H200_L2
    footprint = {  # bytes held at once (fp32 unless said)
        "pointwise": 3 * 4 * f["pointwise_elements"],  # x, cos(x), cos(cos(x))
        "bandwidth": 5 * 4 * f["bandwidth_elements"],  # input, 2 results, the copy's two
        "cross_entropy": 4 * 4 * logits * classes,  # logits, log-probs, 2 gradients
        "adam": 4 * 4 * f["optimizer"]["layers"] * f["optimizer"]["width"] ** 2,  # p, g, m, v
        "attention": 3 * 2 * (lambda a: a["batch"] * a["heads"] * a["seq"] ** 2)(f["attention"]),
    }
    assert all(b < 10 * GB for b in footprint.values()), footprint
    for full in (False, True):  # full sizes too: nightly runs on an A100 40 GB
        assert 4 * 4 * sizes.cross_entropy(full, "cuda")[0] * 32000 < 20 * GB


def test_model_size_per_device_and_mode():
    assert [sizes.model_size(full, "cpu") for full in (False, True)] == ["small", "full"]
    assert [sizes.model_size(full, "cuda:0") for full in (False, True)] == ["cuda", "cuda"]
    assert sizes.model_size(True, "mps") == "full"


def test_workloads_take_the_device_into_the_size_decision(monkeypatch):
    from harness.measure import workloads

    monkeypatch.setenv("HARNESS_DEVICE", "cpu")
    assert workloads.size() == "small" and workloads.size("cuda") == "cuda"
    assert workloads.model_config("alexnet", "cuda")["batch"] >= 128
    assert workloads.model_config("alexnet", "cpu") == zoo.get_model("alexnet").config("small")
    monkeypatch.setenv("HARNESS_FULL", "1")
    assert workloads.size() == "full" and workloads.size(torch.device("cuda")) == "cuda"


def _register(name, **configs):
    return zoo.register_model(
        name,
        build=lambda cfg: nn.Linear(cfg["width"], cfg["num_classes"]),
        inputs=lambda cfg, gen: (torch.randn(cfg["batch"], cfg["width"], generator=gen),),
        **configs,
    )


def test_zoo_cuda_config_defaults_to_full_and_can_be_given(clean_registry):
    small = {"batch": 2, "width": 3, "num_classes": 4}
    full = {"batch": 32, "width": 64, "num_classes": 4}
    plain = _register("plain_probe", small=small, full=full)
    assert plain.cuda is None and plain.config("cuda") == full
    assert zoo.get_model("plain_probe").benchmark_config(False, "cuda") == full
    big = _register("big_probe", small=small, full=full, cuda={**full, "batch": 512})
    assert zoo.get_model("big_probe").benchmark_config(False, "cuda")["batch"] == 512
    assert zoo.get_model("big_probe").benchmark_config(True, "cuda")["batch"] == 512  # nightly too
    assert zoo.get_model("big_probe").benchmark_config(True, "cpu") == full
    assert big.build(zoo.get_model("big_probe").benchmark_config(False, "cuda")).in_features == 64
    with pytest.raises(ValueError, match="the cuda config lacks"):
        _register("bad_probe", small=small, full=full, cuda={"width": 8})


def test_builtin_models_have_device_bound_cuda_configs():
    for name in zoo.model_names():  # each chosen: its own, or the full one where that is bound
        spec = zoo.get_model(name)
        assert spec.cuda is not None or name == "transformer", name
    transformer = zoo.get_model("transformer")
    assert transformer.config("cuda") == transformer.config("full")  # 4 GFLOP per matmul
    for name in ("alexnet", "resnet18"):
        cfg = zoo.get_model(name).config("cuda")
        assert cfg["batch"] >= 128 and cfg["image"] == 224, name
    lm = zoo.get_model("word_lm").config("cuda")
    # the LSTM's recurrent GEMM: 8*B*H^2 FLOPs over 4*H^2 weights of 2 bytes = B FLOP per byte,
    # above an H200's bf16 ridge (989 TFLOP/s over 4.8 TB/s = 206) and an A100's (156)
    assert lm["batch"] >= 206 and lm["nhid"] >= 1024
    mlp = zoo.get_model("mlp")
    assert mlp.config("cuda")["batch"] > mlp.config("full")["batch"]


def test_overrides_parse_in_either_form_and_apply_on_any_device(monkeypatch):
    pairs = (
        "pointwise_elements=2^24, transfer_batch=32x3x224x224,attention.seq=512,"
        "alexnet.batch=64,word_lm.per_token=true"
    )
    json_form = (
        '{"pointwise_elements": 16777216, "transfer_batch": [32, 3, 224, 224], '
        '"attention": {"seq": 512}, "alexnet": {"batch": 64}, "word_lm": {"per_token": true}}'
    )
    assert sizes.parse(pairs) == sizes.parse(json_form)
    monkeypatch.setenv("HARNESS_SIZES", pairs)
    for device in ("cpu", "cuda"):
        assert sizes.pointwise_elements(True, device) == 1 << 24
        assert sizes.transfer_batch(False, device) == (32, 3, 224, 224)
        assert sizes.attention(False, device) == {**sizes.attention(False, device, {}), "seq": 512}
        assert zoo.get_model("alexnet").benchmark_config(False, device)["batch"] == 64
    assert sizes.loop_steps(False, "cpu") == 4  # not overridden
    assert zoo.get_model("alexnet").config("small")["batch"] == 2  # goldens' config untouched
    assert sizes.override_text() == (
        "alexnet.batch=64,attention.seq=512,pointwise_elements=16777216,"
        "transfer_batch=32x3x224x224,word_lm.per_token=true"
    )
    assert zoo.check_size_overrides()["alexnet.batch"] == 64
    # a report describes a recorded run with that run's overrides, not this process's
    assert sizes.pointwise_elements(True, "cpu", overrides={}) == 1 << 22


@pytest.mark.parametrize(
    "text, named",
    [
        ("pointwise=4", ["'pointwise'", "pointwise_elements", "attention.seq", "alexnet.batch"]),
        ("attention.sq=4", ["'attention.sq'", "attention.seq", "attention.head_dim"]),
        ("attention=4", ["'attention'", "attention.batch"]),
        ("transfer_batch=3x4", ["'transfer_batch'", "NxNxNxN"]),
        ("loop_steps=0", ["'loop_steps'", "positive whole number"]),
        ("loop_steps=2.5", ["'loop_steps'", "positive whole number"]),
        ("pointwise_elements.x=4", ["'pointwise_elements.x'", "pointwise_elements=VALUE"]),
        ("pointwise_elements=lots", ["'pointwise_elements'", "2^26"]),
        ("alexnet.btch=4", ["'alexnet.btch'", "batch, hidden, image, num_classes"]),
        ("alexnet.batch=4.5", ["'alexnet.batch'", "positive whole number"]),
        ("alexnt.batch=4", ["'alexnt.batch'", "pointwise_elements", "alexnet, gru"]),
        ("batch", ["'batch'", "key=value", "alexnet.batch=64"]),
        ("[1, 2]", ["key=value"]),
        ("{bad json", ["JSON"]),
    ],
)
def test_bad_overrides_name_the_key_and_the_valid_ones(monkeypatch, text, named):
    monkeypatch.setenv("HARNESS_SIZES", text)
    with pytest.raises(BadInput) as caught:
        zoo.check_size_overrides()
    message = str(caught.value)
    assert caught.value.code == exits.BAD_INPUT and message.startswith("HARNESS_SIZES")
    for part in named:
        assert part in message, (part, message)


def test_a_model_override_is_checked_where_the_config_is_read(monkeypatch):
    monkeypatch.setenv("HARNESS_SIZES", "mlp.depht=3")  # parses: MODEL.FIELD is checked later
    assert sizes.pointwise_elements(False, "cpu") == 1 << 20
    with pytest.raises(BadInput, match="'mlp.depht'.*depth"):
        zoo.get_model("mlp").benchmark_config(False, "cuda")


def test_the_fingerprint_records_an_override_and_comparisons_list_it(monkeypatch):
    from harness.core.env import fingerprint
    from harness.verdict import drift, results

    assert fingerprint()["sizes"] is None
    monkeypatch.setenv("HARNESS_SIZES", "transfer_batch=16x3x224x224")
    fp = fingerprint()
    assert fp["sizes"] == "transfer_batch=16x3x224x224"
    assert ("sizes", "None", fp["sizes"]) in results.fingerprint_differences(
        {**fp, "sizes": None}, fp
    )
    assert drift._is_setting("sizes")  # `harness check --against`: a run setting, listed


def test_advice_describes_the_sizes_of_the_run_it_reads():
    from harness.verdict import advice

    tips = {t.name: t for t in advice.TIPS}
    on_cuda = sizes.Sizing(False, "cuda", {})
    assert "alexnet cuda (batch=128, image=224" in tips["AMP bf16"].sizes(
        {"model": "alexnet"}, on_cuda
    )
    assert (
        tips["torch.compile"]
        .sizes({"benchmark": "PointwiseChain"}, on_cuda)
        .endswith("2^26 float32")
    )
    assert tips["fused attention (SDPA)"].sizes({}, on_cuda).startswith("float16 batch 8")
    recorded = advice.run_sizing({"mode": "fast", "device": "cpu", "sizes": "attention.seq=512"})
    assert tips["fused attention (SDPA)"].sizes({}, recorded).endswith("512 tokens, head dim 64")
    assert tips["uint8 transfer"].sizes({}, recorded).startswith("image batch 8x3x64x64")


@pytest.mark.parametrize("size", ["small", "full"])
def test_golden_capture_on_a_cuda_device_keeps_the_golden_config(clean_registry, monkeypatch, size):
    """Goldens hold shapes: on any device they capture the small configuration (full under
    --full), never the device's benchmark configuration or an override."""
    from harness.golden.capture import capture_model

    monkeypatch.setenv("HARNESS_DEVICE", "cuda")
    monkeypatch.setenv("HARNESS_SIZES", "golden_probe.batch=7")
    seen = []
    configs = {
        "small": {"batch": 2, "width": 3, "num_classes": 4},
        "full": {"batch": 16, "width": 3, "num_classes": 4},
        "cuda": {"batch": 512, "width": 3, "num_classes": 4},
    }

    def build(cfg):
        seen.append(dict(cfg))
        return nn.Linear(cfg["width"], cfg["num_classes"])

    def inputs(cfg, gen):
        seen.append(dict(cfg))
        return (torch.randn(cfg["batch"], cfg["width"], generator=gen),)

    zoo.register_model("golden_probe", build=build, inputs=inputs, **configs)
    try:
        captured = capture_model("golden_probe", "fx", size, device="cuda")
        assert f"f32[{configs[size]['batch']}, 3]" in captured.text
    except RuntimeError:  # built, then moved to a GPU this machine lacks
        assert not torch.cuda.is_available()
    assert seen and all(cfg == configs[size] for cfg in seen), seen


def test_harness_bench_refuses_a_bad_override_before_it_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HARNESS_SIZES", "alexnt.batch=64")
    argv = ["bench", "--quick", "--suite", "canary", "--results-dir", str(tmp_path)]
    assert cli.main(argv) == exits.BAD_INPUT
    assert "'alexnt.batch'" in capsys.readouterr().err
    assert not any(tmp_path.rglob("run.json"))


def test_harness_ab_refuses_a_bad_override_before_a_side_starts(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HARNESS_SIZES", "transfer_batch=1x2")
    argv = ["ab", "HEAD", sys.executable, "--suite", "canary", "--results-dir", str(tmp_path)]
    assert cli.main(argv) == exits.BAD_INPUT
    assert "'transfer_batch'" in capsys.readouterr().err and not any(tmp_path.iterdir())
