"""`harness graph MODEL --frontend F [--full]`: print the canonical graph a golden would hold."""

import sys

from harness.core import exits, settings


def add_arguments(parser):
    from harness.golden.capture import FRONTEND_HELP

    parser.add_argument("model", help="a model name from `harness models`")
    parser.add_argument(
        "--frontend",
        "-f",
        required=True,
        metavar="F",
        help="; ".join(f"{k}: {v}" for k, v in FRONTEND_HELP.items()),
    )
    parser.add_argument("--full", action="store_true", help="use the full configuration")


def run(args) -> int:
    from harness.core.user_models import load_user_models
    from harness.core.zoo import model_names
    from harness.golden.capture import FRONTENDS, CaptureError, capture_model

    load_user_models()  # models of your own: harness_models (ini), HARNESS_MODELS, entry points
    if args.model not in model_names():
        raise exits.BadInput(
            f"unknown model {args.model!r}; choose from {', '.join(model_names())}. "
            f"A model of your own is seen once its module is named in the ini option "
            f"harness_models or in {settings.MODELS.name} (see README 'Adding a model')."
        )
    if args.frontend not in FRONTENDS:
        raise exits.BadInput(
            f"unknown front end {args.frontend!r}; choose from {', '.join(FRONTENDS)}"
        )
    try:
        captured = capture_model(args.model, args.frontend, "full" if args.full else "small")
    except NotImplementedError as exc:
        raise exits.BadInput(str(exc)) from None
    except CaptureError as exc:  # the model itself failed under this front end
        print(f"harness graph: {exc}", file=sys.stderr)
        return exits.FAILED
    sys.stdout.write(captured.text)
    return exits.PASS
