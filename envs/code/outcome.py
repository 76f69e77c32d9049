"""What scoring one answer found: a failure category, the tests passed and how many ran.

Categories come from what the agent observed about a run (exit status, deadline, OOM kill,
output ceiling) and from comparisons the host or the trusted harness made; never from text the
model's code printed. ``infra_error`` is only ever the sandbox's own failure, so a trainer can
mask it instead of scoring it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from gem_sandbox.sandbox.result import ExecResult, Status

FORMAT_ERROR_REWARD = -0.1  # GEM's code env: an answer without a code block


class Category(str, enum.Enum):
    """``info["status"]`` of a scored step."""

    OK = "ok"  # every test passed
    WRONG_ANSWER = "wrong_answer"
    ERROR = "error"  # the code raised, exited non-zero, died of a signal or did not compile
    TIMEOUT = "timeout"
    OOM = "oom"
    OUTPUT_LIMIT = "output_limit"
    FORMAT_ERROR = "format_error"  # no code block in the answer
    INFRA_ERROR = "infra_error"  # the sandbox failed, not the code: mask the sample


_FROM_STATUS = {
    Status.ERROR: Category.ERROR,
    Status.KILLED: Category.ERROR,  # a signal it did not get from us: a crash (SIGSEGV, abort)
    Status.TIMEOUT: Category.TIMEOUT,
    Status.OOM: Category.OOM,
    Status.OUTPUT_LIMIT: Category.OUTPUT_LIMIT,
    Status.INFRA_ERROR: Category.INFRA_ERROR,
}


def failure_of(result: ExecResult) -> Category:
    """The category of a run that did not end ``ok`` (from its agent-observed status)."""
    return _FROM_STATUS.get(result.status, Category.ERROR)


@dataclass(frozen=True)
class Outcome:
    """``tests`` holds each test's category (None: not run, cancelled by an early exit);
    ``detail`` says in a line what failed, for logs."""

    category: Category
    passed: int
    total: int
    tests: list[Category | None] = field(default_factory=list)
    detail: str = ""

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"status": self.category.value, "passed": self.passed, "total": self.total}
        if self.tests:
            info["tests"] = [None if test is None else test.value for test in self.tests]
        if self.detail:
            info["detail"] = self.detail
        return info


def no_code(total: int) -> Outcome:
    return Outcome(Category.FORMAT_ERROR, 0, total, detail="no ``` code block in the answer")
