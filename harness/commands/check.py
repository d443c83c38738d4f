"""`harness check [MODEL...] [--dataset MODULE:FACTORY] [--against FILE] [--json FILE]`: checks
for the silent bugs, the ones that raise nothing.

Models (default: every registered model, your own included, when neither --dataset nor
--against is given): eval determinism, train/eval differ, batch norm on running statistics in
eval, no autograd graph in inference, reproducible training step (harness.measure.checks).
Datasets: the harness's own synthetic image dataset (by default) and each --dataset:
augmentation across epochs and workers, output shape over aspect ratios, loader settings
(harness.measure.datachecks). --against: every difference between this environment and a
recorded one (harness.verdict.drift).

Exit 1 when a check fails (each with its reason and fix), 0 when all pass, 3 for bad input.

--json FILE: the schema below (SCHEMA, also shown by `harness check --help`).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from harness.commands import options
from harness.core import exits, settings

SCHEMA = """--json FILE schema (version 1), written atomically:
    {"schema": 1, "passed": bool, "exit_code": 0 | 1,
     "fingerprint": {...this environment (harness.core.env.fingerprint)...},
     "subjects": [{"kind": "model" | "dataset" | "environment", "name": str,
                   "findings": [{"check": str, "status": "pass" | "FAIL" | "n/a" | "info",
                                 "reason": str, "fix": str, "details": {...}}]}]}
