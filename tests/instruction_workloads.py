"""Tiny workloads for the real instruction counter (tests/test_instructions_valgrind.py): the same
pointwise op, and that op with one more; and two in-place ops, which allocate nothing per call
(glibc's malloc moves a call's count by a few hundred instructions with its heap's history, too
coarse for checking that an injection adds exactly what it was asked for)."""

import torch

from harness.measure.workloads.instructions import InstructionWorkload


def _one_op(folder):
    x = torch.ones(1024)
    return lambda: x.add(1.0)


def _two_ops(folder):
    x = torch.ones(1024)
    return lambda: x.add(1.0).mul(2.0)


def _two_ops_in_place(folder):
    x = torch.ones(1024)
    return lambda: x.add_(1.0).mul_(0.5)


INSTRUCTION_WORKLOADS = {
    "one_op": InstructionWorkload("one_op", _one_op, layouts=(2, 2)),
    "two_ops": InstructionWorkload("two_ops", _two_ops, layouts=(2, 2)),
    "two_ops_in_place": InstructionWorkload("two_ops_in_place", _two_ops_in_place, layouts=(2, 2)),
    # the same work again, for the injection (HARNESS_TEST_EXTRA_INSTRUCTIONS) to be measured on
    "two_ops_injected": InstructionWorkload("two_ops_injected", _two_ops_in_place, layouts=(2, 2)),
}


# Faults stay local to their row (tests/test_instructions_valgrind.py): a build that raises, a
# call that crashes the counting child, and one that runs past its own time limit.
def _raises(folder):
    raise ValueError("this workload cannot be built")


def _crashes(folder):
    import os
    import signal

    return lambda: os.kill(os.getpid(), signal.SIGSEGV)


def _hangs(folder):
    import time

    def call():
        while True:
            time.sleep(0.05)

    return call


INSTRUCTION_WORKLOADS.update(
    raises=InstructionWorkload("raises", _raises, layouts=(1, 1)),
    crashes=InstructionWorkload("crashes", _crashes, layouts=(1, 1)),
    hangs=InstructionWorkload("hangs", _hangs, layouts=(1, 1), warmup=0, timeout_s=20),
)
