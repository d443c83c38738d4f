"""`harness graph MODEL --frontend F [--full]`: print the canonical graph a golden would hold."""

import sys


def add_arguments(parser):
    from harness.capture import FRONTEND_HELP

    parser.add_argument("model", help="a model name from `harness models`")
    parser.add_argument("--frontend", "-f", required=True, metavar="F",
                        help="; ".join(f"{k}: {v}" for k, v in FRONTEND_HELP.items()))
    parser.add_argument("--full", action="store_true", help="use the full configuration")


def run(args) -> int:
    from harness.capture import FRONTENDS, CaptureError, capture_model
    from harness.zoo import model_names

    if args.model not in model_names():
        print(f"harness graph: unknown model {args.model!r}; choose from {', '.join(model_names())}",
              file=sys.stderr)
        return 2
    if args.frontend not in FRONTENDS:
        print(f"harness graph: unknown front end {args.frontend!r}; choose from {', '.join(FRONTENDS)}",
              file=sys.stderr)
        return 2
    try:
        captured = capture_model(args.model, args.frontend, "full" if args.full else "small")
    except NotImplementedError as exc:
        print(f"harness graph: {exc}", file=sys.stderr)
        return 2
    except CaptureError as exc:
        print(f"harness graph: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(captured.text)
    return 0
