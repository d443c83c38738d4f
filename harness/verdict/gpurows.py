"""GPU-time rows: how a raw CUDA timing is judged between runs, and how a row's device facts are
shown (`busy NN%` / `ATen share NN%`) wherever rows are shown.

A raw time measured on CUDA (harness.measure.gputime: CUDA events over batches, sampled until
the median is steady) keeps its noise in the run record (row-facts/, harness.measure.rowfacts).
Such a row is judged without a calibrated noise band, between comparable GPUs only:
- the same GPU model (else the whole comparison is "not comparable", exit 3, unless
  --allow-env-change, and then these rows are "not comparable") and the same clock policy;
- the same physical card (UUID): another card of the model is "different card", judged only at
  a threshold measured across cards (none is measured yet: not judged, saying so);
- a row whose samples were mostly dropped while a thermal or power limit was active is
  "throttled", not judged;
- the threshold is the larger of FLOOR and NOISE_MULTIPLE x the two runs' combined noise (each
  run's relative standard error of the median); a row whose threshold would exceed NOISY is not
  judged ("launch-bound and noisy" when its busy fraction is below one half, else "noisy");
- then the median GPU time per call moved beyond the threshold is a REGRESSION (slower) or
  improved (faster).
FLOOR and NOISE_MULTIPLE are provisional until A/A runs on a GPU set them (docs/gpu.md).
"""

from __future__ import annotations

import math

LAUNCH_BOUND = 0.5  # a busy fraction below this is launch-bound: the GPU waited more than it worked
# what advice and the sanity bands say of such a row instead of helps / hurts / outside the range
LAUNCH_BOUND_VERDICT = "launch-bound at this size"
FLOOR = 0.02  # provisional: the smallest change a GPU-time row is judged at
NOISE_MULTIPLE = 5.0  # provisional: the threshold is at least this many combined noises
NOISY = 0.10  # a GPU row whose threshold would exceed this is not judged
THROTTLED_SHARE = 0.5  # more than this share of a row's samples dropped: throttled


def is_gpu(facts: dict | None) -> bool:
    return bool(facts) and facts.get("device") == "cuda"


def busy_values(facts: dict | None) -> list[float | None]:
    """The busy fraction of each side of a CUDA row (one for a plain row), None where unknown;
    [] for a row that is not a CUDA row."""
    if not is_gpu(facts):
        return []
    return [s.get("busy") for s in (facts.get("sides") or [facts])]


def lowest_busy(facts: dict | None) -> float | None:
    """The least busy side's fraction, None where no side's is known."""
    return min((b for b in busy_values(facts) if b is not None), default=None)


def card_difference(fb: dict | None, fh: dict | None) -> str | None:
    """Why GPU-time rows of these two runs' fingerprints cannot be judged, or None."""
    if not fb or not fh:
        return "not comparable: a run has no fingerprint (GPU model, card and clocks unknown)"
    if fb.get("gpu") != fh.get("gpu"):
        return f"not comparable: GPU model {fb.get('gpu')!r} vs {fh.get('gpu')!r}"
    pb, ph = fb.get("gpu_clock_policy"), fh.get("gpu_clock_policy")
    if pb != ph:
        return f"not comparable: clock policy {pb} vs {ph}"
    ub, uh = fb.get("gpu_uuid"), fh.get("gpu_uuid")
    if ub != uh and not (ub and uh):
        return "not comparable: the card (UUID) is unknown on " + ("base" if not ub else "head")
    if ub != uh:
        return (
            f"different card ({_short(ub)} vs {_short(uh)}): no threshold measured across cards "
            "of this model yet"
        )
    return None


def _short(uuid: str) -> str:
    return uuid.removeprefix("GPU-")[:8]


def combined_noise(fb: dict, fh: dict) -> float | None:
    nb, nh = fb.get("noise"), fh.get("noise")
    if nb is None or nh is None:
        return None
    return math.hypot(nb, nh)


def throttled(facts: dict) -> str | None:
    """`N of M samples dropped (power cap)` where throttling took most of a row, else None."""
    taken, dropped = facts.get("taken") or 0, facts.get("dropped_throttled") or 0
    if taken and dropped / taken > THROTTLED_SHARE:
        seen = ", ".join(facts.get("throttles") or []) or "thermal or power limit"
        return f"{dropped} of {taken} samples dropped ({seen})"
    return None


