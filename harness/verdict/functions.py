"""Where an instruction count went: the functions whose self counts changed most between two runs.

Each side's run record keeps, per instruction row, the top functions by self (exclusive) count
per call and each library group's self count (harness.measure.instructions). Self counts are
the ones to rank: inclusive counts put the interpreter loop and the dispatcher on top of every
change with the same delta. A function in one side's top list only is compared with 0 on the
other side, and marked so: it may sit just below that side's cut, so its change lies between
what is sure (its count less that cut) and its whole count, and it ranks by what is sure.
"""

from __future__ import annotations

import dataclasses

# The parts of an instruction fingerprint that must agree for counts to compare: another valgrind,
# CPU capability (kernel dispatch), Python build or thread count changes what is counted, and for
# a compile row the instruction set and -march inductor compiled its kernels for. The torch
# version is not among them: comparing torch builds is what `harness ab` is for.
COMPARABLE_KEYS = (
    "valgrind",
    "cpu_capability",
    "python",
    "threads",
    "inductor_vec_isa",
    "inductor_march",
)


@dataclasses.dataclass(frozen=True)
class Change:
    function: str
    group: str
    base: float  # self instructions per call (0 where it is not in that side's list)
    head: float
    # in one side's top list only: the smallest count in the other side's list where that list
    # was cut (0: in both lists, or the other side listed every function it ran)
    cut: float = 0.0

    @property
    def partial(self) -> bool:
        return self.cut > 0

    @property
    def delta(self) -> float:
        return self.head - self.base

    @property
    def sure(self) -> float:
        """The part of the change the lists prove: all of it, or for a partial one its count
        less the other side's cut (0 where it may not have moved at all)."""
        if not self.partial:
            return self.delta
        return max(0.0, abs(self.delta) - self.cut) * (1 if self.delta > 0 else -1)

    def text(self) -> str:
        name = short_name(self.function)
        if self.partial:
            side = "base" if self.head else "head"
            near, far = sorted((self.sure, self.delta), key=abs)
            return f"{name} {_compact(near)}..{_compact(far)}/call (outside {side}'s top functions)"
        rel = f" ({self.delta / self.base:+.1%})" if self.base else " (new)"
        return f"{name} {_compact(self.delta)}/call{rel}"


def short_name(function: str) -> str:
    """`libtorch_cpu.so:at::native::add_kernel(at::TensorIteratorBase&)` -> the function without
    its library and argument list, cut to a readable length."""
    name = (
        function.split(":", 1)[1] if ":" in function and not function.startswith("::") else function
    )
    name = _without_arguments(name)
    return name if len(name) <= 70 else name[:67] + "..."


def _without_arguments(name: str) -> str:
    """Cut the final, balanced `(...)` (and a trailing ` const`): the argument list."""
    body = name.removesuffix(" const")
    if not body.endswith(")"):
        return name
    depth = 0
    for i in range(len(body) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(body[i], 0)
        if depth == 0:
            return body[:i] if i else name
    return name


def _compact(x: float) -> str:
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:+.3g}{suffix}"
    return f"{x:+.0f}"


def not_comparable(base: dict | None, head: dict | None) -> str | None:
    """Why two rows' counts do not compare (their fingerprints differ), or None."""
    if not base or not head:
        side = "either side" if not (base or head) else ("base" if not base else "head")
        return (
            f"no instruction fingerprint on {side} (the run record written by harness keeps "
            "it beside the count)"
        )
    # an instruction fingerprint is an object (harness.core.records checked it when read)
    fb, fh = base.get("fingerprint") or {}, head.get("fingerprint") or {}
    fb, fh = (f if isinstance(f, dict) else {} for f in (fb, fh))
    diffs = [f"{k} {fb.get(k)} vs {fh.get(k)}" for k in COMPARABLE_KEYS if fb.get(k) != fh.get(k)]
    return "; ".join(diffs) or None


def layout_error(base: dict | None, head: dict | None) -> float | None:
    """The relative standard error of head/base from the spread of the memory layouts each side
    was counted in (harness.measure.instructions: the row is their mean), or None where a side
    has fewer than two layouts."""
    import statistics

    parts = []
    for side in (base, head):
        layouts = (side or {}).get("layouts") or []
        if len(layouts) < 2:
            return None
        mean = statistics.fmean(layouts)
        if not mean:
            return None
        parts.append((statistics.stdev(layouts) / mean) ** 2 / len(layouts))
    return sum(parts) ** 0.5


def _cut(side: dict) -> float:
    """The smallest self count a side's list holds where the list was cut (a function missing
    from it may sit anywhere below), else 0: missing means not called."""
    listed = side.get("functions") or []
    whole = side.get("functions_total")
    if not listed or (whole is not None and whole <= len(listed)):
        return 0.0
    return min(float(f["self"]) for f in listed)


def changes(base: dict, head: dict) -> list[Change]:
    """Every function in either side's top list, largest sure |self delta| first (all of a
    change both lists show; for one list only, the part its cut proves)."""
    b = {f["function"]: f for f in base.get("functions") or []}
    h = {f["function"]: f for f in head.get("functions") or []}
    cuts = {"base": _cut(base), "head": _cut(head)}
    out = []
    for name in set(b) | set(h):
        fb, fh = b.get(name), h.get(name)
        missing = "base" if fb is None else "head" if fh is None else None
        out.append(
            Change(
                name,
                (fb or fh).get("group", "other"),
                float(fb["self"]) if fb else 0.0,
                float(fh["self"]) if fh else 0.0,
                cuts[missing] if missing else 0.0,
            )
        )
    return sorted(out, key=lambda c: (-abs(c.sure), -abs(c.delta), c.function))


def group_changes(base: dict, head: dict) -> list[tuple[str, float, float]]:
    """(group, base, head) self counts per call for every library group that moved."""
    gb, gh = base.get("groups") or {}, head.get("groups") or {}
    return [
        (g, float(gb.get(g, 0)), float(gh.get(g, 0)))
        for g in sorted(set(gb) | set(gh))
        if gb.get(g, 0) != gh.get(g, 0)
    ]


def explain(base: dict | None, head: dict | None, top: int = 3) -> str:
    """One line for a changed row: the functions whose self counts changed most."""
    if not (base and head):
        return ""
    moved = [c for c in changes(base, head) if c.delta][:top]
    return "; ".join(c.text() for c in moved)
