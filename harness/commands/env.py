"""`harness env`: print the environment fingerprint recorded with every result."""

import json


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    from harness.core.env import fingerprint, machine_name
    from harness.core.table import render

    fp = fingerprint()
    fp["machine_name"] = machine_name()
    if args.json:
        print(json.dumps(fp, indent=2, sort_keys=True))
        return 0
    rows = []
    for key, value in fp.items():
        if isinstance(value, dict):
            rows += [(f"{key}.{sub}", v) for sub, v in value.items()]
        else:
            rows.append((key, value))
    print(render(["setting", "value"], rows), end="")
    return 0
