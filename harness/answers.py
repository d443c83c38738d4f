"""Public names for what the two sides of a paired benchmark row must agree on: a benchmark of
a project of its own declares it where it times the pair (docs/answers.md#declaring-a-pair).

    from harness.answers import allclose, exact, float64_forward
    from harness.measure import timing

    timing.measure_paired(fast, slow, answer=exact("inference_mode vs no_grad forward"))
    timing.measure_paired(
        fused, plain, answer=allclose("fused vs plain", fp64=float64_forward(model, x))
    )

Before any timed call, measure_paired calls each side once after the same seed and records the
verdict (same / WRONG / fail_to_run / n/a) as the row's answer row; `harness gate` fails on a
WRONG. A paired row that declares nothing gets an n/a answer that says how to declare one.
"""

from harness.measure.answers import (  # noqa: F401
    Pair,
    Results,
    allclose,
    declare,
    exact,
    float64,
    float64_forward,
    not_applicable,
    training_result,
)
