"""The runs layer's one worker entry point: what a run needs done in a process of its own, for
isolation (a GPU-check step that may hang, a fingerprint read with another interpreter), without
going through the `harness` command line.

    python -m harness.runs.worker gpu-check-step NAME --out DIR --work DIR --device cuda
    python -m harness.runs.worker fingerprint          this interpreter's fingerprint as JSON
    python -m harness.runs.worker graph-capture --out FILE [--size full] [--model M] [--frontend F]
                                                        every case's canonical graph, as JSON
    python -m harness.runs.worker gpu-time-trial --out FILE --device cuda --slowdown 0.03
                                                        one trial of the GPU-time proof
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.runs.worker")
    sub = parser.add_subparsers(dest="job", required=True)
    step = sub.add_parser(
        "gpu-check-step", help="one step of the GPU proof kit (harness.runs.gpucheck)"
    )
    step.add_argument("name")
    step.add_argument("--out", required=True)
    step.add_argument("--work", required=True)
    step.add_argument("--device", required=True)
    sub.add_parser(
        "fingerprint", help="harness.core.env.fingerprint() of this interpreter, as JSON"
    )
    graphs = sub.add_parser(
        "graph-capture", help="every model under every front end, as harness graph-diff needs"
    )
    graphs.add_argument("--out", required=True)
    graphs.add_argument("--size", default="small", choices=("small", "full"))
    graphs.add_argument("--model", action="append")
    graphs.add_argument("--frontend", action="append")
    trial = sub.add_parser(
        "gpu-time-trial", help="one trial of the GPU-time proof (harness.runs.gpuproof)"
    )
    trial.add_argument("--out", required=True)
    trial.add_argument("--device", default="cuda")
    trial.add_argument("--slowdown", type=float, required=True)
    args = parser.parse_args(argv)
    if args.job == "gpu-time-trial":
        from harness.core import exits

        return exits.guarded("gpu-time trial", lambda: _gpu_time_trial(args))
    if args.job == "graph-capture":
        from harness.core import exits

        return exits.guarded("graph-capture", lambda: _graph_capture(args))
    if args.job == "fingerprint":
        from harness.core.env import fingerprint

        print(json.dumps(fingerprint(), indent=2, sort_keys=True))
        return 0
    import signal

    from harness.core import exits
    from harness.core.processes import die_with_parent
    from harness.runs import gpucheck

    # the kit's orchestrator gone (killed outright): an interrupt, so that what this step started
    # in sessions of its own (asv: harness.runs.asv) is ended as on Ctrl-C
    die_with_parent(signal.SIGINT)
    return exits.guarded(
        f"gpu-check step {args.name}",
        lambda: gpucheck.run_step(args.name, args.out, args.work, args.device),
    )


def _gpu_time_trial(args) -> int:
    from pathlib import Path

    from harness.core.files import write_json_atomic
    from harness.runs import gpuproof

    # started by run_in_session, which ends it with its parent
    write_json_atomic(Path(args.out), gpuproof.measure_trial(args.device, args.slowdown))
    return 0


def _graph_capture(args) -> int:
    from pathlib import Path

    from harness.core.files import write_json_atomic
    from harness.golden.graphdiff import capture_all

    write_json_atomic(Path(args.out), capture_all(args.size, args.model, args.frontend))
    return 0


if __name__ == "__main__":
    sys.exit(main())
