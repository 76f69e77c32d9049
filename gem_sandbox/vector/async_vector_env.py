"""Step envs concurrently on one event loop (``gem.vector.async_vector_env``).

GEM's ``AsyncVectorEnv`` runs a thread per env; this one runs a coroutine per env in one task
group: an env that waits on a sandbox yields the loop to the others, and a thousand envs cost
a thousand coroutines, not a thousand threads. An env with only a sync face runs in a worker
thread (inline when it says it does not block). Its sync face drives the async one through
:mod:`gem_sandbox.bridge`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from gem_sandbox.bridge import run_sync
from gem_sandbox.core import Env, StepReturn, aclose_env, areset_env, astep_env, env_suspends
from gem_sandbox.vector.vector_env import (
    Actions,
    AutoresetMode,
    EnvError,
    Plan,
    ResetBatch,
    Seeds,
    StepBatch,
    T,
    VectorEnv,
)


def step_reset_env(action: Any, env: Env, autoreset_mode: AutoresetMode | str, autoreset_env: bool) -> StepReturn:
    """One env's part of a vector step (GEM's helper): with ``NEXT_STEP``, reset it when
    ``autoreset_env`` (its last step ended the episode; reward 0) or else step it; with
    ``SAME_STEP``, step it and reset it at once when the step ends the episode (the final
    observation and info kept in ``info["final_obs"]``/``info["final_info"]``, as the vector
    envs here do)."""
    mode = AutoresetMode(autoreset_mode)
    if mode is AutoresetMode.NEXT_STEP:
        if autoreset_env:
            obs, info = env.reset()
            return obs, 0.0, False, False, info
        return env.step(action)
    obs, reward, terminated, truncated, info = env.step(action)
    if terminated or truncated:
        final_obs, final_info = obs, info
        obs, info = env.reset()
        info = {**info, "final_obs": final_obs, "final_info": final_info}
    return obs, reward, terminated, truncated, info


class AsyncVectorEnv(VectorEnv):
    """Steps envs concurrently on one event loop: no thread per env. ``async with`` closes
    every env at the end of the block."""

    async def __aenter__(self) -> AsyncVectorEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def areset(  # type: ignore[override]
        self,
        seed: Seeds = None,
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ResetBatch:
        """The async face of :meth:`reset`."""
        return self._reset_batch(await self._gather(self._reset_plans(seed, env_kwargs, kwargs)))

    async def astep(self, actions: Actions) -> StepBatch:  # type: ignore[override]
        """The async face of :meth:`step`."""
        return self._step_batch(await self._gather(self._step_plans(actions)))

    async def aclose(self) -> None:
        """The async face of :meth:`close`; the envs close concurrently, and one's failure
        cancels none of the others."""
        errors: dict[int, Exception] = {}

        async def close(i: int) -> None:
            try:
                await aclose_env(self.envs[i])
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
                if env_suspends(self.envs[i]):
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
                method = areset_env if call.method == "reset" else astep_env
                try:
                    if self.step_timeout is None:  # a cancel scope costs more than a game step
                        result = call.checked(await method(env, *call.args, **call.kwargs))
                    else:  # the timeout's error stands unless the call returns in time
                        result = EnvError(f"timed out after {self.step_timeout} s", "timeout")
                        with anyio.move_on_after(self.step_timeout):
                            result = call.checked(await method(env, *call.args, **call.kwargs))
                except Exception as exc:  # isolation: one env's bug must not end the batch
                    result = EnvError.from_exception(exc)
        except StopIteration as done:
            return done.value
