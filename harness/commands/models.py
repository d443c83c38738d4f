"""`harness models`: the zoo, with parameter counts of its small, full and CUDA configurations,
including models of your own (named by the ini option harness_models, HARNESS_MODELS or the
harness.models entry points)."""


def add_arguments(parser):
    pass


def run(args) -> int:
    from harness.core.table import render
    from harness.core.user_models import load_user_models
    from harness.core.zoo import get_model, model_names
    from harness.golden.capture import FRONTENDS

    load_user_models()
    rows = []
    for name in model_names():
        spec = get_model(name)
        frontends = ",".join(f for f in FRONTENDS if f not in spec.unsupported)
        rows.append(
            (
                name,
                f"{spec.parameter_count('small'):,}",
                f"{spec.parameter_count('full'):,}",
                f"{spec.parameter_count('cuda'):,}",
                frontends,
                spec.description,
            )
        )
    print(
        render(
            ["model", "small params", "full params", "cuda params", "front ends", "description"],
            rows,
            align=("left", "right", "right", "right", "left", "left"),
        ),
        end="",
    )
    return 0
