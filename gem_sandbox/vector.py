"""Vectorized environments: many envs stepped as one batch.

* :class:`SyncVectorEnv` steps envs one after another through their sync faces
  (``reset``/``step``/``close``), like GEM's: no event loop of its own, and a sync-native env
  runs in the caller's thread. It has no ``step_timeout``: a sync call cannot be interrupted
  without a thread per step.
* :class:`AsyncVectorEnv` steps them concurrently through their async faces in one task group.
  There is no thread per env: an env that waits on a sandbox yields the loop to the others, and
  a thousand envs cost a thousand coroutines, not a thousand threads. Its sync face drives the
  async one through :mod:`gem_sandbox.sync`.

Both share one implementation of what happens to each env in a batch (autoreset, subset
stepping, error isolation): a *plan* per env, a generator that yields the calls to make on
the env and receives their results, which each class's driver performs its own way.

Results follow GEM: observations and infos as lists, rewards, terminations and truncations as
numpy arrays, each holding only the envs that were stepped. An env that raises (or overruns
``step_timeout``) is isolated: its slot ends the episode with the error in ``info["error"]``
and the rest of the batch is unaffected.
"""

from __future__ import annotations

import enum
import reprlib
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import anyio
import numpy as np

from gem_sandbox.sync import run_sync
from gem_sandbox.core import Env, ResetReturn

T = TypeVar("T")
Transition = tuple[Any, float, bool, bool, dict[str, Any]]
Seeds = int | Sequence[int | None] | None
Actions = Sequence[Any] | Mapping[int, Any]
StepBatch = tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]
ResetBatch = tuple[list[Any], list[dict[str, Any]]]


class AutoresetMode(str, enum.Enum):
    """When a finished env is reset (see Gymnasium's vector autoreset modes).

    ``SAME_STEP``: in the step that ends the episode; that step returns the new episode's first
    observation and keeps the final one in ``info["final_obs"]`` / ``info["final_info"]``.
    ``NEXT_STEP``: on the env's next step, whose action is ignored.
    """

    SAME_STEP = "same_step"
    NEXT_STEP = "next_step"


@dataclass(frozen=True)
class EnvError:
    """An env call that raised or timed out, received by a plan in place of a return value.

    A type of its own, so that no value an env returns (a 2-tuple included) can pass for one.
    """

    message: str
    error_type: str  # "exception" or "timeout"

    @classmethod
    def from_exception(cls, exc: Exception) -> EnvError:
        return cls(f"{type(exc).__name__}: {exc}", "exception")

    @property
    def info(self) -> dict[str, Any]:
        return {"error": self.message, "error_type": self.error_type}


#: What each call returns when it succeeds: its length, and its fields for error messages.
_RETURNS = {"reset": (2, "(obs, info)"), "step": (5, "(obs, reward, terminated, truncated, info)")}


class EnvCall(NamedTuple):
    """A call a plan asks for: ``env.<method>(*args, **kwargs)`` from the sync driver,
    ``await env.a<method>(*args, **kwargs)`` from the async one. (A named tuple: one is made
    per env per step.)"""

    method: str  # "reset" or "step"
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def checked(self, result: Any) -> Any:
        """The call's return value, or an :class:`EnvError` when it has the wrong shape."""
        length, fields = _RETURNS[self.method]
        if isinstance(result, (tuple, list)) and len(result) == length:
            return result
        message = f"TypeError: {self.method} returned {reprlib.repr(result)}, not {fields}"
        return EnvError(message, "exception")


#: One env's part of a batch: yields calls, receives each one's result (or an :class:`EnvError`
#: when it raised, timed out or returned the wrong shape) and returns the slot's result.
Plan = Generator[EnvCall, Any, T]


