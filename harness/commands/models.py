"""`harness models`: the zoo, with parameter counts of its small, full and CUDA configurations,
including models of your own (named by the ini option harness_models, HARNESS_MODELS or the
harness.models entry points). A column says who registered each model: in a project of its own
the packaged suites cover only the models it registers, not the built-in ones; another its
declared kind (register_model(kind=...): what the sanity bands read; "-" where none)."""


def add_arguments(parser):
    pass


def run(args) -> int:
    from harness.core.table import render
    from harness.core.user_models import load_user_models
    from harness.core.zoo import BUILTIN_ORIGIN, get_model, model_names
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
                spec.kind or "-",
                "built-in" if spec.origin == BUILTIN_ORIGIN else _shown(spec.origin),
                spec.description,
            )
        )
    print(
        render(
            [
                "model",
                "small params",
                "full params",
                "cuda params",
                "front ends",
                "kind",
                "registered by",
                "description",
            ],
            rows,
            align=("left", "right", "right", "right", "left", "left", "left", "left"),
        ),
        end="",
    )
    return 0


def _shown(origin: str) -> str:
    """A module's path relative to the working directory where it lies below it."""
    import pathlib

    path = pathlib.Path(origin)
    try:
        return str(path.relative_to(pathlib.Path.cwd().resolve()))
    except ValueError:
        return str(path)
