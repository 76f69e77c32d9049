"""Score completions on single-turn envs: the one scoring API every trainer adapter shares.

Trainers that bring their own rollouts (TRL's GRPO reward functions, verl's reward manager,
verifiers' rubrics) need one thing from an env: "what does this completion earn on the task
seeded ``s``?". :class:`Scorer` answers it the way an episode would: a fresh env (made, then
wrapped with GEM's wrapper-factory names) reset to the seed, stepped once with the completion.
A fresh env per pair keeps pairs independent, so they score concurrently and in any order.
An env that scores batches itself (:class:`BatchScoring`: the code envs' ``ascore_many``)
gets a whole unwrapped batch at once instead: one env, the task each seed's reset would serve,
the same rewards and infos, without making an env (and loading its dataset) per pair.

``rows(n, seed)`` builds the prompts a trainer's dataset holds; a row's ``seed`` is what a
reward function later hands back. Each result is a :class:`Scored`: the env's reward, the
``status`` its info reports (``"infra_error"`` when the sandbox failed rather than the answer:
trainers mask those samples instead of learning from a zero) and the whole info.

Sandboxes come from ``runtime``: a :class:`~gem_sandbox.Runtime` for :meth:`Scorer.ascore_many`
on the caller's loop, a :class:`~gem_sandbox.SyncRuntime` (or None, the process default) for
:meth:`Scorer.score_many`.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import anyio

from gem_sandbox import bridge
from gem_sandbox.core import Env, aclose_env, areset_env, astep_env
from gem_sandbox.registry import make, spec
from gem_sandbox.runtime import Runtime
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns

__all__ = ["INFRA_ERROR", "BatchScoring", "Scored", "Scorer"]

INFRA_ERROR = "infra_error"


@dataclass(frozen=True)
class Scored:
    """One completion's score. ``status`` is the env's ``info["status"]`` (a tool wrapper's
    ``tool_status`` when the env gave none; ``"ok"`` when neither did)."""

    reward: float
    status: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def infra_error(self) -> bool:
        """The sandbox failed, not the answer: mask this sample, do not train on its reward."""
        return self.status == INFRA_ERROR


@runtime_checkable
class BatchScoring(Protocol):
    """An env that scores many answers itself, as many single steps would."""

    def task_of(self, seed: int) -> Any:
        """The task ``reset(seed=seed)`` serves."""
        ...

    async def ascore_many(self, pairs: Iterable[tuple[str, Any]], *, max_concurrency: int | None = None) -> list[Any]:
        """Outcomes (with ``.info()``) of ``(answer, task)`` pairs, in order."""
        ...

    def reward_of(self, outcome: Any) -> float:
        """The reward a step pays for ``outcome``."""
        ...


class Scorer:
    """``Scorer("code:CodeContest", sample=True, runtime=rt)`` scores completions on that env.

    ``env_kwargs`` go to :func:`gem_sandbox.make`; ``wrappers`` are GEM's wrapper-factory names
    (``"python_tool"``), their tools on ``runtime`` (as is the env itself when it takes one)
    with ``tool_options`` (:func:`~gem_sandbox.wrappers.wrapper_factory.get_wrapper_fns`'s).
    An unknown env id or wrapper raises here, before any scoring.
    """

    def __init__(
        self,
        env_id: str,
        *,
        runtime: Runtime | SyncRuntime | None = None,
        wrappers: str = "",
        tool_options: Mapping[str, Any] | None = None,
        **env_kwargs: Any,
    ) -> None:
        env_class = spec(env_id).load()  # UnknownEnvError (a ValueError) names close matches
        self.env_id = env_id
        self.runtime = runtime
        self.wrappers = wrappers
        self.env_kwargs = dict(env_kwargs)
        if runtime is not None and "runtime" in inspect.signature(env_class).parameters:
            self.env_kwargs.setdefault("runtime", runtime)
        self._wrap = get_wrapper_fns(wrappers, runtime=runtime, tool_options=tool_options)  # unknown names raise
        # Wrappers change what a step pays, so a wrapped env scores pair by pair.
        self._batches = not self._wrap and issubclass(env_class, BatchScoring)

    def make_env(self) -> Env:
        """A fresh env, made and wrapped as this scorer's are."""
        env = make(self.env_id, **self.env_kwargs)
        for wrap in self._wrap:
            env = wrap(env)
        return env

    def rows(self, n: int, seed: int = 0) -> list[dict[str, Any]]:
        """Dataset rows for seeds ``seed .. seed+n-1``: ``{"prompt", "env_id", "seed"}``, the
        prompt being the env's first observation for that seed."""
        if n < 0:
            raise ValueError(f"n must be at least 0, got {n}")
        env = self.make_env()
        try:
            return [
                {"prompt": env.reset(seed=s)[0], "env_id": self.env_id, "seed": s} for s in range(seed, seed + n)
            ]
        finally:
            env.close()

    async def ascore(self, completion: str, seed: int) -> Scored:
        """Reset a fresh env to ``seed``, step ``completion`` once, and report what it earned."""
        _check(completion, seed)
        env = self.make_env()
        try:
            await areset_env(env, seed=int(seed))
            _, reward, _, _, info = await astep_env(env, completion)
        finally:
            with anyio.CancelScope(shield=True):
                await aclose_env(env)
        return _scored(reward, info)

    async def ascore_many(
        self, pairs: Iterable[tuple[str, int]], *, max_concurrency: int | None = None
    ) -> list[Scored]:
        """Score ``(completion, seed)`` pairs concurrently (at most ``max_concurrency`` at once;
        None: all, the runtime's pool bounds the sandboxes; a :class:`BatchScoring` env's own
        default); results in the pairs' order."""
        pairs = list(pairs)
        for completion, seed in pairs:
            _check(completion, seed)  # refused before any scoring starts, not inside a task group
        if self._batches and pairs:
            return await self._ascore_batch(pairs, max_concurrency)
        results: list[Scored | None] = [None] * len(pairs)
        limiter = anyio.CapacityLimiter(max_concurrency or max(1, len(pairs)))

        async def score(index: int, completion: str, seed: int) -> None:
            async with limiter:
                results[index] = await self.ascore(completion, seed)

        async with anyio.create_task_group() as tg:
            for index, (completion, seed) in enumerate(pairs):
                tg.start_soon(score, index, completion, seed)
        return [result for result in results if result is not None]

    async def _ascore_batch(self, pairs: list[tuple[str, int]], max_concurrency: int | None) -> list[Scored]:
        """All ``pairs`` on one env that scores batches itself."""
        env = self.make_env()
        try:
            assert isinstance(env, BatchScoring)
            tasks = [(completion, env.task_of(int(seed))) for completion, seed in pairs]
            outcomes = await env.ascore_many(tasks, max_concurrency=max_concurrency)
            return [_scored(env.reward_of(outcome), outcome.info()) for outcome in outcomes]
        finally:
            with anyio.CancelScope(shield=True):
                await aclose_env(env)

    def score_many(self, pairs: Sequence[tuple[str, int]], *, max_concurrency: int | None = None) -> list[Scored]:
        """:meth:`ascore_many` for blocking callers (the runtime must be a ``SyncRuntime`` or
        None, the process default)."""
        if isinstance(self.runtime, Runtime):
            raise TypeError("score_many runs on gem-sandbox's own loop: give the Scorer a SyncRuntime, or call ascore_many")
        return bridge.run_sync(self.ascore_many, pairs, max_concurrency=max_concurrency)


def _scored(reward: float, info: Mapping[str, Any]) -> Scored:
    status = info.get("status", info.get("tool_status", "ok"))
    return Scored(float(reward), str(status), dict(info))


def _check(completion: object, seed: object) -> None:
    if not isinstance(completion, str):
        raise TypeError(f"a completion is a str, got {type(completion).__name__}")
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        raise TypeError(f"a seed is an int, got {type(seed).__name__}")
