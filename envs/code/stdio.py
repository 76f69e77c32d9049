"""stdin/stdout code tasks in GEM's format, scored in a sandbox and judged on the host.

A task is ``{"problem": ..., "tests": {"inputs": [...], "outputs": [...]}}`` (``tests`` may be
that dict as a JSON string; an input or output given as a list is its lines). The prompt is
the problem, as in GEM; the answer is the last fenced code block.

Each test is one run of the solution on one leased sandbox, fed the test's input on stdin;
up to ``max_parallel`` run at once, and ``early_exit`` stops at the first failure (runs
still going are left to the lease's reset, which kills them). A test passes when the agent
saw the run exit 0 within its limits and the host finds its stdout equal to the expected
output after stripping surrounding whitespace (GEM's comparison). The expected outputs never
enter the sandbox: nothing the code prints, writes or reads can forge a pass, and the status
(exit, deadline, OOM kill, output ceiling) is the agent's observation, never the code's output.

Unlike GEM: no substring blacklist (``sys.exit(0)`` at the end, threads, ``subprocess`` and
``resource`` are fine, the sandbox is the boundary), no silent re-run with extra imports, the
timeout is applied per test, memory is bounded per test, and every language the agent serves
as a program reading stdin (:data:`LANGUAGES`) is supported.

``language`` picks the one answers are written in; the prompt then names it. C++ is compiled
once per scored answer, by a run that execs ``g++`` in the sandbox's work dir; each test then
runs the binary. The other languages run as the agent runs them (``Sandbox.run(code,
language)``), a compiled one compiling in each test's run, within ``compile_timeout``. A
compile that fails is ``error``, one past ``compile_timeout`` is ``timeout``. A language the
sandbox's image lacks raises :class:`~gem_sandbox.sandbox.errors.UnsupportedLanguage` (the
polyglot image has them all). :data:`POLYGLOT_SAMPLE` holds five problems with a reference
solution in each language, MultiPL-E style (``task["solutions"][language]``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib.resources import files
from typing import Any

import anyio

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import UnsupportedLanguage
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.sync import SyncRuntime
from gem_sandbox_envs import hub
from gem_sandbox_envs.gem_options import refuse_unknown

from . import tasks as task_sources
from .base import ScoredCodeEnv
from .outcome import Category, Outcome, failure_of
from .tasks import Task, TaskCycle

# language -> its name in the prompt: the agent's languages whose programs read stdin
LANGUAGES = {
    "python": "Python",
    "cpp": "C++",
    "bash": "Bash",
    "nodejs": "JavaScript (Node.js)",
    "typescript": "TypeScript",
    "go": "Go",
    "java": "Java (a public class Main)",
    "scala": "Scala (an object with a main method)",
    "kotlin_script": "Kotlin (a script)",
    "csharp": "C#",
    "php": "PHP",
    "rust": "Rust",
    "lua": "Lua",
    "R": "R",
    "perl": "Perl",
    "ruby": "Ruby",
    "racket": "Racket (#lang racket)",
}
LANGUAGE_PROMPT = "\n\nWrite the program in {name}: it reads standard input and writes standard output."
SAMPLE_FILE = "stdio_sample.jsonl"
POLYGLOT_SAMPLE = str(files(__package__).joinpath("data", "polyglot_sample.jsonl"))
BINARY = "solution"
# g++ reads the source from stdin, so it is never a file other runs could read or replace.
COMPILE_CPP = (
    "import os\n"
    f"os.execvp('g++', ['g++', '-O2', '-std=c++17', '-x', 'c++', '-o', {BINARY!r}, '-'])\n"
)
# Python ignores SIGPIPE and SIGXFSZ; a C++ program expects them at their defaults.
RUN_BINARY = (
    "import os, signal\n"
    "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"
    f"os.execv({'./' + BINARY!r}, [{BINARY!r}])\n"
)


@dataclass(frozen=True)
class Test:
    input: str
    output: str


def _text(value: Any) -> str:
    """A test's input or output as GEM reads it: a string, or a list of lines."""
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def parse_tests(raw: Any, max_tests: int) -> list[Test]:
    """The task's tests; past ``max_tests``, those with the longest inputs (GEM's choice)."""
    tests = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(tests, dict) or "inputs" not in tests or "outputs" not in tests:
        raise ValueError('a task\'s tests must be {"inputs": [...], "outputs": [...]}')
    pairs = [Test(_text(i), _text(o)) for i, o in zip(tests["inputs"], tests["outputs"], strict=True)]
    if len(pairs) > max_tests:
        longest = sorted(range(len(pairs)), key=lambda i: len(pairs[i].input), reverse=True)[:max_tests]
        pairs = [pairs[i] for i in longest]
    return pairs


def judge(result: ExecResult, expected: str) -> Category:
    """One test's verdict: the agent's status first, then the host's comparison."""
    if result.status is not Status.OK:
        return failure_of(result)
    return Category.OK if result.stdout.strip() == expected.strip() else Category.WRONG_ANSWER


def summarize(verdicts: list[Category | None]) -> Outcome:
    """An ``infra_error`` anywhere makes the whole answer one (mask it); otherwise the first
    failing test in order gives the category. A task without tests scores 0 (GEM pays 1.0)."""
    passed = sum(v is Category.OK for v in verdicts)
    failed = [(i, v) for i, v in enumerate(verdicts) if v is not None and v is not Category.OK]
    if any(v is Category.INFRA_ERROR for _, v in failed):
        return Outcome(Category.INFRA_ERROR, passed, len(verdicts), verdicts, "the sandbox failed")
    if not failed:
        if verdicts and passed == len(verdicts):
            return Outcome(Category.OK, passed, len(verdicts), verdicts)
        return Outcome(Category.WRONG_ANSWER, passed, len(verdicts), verdicts, "the task has no tests")
    first, category = failed[0]
    return Outcome(category, passed, len(verdicts), verdicts, f"test {first}: {category.value}")


