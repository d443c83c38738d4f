"""Every environment variable the harness reads, declared once: name, type, default, meaning.

Code reads a variable through its Setting (`settings.FULL.get()`) and writes one for a child
process with `settings.FULL.encode(value)`; no module names a `HARNESS_*` variable itself. A flag
is on for any value except empty, 0, false, no and off (case-insensitive), everywhere: `CI=true`,
`CI=woodpecker` and `HARNESS_FULL=1` are on, `HARNESS_FULL=off` is off. A number that does not
parse is bad input naming the variable. docs/configuration.md holds the table `markdown()`
writes (`python -m harness.core.settings --write docs/configuration.md`; a test keeps it current).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

OFF = frozenset({"", "0", "false", "no", "off"})
FLAG, INT, FLOAT, PATH, TEXT, LIST, LINES = "flag", "int", "float", "path", "text", "list", "lines"


def is_on(value: str | None) -> bool:
    return (value or "").strip().lower() not in OFF


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    kind: str
    default: object
    meaning: str
    who: str = "you"  # who sets it: "you", "harness" (for its child processes), "tests"

    def raw(self, environ=None) -> str | None:
        value = (os.environ if environ is None else environ).get(self.name)
        return None if value is None else value.strip()

    def is_set(self, environ=None) -> bool:
        return bool(self.raw(environ))

    def get(self, environ=None):
        """The typed value, or the default where the variable is unset or empty."""
        value = self.raw(environ)
        if self.kind == FLAG:
            return self.default if value is None else is_on(value)
        if not value:
            return self.default
        if self.kind == PATH:
            return Path(value)
        if self.kind == LIST:
            return [v.strip() for v in value.split(",") if v.strip()]
        if self.kind == LINES:  # items that may hold commas (regexes): one per line
            return [v for v in value.splitlines() if v]
        if self.kind in (INT, FLOAT):
            try:
                number = int(value) if self.kind == INT else float(value)
            except ValueError:
                from harness.core.exits import BadInput

                raise BadInput(
                    f"{self.name} must be a {'whole ' if self.kind == INT else ''}number, "
                    f"got {value!r} ({self.meaning})"
                ) from None
            return number
        return value

    def encode(self, value) -> str:
        """`value` as this variable's text, for a child process's environment."""
        if self.kind == FLAG:
            return "1" if value else "0"
        if self.kind == LIST:
            return ",".join(value)
        if self.kind == LINES:
            return "\n".join(value)
        return str(value)


FULL = Setting(
    "HARNESS_FULL",
    FLAG,
    False,
    "full model sizes and parameter grids in every suite and golden (`harness bench "
    "--full`, `pytest --full`); off: the fast CI sizes",
)
QUICK = Setting(
    "HARNESS_QUICK",
    FLAG,
    False,
    "the suites run under asv's `--quick` (asv does not tell a benchmark)",
    "harness",
)
THREADS = Setting(
    "HARNESS_THREADS",
    INT,
    None,
    "CPU threads for the whole run (`harness bench --threads`); default 1, all cores in full runs",
)
DEVICE = Setting(
    "HARNESS_DEVICE",
    TEXT,
    None,
    "device the benchmarks run on (`cpu`, `cuda`, `cuda:1`); default CUDA where "
    "present, else the CPU",
)
GPU_CLOCK_POLICY = Setting(
    "HARNESS_GPU_CLOCK_POLICY",
    TEXT,
    None,
    "the GPU's clock policy when you know it (`locked`: your runner pins the SM clock, "
    "e.g. `nvidia-smi -lgc`; `unlocked`); default read through NVML, else unknown",
)
SIZES = Setting(
    "HARNESS_SIZES",
    TEXT,
    None,
    "benchmark sizes of one run, on any device and in any mode: `key=value` pairs (or a JSON "
    "object) over the size names of harness/core/sizes.py and zoo model fields, e.g. "
    "`pointwise_elements=2^26,transfer_batch=32x3x224x224,attention.seq=4096,alexnet.batch=64`; "
    "recorded in the run's fingerprint; goldens never use it",
)
GOLDEN_DEVICE = Setting(
    "HARNESS_GOLDEN_DEVICE",
    TEXT,
    "cpu",
    "device the golden tests capture on; `cuda` compares with expect/cuda/ "
    "variants where they exist",
)
EXPECT_DIR = Setting(
    "HARNESS_EXPECT_DIR",
    PATH,
    None,
    "folder of the goldens (default: expect/ of the checkout, or the "
    "`harness_expect_dir` ini option)",
)
FORCE_ACCEPT = Setting(
    "HARNESS_FORCE_ACCEPT",
    FLAG,
    False,
    "allow `pytest --accept` where CI is set (as `--force-accept`)",
)
MODELS = Setting(
    "HARNESS_MODELS",
    LIST,
    [],
    "models of your own for one run: comma-separated module names or .py paths "
    "(relative to the working directory)",
)
PROJECT = Setting(
    "HARNESS_PROJECT",
    PATH,
    None,
    "the checkout, or the project made by `harness init`, every command works in (default: "
    "found from the working directory)",
)
OWN_MODELS = Setting(
    "HARNESS_OWN_MODELS",
    FLAG,
    False,
    "the packaged suites (graph goldens, models benchmarks) cover only the project's own models, "
    "not the built-in zoo: set by `harness bench` and by the pytest plugin outside a harness "
    "checkout",
    "harness",
)
REFUSE_DIRTY = Setting(
    "HARNESS_REFUSE_DIRTY",
    FLAG,
    False,
    "refuse a working tree that differs from its commit: `harness bench` (and nightly, and an "
    "interpreter side of `harness ab`) exits 3 before it runs anything, and `harness gate` exits "
    "3 on a run marked dirty; off: such runs are measured, marked `(dirty)` and judged",
)
RESULTS_DIR = Setting(
    "HARNESS_RESULTS_DIR",
    PATH,
    None,
    "the results root (runs/, asv/, baselines/, noise/ below it); `--results-dir` wins",
)
STORE_REMOTE = Setting(
    "HARNESS_STORE_REMOTE",
    TEXT,
    "origin",
    "where the results history lives (`harness store`, `--pull`): a git remote of the project "
    "or any git URL; `--remote` wins",
)
STORE_REF = Setting(
    "HARNESS_STORE_REF",
    TEXT,
    "refs/harness/results",
    "the ref of that remote holding the results history (outside refs/heads/: a plain clone "
    "does not download it); `--ref` wins",
)
STORE_TIMEOUT_S = Setting(
    "HARNESS_STORE_TIMEOUT_S",
    FLOAT,
    300.0,
    "seconds one git command of the results history may take before it is ended (exit 5)",
)
STORE_RETRY_S = Setting(
    "HARNESS_STORE_RETRY_S",
    FLOAT,
    120.0,
    "seconds `harness store push` (and `prune --store`) keep retrying after another runner "
    "pushed first (fetch, re-apply, back off); then exit 5",
)
STORE_PULL_MAX_BYTES = Setting(
    "HARNESS_STORE_PULL_MAX_BYTES",
    INT,
    2 * 2**30,
    "bytes one `harness store pull` (or `--pull`) writes under runs/ (2 GiB); the records past "
    "it are not pulled, named in one line (exit 3): pull fewer, or raise it",
)
STORE_PULL_MAX_REPEATED_BYTES = Setting(
    "HARNESS_STORE_PULL_MAX_REPEATED_BYTES",
    INT,
    256 * 2**20,
    "bytes one pull writes of content it already wrote for another record (one file shared by "
    "many run ids; 256 MiB): the records past it are not pulled, named in one line (exit 3)",
)
MAX_FILE_BYTES = Setting(
    "HARNESS_MAX_FILE_BYTES",
    INT,
    64 * 2**20,
    "bytes of one file from elsewhere: a run record's file (pull, push, merge, every reader) "
    "or a JSON file in a results folder (64 MiB); a record holding a bigger one is refused, "
    "and a pull does not fetch it where the server filters blobs",
)
MAX_JSON_TOKENS = Setting(
    "HARNESS_MAX_JSON_TOKENS",
    INT,
    2_000_000,
    "brackets, braces, commas and colons (outside strings) of one JSON file from elsewhere, "
    "counted before it is parsed: what it may cost in memory (about 100 bytes each at worst); "
    "a file with more is refused by name",
)
STORE_MAX_ENTRIES = Setting(
    "HARNESS_STORE_MAX_ENTRIES",
    INT,
    1_000_000,
    "entries one folder of the results history may hold (its root, `runs/`, a machine's "
    "folder, ...), and runs, tombstones and listings in all, for a store command to read or "
    "rewrite it: over it that folder is skipped, or the command refuses (exit 3), naming it",
)
PAIRED_WINDOW_S = Setting(
    "HARNESS_PAIRED_WINDOW_S",
    FLOAT,
    None,
    "wall seconds one process spreads each paired comparison over, and each raw time's calls "
    "(`harness ab` sets it: a side's processes share one run's window)",
    "harness",
)
CANARY_EXTRA = Setting(
    "HARNESS_CANARY_EXTRA",
    FLAG,
    False,
    "one more op in the canary's chain: the gate's injected regression",
)
PROFILER_NOISE = Setting(
    "HARNESS_PROFILER_NOISE",
    FLAG,
    False,
    "show what torch.profiler prints to stderr (the CUDA build's driver messages on CPU machines)",
)
DISTRIBUTED_TIMEOUT_S = Setting(
    "HARNESS_DISTRIBUTED_TIMEOUT_S",
    FLOAT,
    None,
    "seconds one torchrun launch may take before it is killed with its "
    "workers (default 300 fast, 1800 full)",
)
JS_DIR = Setting(
    "HARNESS_JS_DIR",
    PATH,
    Path("/usr/share/javascript"),
    "local copies of the scripts asv's dashboard loads (Debian's libjs-* packages)",
)
PYTHON = Setting(
    "HARNESS_PYTHON",
    PATH,
    None,
    "the interpreter behind asv's fixed launcher (~/.cache/harness/asv-python)",
    "harness",
)
ANSWER_KEEP_BYTES = Setting(
    "HARNESS_ANSWER_KEEP_BYTES",
    INT,
    16 * 1024 * 1024,
    "at most this many bytes of tensors (inputs and differing results) in the file a run keeps "
    "for its first WRONG answer (`answers/first-wrong.pt` in the record)",
)
RUN_RECORD = Setting(
    "HARNESS_RUN_RECORD",
    PATH,
    None,
    "the run record being written: instruction counts keep their per-function tables in it, "
    "timing rows their facts (GPU and host time, busy fraction, ATen share)",
    "harness",
)
SCRATCH_DIR = Setting(
    "HARNESS_SCRATCH_DIR",
    PATH,
    None,
    "a folder the running command removes afterwards, also when a benchmark is "
    "killed: scratch of the instruction counter",
    "harness",
)
STEP_BUDGET_S = Setting(
    "HARNESS_STEP_BUDGET_S",
    FLOAT,
    None,
    "seconds a GPU proof kit step may take (`harness gpu-check` sets it for each step)",
    "harness",
)
INSTRUCTION_WORKLOADS = Setting(
    "HARNESS_INSTRUCTION_WORKLOADS",
    LIST,
    [],
    "instruction workloads to count, by key (default all): `harness calibrate "
    "--extra-instructions` counts only the rows it proves",
    "harness",
)
INSTRUCTION_BENCH = Setting(
    "HARNESS_INSTRUCTION_BENCH",
    LINES,
    [],
    "the run's `--bench` regexes, one per line: one valgrind process counts every instruction "
    "row of a run, so it counts only the rows they select (default all)",
    "harness",
)
DISTRIBUTED_SECTIONS = Setting(
    "HARNESS_DISTRIBUTED_SECTIONS",
    LIST,
    [],
    "distributed sections to measure (default all): one torchrun launch serves every row, so "
    "`--bench` selects through this",
    "harness",
)
TEST_SLOWDOWN = Setting(
    "HARNESS_TEST_SLOWDOWN",
    FLOAT,
    0.0,
    "test-only: slow a wrapped workload by this fraction of its CPU time "
    "(`harness calibrate --slowdown`)",
    "tests",
)
TEST_SLOWDOWN_SIDE = Setting(
    "HARNESS_TEST_SLOWDOWN_SIDE",
    TEXT,
    "all",
    "test-only: which side `--slowdown` slows, `all` or `compiled`",
    "tests",
)
TEST_SLOWDOWN_ROWS = Setting(
    "HARNESS_TEST_SLOWDOWN_ROWS",
    TEXT,
    "",
    "test-only: `REGEX=F;...`: rows whose name a REGEX is found in have their measured side "
    "slowed by F of its CPU time (harness.measure.inject)",
    "tests",
)
TEST_ANSWER_NOISE = Setting(
    "HARNESS_TEST_ANSWER_NOISE",
    TEXT,
    "",
    "test-only: `REGEX=F;...`: rows whose name a REGEX is found in get seeded per-element noise "
    "of F times their answer rule's tolerance on the new side's results (harness.measure.answers)",
    "tests",
)
TEST_ANSWER_SEED = Setting(
    "HARNESS_TEST_ANSWER_SEED",
    INT,
    0,
    "test-only: the seed of HARNESS_TEST_ANSWER_NOISE's noise",
    "tests",
)
TEST_EXTRA_INSTRUCTIONS = Setting(
    "HARNESS_TEST_EXTRA_INSTRUCTIONS",
    FLOAT,
    0.0,
    "test-only: extra work per call of this fraction of a workload's "
    "instructions (`harness calibrate --extra-instructions`)",
    "tests",
)
TEST_EXTRA_INSTRUCTIONS_WORKLOADS = Setting(
    "HARNESS_TEST_EXTRA_INSTRUCTIONS_WORKLOADS",
    LIST,
    [],
    "test-only: the instruction workloads that extra work goes into",
    "tests",
)
# read the same way, not ours to name
CI = Setting("CI", FLAG, False, "set by CI systems: goldens are compared, never accepted")
EXPECTTEST_ACCEPT = Setting("EXPECTTEST_ACCEPT", FLAG, False, "as `pytest --accept` (expecttest's)")

REGISTRY = {s.name: s for s in list(globals().values()) if isinstance(s, Setting)}


def markdown() -> str:
    """The table of docs/configuration.md."""

    def default(s: Setting) -> str:
        if s.default in (None, [], ""):
            return "unset"
        if s.kind == FLAG:
            return "off" if not s.default else "on"
        return f"`{s.default}`"

    lines = ["| variable | type | default | set by | meaning |", "|---|---|---|---|---|"]
    lines += [
        f"| `{s.name}` | {s.kind} | {default(s)} | {s.who} | {s.meaning} |"
        for s in REGISTRY.values()
    ]
    return "\n".join(lines) + "\n"


BEGIN, END = (
    "<!-- settings table: generated by harness.core.settings -->",
    "<!-- end of settings table -->",
)


def write_table(path: Path) -> None:
    """Put markdown() between BEGIN and END in `path` (the rest of the page is left alone)."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{BEGIN}\n{markdown()}{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        write_table(Path(sys.argv[2]))
    else:
        print(markdown(), end="")
