"""What a silent-bug check found (`harness check`): one finding per check, the statuses shared by
the model and data checks (harness.measure.checks, .datachecks) and the environment drift check
(harness.verdict.drift)."""

from __future__ import annotations

import dataclasses

PASS, FAIL, NA, INFO = "pass", "FAIL", "n/a", "info"


@dataclasses.dataclass
class Finding:
    check: str
    status: str  # pass | FAIL | n/a | info (a setting recorded; never fails)
    reason: str
    fix: str = ""
    details: dict = dataclasses.field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
