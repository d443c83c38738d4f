"""One side's benchmark process in `harness ab`'s interleaved pairs (harness.runs.interleave).

Run by the side's own interpreter as `python <a copy of this file> BENCH_DIR CACHE_DIR MODE`
(a copy, not `-m`: a revision under test may have no such module, and the side's own harness
package must be the one its benchmarks import). Only the standard library and asv_runner, which
asv installs beside every benchmark environment, are used here.

It discovers the suite as asv does, then answers one JSON request per line on stdin with one
JSON line on its stdout (the benchmarks' own prints go to stderr):

    {"row": "models.Inference.track_inference_time-8", "cpus": [0] or null}
        -> {"ready": true} | {"skipped": true} | {"error": "..."}: the row set up, in a forked
        child (MODE "fork": the suite is imported once, every row gets a fresh process, as asv's
        forkserver) or in this process (MODE "once": one row, then exit; CUDA, where a forked
        CUDA context is unusable)
    {"block": true} -> {"value": <what the benchmark returned>, "answers": {row: facts}}
        | {"skipped": true} | {"error": ...}; "answers": the answer checks the block's call made
        (harness.measure.answers.LAST of the side's own harness, where it has one), as the run
        record keeps them
    {"end": true}   -> {"done": true}: teardown, the row's process exits
    a row's process that dies (a crash, a signal) is answered for by this one: {"died": "..."}

The controller sends a request only after the answer to the one before, so no line is ever
read ahead into a buffer a fork would duplicate.
"""

import json
import math
import os
import pickle
import sys
import traceback


def _readline(fd):
    out = bytearray()
    while True:
        ch = os.read(fd, 1)
        if not ch:
            return None
        if ch == b"\n":
            return json.loads(out.decode())
        out += ch


def _send(out, msg):
    out.write(json.dumps(msg) + "\n")
    out.flush()


def _cached(bench, cache_dir):
    # setup_cache runs once per key and run, as asv runs it, and is shared through a pickle
    key = bench.setup_cache_key
    if key is None:
        bench.set_cache(None)
        return
    path = os.path.join(cache_dir, "".join(c if c.isalnum() else "_" for c in key) + ".pickle")
    if not os.path.exists(path):
        cache = bench.do_setup_cache()
        with open(path + ".tmp", "wb") as f:
            pickle.dump(cache, f)
        os.replace(path + ".tmp", path)
    with open(path, "rb") as f:
        bench.set_cache(pickle.load(f))


def _answers():
    """row -> the record's facts of every answer check this process made: what the side's own
    harness keeps in harness.measure.answers.LAST (nothing where its harness has no answer
    checks, or the row's benchmark never imported them)."""
    last = getattr(sys.modules.get("harness.measure.answers"), "LAST", None)
    out = {}
    for row, answer in (last if isinstance(last, dict) else {}).items():
        try:
            out[str(row)] = answer.to_facts()
        except Exception:  # another revision's answer: left out, the timing stands
            traceback.print_exc()
    return out


def _serve_row(req, bench_dir, cache_dir, out):
    from asv_runner.benchmarks.mark import SkipNotImplemented
    from asv_runner.discovery import get_benchmark_from_name

    if req.get("cpus"):
        os.sched_setaffinity(0, req["cpus"])
    try:
        bench = get_benchmark_from_name(bench_dir, req["row"])
        _cached(bench, cache_dir)
        skip = bench.do_setup()
    except Exception:
        _send(out, {"error": traceback.format_exc()})
        skip = None
    else:
        _send(out, {"skipped": True} if skip else {"ready": True})
    while True:
        msg = _readline(0)
        if msg is None or msg.get("end"):
            break
        if skip is not False:
            _send(out, {"skipped": True} if skip else {"error": "the row's setup failed"})
            continue
        try:
            value = bench.do_run()
        except SkipNotImplemented:
            _send(out, {"skipped": True})
            continue
        except Exception:
            _send(out, {"error": traceback.format_exc()})
            continue
        if isinstance(value, float) and math.isnan(value):
            _send(out, {"skipped": True})
        else:
            _send(out, {"value": value, "answers": _answers()})
    if skip is not None:
        try:
            bench.do_teardown()
        except Exception:
            traceback.print_exc()  # the row's values stand; its stderr shows the teardown's error
    if msg is None:  # the controller is gone
        return False
    _send(out, {"done": True})
    return True


def main(argv):
    bench_dir, cache_dir, mode = argv  # cache_dir: the side's, shared by its processes
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what benchmarks print must not reach the protocol
    sys.stdout = sys.stderr
    from asv_runner.discovery import list_benchmarks

    path = os.path.join(cache_dir, f"benchmarks-{os.getpid()}.json")
    with open(path, "w") as f:
        list_benchmarks(bench_dir, f)
    _send(out, {"benchmarks": path})
    while True:
        req = _readline(0)
        if req is None:
            return 0
        if mode == "once":
            _serve_row(req, bench_dir, cache_dir, out)
            return 0
        pid = os.fork()
        if pid == 0:
            done = False
            try:
                done = _serve_row(req, bench_dir, cache_dir, out)
            except BaseException:
                traceback.print_exc()
            finally:
                out.flush()
                os._exit(0 if done else 1)
        _, status = os.waitpid(pid, 0)
        if status:  # the row's process died before its answer "done": the controller waits
            _send(out, {"died": f"the row's process ended with wait status {status}"})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
