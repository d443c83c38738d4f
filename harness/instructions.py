"""Public name for a project's own instruction rows: a benchmark module of a project of its own
adds rows to the run's one valgrind process with a table of these (docs/own-project.md):

    from harness.instructions import InstructionWorkload

    INSTRUCTION_WORKLOADS = {"forward": InstructionWorkload("forward", build_forward)}
"""

from harness.measure.workloads.instructions import InstructionWorkload  # noqa: F401
