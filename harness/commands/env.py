"""`harness env`: print the environment fingerprint recorded with every result."""

import json


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="print JSON instead of aligned text")


def run(args) -> int:
    from harness.env import fingerprint, machine_name

    fp = fingerprint()
    fp["machine_name"] = machine_name()
    if args.json:
        print(json.dumps(fp, indent=2, sort_keys=True))
        return 0
    for key, value in fp.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                print(f"{key + '.' + sub:<34} {v}")
        else:
            print(f"{key:<34} {value}")
    return 0
