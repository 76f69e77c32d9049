"""What the code envs share: a task per episode, one scored answer, sandboxes from a runtime.

An env is single-turn, as GEM's code envs are: ``reset`` serves a task, the first ``step``
extracts the answer's code and scores it in a sandbox leased for that step alone (a tool
episode's own sandbox, with whatever the model left in it, is never the one that scores),
and the episode ends. ``info`` carries the :class:`~.outcome.Outcome`: ``status`` (the failure
category), ``passed`` and ``total``.

``runtime`` is a :class:`~gem_sandbox.Runtime` (async callers), a
:class:`~gem_sandbox.SyncRuntime`, or None for the process default that serves sync callers.
"""

from __future__ import annotations

import abc
import copy
from typing import Any

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

    async def astep(self, action: str) -> StepReturn:
        code = last_code_block(action)
        if code is None:
            outcome = no_code(self.tests_of(self.task))
            return TERMINAL_STATE, FORMAT_ERROR_REWARD, True, True, outcome.info()
        outcome = await self.ascore(code)
        return TERMINAL_STATE, self.reward_of(outcome), True, True, outcome.info()

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