def threshold(fb: dict, fh: dict) -> tuple[float | None, str]:
    """(threshold, why) of a GPU-time row, or (None, the reason it is not judged)."""
    for side, facts in (("base", fb), ("head", fh)):
        why = throttled(facts)
        if why:
            return None, f"GPU time: throttled on {side}: {why}"
    noise = combined_noise(fb, fh)
    if noise is None:
        return None, "GPU time: no recorded noise on a side"
    limit = max(FLOOR, NOISE_MULTIPLE * noise)
    if limit > NOISY:
        low = min((b for b in map(lowest_busy, (fb, fh)) if b is not None), default=None)
        what = (
            f"launch-bound (busy {low:.0%}) and noisy"
            if low is not None and low < LAUNCH_BOUND
            else "noisy"
        )
        return None, (
            f"GPU time: {what}: noise {fb['noise']:.1%}/{fh['noise']:.1%} needs a threshold "
            f"of {limit:.0%} > {NOISY:.0%}"
        )
    basis = "floor" if limit == FLOOR else f"{NOISE_MULTIPLE:g} x noise"
    return limit, (
        f"GPU time: noise {fb['noise']:.2%}/{fh['noise']:.2%}, threshold {limit:.1%} ({basis})"
    )


def label(facts: dict | None) -> str:
    """`busy NN%` (per side for a paired row; `launch-bound` below one half) on CUDA,
    `ATen share NN%` on a CPU, "" without facts."""
    if not facts:
        return ""
    if is_gpu(facts):
        busy, low = busy_values(facts), lowest_busy(facts)
        if low is None:
            return ""
        text = "busy " + "/".join("?" if b is None else f"{b:.0%}" for b in busy)
        return text + (", launch-bound" if low < LAUNCH_BOUND else "")
    shares = [s.get("aten_share") for s in (facts.get("sides") or [facts])]
    if all(s is None for s in shares):
        return ""
    return "ATen share " + "/".join("?" if s is None else f"{s:.0%}" for s in shares)


def launch_bound(facts: dict | None) -> bool:
    """A CUDA row whose GPU was busy less than half of a call (on any side): what it times is
    launches and Python, not the GPU work the advice is about."""
    low = lowest_busy(facts)
    return low is not None and low < LAUNCH_BOUND


def span_label(many: list[dict | None]) -> str:
    """One label for several rows (a benchmark's cases): the range of their busy fractions (or
    ATen shares), `launch-bound` when any case is."""
    facts = [f for f in many if f]
    gpu = [b for f in facts for b in busy_values(f) if b is not None]
    if gpu:
        low, high = min(gpu), max(gpu)
        text = f"busy {low:.0%}" + (f"..{high:.0%}" if round(high, 2) != round(low, 2) else "")
        return text + (", launch-bound" if low < LAUNCH_BOUND else "")
    cpu = [s.get("aten_share") for f in facts if not is_gpu(f) for s in (f.get("sides") or [f])]
    cpu = [c for c in cpu if c is not None]
    if cpu:
        low, high = min(cpu), max(cpu)
        return f"ATen share {low:.0%}" + (
            f"..{high:.0%}" if round(high, 2) != round(low, 2) else ""
        )
    return ""


def series_threshold(
    points: list[tuple[dict | None, dict | None]],
) -> tuple[float | None, str] | None:
    """A GPU-time row's threshold over a series of runs (`harness history`), from each run's
    (facts, fingerprint): None when the row is not a GPU-time row in every run; else
    (threshold, why), or (None, why not) by the pairwise rules: a run's GPU differs from the
    first's (card_difference), a run was throttled, or the row is too noisy. The threshold is
    the pairwise one (threshold()) at the series' median noise."""
    if not points or not all(is_gpu(f) for f, _ in points):
        return None
    first = points[0][1]
    for i, (facts, fp) in enumerate(points):
        why = card_difference(first, fp)  # each run against the first (itself: fingerprinted?)
        if why:
            return None, f"GPU time: {why} (run {i + 1} of {len(points)})"
        why = throttled(facts)
        if why:
            return None, f"GPU time: throttled in run {i + 1} of {len(points)}: {why}"
    noises = sorted(f["noise"] for f, _ in points if f.get("noise") is not None)
    if not noises:
        return None, "GPU time: no recorded noise"
    busy = [b for f, _ in points if (b := lowest_busy(f)) is not None]
    typical = {"device": "cuda", "noise": noises[len(noises) // 2], "busy": min(busy, default=None)}
    return threshold(typical, typical)
