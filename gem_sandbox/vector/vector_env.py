"""The vector env contract and the batch machinery both drivers share (``gem.vector.vector_env``).

A vector env is itself an :class:`~gem_sandbox.core.Env` (GEM's is): ``reset`` and ``step``
take and return batches. What happens to each env in a batch (autoreset, subset stepping, error
isolation) is written once, as a *plan* per env: a generator that yields the calls to make on
the env and receives their results, which :class:`SyncVectorEnv` and :class:`AsyncVectorEnv`
each perform their own way.

Results follow GEM: observations and infos as lists, rewards, terminations and truncations as
numpy arrays, each holding only the envs that were stepped. An env that raises (or overruns
``step_timeout``) is isolated: its slot ends the episode with the error in ``info["error"]``
and the rest of the batch is unaffected.
"""

from __future__ import annotations

import copy
import enum
import reprlib
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np

from gem_sandbox.core import Env, ResetReturn

T = TypeVar("T")
#: GEM's name for the type of the batched arrays (rewards, terminations, truncations).
ArrayType = TypeVar("ArrayType")
Transition = tuple[Any, float, bool, bool, dict[str, Any]]
Seeds = int | Sequence[int | None] | None
Actions = Sequence[Any] | Mapping[int, Any]
StepBatch = tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]
ResetBatch = tuple[list[Any], list[dict[str, Any]]]


class AutoresetMode(str, enum.Enum):
    """When a finished env is reset (Gymnasium's vector autoreset modes, GEM's values).

    ``SAME_STEP`` (the default, as in GEM): in the step that ends the episode; that step returns
    the new episode's first observation and reset info, with the final observation and info
    kept in ``info["final_obs"]`` / ``info["final_info"]``.
    ``NEXT_STEP``: on the env's next step, whose action is ignored and which returns the new
    episode's first observation with reward 0.

    Any spelling of the two is accepted: GEM's enum members, ``"SameStep"``, ``"same_step"``.
    """

    NEXT_STEP = "NextStep"
    SAME_STEP = "SameStep"

    @classmethod
    def _missing_(cls, value: object) -> AutoresetMode | None:
        value = getattr(value, "value", value)  # another enum's member, e.g. GEM's own
        if isinstance(value, str):
            key = value.replace("_", "").replace("-", "").lower()
            for member in cls:
                if member.value.lower() == key:
                    return member
        return None


class VectorSizeError(ValueError, AssertionError):
    """A batch argument (actions, seeds, per-env kwargs) whose length is not the number of
    envs. GEM asserts these; this is both error types, so either ``except`` catches it."""


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


class SpawnOf:
    """The ``env_fns`` entry of a vector env built from env instances: each call returns a new
    env like ``env`` (``env.spawn()``; a deep copy of an env that cannot spawn, as GEM's)."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def __call__(self) -> Env:
        try:
            return self.env.spawn()
        except NotImplementedError:
            return copy.deepcopy(self.env)

    def __repr__(self) -> str:
        return f"SpawnOf({self.env!r})"


class VectorEnv(Env):
    """A batch of envs with autoreset, subset stepping and per-env error isolation.

    Built GEM's way, ``VectorEnv(env_ids, env_fns, autoreset_mode)`` (each of ``env_fns`` is
    called once to make an env), or from envs already made: ``VectorEnv(envs)`` or
    ``VectorEnv(envs=envs, env_ids=...)``, whose ``env_fns`` then spawn new envs like them.
    Either way ``envs``, ``env_fns``, ``env_ids`` and ``num_envs`` are GEM's attributes.

    The shared part of :class:`SyncVectorEnv` and :class:`AsyncVectorEnv`: the contract, the
    plans of what each env does in a batch, and the assembly of the batch's results.
    """

    _guards = {}  # the envs guard their own steps; a batch of actions is not one action
    _expose_settings = False

    #: Whether the class can cut a step at ``step_timeout``.
    supports_step_timeout: ClassVar[bool] = True

    def __init__(
        self,
        envs_or_env_ids: Sequence[Env] | Sequence[str] | None = None,
        /,
        env_fns: Sequence[Callable[[], Env]] | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        *,
        env_ids: Sequence[str] | None = None,
        envs: Sequence[Env] | None = None,
        step_timeout: float | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed)
        first = list(envs_or_env_ids) if envs_or_env_ids is not None else None
        if first and all(isinstance(x, str) for x in first):  # GEM's (env_ids, env_fns)
            if env_ids is not None:
                raise TypeError("env_ids given twice: positionally and by keyword")
            env_ids = first
        elif first is not None:
            if envs is not None:
                raise TypeError("envs given twice: positionally and by keyword")
            envs = first
        if envs is None:
            if env_fns is None:
                raise TypeError("a vector env needs env_fns (GEM's signature) or envs")
            envs = [env_fn() for env_fn in env_fns]
        envs = list(envs)
        if not envs:
            raise ValueError("a vector env needs at least one env")
        if step_timeout is not None and not self.supports_step_timeout:
            raise ValueError(
                f"{type(self).__name__} cannot apply step_timeout: it calls each env's sync "
                "step, which cannot be interrupted; use AsyncVectorEnv "
                "(make_vec(..., async_mode=True)) for step timeouts"
            )
        self.envs = envs
        self.num_envs = len(envs)
        self.env_fns = list(env_fns) if env_fns is not None else [SpawnOf(env) for env in envs]
        if env_ids is not None and len(env_ids) != self.num_envs:
            raise VectorSizeError(f"got {len(env_ids)} env_ids for {self.num_envs} envs")
        self.env_ids = list(env_ids) if env_ids else [getattr(e, "env_id", None) or "" for e in envs]
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.step_timeout = step_timeout
        self.seed = seed
        self._needs_reset = [False] * self.num_envs

    def reset(  # type: ignore[override]
        self,
        seed: Seeds = None,
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ResetBatch:
        """Reset every env. An int ``seed`` seeds env ``i`` with ``seed + i``; ``env_kwargs``
        gives each env its own reset kwargs on top of the shared ``kwargs``."""
        raise NotImplementedError

    def step(self, actions: Actions) -> StepBatch:  # type: ignore[override]
        """Step the envs. A sequence steps all of them; a dict ``{index: action}`` steps only
        those, and the results hold only those, in the dict's order."""
        raise NotImplementedError

    def close(self) -> None:
        """Close every env, each isolated from the others' failures; then, if any failed,
        raise an :class:`ExceptionGroup` naming each of them."""
        raise NotImplementedError

    def sample_random_actions(self) -> list[Any]:
        return [env.sample_random_action() for env in self.envs]

    def sample_random_action(self) -> list[Any]:  # type: ignore[override]
        """One random action per env (the batch's random action)."""
        return self.sample_random_actions()

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
            raise VectorSizeError(f"env_kwargs has {len(env_kwargs)} entries for {self.num_envs} envs")
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
                raise VectorSizeError(f"got {len(actions)} actions for {self.num_envs} envs")
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
            raise VectorSizeError(f"got {len(seed)} seeds for {self.num_envs} envs")
        return list(seed)
