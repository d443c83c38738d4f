"""The example workflow (.github/workflows/gpu.yml) keeps the rules docs/gpu.md gives for it.

zizmor checks pins, permissions and persisted credentials in CI (.ci/run); these tests say the
same without it, on every test run, and check what zizmor does not: that no job on the
self-hosted GPU runner takes a pull request from a fork, and that the one job holding a
write token is the one that pushes.
"""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "gpu.yml"
SAME_REPO = "github.event.pull_request.head.repo.full_name == github.repository"


def load():
    return yaml.safe_load(WORKFLOW.read_text())


def jobs():
    return load()["jobs"]


def pushes(job) -> bool:
    return any("harness store push" in step.get("run", "") for step in job["steps"])


def self_hosted(job) -> bool:
    runs_on = job["runs-on"]
    return "self-hosted" in (runs_on if isinstance(runs_on, list) else [runs_on])


def test_the_token_reads_only_except_in_the_job_that_pushes():
    assert load()["permissions"] == {"contents": "read"}
    writers = {name for name, job in jobs().items() if job.get("permissions")}
    assert writers == {name for name, job in jobs().items() if pushes(job)} == {"nightly"}
    assert jobs()["nightly"]["permissions"] == {"contents": "write"}


def test_every_action_is_pinned_to_a_commit_with_its_release_beside_it():
    lines = [line.strip() for line in WORKFLOW.read_text().splitlines() if "uses:" in line]
    assert lines
    pinned = re.compile(r"^- uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")
    assert [line for line in lines if not pinned.match(line)] == []


def test_only_the_job_that_pushes_keeps_the_token_in_its_checkout():
    for name, job in jobs().items():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is pushes(job), name


def test_no_expression_is_expanded_into_a_shell_line():
    # values reach the shell through env:, where the shell reads them as data
    for name, job in jobs().items():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), (name, step.get("name"))


def test_no_job_on_the_gpu_runner_takes_a_pull_request_from_a_fork():
    # pull requests only from this repository's branches; a job without a condition of its own
    # runs only after one that has it; the other jobs run only on the events they name
    for name, job in jobs().items():
        if not self_hosted(job):
            continue
        condition = job.get("if")
        if condition is None:
            needs = job["needs"] if isinstance(job["needs"], list) else [job["needs"]]
            assert all(SAME_REPO in jobs()[need]["if"] for need in needs), name
        elif "'pull_request'" in condition:
            assert SAME_REPO in condition, name
        else:
            events = set(re.findall(r"github\.event_name == '(\w+)'", condition))
            assert events and "pull_request" not in events and "!=" not in condition, name


def test_a_fork_commit_is_run_only_by_its_full_id():
    # the reviewed commit comes in through workflow_dispatch; a branch name could move after
    # the review, so each job on the GPU runner that checks it out refuses anything else first
    for name, job in jobs().items():
        refs = [s for s in job["steps"] if s.get("with", {}).get("ref") == "${{ inputs.ref }}"]
        if not (refs and self_hosted(job)) or "needs" in job:
            continue
        first = job["steps"][0]
        assert "[0-9a-f]{40}" in first["run"] and first["env"] == {"REF": "${{ inputs.ref }}"}, name
    assert "inputs.ref == ''" in jobs()["nightly"]["if"]
