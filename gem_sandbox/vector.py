"""Vectorized environments: many envs stepped as one batch.

Both classes drive the envs' async faces on one event loop (the caller's, through ``astep``
and ``areset``, or the shared background loop through the sync ``step`` and ``reset``):

* :class:`SyncVectorEnv` steps envs one after another, like GEM's;
* :class:`AsyncVectorEnv` steps them concurrently in one task group. There is no thread per
  env: an env that waits on a sandbox yields the loop to the others, and a thousand envs cost a
  thousand coroutines, not a thousand threads.

Results follow GEM: observations and infos as lists, rewards, terminations and truncations as
numpy arrays, each holding only the envs that were stepped. An env that raises or overruns
``step_timeout`` is isolated: its slot ends the episode with the error in ``info["error"]``
and the rest of the batch is unaffected.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import numpy as np

from gem_sandbox._loop import run_sync
from gem_sandbox.core import Env

Transition = tuple[Any, float, bool, bool, dict[str, Any]]


class AutoresetMode(str, enum.Enum):
    """When a finished env is reset (see Gymnasium's vector autoreset modes).

    ``SAME_STEP``: in the step that ends the episode; that step returns the new episode's first
    observation and keeps the final one in ``info["final_obs"]`` / ``info["final_info"]``.
    ``NEXT_STEP``: on the env's next step, whose action is ignored.
    """

    SAME_STEP = "same_step"
    NEXT_STEP = "next_step"


class VectorEnv:
    """A batch of envs with autoreset, subset stepping and per-env error isolation."""

    concurrent = False

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
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.env_ids = list(env_ids) if env_ids else [e.env_id or "" for e in self.envs]
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.step_timeout = step_timeout
        self.seed = seed
        self._needs_reset = [False] * self.num_envs

    # -- async face (the implementation) ----------------------------------------------
    async def areset(
        self,
        seed: int | Sequence[int | None] | None = None,
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset every env. An int ``seed`` seeds env ``i`` with ``seed + i``; ``env_kwargs``
        gives each env its own reset kwargs on top of the shared ``kwargs``."""
        seeds = self._seeds(seed)
        if env_kwargs is not None and len(env_kwargs) != self.num_envs:
            raise ValueError(f"env_kwargs has {len(env_kwargs)} entries for {self.num_envs} envs")
        per_env = [{**kwargs, **(env_kwargs[i] if env_kwargs else {})} for i in range(self.num_envs)]
        results = await self._gather(
            range(self.num_envs), lambda i: self._reset_one(i, seeds[i], per_env[i])
        )
        return [obs for obs, _ in results], [info for _, info in results]

    async def astep(
        self, actions: Sequence[Any] | Mapping[int, Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step the envs. A sequence steps all of them; a dict ``{index: action}`` steps only
        those, and the results hold only those, in the dict's order."""
        if isinstance(actions, Mapping):
            indices = list(actions)
            for i in indices:
                if not 0 <= i < self.num_envs:
                    raise IndexError(f"env index {i} out of range for {self.num_envs} envs")
        else:
            if len(actions) != self.num_envs:
                raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs")
            indices = list(range(self.num_envs))
        results = await self._gather(indices, lambda i: self._step_one(i, actions[i]))
        obs, rewards, terminated, truncated, infos = zip(*results)
        return (
            list(obs),
            np.asarray(rewards, dtype=np.float64),
            np.asarray(terminated, dtype=np.bool_),
            np.asarray(truncated, dtype=np.bool_),
            list(infos),
        )

    async def aclose(self) -> None:
        await self._gather(range(self.num_envs), lambda i: self.envs[i].aclose())

    # -- sync face ---------------------------------------------------------------------
    def reset(self, seed: int | Sequence[int | None] | None = None, **kwargs: Any):
        return run_sync(self.areset, seed, **kwargs)

    def step(self, actions: Sequence[Any] | Mapping[int, Any]):
        return run_sync(self.astep, actions)

    def close(self) -> None:
        run_sync(self.aclose)

    def sample_random_actions(self) -> list[Any]:
        return [env.sample_random_action() for env in self.envs]

    def __len__(self) -> int:
        return self.num_envs

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one env -----------------------------------------------------------------------
    async def _reset_one(self, i: int, seed: int | None, kwargs: Mapping[str, Any]):
        self._needs_reset[i] = False
        return await self._guarded(self.envs[i].areset(seed=seed, **kwargs))

    async def _step_one(self, i: int, action: Any) -> Transition:
        env = self.envs[i]
        if self._needs_reset[i]:
            self._needs_reset[i] = False
            obs, info = await self._guarded(env.areset())
            if "error" in info:
                return self._errored(i, obs, info)
            return obs, 0.0, False, False, info
        outcome = await self._guarded(env.astep(action))
        if len(outcome) == 2:  # the step raised or timed out
            return self._errored(i, *outcome)
        obs, reward, terminated, truncated, info = outcome
        if terminated or truncated:
            if self.autoreset_mode is AutoresetMode.NEXT_STEP:
                self._needs_reset[i] = True
            else:
                final_obs, final_info = obs, info
                obs, info = await self._guarded(env.areset())
                info = {**info, "final_obs": final_obs, "final_info": final_info}
                self._needs_reset[i] = "error" in info
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _errored(self, i: int, obs: Any, info: dict[str, Any]) -> Transition:
        self._needs_reset[i] = True
        return obs, 0.0, True, info.get("error_type") == "timeout", info

    async def _guarded(self, call: Awaitable[Any]) -> Any:
        """Await ``call`` under the step timeout; failures become ``("", {"error": ...})``."""
        try:
            if self.step_timeout is None:
                return await call
            with anyio.fail_after(self.step_timeout):
                return await call
        except TimeoutError:
            return "", {"error": f"timed out after {self.step_timeout} s", "error_type": "timeout"}
        except Exception as exc:  # isolation: one env's bug must not end the batch
            return "", {"error": f"{type(exc).__name__}: {exc}", "error_type": "exception"}

    async def _gather(self, indices: Iterable[int], call: Callable[[int], Awaitable[Any]]) -> list[Any]:
        """``[await call(i) for i in indices]``; concurrently in the async vector env, where
        envs that never suspend run inline since a task each would only add overhead."""
        indices = list(indices)
        results: list[Any] = [None] * len(indices)

        async def one(k: int) -> None:
            results[k] = await call(indices[k])

        async with anyio.create_task_group() as tg:
            for k, i in enumerate(indices):
                if self.concurrent and self.envs[i].suspends:
                    tg.start_soon(one, k)
                else:
                    await one(k)
        return results

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int):
            return [seed + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(f"got {len(seed)} seeds for {self.num_envs} envs")
        return list(seed)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} num_envs={self.num_envs}>"


class SyncVectorEnv(VectorEnv):
    """Steps envs one after another (GEM's ``SyncVectorEnv``)."""


class AsyncVectorEnv(VectorEnv):
    """Steps envs concurrently on one event loop: no thread per env."""

    concurrent = True
