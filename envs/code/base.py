"""What the code envs share: a task per episode, one scored answer, sandboxes from a runtime.

An env is single-turn, as GEM's code envs are: ``reset`` serves a task, the first ``step``
extracts the answer's code and scores it in a sandbox leased for that step alone (a tool
episode's own sandbox, with whatever the model left in it, is never the one that scores),
and the episode ends. ``info`` carries the :class:`~.outcome.Outcome`: ``status`` (the failure
category), ``passed`` and ``total``.

Trainers score a whole batch at once with :meth:`ScoredCodeEnv.ascore_many`: ``(answer,
task)`` pairs (:meth:`~ScoredCodeEnv.task_of` gives the task a reset seed serves) scored as
steps would be, spread over the runtime's sandboxes, outcomes in order. No episode is
touched, so one env serves every pair.

``runtime`` is a :class:`~gem_sandbox.Runtime` (async callers), a
:class:`~gem_sandbox.SyncRuntime`, or None for the process default that serves sync callers.
"""

from __future__ import annotations

import abc
import copy
import random
from collections.abc import Iterable
from typing import Any

import anyio

from gem_sandbox.core import Env, ResetReturn, StepReturn
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import BackendNotAvailable, SandboxCrashed, SandboxUnavailable
from gem_sandbox.sync import SyncRuntime, resolve_runtime

from .extract import last_code_block
from .outcome import FORMAT_ERROR_REWARD, Category, Outcome, no_code
from .tasks import Task, TaskCycle

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"  # GEM's observation after a single-turn episode
REWARDS = ("all", "fraction")
MAX_SOURCE_BYTES = 1 << 20  # an answer past this is the model's error, not a request to send


class ScoredCodeEnv(Env[str, str]):
    """``reward="all"``: 1.0 when every test passes, else 0 (GEM's); ``"fraction"``: the
    fraction passed. An answer without a code block earns GEM's -0.1."""

    blocking = False  # reset only picks a task; steps are async-native

    def __init__(
        self,
        tasks: TaskCycle,
        *,
        seed: int | None,
        reward: str,
        runtime: Runtime | SyncRuntime | None,
    ) -> None:
        super().__init__(seed)
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        self.cycle = tasks
        self.reward = reward
        self.runtime = runtime
        self.task: Task = {}

    @abc.abstractmethod
    def prompt(self, task: Task) -> str:
        """The first observation for ``task``."""

    @abc.abstractmethod
    def tests_of(self, task: Task) -> int:
        """How many tests ``task``'s answer is scored on."""

    @abc.abstractmethod
    async def score_on(self, sandbox: Sandbox, code: str, task: Task) -> Outcome:
        """Score ``code`` against ``task`` on a freshly leased ``sandbox``."""

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        self.seed_rng(seed)
        self.task = self.cycle.draw(self.rng) if seed is not None else self.cycle.next()
        return self.prompt(self.task), {}

    def task_of(self, seed: int) -> Task:
        """The task ``reset(seed=seed)`` serves, without starting an episode."""
        return self.cycle.draw(random.Random(seed))

    async def astep(self, action: str) -> StepReturn:
        outcome = await self.ascore_answer(action, self.task)
        return TERMINAL_STATE, self.reward_of(outcome), True, True, outcome.info()

    async def ascore_answer(self, answer: str, task: Task) -> Outcome:
        """Score a model's whole ``answer`` as a step does: the code of its last fenced
        block, or ``format_error`` without one."""
        code = last_code_block(answer)
        return no_code(self.tests_of(task)) if code is None else await self.ascore(code, task)

    async def ascore_many(
        self, pairs: Iterable[tuple[str, Task]], *, max_concurrency: int | None = None
    ) -> list[Outcome]:
        """Score ``(answer, task)`` pairs as steps would (:meth:`ascore_answer`), at most
        ``max_concurrency`` at once (None: as many as the runtime's pool holds, so none waits
        past its acquire timeout in the pool's line); outcomes in the pairs' order."""
        pairs = list(pairs)
        for answer, _ in pairs:  # refused before any scoring starts, not inside a task group
            if not isinstance(answer, str):
                raise TypeError(f"an answer is a str, got {type(answer).__name__}")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        runtime = await resolve_runtime(self.runtime)
        limiter = anyio.CapacityLimiter(max_concurrency or runtime.config.max_size)
        outcomes: list[Outcome | None] = [None] * len(pairs)

        async def score(index: int, answer: str, task: Task) -> None:
            async with limiter:
                outcomes[index] = await self.ascore_answer(answer, task)

        async with anyio.create_task_group() as tg:
            for index, (answer, task) in enumerate(pairs):
                tg.start_soon(score, index, answer, task)
        return [outcome for outcome in outcomes if outcome is not None]

    async def ascore(self, code: str, task: Task | None = None) -> Outcome:
        """Score already extracted ``code`` against ``task`` (default: this episode's)."""
        task = self.task if task is None else task
        if len(code.encode()) > MAX_SOURCE_BYTES:
            return Outcome(Category.ERROR, 0, self.tests_of(task), detail=f"the code is over {MAX_SOURCE_BYTES} bytes")
        runtime = await resolve_runtime(self.runtime)
        try:
            async with runtime.lease() as sandbox:
                return await self.score_on(sandbox, code, task)
        except BackendNotAvailable:
            raise  # nothing can score here at all: the caller's to fix, not a sample to mask
        except (SandboxUnavailable, SandboxCrashed) as exc:  # no sandbox, or it died mid-score
            return Outcome(Category.INFRA_ERROR, 0, self.tests_of(task), detail=str(exc))

    def reward_of(self, outcome: Outcome) -> float:
        """The reward a step pays for ``outcome`` (GEM's -0.1 for an answer without code)."""
        if outcome.category is Category.FORMAT_ERROR:
            return FORMAT_ERROR_REWARD
        if self.reward == "fraction":
            return outcome.fraction
        return 1.0 if outcome.category is Category.OK else 0.0

    def get_state(self) -> dict[str, Any]:
        """The episode and the task order; the runtime (shared, not state) is left out."""
        return copy.deepcopy({k: v for k, v in vars(self).items() if k != "runtime"})

    def _spawn_copy(self) -> Env:
        """A copy sharing the tasks and the runtime, with its own order and episode."""
        clone = copy.copy(self)
        clone.set_state(self.get_state())
        return clone
