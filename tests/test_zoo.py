"""The model zoo: seeded, registrable, with clear errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from harness.core import zoo


def test_builds_are_seeded_and_repeatable():
    spec = zoo.get_model("mlp")
    a, b = spec.build(), spec.build()
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(pa, pb), name
    assert not a.training, "models are built in eval mode"


def test_check_inputs_differ_from_capture_inputs():
    spec = zoo.get_model("alexnet")
    (x,), (y,) = spec.inputs(), spec.inputs(check=True)
    assert x.shape == y.shape and not torch.equal(x, y)
    assert torch.equal(x, spec.inputs()[0])


def test_every_model_runs_its_small_config_and_trains_one_step():
    for name in zoo.model_names():
        spec = zoo.get_model(name)
        model = spec.build().train()
        loss = spec.loss(model(*spec.inputs()), spec.targets())
        loss.backward()
        assert torch.isfinite(loss), name


def test_full_configs_are_the_real_sizes():
    assert zoo.get_model("alexnet").parameter_count("full") == 61_100_840  # torchvision's AlexNet
    assert zoo.get_model("resnet18").parameter_count("full") == 11_689_512
    assert zoo.get_model("alexnet").config("full")["image"] == 224


def test_unknown_model_lists_the_registered_ones():
    with pytest.raises(KeyError, match="unknown model 'vgg'.*alexnet.*word_lm"):
        zoo.get_model("vgg")


def test_register_model_validates_its_input():
    def build(cfg):
        return nn.Linear(2, 2)

    def inputs(cfg, g):
        return (torch.randn(1, 2, generator=g),)

    with pytest.raises(ValueError, match="already registered"):
        zoo.register_model(
            "mlp",
            build=build,
            inputs=inputs,
            small={"batch": 1, "num_classes": 2},
            full={"batch": 1, "num_classes": 2},
        )
    with pytest.raises(ValueError, match="lacks.*num_classes"):
        zoo.register_model("toy", build=build, inputs=inputs, small={"batch": 1}, full={"batch": 1})
    with pytest.raises(ValueError, match="letters, digits"):
        zoo.register_model(
            "../toy",
            build=build,
            inputs=inputs,
            small={"batch": 1, "num_classes": 2},
            full={"batch": 1, "num_classes": 2},
        )
    with pytest.raises(ValueError, match="unknown size"):
        zoo.get_model("mlp").config("medium")
