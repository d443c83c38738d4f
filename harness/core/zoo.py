"""The model zoo: every model the harness captures or benchmarks, with seeded weights and inputs.

Each model has a *small* configuration (seconds on two CPU cores; used by goldens, tests and
quick CPU benchmarks), a *full* one (the real sizes; `--full` goldens and nightly CPU runs) and a
*cuda* one (benchmarks on a CUDA GPU in every mode: device-bound on a data-centre GPU; default:
the full one). Which one a benchmark uses is decided in one place, harness.core.sizes.model_size;
golden captures use small (full under --full) on every device. Register your own with one call:

    from harness.zoo import register_model   (or harness.core.zoo)
    register_model("tiny_cnn", build=lambda cfg: TinyCNN(cfg["width"]),
                   inputs=lambda cfg, g: (torch.randn(cfg["batch"], 3, 32, 32, generator=g),),
                   small={"width": 8, "batch": 2, "num_classes": 10},
                   full={"width": 64, "batch": 32, "num_classes": 10},
                   cuda={"width": 64, "batch": 512, "num_classes": 10})   # optional

Models of your own are registered the same way in a module that the harness loads for pytest
and the `harness` command alike (harness.core.user_models: the `harness_models` ini option,
HARNESS_MODELS, or the `harness.models` entry-point group).

Every model is a classifier here: its first output is log-probabilities or logits over
`cfg["num_classes"]` classes, which is what `ModelSpec.loss` assumes for training steps.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from harness.core import names, sizes
from harness.core.env import DEFAULT_SEED, seed_everything

SIZES = ("small", "full", "cuda")
# a configuration's name (SIZES), or a configuration already chosen (benchmark_config)
Size = str | Mapping[str, Any]

# Seed offsets keep weights, capture inputs and check inputs on separate streams: a check input
# that equals the capture input could not catch a value that tracing baked in as a constant.
_INPUT_SEED_OFFSET = 1
_CHECK_SEED_OFFSET = 2


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    build_fn: Callable[[Mapping[str, Any]], nn.Module]
    inputs_fn: Callable[[Mapping[str, Any], torch.Generator], tuple]
    small: Mapping[str, Any]
    full: Mapping[str, Any]
    description: str = ""
    # front end name -> why this model cannot be captured by it (the test is skipped with it)
    unsupported: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # which conv-style settings apply to it (channels_last only helps 4-d image inputs)
    image_model: bool = False
    # the file that registered it, and where its goldens live if not in the run's expect/ dir
    origin: str = ""
    expect_dir: str | None = None
    # the configuration benchmarks on a CUDA GPU use; None: the full one
    cuda: Mapping[str, Any] | None = None
    # instruction rows (harness.measure.workloads.instructions): True counts its inference and
    # training step; a string opts out and says why (shown in those rows)
    instructions: bool | str = True
    # '<name>_compile', the instructions torch.compile spends compiling it: False, True (every
    # run) or "full" (full runs only: a compile is heavy under valgrind)
    compile_instructions: bool | str = False
    # what kind of network it is (KINDS); None: not declared. A published figure about one kind
    # (channels_last: conv nets) is held only against models declared of that kind
    kind: str | None = None
    # the models suite's torch.compile rows (time and answer): True (every run), "full" (full
    # runs only) or a string saying why it is never compiled (its rows are n/a with it)
    compile: bool | str = True

    def compile_opt_out(self) -> str:
        """Why the models suite never compiles this model ("" where it does)."""
        return "" if self.compile in (True, COMPILE_FULL) else str(self.compile)

    def config(self, size: Size = "small") -> dict:
        """The configuration named `size` ("small", "full" or "cuda"); a mapping is a
        configuration already chosen (benchmark_config) and is returned as is."""
        if isinstance(size, Mapping):
            return dict(size)
        if size not in SIZES:
            raise ValueError(f"unknown size {size!r} for model {self.name!r}; use one of {SIZES}")
        if size == "cuda":
            return dict(self.full if self.cuda is None else self.cuda)
        return dict(self.small if size == "small" else self.full)

    def benchmark_config(self, full: bool, device, overrides: Mapping | None = None) -> dict:
        """The configuration a benchmark on `device` in this mode uses: the one
        harness.core.sizes.model_size names (small/full on CPU, cuda on a GPU), with this model's
        HARNESS_SIZES fields applied (`overrides`: a recorded run's instead). Never a golden's."""
        cfg = self.config(sizes.model_size(full, device))
        return sizes.with_model_overrides(self.name, cfg, overrides)

    def build(self, size: Size = "small", seed: int = DEFAULT_SEED) -> nn.Module:
        """The model with seeded weights, in eval mode (dropout off, batch norm on running
        stats)."""
        seed_everything(seed)
        model = self.build_fn(self.config(size))
        return model.eval()

    def inputs(self, size: Size = "small", seed: int = DEFAULT_SEED, check: bool = False) -> tuple:
        """Seeded example inputs; `check=True` gives a second, different set for semantic checks."""
        gen = torch.Generator().manual_seed(
            seed + (_CHECK_SEED_OFFSET if check else _INPUT_SEED_OFFSET)
        )
        return tuple(self.inputs_fn(self.config(size), gen))

    def targets(self, size: Size = "small", seed: int = DEFAULT_SEED) -> torch.Tensor:
        """Seeded class labels matching the first output of the model, for training steps."""
        cfg = self.config(size)
        gen = torch.Generator().manual_seed(seed + 3)
        model_out_rows = self._output_rows(cfg)
        return torch.randint(0, cfg["num_classes"], (model_out_rows,), generator=gen)

    def _output_rows(self, cfg) -> int:
        return cfg["batch"] * cfg.get("seq_len", 1) if cfg.get("per_token") else cfg["batch"]

    @staticmethod
    def loss(outputs, targets: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of the first output, in float32 (float64 where the logits are: the
        float64 referee of an answer check, harness.measure.answers)."""
        logits = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
        if logits.dtype != torch.float64:
            logits = logits.float()
        return F.cross_entropy(logits, targets.to(logits.device))

    def parameter_count(self, size: Size = "small") -> int:
        # Built on the meta device: counting the full AlexNet must not allocate 240 MB.
        with torch.device("meta"):
            model = self.build_fn(self.config(size))
        return sum(p.numel() for p in model.parameters())


_REGISTRY: dict[str, ModelSpec] = {}
COMPILE_FULL = "full"  # register_model(compile=...): compiled in full runs only
BUILTIN_ORIGIN = str(Path(__file__).resolve())
# register_model(kind=...): what a model is, for figures published about one kind of network
KINDS = {
    "conv": "convolutional network",
    "transformer": "attention (transformer) network",
    "recurrent": "recurrent network (RNN, LSTM, GRU)",
    "mlp": "multilayer perceptron",
    "other": "another kind of network",
}


def register_model(
    name: str,
    *,
    build,
    inputs,
    small,
    full,
    description: str = "",
    unsupported: Mapping[str, str] | None = None,
    image_model: bool = False,
    replace: bool = False,
    expect_dir: str | None = None,
    cuda: Mapping[str, Any] | None = None,
    instructions: bool | str = True,
    compile_instructions: bool | str = False,
    kind: str | None = None,
    compile: bool | str = True,
) -> ModelSpec:
    """Add a model to the zoo. `build(cfg) -> nn.Module`, `inputs(cfg, generator) -> tuple`.

    `small` and `full` are config dicts; each needs `batch` and `num_classes`. `cuda` (optional,
    default: `full`) is the config benchmarks use on a CUDA GPU, in quick and full runs alike:
    size it so one call keeps the GPU busy (bytes moved or FLOPs far above kernel launches, see
    docs/gpu.md#cuda-sizes) and stays within ~1-20 ms; goldens never use it. `expect_dir`
    keeps this model's goldens in a folder of its own (relative to the registering file), e.g.
    `expect_dir="expect"` beside your suite; by default they go to the run's expect/ folder.
    `kind` (optional, one of KINDS: "conv", "transformer", "recurrent", "mlp", "other") says
    what the network is: a published range about one kind (channels_last: conv nets) is held
    only against models declared of that kind.

    Instruction rows (callgrind; docs/instructions.md): `instructions=True` (default) counts the
    small configuration's inference and training step, `'<name>_inference'` and
    `'<name>_training_step'`; a model too big to count under valgrind opts out with the reason,
    `instructions="one call takes minutes under valgrind"`, which its rows show.
    `compile_instructions=True` adds `'<name>_compile'`, the instructions torch.compile spends
    compiling its inference (every run); `"full"` counts it in full runs only.

    torch.compile rows (the models suite; docs/answers.md#in-a-project-of-your-own):
    `compile=True` (default) times `torch.compile(model)` against eager and checks that both
    compute the same result: its inference in every run (`CompiledOverEager`), its training
    step in full runs (`CompiledTrainingStepOverEager`); `"full"` leaves it out of quick runs; a
    string opts out, `compile="data-dependent control flow: dynamo retraces every call"`, and
    its rows are n/a with that reason. It is independent of `compile_instructions`, which
    counts the instructions of the compile itself (the instructions suite) and is off by
    default: a model may have either, both or neither.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"model {name!r}: unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    if not isinstance(name, str) or not names.is_model_name(name):
        raise ValueError(f"model name {name!r} is not allowed: use {names.MODEL_NAME_RULE}")
    origin = str(Path(sys._getframe(1).f_code.co_filename).resolve())
    # The same file registering again (imported once by pytest as a conftest, once by the
    # user_models loader) replaces its own model; another file may not take the name.
    if name in _REGISTRY and not replace and _REGISTRY[name].origin != origin:
        raise ValueError(
            f"model {name!r} is already registered (by {_REGISTRY[name].origin}); "
            "pass replace=True to override it"
        )
    for size, cfg in (("small", small), ("full", full), ("cuda", cuda or full)):
        missing = {"batch", "num_classes"} - set(cfg)
        if missing:
            raise ValueError(f"model {name!r}: the {size} config lacks {sorted(missing)}")
    if instructions is not True and not (isinstance(instructions, str) and instructions.strip()):
        raise ValueError(
            f"model {name!r}: instructions= is True (count its rows) or a string saying why "
            f"it is not counted, got {instructions!r}"
        )
    if compile_instructions not in (False, True, "full"):
        raise ValueError(
            f"model {name!r}: compile_instructions= is False, True or 'full', "
            f"got {compile_instructions!r}"
        )
    if compile is not True and not (isinstance(compile, str) and compile.strip()):
        raise ValueError(
            f"model {name!r}: compile= is True (compile it in every run), {COMPILE_FULL!r} (full "
            f"runs only) or a string saying why it is never compiled, got {compile!r}"
        )
    if expect_dir is not None:
        expect_dir = str((Path(origin).parent / expect_dir).resolve())
    spec = ModelSpec(
        name,
        build,
        inputs,
        dict(small),
        dict(full),
        description,
        dict(unsupported or {}),
        image_model,
        origin,
        expect_dir,
        None if cuda is None else dict(cuda),
        instructions,
        compile_instructions,
        kind,
        compile,
    )
    _REGISTRY[name] = spec
    return spec


def get_model(name: str) -> ModelSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown model {name!r}; registered models: {', '.join(sorted(_REGISTRY))}"
        ) from None


def model_names() -> list[str]:
    return sorted(_REGISTRY)


def check_size_overrides(overrides: Mapping | None = None) -> Mapping:
    """Every HARNESS_SIZES key checked (harness.core.sizes), `MODEL.FIELD` ones against the
    registered models (load models of your own first): what a command calls before it starts a
    run, so that a typo is bad input at once, not a failed benchmark in every process."""
    over = sizes.active(overrides)
    for model, fields in sizes.model_keys(over).items():
        for field, value in fields.items():
            if model not in _REGISTRY:
                raise sizes.unknown_model(model, field, model_names())
            spec = _REGISTRY[model]
            every = {k: v for size in SIZES for k, v in spec.config(size).items()}
            sizes.check_model_field(model, field, value, every)
    return over


# --------------------------------------------------------------------------------------------
# Built-in models


def _alexnet(cfg):
    import torchvision

    model = torchvision.models.alexnet(num_classes=cfg["num_classes"])
    if cfg["hidden"] != 4096:
        # Same layer sequence as torchvision's head, narrower: the graph keeps its shape of ops
        # while the small configuration stays fast on two cores.
        h = cfg["hidden"]
        model.classifier = nn.Sequential(
            nn.Dropout(0.5),
            nn.Linear(256 * 6 * 6, h),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(h, h),
            nn.ReLU(inplace=True),
            nn.Linear(h, cfg["num_classes"]),
        )
    return model


def _image_inputs(cfg, gen):
    return (torch.randn(cfg["batch"], 3, cfg["image"], cfg["image"], generator=gen),)


register_model(
    "alexnet",
    kind="conv",
    build=_alexnet,
    inputs=_image_inputs,
    image_model=True,
    small={"batch": 2, "image": 64, "num_classes": 10, "hidden": 128},
    full={"batch": 16, "image": 224, "num_classes": 1000, "hidden": 4096},
    # 550 GFLOP per training step (convolutions in TF32): ~4 ms on an H200, far above launches
    cuda={"batch": 128, "image": 224, "num_classes": 1000, "hidden": 4096},
    description="torchvision AlexNet (small: 64 px, narrow classifier head)",
    # the conv net's compile row: heavy under valgrind, so full runs only (docs/instructions.md)
    compile_instructions="full",
)


def _resnet18(cfg):
    import torchvision

    return torchvision.models.resnet18(num_classes=cfg["num_classes"])


register_model(
    "resnet18",
    kind="conv",
    build=_resnet18,
    inputs=_image_inputs,
    image_model=True,
    small={"batch": 2, "image": 32, "num_classes": 10},
    full={"batch": 16, "image": 224, "num_classes": 1000},
    # 1.4 TFLOP per training step: ~10 ms on an H200 (batch 16 was launch-bound there)
    cuda={"batch": 128, "image": 224, "num_classes": 1000},
    description="torchvision ResNet-18 (small: 32 px, 10 classes)",
)


class WordLanguageModel(nn.Module):
    """pytorch/examples word_language_model: Embedding -> LSTM -> Linear, hidden state in and
    out."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden


def _word_lm(cfg):
    return WordLanguageModel(cfg["num_classes"], cfg["emsize"], cfg["nhid"], cfg["nlayers"])


def _word_lm_inputs(cfg, gen):
    tokens = torch.randint(0, cfg["num_classes"], (cfg["seq_len"], cfg["batch"]), generator=gen)
    shape = (cfg["nlayers"], cfg["batch"], cfg["nhid"])
    return (tokens, (torch.zeros(shape), torch.zeros(shape)))


register_model(
    "word_lm",
    kind="recurrent",
    build=_word_lm,
    inputs=_word_lm_inputs,
    # num_classes is the vocabulary: the decoder classifies every token position.
    small={
        "batch": 2,
        "seq_len": 5,
        "num_classes": 50,
        "emsize": 16,
        "nhid": 16,
        "nlayers": 2,
        "per_token": True,
    },
    full={
        "batch": 20,
        "seq_len": 35,
        "num_classes": 33278,
        "emsize": 650,
        "nhid": 650,
        "nlayers": 2,
        "per_token": True,
    },
    # batch 256: the LSTM's recurrent GEMM does 256 FLOP per weight byte in 16 bits (128 in
    # fp32), above the H200's and A100's FLOP/byte ridge: compute-bound. Penn Treebank's
    # 10000-word vocabulary: with WikiText-2's the fp32 decoder alone would take ~35 ms.
    cuda={
        "batch": 256,
        "seq_len": 35,
        "num_classes": 10000,
        "emsize": 1024,
        "nhid": 1024,
        "nlayers": 2,
        "per_token": True,
    },
    description="word-language-model LSTM (full: WikiText-2 vocabulary, 650 units, bptt 35)",
)


class TransformerClassifier(nn.Module):
    def __init__(self, d_model, nhead, dim_ff, nlayers, num_classes):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_ff, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


def _transformer(cfg):
    return TransformerClassifier(
        cfg["d_model"], cfg["nhead"], cfg["dim_ff"], cfg["nlayers"], cfg["num_classes"]
    )


def _sequence_inputs(cfg, gen):
    return (torch.randn(cfg["batch"], cfg["seq_len"], cfg["d_model"], generator=gen),)


register_model(
    "transformer",
    kind="transformer",
    build=_transformer,
    inputs=_sequence_inputs,
    small={
        "batch": 2,
        "seq_len": 8,
        "d_model": 32,
        "nhead": 2,
        "dim_ff": 64,
        "nlayers": 2,
        "num_classes": 10,
    },
    full={
        "batch": 16,
        "seq_len": 128,
        "d_model": 512,
        "nhead": 8,
        "dim_ff": 2048,
        "nlayers": 6,
        "num_classes": 1000,
    },
    # no cuda= of its own: the full size (the default) already is device-bound, 241 GFLOP per
    # training step in fp32, every matmul 4 GFLOP (~0.1 ms); larger would take over 20 ms per
    # step on an A100
    description="nn.TransformerEncoder (post-norm) with a mean-pooled linear head",
)


class GRUClassifier(nn.Module):
    def __init__(self, d_model, hidden, nlayers, num_classes):
        super().__init__()
        self.rnn = nn.GRU(d_model, hidden, nlayers, batch_first=True)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x):
        output, _ = self.rnn(x)
        return self.head(output[:, -1])