class CodeEnv(ScoredCodeEnv):
    """GEM's ``CodeEnv(dataset_name, split, dataset, question_key, test_key, seed, ...)``
    scored in sandboxes. Tasks come from ``sample=True`` (the shipped sample),
    ``data_path`` (a JSONL file), ``dataset`` (rows already loaded) or a download of
    ``dataset_name``. ``timeout`` (seconds) and ``memory_mb`` (None: the runtime's per-run
    default) bound each test run; ``early_exit`` defaults to on for ``reward="all"``, where
    the first failure settles the reward, and off for ``"fraction"``. The arguments are GEM's,
    in GEM's order, up to ``sandbox_type``; ``max_workers``, ``verbose`` and ``sandbox_type``
    do nothing (``max_parallel`` bounds the runs, and every run is sandboxed), nor do the other
    names GEM's envs take (``max_turns``...); any other name is refused."""

    def __init__(
        self,
        dataset_name: str = "",
        split: str | None = None,
        dataset: Any = None,
        question_key: str = "problem",
        test_key: str = "tests",
        seed: int | None = 0,
        max_workers: int = 5,
        max_tests: int = 12,
        verbose: bool = False,
        sandbox_type: str = "none",
        *,
        data_path: str | None = None,
        sample: bool = False,
        language: str = "python",
        reward: str = "all",
        early_exit: bool | None = None,
        max_parallel: int = 8,
        timeout: float = 10.0,
        memory_mb: int | None = None,
        compile_timeout: float = 30.0,
        runtime: Runtime | SyncRuntime | None = None,
        **gem_options: Any,
    ) -> None:
        refuse_unknown(type(self), gem_options)
        if language not in LANGUAGES:
            raise ValueError(f"language must be one of {', '.join(LANGUAGES)}; got {language!r}")
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        rows = dataset if dataset is not None else task_sources.load(dataset_name, split, data_path, sample, SAMPLE_FILE)
        super().__init__(TaskCycle(rows, seed), seed=seed, reward=reward, runtime=runtime)
        self.question_key = question_key
        self.test_key = test_key
        self.max_tests = max_tests
        self.language = language
        self.early_exit = reward == "all" if early_exit is None else early_exit
        self.max_parallel = max_parallel
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.compile_timeout = compile_timeout

    @classmethod
    def describe_source(cls, **kwargs: Any) -> str:
        return hub.describe(
            kwargs.get("dataset_name", ""), kwargs.get("split"), kwargs.get("data_path"), kwargs.get("sample", False)
        )

    @property
    def tests(self) -> Any:
        """GEM's ``env.tests``: the current task's tests as its row gives them (a JSON string
        decoded); None before the first reset."""
        tests = self.task.get(self.test_key)
        return json.loads(tests) if isinstance(tests, str) else tests

    def prompt(self, task: Task) -> str:
        """GEM's prompt, the problem; past Python, it names the language to write in."""
        problem = str(task[self.question_key])
        return problem if self.language == "python" else problem + LANGUAGE_PROMPT.format(name=LANGUAGES[self.language])

    def tests_of(self, task: Task) -> int:
        return len(parse_tests(task[self.test_key], self.max_tests))

    async def score_on(self, sandbox: Sandbox, code: str, task: Task) -> Outcome:
        tests = parse_tests(task[self.test_key], self.max_tests)
        program, language = code, self.language
        if language not in sandbox.hello.get("languages", []):
            raise UnsupportedLanguage(f"sandbox {sandbox.id} cannot run {language}; the polyglot image can run every language")
        if language == "cpp":
            built = await sandbox.run(
                COMPILE_CPP,
                stdin=code,
                timeout=self.compile_timeout,
                limits=replace(sandbox.limits, run_memory_mb=0),  # g++ gets the sandbox's memory
            )
            if not built.ok:
                category = failure_of(built)
                lines = built.stderr.strip().splitlines()
                return Outcome(category, 0, len(tests), [None] * len(tests), f"compile: {lines[-1] if lines else category.value}")
            program, language = RUN_BINARY, "python"
        verdicts: list[Category | None] = [None] * len(tests)
        limiter = anyio.CapacityLimiter(self.max_parallel)
        compiling = {} if language == "python" else {"compile_timeout": self.compile_timeout}

        async def run_test(index: int, test: Test, scope: anyio.CancelScope) -> None:
            async with limiter:
                result = await sandbox.run(program, language, stdin=test.input, timeout=self.timeout,
                                           limits=self._limits(sandbox, test), **compiling)
            verdicts[index] = judge(result, test.output)
            if self.early_exit and verdicts[index] is not Category.OK:
                scope.cancel()

        async with anyio.create_task_group() as tg:
            for index, test in enumerate(tests):
                tg.start_soon(run_test, index, test, tg.cancel_scope)
        return summarize(verdicts)

    def _limits(self, sandbox: Sandbox, test: Test) -> RunLimits:
        """The sandbox's run limits, with ``memory_mb``, and room to print the expected output
        twice over (a longer output cannot match, and is cut as ``output_limit``)."""
        limits = sandbox.limits if self.memory_mb is None else replace(sandbox.limits, run_memory_mb=self.memory_mb)
        room = 2 * len(test.output.encode()) + 4096
        return replace(limits, max_output_bytes=room) if room > limits.max_output_bytes else limits
