"""Reading callgrind's output: instructions per function, grouped by library.

callgrind writes one file per dump (`CALLGRIND_DUMP_STATS_AT`, harness.measure.instructions) in
its documented text format. The counter runs valgrind with `--compress-strings=no
--compress-pos=no`, so every `fn=`/`cfn=` line carries the full, demangled name and every cost
line an absolute position. What matters here:

    ob=OBJECT        the shared object (or executable) of the functions that follow
    fn=NAME          the function whose *self* costs the following cost lines are
    cfn=NAME         a callee; the next `calls=` line says a call to it follows, and the cost
    calls=N TARGET   line after that is the call's *inclusive* cost, not the caller's self cost
    POS COST         a cost line (one position column per `positions:` entry, then Ir)

A function's self count is the sum of its own cost lines; its inclusive count is self plus the
inclusive cost of its calls to other functions. Recursion levels (`fn'2`) are merged and a
function's calls to itself are left out of its inclusive count; recursion through other
functions (Python's eval loop calling itself through C) still counts twice, so inclusive counts
are capped at the dump's total. Rankings use self counts: inclusive ones put the interpreter
loop and the dispatcher on top of every change.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

LIBTORCH, PYTHON, INDUCTOR, OTHER = "libtorch", "python", "inductor kernel", "other"
GROUPS = (LIBTORCH, PYTHON, INDUCTOR, OTHER)
_RECURSION = re.compile(r"'\d+$")


@dataclasses.dataclass
class Dump:
    """One callgrind dump: its trigger name, total instructions, and per-function counts keyed
    by (object, function), both totals over the dump (not per call)."""

    trigger: str
    total: int
    self_counts: dict[tuple[str, str], int]
    inclusive: dict[tuple[str, str], int]


def parse(path: str | os.PathLike) -> Dump:
    """One callgrind output file (uncompressed names and positions)."""
    self_counts: dict[tuple[str, str], int] = {}
    calls_out: dict[tuple[str, str], int] = {}
    trigger, total, npos = "", None, 1
    ob = fn = cob = cfn = ""
    in_call = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            head = line[0]
            if head.isdigit() or head in "+-*":
                parts = line.split()
                if len(parts) <= npos:
                    continue
                cost = int(parts[npos])
                key = (ob, fn)
                if in_call:
                    in_call = False
                    if (cob or ob, cfn) != key:  # a call to itself is already in its self count
                        calls_out[key] = calls_out.get(key, 0) + cost
                    cob = ""  # cob= and cfn= name the target of the next call only
                else:
                    self_counts[key] = self_counts.get(key, 0) + cost
                continue
            name, sep, value = line.partition("=")
            if sep:
                if name == "ob":
                    ob = value
                elif name == "fn":
                    fn = _RECURSION.sub("", value)
                elif name == "cob":
                    cob = value
                elif name == "cfn":
                    cfn = _RECURSION.sub("", value)
                elif name == "calls":
                    in_call = True
                continue
            name, sep, value = line.partition(":")
            if name == "desc" and value.strip().startswith("Trigger:"):
                trigger = value.strip()[len("Trigger:") :].strip()
                trigger = trigger.removeprefix("Client Request:").strip()
            elif name == "totals":
                total = int(value.split()[0])
            elif name == "positions":
                npos = len(value.split())
    if total is None:
        total = sum(self_counts.values())
    inclusive = {k: min(total, v + calls_out.get(k, 0)) for k, v in self_counts.items()}
    return Dump(trigger, total, self_counts, inclusive)


def group_of(obj: str, kernel_dirs: tuple[str, ...] = ()) -> str:
    """The library group of a shared object's path: libtorch, the Python interpreter, a kernel
    inductor generated (a .so under its cache folder), or other (libc, libm, OpenMP, numpy...)."""
    name = os.path.basename(obj)
    if any(obj.startswith(d.rstrip("/") + "/") for d in kernel_dirs if d) or "torchinductor" in obj:
        return INDUCTOR
    if name.startswith(("libtorch", "libc10")) or "/torch/_C" in obj:
        return LIBTORCH
    if name.startswith("libpython") or re.match(r"python\d", name) or "/lib-dynload/" in obj:
        return PYTHON
    return OTHER


def function_key(obj: str, fn: str, group: str) -> str:
    """How a function is named across runs: `library:function`. An inductor kernel's .so is
    named after a hash of its code, so its library is the group, not the file name; code without
    a symbol (named by its address) is one row."""
    lib = "<inductor>" if group == INDUCTOR else os.path.basename(obj) or "???"
    if lib == "???" and fn.startswith("0x"):  # code with no symbol: oneDNN's JIT kernels mostly,
        fn = "<code without symbols>"  # at addresses that differ from run to run
    return f"{lib}:{fn}"


def summarize(
    dumps: list[Dump], calls: int, top: int, kernel_dirs: tuple[str, ...] = (), overhead: int = 0
) -> dict:
    """Per call, averaged over `dumps` (one per memory layout the workload was counted in): the
    total, each group's self count, and the `top` functions by self count (with their inclusive
    counts). `overhead`: instructions of an empty measurement (the client requests themselves),
    taken off each dump's total before dividing."""
    per = calls * len(dumps)
    groups = dict.fromkeys(GROUPS, 0.0)
    merged: dict[str, dict] = {}
    for dump in dumps:
        for (obj, fn), count in dump.self_counts.items():
            group = group_of(obj, kernel_dirs)
            groups[group] += count / per
            name = function_key(obj, fn, group)  # one name in two objects ("???" mostly): one row
            m = merged.setdefault(
                name, {"function": name, "group": group, "self": 0.0, "inclusive": 0.0}
            )
            m["self"] += count / per
            m["inclusive"] += dump.inclusive[(obj, fn)] / per
    ranked = sorted(merged.values(), key=lambda r: (-r["self"], r["function"]))
    layouts = [round((d.total - overhead) / calls, 1) for d in dumps]
    return {
        "per_call": round(sum(layouts) / len(layouts), 1),
        "layouts": layouts,
        "groups": {g: round(v, 1) for g, v in groups.items()},
        "functions": [
            dict(r, self=round(r["self"], 1), inclusive=round(r["inclusive"], 1))
            for r in ranked[:top]
        ],
        "functions_total": len(ranked),
    }


def dump_files(prefix: Path) -> list[Path]:
    """callgrind's files for one `--callgrind-out-file=PREFIX.%p`: PREFIX.<pid>[.<part>]."""
    return sorted(prefix.parent.glob(prefix.name + ".*"))
