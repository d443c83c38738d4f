"""Steps (change points) in one series of per-run values: the pure part of `harness history`
(harness.verdict.history explains the method), shared with the noise the gate learns from the
history (harness.verdict.noise), which splits a series where it steps."""

from __future__ import annotations

import statistics

from harness.verdict.compare import mann_whitney_p

MIN_SIDE = 4  # runs needed on each side of a step before it is confirmed
WINDOW = 8  # at most this many runs on each side enter the medians and the test
ALPHA = 0.05  # Mann-Whitney over per-run values; 4 vs 4 perfectly separated gives p = 0.029
CONFIRMED, POSSIBLE = "confirmed", "possible"


def _run_lengths(values: list[float], tolerance: float = 0.0) -> list[tuple[int, int]]:
    """Runs of equal values; with `tolerance`, of values within it of the run's first."""
    segs, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or _moved(values[start], values[i], tolerance):
            segs.append((start, i))
            start = i
    return segs


def _moved(a: float, b: float, tolerance: float) -> bool:
    return a != b if not tolerance else abs(_size(a, b)) > tolerance


def _potts_segments(
    values: list[float], threshold: float, min_side: int = MIN_SIDE
) -> list[tuple[int, int]]:
    """Segments of the L1 piecewise-constant fit (asv.step_detect.solve_potts_approx). The
    penalty per segment is what a step of the threshold's size saves over half of min_side runs:
    asv's automatic penalty (detect_steps) missed a 10% step over 2% noise in 20 runs."""
    from asv.step_detect import solve_potts_approx

    level = abs(statistics.median(values)) or 1.0
    gamma = min_side * threshold * level / 2
    right, _values, _dists = solve_potts_approx(values, [1.0] * len(values), gamma=gamma)
    return list(zip([0] + list(right[:-1]), right))


def _median(xs):
    return statistics.median(xs)


def _size(before: float, after: float) -> float:
    if before == 0:
        return 0.0 if after == 0 else float("inf")
    return after / before - 1


def find_steps(
    values: list[float],
    exact: bool,
    threshold: float,
    min_side: int = MIN_SIDE,
    tolerance: float = 0.0,
) -> list[dict]:
    """Steps in one series: dicts with index (0-based, first point after), status, before,
    after, size, p. Pure function of the values, for tests. `min_side`: runs needed on each side
    (MIN_SIDE unless `harness history --min-side` says otherwise); `tolerance` (with `exact`): a
    counter that steps only beyond it (instruction counts)."""
    if len(values) < 2:
        return []
    segs = (
        _run_lengths(values, tolerance) if exact else _potts_segments(values, threshold, min_side)
    )
    longs = [s for s in segs if s[1] - s[0] >= min_side]
    found = []

    def first_after(lo: int, hi: int, b: float, a: float) -> int:
        for i in range(lo, hi):
            if abs(values[i] - a) < abs(values[i] - b):
                return i
        return hi

    def significant(bv, av) -> tuple[bool, float | None, float]:
        b, a = _median(bv), _median(av)
        size = _size(b, a)
        if exact:
            return _moved(b, a, tolerance), None, size
        p = mann_whitney_p(bv, av)
        return abs(size) >= threshold and p < ALPHA, p, size

    for left, right in zip(longs, longs[1:]):
        bv = values[max(left[0], left[1] - WINDOW) : left[1]]
        av = values[right[0] : min(right[1], right[0] + WINDOW)]
        ok, p, size = significant(bv, av)
        if ok:
            found.append(
                dict(
                    index=first_after(left[1], right[0], _median(bv), _median(av)),
                    status=CONFIRMED,
                    before=_median(bv),
                    after=_median(av),
                    size=size,
                    p=p,
                    n_before=len(bv),
                    n_after=len(av),
                    last_before=left[1] - 1,
                )
            )
    if longs and longs[-1][1] < len(values):  # the newest runs left the last long level
        left = longs[-1]
        bv = values[max(left[0], left[1] - WINDOW) : left[1]]
        av = values[left[1] :]
        b, a = _median(bv), _median(av)
        size = _size(b, a)
        same_side = all(v > b for v in av) or all(v < b for v in av)
        if same_side and (_moved(b, a, tolerance) if exact else abs(size) >= threshold):
            found.append(
                dict(
                    index=left[1],
                    status=POSSIBLE,
                    before=b,
                    after=a,
                    size=size,
                    p=None,
                    n_before=len(bv),
                    n_after=len(av),
                    last_before=left[1] - 1,
                )
            )
    return found