def _gru(cfg):
    return GRUClassifier(cfg["d_model"], cfg["hidden"], cfg["nlayers"], cfg["num_classes"])


register_model(
    "gru",
    kind="recurrent",
    build=_gru,
    inputs=_sequence_inputs,
    small={"batch": 2, "seq_len": 6, "d_model": 8, "hidden": 16, "nlayers": 2, "num_classes": 10},
    full={
        "batch": 32,
        "seq_len": 100,
        "d_model": 256,
        "hidden": 512,
        "nlayers": 2,
        "num_classes": 1000,
    },
    # batch 256, hidden 1024: each step's recurrent GEMM is 1.6 GFLOP at 128 FLOP per fp32
    # weight byte (compute-bound, as the word LM's LSTM); 1.6 TFLOP per training step
    cuda={
        "batch": 256,
        "seq_len": 100,
        "d_model": 256,
        "hidden": 1024,
        "nlayers": 2,
        "num_classes": 1000,
    },
    description="2-layer GRU over a sequence, classifying from the last step",
    # its compiled/eager ratio would compare eager with itself (torch 2.14: 0 graphs compiled)
    compile="torch.compile compiles no graph of it: dynamo does not trace nn.GRU "
    "(torch._dynamo.config.allow_rnn is off by default) and runs the whole forward eagerly",
)


