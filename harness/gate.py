"""Compatibility name: `python -m harness.gate --require-gpu` keeps working, the GPU-runner check
alone (tox -e gpu). The gate itself lives in harness.verdict.gate; `harness gate BASE HEAD` runs
it."""

import sys

from harness.verdict.gate import Outcome, exit_code, run_gate  # noqa: F401  (re-exported)


def main(argv: list[str]) -> int:
    from harness.core import exits

    if argv != ["--require-gpu"]:
        print(
            "usage: python -m harness.gate --require-gpu   "
            "(for comparisons: harness gate BASE HEAD)",
            file=sys.stderr,
        )
        return exits.BAD_INPUT
    from harness.core.env import require_gpu

    try:
        print(f"GPU present: {require_gpu()}", file=sys.stderr)
    except exits.NoGPU as exc:
        print(f"python -m harness.gate: {exc}", file=sys.stderr)
        return exc.code
    return exits.PASS


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
