"""The environment contract: :class:`Env` and :class:`EnvWrapper`.

An environment is a text-in, text-out MDP. Each one has two faces that share one
implementation:

* the **sync** face, GEM's and Gymnasium's: ``reset``, ``step``, ``close``;
* the **async** face, the native path for anything that waits on a sandbox:
  ``areset``, ``astep``, ``aclose``.

A subclass implements whichever face is natural and gets the other for free. Async-native
envs (tool use, code scoring) are driven from sync callers through :mod:`gem_sandbox.sync`;
sync-native envs are called inline from async callers when their steps are cheap
(``blocking = False``, the pure-Python games), or through a worker thread when they block.
"""

from __future__ import annotations

import copy
import functools
import random
from typing import Any, Generic, SupportsFloat, TypeVar

import anyio.to_thread

from gem_sandbox.sync import run_sync

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")

ResetReturn = tuple[Any, dict[str, Any]]
StepReturn = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]


def _overrides(obj: object, name: str) -> bool:
    return _class_overrides(type(obj), name)


@functools.cache
def _class_overrides(cls: type, name: str) -> bool:
    """Whether ``cls`` replaces ``Env.<name>``; cached, as vector envs ask per env per step."""
    return getattr(cls, name) is not getattr(Env, name)


class Env(Generic[ObsType, ActType]):
    """Base class of every environment.

    ``reset(seed=None, **kwargs) -> (obs, info)`` starts an episode;
    ``step(action) -> (obs, reward, terminated, truncated, info)`` advances it.
    Single-turn envs return ``terminated`` and ``truncated`` both True.

    Randomness comes from ``self.rng`` (a :class:`random.Random` owned by the instance),
    never from the global ``random`` module, so that envs in one process are independent and
    ``reset(seed=s)`` reproduces an episode exactly.
    """

    #: True when a sync ``step`` may block (I/O, subprocesses); the async face then runs it
    #: in a worker thread. Pure-Python envs whose steps take microseconds set it False.
    blocking: bool = True

    env_id: str | None = None
    entry_point: Any = None

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)
        self._seed = seed

    # -- sync face ---------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        """Start a new episode; reseed ``self.rng`` first when ``seed`` is given."""
        if _overrides(self, "areset"):
            return run_sync(self.areset, seed, **kwargs)
        raise NotImplementedError(f"{type(self).__name__} implements neither reset nor areset")

    def step(self, action: ActType) -> StepReturn:
        """Apply one action."""
        if _overrides(self, "astep"):
            return run_sync(self.astep, action)
        raise NotImplementedError(f"{type(self).__name__} implements neither step nor astep")

    def close(self) -> None:
        """Release resources (sandboxes, files). Safe to call twice."""
        if _overrides(self, "aclose"):
            run_sync(self.aclose)

    # -- async face --------------------------------------------------------------------
    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        if not _overrides(self, "reset"):
            raise NotImplementedError(f"{type(self).__name__} implements neither reset nor areset")
        return await self._call_sync(self.reset, seed, **kwargs)

    async def astep(self, action: ActType) -> StepReturn:
        if not _overrides(self, "step"):
            raise NotImplementedError(f"{type(self).__name__} implements neither step nor astep")
        return await self._call_sync(self.step, action)

    async def aclose(self) -> None:
        if _overrides(self, "close"):
            await self._call_sync(self.close)

    async def _call_sync(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.blocking:
            return fn(*args, **kwargs)
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    @property
    def suspends(self) -> bool:
        """Whether the async face can suspend (awaits I/O or a worker thread). Vector envs call
        envs that cannot inline, one after another, instead of paying for a task each."""
        return self.blocking or _overrides(self, "astep") or _overrides(self, "areset")

    # -- helpers -----------------------------------------------------------------------
    def seed_rng(self, seed: int | None) -> None:
        """Reseed this env's generator; ``reset`` implementations call it with their seed."""
        if seed is not None:
            self.rng.seed(seed)
            self._seed = seed

    def sample_random_action(self) -> ActType:
        """A uniformly random well-formed action for the current state."""
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:
        """A deep copy of everything needed to resume this episode with :meth:`set_state`."""
        return copy.deepcopy({k: v for k, v in vars(self).items() if not k.startswith("__")})

    def set_state(self, state: dict[str, Any]) -> None:
        vars(self).update(copy.deepcopy(state))

    def spawn(self, same_state: bool = False, **kwargs: Any) -> Env:
        """A fresh instance with this one's configuration (and state when ``same_state``)."""
        clone = copy.deepcopy(self)
        for key, value in kwargs.items():
            setattr(clone, key, value)
        if not same_state:
            clone.reset()
        return clone

    @property
    def unwrapped(self) -> Env:
        return self

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Env:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{f' {self.env_id}' if self.env_id else ''}>"


class EnvWrapper(Env[ObsType, ActType]):
    """Changes one aspect of a wrapped env and forwards everything else.

    Unknown attributes are looked up on the inner env at access time (not copied once), so a
    wrapper always sees the inner env's current state. A wrapper that changes steps overrides
    both ``step`` and ``astep`` (usually as two lines around one shared helper), so that the
    async path never detours through a thread.
    """

    def __init__(self, env: Env) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def blocking(self) -> bool:  # type: ignore[override]
        return self.env.blocking

    @property
    def suspends(self) -> bool:
        return self.env.suspends

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action: ActType) -> StepReturn:
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()

    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return await self.env.areset(seed=seed, **kwargs)

    async def astep(self, action: ActType) -> StepReturn:
        return await self.env.astep(action)

    async def aclose(self) -> None:
        await self.env.aclose()

    def sample_random_action(self) -> ActType:
        return self.env.sample_random_action()

    def get_state(self) -> dict[str, Any]:
        return self.env.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state)

    def spawn(self, same_state: bool = False, **kwargs: Any) -> Env:
        clone = copy.copy(self)
        clone.env = self.env.spawn(same_state=same_state, **kwargs)
        return clone

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"