class VectorEnv(ABC):
    """A batch of envs with autoreset, subset stepping and per-env error isolation.

    The shared part of :class:`SyncVectorEnv` and :class:`AsyncVectorEnv`: the contract, the
    plans of what each env does in a batch, and the assembly of the batch's results.
    """

    #: Whether the class can cut a step at ``step_timeout``.
    supports_step_timeout = True

    def __init__(
        self,
        envs: Sequence[Env],
        env_ids: Sequence[str] | None = None,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        step_timeout: float | None = None,
        seed: int | None = None,
    ) -> None:
        if not envs:
            raise ValueError("a vector env needs at least one env")
        if step_timeout is not None and not self.supports_step_timeout:
            raise ValueError(
                f"{type(self).__name__} cannot apply step_timeout: it calls each env's sync "
                "step, which cannot be interrupted; use AsyncVectorEnv "
                "(make_vec(..., async_mode=True)) for step timeouts"
            )
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.env_ids = list(env_ids) if env_ids else [e.env_id or "" for e in self.envs]
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.step_timeout = step_timeout
        self.seed = seed
        self._needs_reset = [False] * self.num_envs

    @abstractmethod
    def reset(
        self,
        seed: Seeds = None,
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ResetBatch:
        """Reset every env. An int ``seed`` seeds env ``i`` with ``seed + i``; ``env_kwargs``
        gives each env its own reset kwargs on top of the shared ``kwargs``."""

    @abstractmethod
    def step(self, actions: Actions) -> StepBatch:
        """Step the envs. A sequence steps all of them; a dict ``{index: action}`` steps only
        those, and the results hold only those, in the dict's order."""

    @abstractmethod
    def close(self) -> None:
        """Close every env, each isolated from the others' failures; then, if any failed,
        raise an :class:`ExceptionGroup` naming each of them."""

    def sample_random_actions(self) -> list[Any]:
        return [env.sample_random_action() for env in self.envs]

    def __len__(self) -> int:
        return self.num_envs

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} num_envs={self.num_envs}>"

    # -- batches -----------------------------------------------------------------------
    def _reset_plans(
        self,
        seed: Seeds,
        env_kwargs: Sequence[Mapping[str, Any]] | None,
        kwargs: Mapping[str, Any],
    ) -> list[tuple[int, Plan[ResetReturn]]]:
        seeds = self._seeds(seed)
        if env_kwargs is not None and len(env_kwargs) != self.num_envs:
            raise ValueError(f"env_kwargs has {len(env_kwargs)} entries for {self.num_envs} envs")
        return [
            (i, self._reset_plan(i, seeds[i], {**kwargs, **(env_kwargs[i] if env_kwargs else {})}))
            for i in range(self.num_envs)
        ]

    def _step_plans(self, actions: Actions) -> list[tuple[int, Plan[Transition]]]:
        if isinstance(actions, Mapping):
            indices = list(actions)
            for i in indices:
                if not 0 <= i < self.num_envs:
                    raise IndexError(f"env index {i} out of range for {self.num_envs} envs")
        else:
            if len(actions) != self.num_envs:
                raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs")
            indices = list(range(self.num_envs))
        return [(i, self._step_plan(i, actions[i])) for i in indices]

    @staticmethod
    def _reset_batch(results: list[ResetReturn]) -> ResetBatch:
        return [obs for obs, _ in results], [info for _, info in results]

    @staticmethod
    def _step_batch(results: list[Transition]) -> StepBatch:
        obs, rewards, terminated, truncated, infos = zip(*results)
        return (
            list(obs),
            np.asarray(rewards, dtype=np.float64),
            np.asarray(terminated, dtype=np.bool_),
            np.asarray(truncated, dtype=np.bool_),
            list(infos),
        )

    def _raise_close_errors(self, errors: Mapping[int, Exception]) -> None:
        """Raise one error naming every env that failed to close, after all were closed."""
        if not errors:
            return
        failed = [f"env {i} ({self.env_ids[i] or type(self.envs[i]).__name__})" for i in errors]
        for name, exc in zip(failed, errors.values()):
            exc.add_note(f"raised while closing {name}")
        raise ExceptionGroup(
            f"{len(errors)} of {self.num_envs} envs failed to close: {', '.join(failed)}; "
            "the others were closed",
            list(errors.values()),
        )

    # -- one env -----------------------------------------------------------------------
    def _reset_plan(self, i: int, seed: int | None, kwargs: Mapping[str, Any]) -> Plan[ResetReturn]:
        """Reset env ``i``; a failed reset gives ``("", {"error": ..., ...})`` and is retried on
        the env's next step."""
        result = yield EnvCall("reset", (), {"seed": seed, **kwargs})
        self._needs_reset[i] = isinstance(result, EnvError)
        return ("", result.info) if isinstance(result, EnvError) else result

    def _step_plan(self, i: int, action: Any) -> Plan[Transition]:
        if self._needs_reset[i]:
            obs, info = yield from self._reset_plan(i, None, {})
            if self._needs_reset[i]:
                return self._errored(i, obs, info)
            return obs, 0.0, False, False, info
        outcome = yield EnvCall("step", (action,), {})
        if isinstance(outcome, EnvError):
            return self._errored(i, "", outcome.info)
        obs, reward, terminated, truncated, info = outcome
        if terminated or truncated:
            if self.autoreset_mode is AutoresetMode.NEXT_STEP:
                self._needs_reset[i] = True
            else:
                final_obs, final_info = obs, info
                obs, info = yield from self._reset_plan(i, None, {})
                info = {**info, "final_obs": final_obs, "final_info": final_info}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _errored(self, i: int, obs: Any, info: dict[str, Any]) -> Transition:
        self._needs_reset[i] = True
        return obs, 0.0, True, info.get("error_type") == "timeout", info

    def _seeds(self, seed: Seeds) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int):
            return [seed + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(f"got {len(seed)} seeds for {self.num_envs} envs")
        return list(seed)


class SyncVectorEnv(VectorEnv):
    """Steps envs one after another through their sync faces (GEM's ``SyncVectorEnv``).

    No event loop is involved beyond what each env's own sync face uses. ``step_timeout`` is
    not supported (a sync call cannot be interrupted); use :class:`AsyncVectorEnv` for it.
    """

    supports_step_timeout = False

    def reset(
        self,
        seed: Seeds = None,
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ResetBatch:
        plans = self._reset_plans(seed, env_kwargs, kwargs)
        return self._reset_batch([self._drive(i, plan) for i, plan in plans])

    def step(self, actions: Actions) -> StepBatch:
        return self._step_batch([self._drive(i, plan) for i, plan in self._step_plans(actions)])

    def close(self) -> None:
        errors: dict[int, Exception] = {}
        for i, env in enumerate(self.envs):
            try:
                env.close()
            except Exception as exc:  # the others must still be closed
                errors[i] = exc
        self._raise_close_errors(errors)

    def _drive(self, i: int, plan: Plan[T]) -> T:
        """Run ``plan`` against env ``i``'s sync face."""
        env, result = self.envs[i], None
        try:
            while True:
                call = plan.send(result)
                try:
                    result = call.checked(getattr(env, call.method)(*call.args, **call.kwargs))
                except Exception as exc:  # isolation: one env's bug must not end the batch
                    result = EnvError.from_exception(exc)
        except StopIteration as done:
            return done.value


class AsyncVectorEnv(VectorEnv):
    """Steps envs concurrently on one event loop: no thread per env. ``async with`` closes
    every env at the end of the block."""

    async def __aenter__(self) -> AsyncVectorEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def areset(
        self,
        seed: Seeds = None,
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ResetBatch:
        """The async face of :meth:`reset`."""
        return self._reset_batch(await self._gather(self._reset_plans(seed, env_kwargs, kwargs)))

    async def astep(self, actions: Actions) -> StepBatch:
        """The async face of :meth:`step`."""
        return self._step_batch(await self._gather(self._step_plans(actions)))

    async def aclose(self) -> None:
        """The async face of :meth:`close`; the envs close concurrently, and one's failure
        cancels none of the others."""
        errors: dict[int, Exception] = {}

        async def close(i: int) -> None:
            try:
                await self.envs[i].aclose()
            except Exception as exc:  # the others must still be closed
                errors[i] = exc

        async with anyio.create_task_group() as tg:
            for i in range(self.num_envs):
                tg.start_soon(close, i)
        self._raise_close_errors(dict(sorted(errors.items())))

    # -- sync face ---------------------------------------------------------------------
    def reset(
        self,
        seed: Seeds = None,
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ResetBatch:
        return run_sync(self.areset, seed, env_kwargs, **kwargs)

    def step(self, actions: Actions) -> StepBatch:
        return run_sync(self.astep, actions)

    def close(self) -> None:
        run_sync(self.aclose)

    # -- driving plans -----------------------------------------------------------------
    async def _gather(self, plans: list[tuple[int, Plan[T]]]) -> list[T]:
        """Run each plan against its env's async face, concurrently in one task group; envs
        that never suspend run inline, since a task each would only add overhead."""
        results: list[Any] = [None] * len(plans)

        async def one(k: int) -> None:
            results[k] = await self._drive(*plans[k])

        async with anyio.create_task_group() as tg:
            for k, (i, _) in enumerate(plans):
                if self.envs[i].suspends:
                    tg.start_soon(one, k)
                else:
                    await one(k)
        return results

    async def _drive(self, i: int, plan: Plan[T]) -> T:
        """Run ``plan`` against env ``i``'s async face, each call under the step timeout."""
        env, result = self.envs[i], None
        try:
            while True:
                call = plan.send(result)
                method = getattr(env, "a" + call.method)
                try:
                    if self.step_timeout is None:  # a cancel scope costs more than a game step
                        result = call.checked(await method(*call.args, **call.kwargs))
                    else:  # the timeout's error stands unless the call returns in time
                        result = EnvError(f"timed out after {self.step_timeout} s", "timeout")
                        with anyio.move_on_after(self.step_timeout):
                            result = call.checked(await method(*call.args, **call.kwargs))
                except Exception as exc:  # isolation: one env's bug must not end the batch
                    result = EnvError.from_exception(exc)
        except StopIteration as done:
            return done.value
