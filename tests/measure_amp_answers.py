"""The natural difference of an autocast training step from the fp32 step, per zoo model and
low-precision dtype, on this machine's CPU: what harness.core.tolerances' LOW_PRECISION bounds
must leave room for (docs/answers.md#what-each-pair-compares, the AMP row).

    .venv/bin/python tests/measure_amp_answers.py                 # small (quick-run) sizes
    .venv/bin/python tests/measure_amp_answers.py --full          # full sizes too (minutes)
    .venv/bin/python tests/measure_amp_answers.py --models alexnet word_lm

Per model and dtype, the check amp.AutocastOverFp32 declares (harness.measure.workloads.amp's
pair: the cosine rule over the loss, every gradient and every parameter after one SGD step, from
one starting state and seed), with a step of the same form (fp16 autocast runs on a CPU here
too, without GradScaler). Printed: the answer and its value (error over tolerance, <= 1 is the
same answer) with the output that decided it; the loss's relative difference and its share of
LOW_PRECISION_LOSS; the lowest cosine of a gradient or parameter that also fails allclose at
the pair's band (what LOW_PRECISION_GRAD_COSINE must stay below).
"""

from __future__ import annotations

import argparse
import copy
import os

import torch


def _step(spec, model, inputs, targets, dtype, losses: list):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss = spec.loss(model(*inputs), targets)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        return loss

    return step


def measure(name: str, full: bool, precision: str) -> str:
    from harness.core import tolerances
    from harness.core.env import seed_everything
    from harness.core.zoo import get_model
    from harness.measure import answers
    from harness.measure.workloads import amp

    spec = get_model(name)
    cfg = spec.benchmark_config(full, "cpu")
    ref = spec.build(cfg).train()
    new = copy.deepcopy(ref)
    inputs, targets = spec.inputs(cfg), spec.targets(cfg)
    pair = amp._pair(
        amp._Side(precision, new, inputs), amp._Side("fp32", ref, inputs), (name, "cpu")
    )
    head = f"{name:12} {precision:5} {'full' if full else 'small':5}"
    if pair.not_applicable:
        return f"{head} n/a: {pair.not_applicable[:90]}"
    low, lossed = amp._DTYPES[precision], ([], [])
    steps = (
        _step(spec, new, inputs, targets, low, lossed[0]),
        _step(spec, ref, inputs, targets, None, lossed[1]),
    )
    answer, error = answers.check(pair, *steps)
    if error is not None:
        return f"{head} cannot run here: {answer.reason[:80]}"
    # the lowest cosine among gradients and parameters that fail allclose too
    a, b = copy.deepcopy(ref), copy.deepcopy(ref)  # both from the reference's state now
    losses: tuple[list, list] = ([], [])
    seed_everything(pair.seed)
    _step(spec, a, inputs, targets, low, losses[0])()
    seed_everything(pair.seed)
    _step(spec, b, inputs, targets, None, losses[1])()
    ra = answers._kept(answers.flatten(answers.training_result(a, None)))
    rb = answers._kept(answers.flatten(answers.training_result(b, None)))
    worst, worst_name = 1.0, "-"
    for k, v in rb.items():
        if isinstance(v, torch.Tensor) and k in ra:
            band = answers._allclose_ratio(ra[k], v, pair.tolerance)
            cos = answers._cosine(ra[k], v)
            if band > 1 and cos < worst:
                worst, worst_name = cos, k
    loss_rel = abs(lossed[0][0] - lossed[1][0]) / abs(lossed[1][0])
    bound = tolerances.LOW_PRECISION_LOSS[str(low).removeprefix("torch.")]
    return (
        f"{head} {answer.status:5} value {answer.value:6.3f} ({answer.output}); "
        f"loss_rel {loss_rel:.2e} ({loss_rel / bound:.3f} of {bound:g}); "
        f"lowest cosine past allclose {worst:.4f} ({worst_name})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="full sizes as well")
    parser.add_argument("--models", nargs="*", help="these zoo models only")
    args = parser.parse_args()
    from harness.core.zoo import model_names

    torch.set_num_threads(int(os.environ.get("THREADS", "1")))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    for full in [False, True] if args.full else [False]:
        for name in args.models or model_names():
            for precision in ("bf16", "fp16"):
                print(measure(name, full, precision), flush=True)


if __name__ == "__main__":
    main()