"info" records a setting and never fails; "environment drift" details hold "differences":
[{"setting", "recorded", "now", "kind": "environment" | "setting"}] and "source"."""

OWN_DATASET = "harness synthetic images (the dataloader suite's pipeline)"
WIDTH = 100  # the reason column wraps here: a terminal, and a CI log, stay readable


def add_arguments(parser):
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = SCHEMA
    parser.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help="models to check (default: every registered model, your own included: "
        f"harness_models ini option, {settings.MODELS.name}, entry points)",
    )
    parser.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="check a data pipeline: FACTORY() in MODULE (a dotted module or a .py path) "
        "returns a Dataset (with its `transform`) or a DataLoader; repeatable",
    )
    parser.add_argument(
        "--against",
        metavar="FILE",
        help="list every difference between this environment and a recorded one: a golden "
        "(.expect), a fingerprint.json, a result file, a run-record folder, a run id, "
        "`latest` or `baseline`",
    )
    parser.add_argument("--json", metavar="FILE", help="write the findings as JSON (schema below)")
    options.results_dir(parser)
    parser.add_argument(
        "--machine",
        help="the machine whose runs --against looks in, where the results "
        "root holds several (default: the only one)",
    )


def _dataset(spec: str):
    from harness.core.user_models import load_module

    module_spec, sep, factory_name = spec.rpartition(":")
    if not sep or not module_spec or not factory_name:
        raise exits.BadInput(
            f"--dataset {spec!r}: write MODULE:FACTORY, e.g. mydata.py:make_dataset or "
            "mypkg.data:train_set"
        )
    module = load_module(module_spec, f"--dataset {spec}")
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise exits.BadInput(
            f"--dataset {spec!r}: {module_spec} has no callable {factory_name!r}; "
            f"its callables: {', '.join(found) or 'none'}"
        )
    try:
        obj = factory()
    except Exception as exc:
        raise exits.BadInput(
            f"--dataset {spec!r}: {factory_name}() raised {type(exc).__name__}: {exc}; "
            "fix the factory so it builds the dataset with no arguments"
        ) from exc
    if not hasattr(obj, "__getitem__") and not hasattr(obj, "dataset"):
        raise exits.BadInput(
            f"--dataset {spec!r}: {factory_name}() returned a {type(obj).__name__}; "
            "return a torch.utils.data.Dataset or DataLoader"
        )
    return obj


def _recorded(spec: str, args) -> tuple[dict, str, tuple | None]:
    """(fingerprint, source, keys it records or None for all)."""
    from harness.golden import store

    path = Path(spec)
    if path.is_file() and path.suffix != ".json":
        try:
            golden = store.read(path)
        except store.GoldenError as exc:
            raise exits.BadInput(f"--against {spec}: {exc}") from None
        keys = tuple(k for k in ("torch",) if k in golden.header)
        if not keys:
            raise exits.BadInput(f"--against {spec}: the golden header records no torch version")
        return {k: golden.header[k] for k in keys}, f"golden {path}", keys
    from harness.verdict import drift, results

    fp, source = drift.recorded_fingerprint(
        spec, results.results_root(args.results_dir), args.machine
    )
    return fp, source, None


def _print(kind: str, name: str, findings, out) -> None:
    from harness.core.table import render

    print(f"\n{kind} {name}", file=out)
    rows = [
        (
            f.check,
            f.status,
            textwrap.fill(
                f.reason.rstrip(".")
                + "."
                + (f" Fix: {f.fix.rstrip('.')}." if f.fix and f.failed else ""),
                WIDTH,
                break_long_words=False,
                break_on_hyphens=False,
            ),
        )
        for f in findings
    ]
    print(render(["check", "status", "reason / fix"], rows), end="", file=out)


def run(args) -> int:
    from harness.core.env import fingerprint
    from harness.core.files import write_json_atomic
    from harness.core.user_models import load_user_models
    from harness.core.zoo import get_model, model_names

    load_user_models()  # models of your own: harness_models (ini), HARNESS_MODELS, entry points
    unknown = [m for m in args.models if m not in model_names()]
    if unknown:
        raise exits.BadInput(
            f"unknown model {', '.join(map(repr, unknown))}; choose from "
            f"{', '.join(model_names())}. A model of your own is seen once its module is "
            f"named in the ini option harness_models or in {settings.MODELS.name} (see README "
            "'Adding a model')."
        )
    everything = not (args.models or args.dataset or args.against)
    datasets = [(spec, _dataset(spec)) for spec in args.dataset]  # bad input before any check runs
    recorded = _recorded(args.against, args) if args.against else None

    from harness.measure import checks, datachecks

    subjects = []
    for name in model_names() if everything else args.models:
        subjects.append(("model", name, checks.check_model(get_model(name))))
    if everything:
        subjects.append(
            ("dataset", OWN_DATASET, datachecks.check_dataset(datachecks.own_loader(), "dataset"))
        )
    for spec, obj in datasets:
        subjects.append(("dataset", spec, datachecks.check_dataset(obj, "dataset")))
    current = fingerprint()
    if recorded:
        from harness.verdict import drift

        fp, source, keys = recorded
        subjects.append(("environment", args.against, [drift.drift(fp, current, source, keys)]))

    failed = [(kind, name, f) for kind, name, found in subjects for f in found if f.failed]
    for kind, name, found in subjects:
        _print(kind, name, found, sys.stdout)
        if kind == "environment" and found[0].details.get("differences"):
            from harness.core.table import render

            rows = [
                (d["setting"], d["recorded"], d["now"], d["kind"])
                for d in found[0].details["differences"]
            ]
            print(render(["setting", "recorded", "now", "kind"], rows), end="")
    checked = sum(len(found) for _, _, found in subjects)
    print(
        f"\n{checked} checks on {len(subjects)} {'subject' if len(subjects) == 1 else 'subjects'}: "
        + (
            f"{len(failed)} FAILED ({', '.join(f'{n}: {f.check}' for _, n, f in failed)})"
            if failed
            else "all pass"
        )
    )
    code = exits.REGRESSION if failed else exits.PASS
    if args.json:
        write_json_atomic(
            args.json,
            {
                "schema": 1,
                "passed": not failed,
                "exit_code": code,
                "fingerprint": current,
                "subjects": [
                    {"kind": kind, "name": name, "findings": [f.as_dict() for f in found]}
                    for kind, name, found in subjects
                ],
            },
        )
    return code
