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

Every env guards its lifecycle (Gymnasium's order enforcing, built in and extended): a step
before the first reset or after the episode ended raises :class:`ResetNeeded`, one whose action
is not a string raises :class:`InvalidAction`, before the env is touched.
"""

from __future__ import annotations

import copy
import functools
import inspect
import random
import reprlib
from collections.abc import Callable
from typing import Any, ClassVar, Generic, SupportsFloat, TypeVar

import anyio.to_thread

from gem_sandbox.sync import run_sync

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")

ResetReturn = tuple[Any, dict[str, Any]]
StepReturn = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]


class ResetNeeded(RuntimeError):
    """``step`` with no episode running: before the first ``reset`` or after the episode ended
    (Gymnasium's name). Playing on would replay a finished board and pay its rewards again."""


class InvalidAction(TypeError):
    """An action that is not a string. Actions are the model's text; anything else (token ids,
    a ``None`` from a failed generation) is a bug in the caller, not a move to score."""


def _ended(result: Any) -> bool:
    """Whether a step's return ends the episode; False for a malformed one, which whoever
    called ``step`` reports (vector envs isolate it with its shape in the error)."""
    try:
        return bool(result[2] or result[3])
    except (TypeError, IndexError, KeyError):
        return False


# The guards wrapped around the reset/step methods each subclass defines (see
# ``Env.__init_subclass__``). Every write is idempotent (a step stores the turn it read at
# entry + 1), so a subclass's step that calls ``super().step()``, two guards nested, still
# counts one turn.
def _guard_reset(fn: Callable[..., ResetReturn]) -> Callable[..., ResetReturn]:
    @functools.wraps(fn)
    def reset(self: Env, *args: Any, **kwargs: Any) -> ResetReturn:
        self._turn, self._done = 0, False
        try:
            return fn(self, *args, **kwargs)
        except BaseException:  # even after a nested reset succeeded: no episode to step
            self._turn = None
            raise

    return reset


def _guard_areset(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def areset(self: Env, *args: Any, **kwargs: Any) -> ResetReturn:
        self._turn, self._done = 0, False
        try:
            return await fn(self, *args, **kwargs)
        except BaseException:
            self._turn = None
            raise

    return areset


def _guard_step(fn: Callable[..., StepReturn]) -> Callable[..., StepReturn]:
    @functools.wraps(fn)
    def step(self: Env, action: Any) -> StepReturn:
        turn = self._turn
        if turn is None or self._done or not isinstance(action, str):
            turn = self.check_step(action)  # raises; the fast path is the three checks above
        result = fn(self, action)
        self._turn, self._done = turn + 1, _ended(result)
        return result

    return step


def _guard_astep(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def astep(self: Env, action: Any) -> StepReturn:
        turn = self._turn
        if turn is None or self._done or not isinstance(action, str):
            turn = self.check_step(action)
        result = await fn(self, action)
        self._turn, self._done = turn + 1, _ended(result)
        return result

    return astep


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

    The ``reset``/``areset``/``step``/``astep`` a subclass defines are wrapped when the class
    is created, so that every env, however built, raises :class:`ResetNeeded` or
    :class:`InvalidAction` instead of stepping when it should not. The lifecycle is part of
    the env's state (``get_state`` carries it).
    """

    #: The guard each of these methods gets where a subclass defines it.
    _guards: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "reset": _guard_reset,
        "areset": _guard_areset,
        "step": _guard_step,
        "astep": _guard_astep,
    }
    # Class defaults, so that an env whose ``__init__`` skips this one's starts with no episode.
    _turn: int | None = None  # steps taken this episode; None until a reset succeeds
    _done: bool = False  # the last step ended the episode

    #: True when a sync ``step`` may block (I/O, subprocesses); the async face then runs it
    #: in a worker thread. Pure-Python envs whose steps take microseconds set it False.
    blocking: bool = True

    env_id: str | None = None
    entry_point: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Subclasses implement the public methods themselves (GEM's and Gymnasium's way, and
        # how this class tells which face is native), so the guard goes around each of them.
        super().__init_subclass__(**kwargs)
        for name, guard in cls._guards.items():
            fn = cls.__dict__.get(name)
            if inspect.isfunction(fn):
                setattr(cls, name, guard(fn))

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
    def check_step(self, action: object) -> int:
        """The number of turns played so far; raises :class:`ResetNeeded` unless an episode
        is running and :class:`InvalidAction` unless ``action`` is text. The guard of every
        ``step`` raises through it; a wrapper calls it before answering a step itself."""
        turn = self._turn
        if turn is None:
            raise ResetNeeded(f"{type(self).__name__} has no episode running: call reset() first")
        if self._done:
            raise ResetNeeded(f"{type(self).__name__}'s episode ended at turn {turn}; call reset() to start a new one")
        if not isinstance(action, str):
            raise InvalidAction(
                f"actions are strings (the model's text); {type(self).__name__} got "
                f"{type(action).__name__} {reprlib.repr(action)}"
            )
        return turn

    @classmethod
    def describe_source(cls, **kwargs: Any) -> str:
        """Where the env's problems come from with these registered ``kwargs`` (``gem-sandbox
        envs`` lists it): a shipped sample, a local file, a download, or, as here, generated."""
        return "generated"

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
    async path never detours through a thread; one that owns resources overrides both
    ``close`` and ``aclose``, releases them and forwards to the inner env.

    The lifecycle is the inner env's, which guards every step forwarded to it: wrappers are
    not guarded themselves, so stacking them costs and counts nothing more. A wrapper that
    answers a step without forwarding it (a tool call) calls :meth:`check_step` first.
    """

    _guards = {}  # the inner env guards (see above)

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

    def check_step(self, action: object) -> int:
        return self.env.check_step(action)

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