def _mlp(cfg):
    w, layers = cfg["width"], []
    dims = [cfg["features"]] + [w] * cfg["depth"]
    for d_in, d_out in zip(dims, dims[1:]):
        layers += [nn.Linear(d_in, d_out), nn.BatchNorm1d(d_out), nn.ReLU(), nn.Dropout(0.1)]
    layers.append(nn.Linear(w, cfg["num_classes"]))
    return nn.Sequential(*layers)


def _mlp_inputs(cfg, gen):
    return (torch.randn(cfg["batch"], cfg["features"], generator=gen),)


register_model(
    "mlp",
    kind="mlp",
    build=_mlp,
    inputs=_mlp_inputs,
    small={"batch": 4, "features": 16, "width": 32, "depth": 2, "num_classes": 10},
    full={"batch": 256, "features": 1024, "width": 4096, "depth": 4, "num_classes": 1000},
    # batch 512: 180 GFLOP per training step in fp32 matmuls, each 17 GFLOP (~0.4 ms on an H200)
    cuda={"batch": 512, "features": 1024, "width": 4096, "depth": 4, "num_classes": 1000},
    description="MLP: (Linear -> BatchNorm1d -> ReLU -> Dropout) x depth -> Linear",
    compile_instructions=True,  # the cheapest compile row, in every run (docs/instructions.md)
)
