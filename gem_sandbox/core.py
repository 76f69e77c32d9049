"""The environment contract: :class:`Env` and :class:`EnvWrapper`.

An environment is a text-in, text-out MDP. Each one has two faces that share one
implementation:

* the **sync** face, GEM's and Gymnasium's: ``reset``, ``step``, ``close``;
* the **async** face, the native path for anything that waits on a sandbox:
  ``areset``, ``astep``, ``aclose``.

A subclass implements whichever face is natural and gets the other for free. Async-native
envs (tool use, code scoring) are driven from sync callers through :mod:`gem_sandbox.bridge`;
sync-native envs are called inline from async callers when their steps are cheap
(``blocking = False``, the pure-Python games), or through a worker thread when they block.

Every env guards its lifecycle (Gymnasium's order enforcing, built in and extended): a step
before the first reset or after the episode ended raises :class:`ResetNeeded`, one whose action
is not a string raises :class:`InvalidAction`, before the env is touched.

GEM's own contract holds too, so that an env or wrapper written for ``gem`` runs here as it is:
``super().reset(seed)`` seeds (GEM's base does, the global ``random`` and ``numpy`` included),
every constructor setting is an attribute from construction on, and wrappers accept envs that
have only GEM's sync face (the ``*_env`` helpers of :mod:`gem_sandbox.faces`, exported here too,
give any env both faces).
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

from gem_sandbox.bridge import run_sync
from gem_sandbox.faces import (
    aclose_env,
    areset_env,
    astep_env,
    close_env,
    complete_faces,
    env_blocking,
    env_suspends,
    get_state_of,
    set_state_of,
)
from gem_sandbox.guards import exposing_settings, guard_areset, guard_astep, guard_reset, guard_step

__all__ = [
    "ActType",
    "Env",
    "EnvWrapper",
    "InvalidAction",
    "ObsType",
    "ResetNeeded",
    "ResetReturn",
    "StepReturn",
    "aclose_env",
    "areset_env",
    "astep_env",
    "close_env",
    "env_blocking",
    "env_suspends",
    "get_state_of",
    "set_state_of",
]

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

    A subclass's ``__init__`` is wrapped too: each plain-data argument it did not store under
    its own name becomes an attribute (GEM's envs have every setting, ``max_turns`` included,
    from construction on). An env written for GEM, drawing from the global ``random`` after
    ``super().reset(seed)``, is reproducible as in GEM: the base reset seeds it.
    """

    #: The guard each of these methods gets where a subclass defines it.
    _guards: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "reset": guard_reset,
        "areset": guard_areset,
        "step": guard_step,
        "astep": guard_astep,
    }
    # Class defaults, so that an env whose ``__init__`` skips this one's starts with no episode.
    _turn: int | None = None  # steps taken this episode; None until a reset succeeds
    _done: bool = False  # the last step ended the episode

    #: True when a sync ``step`` may block (I/O, subprocesses); the async face then runs it
    #: in a worker thread. Pure-Python envs whose steps take microseconds set it False.
    blocking: bool = True

    env_id: str | None = None
    entry_point: Any = None

    #: Whether constructor settings become attributes (see :func:`gem_sandbox.guards.exposing_settings`);
    #: wrappers and vector envs, whose attributes are forwarded or their own, opt out.
    _expose_settings: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Subclasses implement the public methods themselves (GEM's and Gymnasium's way, and
        # how this class tells which face is native), so the guard goes around each of them.
        super().__init_subclass__(**kwargs)
        for name, guard in cls._guards.items():
            fn = cls.__dict__.get(name)
            if inspect.isfunction(fn):
                setattr(cls, name, guard(fn))
        init = cls.__dict__.get("__init__")
        if inspect.isfunction(init):
            cls.__init__ = exposing_settings(init)  # type: ignore[method-assign]

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)
        self._seed = seed

    # -- sync face ---------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        """Start a new episode; reseed ``self.rng`` first when ``seed`` is given.

        Called through ``super().reset(seed)`` from a subclass's own ``reset`` (GEM's way),
        it only seeds, as GEM's base does: ``self.rng`` and the global ``random`` and ``numpy``
        generators, which GEM-style envs draw from; it returns None.
        """
        if _overrides(self, "reset"):
            self._seed_as_gem_does(seed)
            return None  # type: ignore[return-value]
        if _overrides(self, "areset"):
            return run_sync(self.areset, seed, **kwargs)
        raise NotImplementedError(f"{type(self).__name__} implements neither reset nor areset")

    def step(self, action: ActType) -> StepReturn:
        """Apply one action. Through ``super().step(action)`` it does nothing (GEM's base
        is abstract) and returns None."""
        if _overrides(self, "step"):
            return None  # type: ignore[return-value]
        if _overrides(self, "astep"):
            return run_sync(self.astep, action)
        raise NotImplementedError(f"{type(self).__name__} implements neither step nor astep")

    def close(self) -> None:
        """Release resources (sandboxes, files). Safe to call twice."""
        if not _overrides(self, "close") and _overrides(self, "aclose"):
            run_sync(self.aclose)

    # -- async face --------------------------------------------------------------------
    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        if _overrides(self, "areset"):  # through super() from the subclass's own areset
            self._seed_as_gem_does(seed)
            return None  # type: ignore[return-value]
        if not _overrides(self, "reset"):
            raise NotImplementedError(f"{type(self).__name__} implements neither reset nor areset")
        return await self._call_sync(self.reset, seed, **kwargs)

    async def astep(self, action: ActType) -> StepReturn:
        if _overrides(self, "astep"):
            return None  # type: ignore[return-value]
        if not _overrides(self, "step"):
            raise NotImplementedError(f"{type(self).__name__} implements neither step nor astep")
        return await self._call_sync(self.step, action)

    async def aclose(self) -> None:
        if not _overrides(self, "aclose") and _overrides(self, "close"):
            await self._call_sync(self.close)

    def _seed_as_gem_does(self, seed: int | None) -> None:
        if seed is not None:
            from gem_sandbox.utils import seeding  # numpy, only when GEM-style code seeds

            self.seed_rng(seed)
            seeding.set_seed(seed)

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
            rng = getattr(self, "rng", None)
            if isinstance(rng, random.Random):
                rng.seed(seed)
            else:  # an env whose __init__ skipped this class's
                self.rng = random.Random(seed)
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
        """A copy with this one's configuration, reset unless ``same_state`` (then it carries
        this episode on, independently). ``seed`` reseeds the copy: its first episode is
        ``reset(seed=seed)``'s, or with ``same_state`` the episodes after this one draw from
        it; other ``kwargs`` are set on the copy."""
        seed = kwargs.pop("seed", None)
        clone = self._spawn_copy()
        for key, value in kwargs.items():
            setattr(clone, key, value)
        if not same_state:
            clone.reset(seed=seed)
        elif seed is not None:
            clone.seed_rng(seed)
        return clone

    def _spawn_copy(self) -> Env:
        """The copy :meth:`spawn` starts from: a deep copy (envs sharing heavy read-only data
        override this)."""
        return copy.deepcopy(self)

    async def afork(self, n: int) -> list[Env]:
        """``n`` copies that carry this episode on from where it is, independently of it and
        of each other: a GRPO group sampled from one state, a search tree's branches. Wrappers
        that hold sandboxes fork those too, so each copy has sandboxes of its own starting from
        the same files, kernels and shells. ``VectorEnv(envs=...)`` steps the copies on as one
        batch, without a reset."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"fork makes one or more copies, not {n!r}")
        return [self.spawn(same_state=True) for _ in range(n)]

    def fork(self, n: int) -> list[Env]:
        """:meth:`afork` from synchronous code."""
        return run_sync(self.afork, n)

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
    ``close`` and ``aclose``, releases them and forwards to the inner env. A wrapper written
    for GEM overrides only the sync ``reset``/``step``: its async face then runs them (inline
    over envs that never suspend, else in a worker thread), so no path bypasses them.

    The inner env may be any GEM-style env, sync face only (a ``gem.Env``): the async face,
    ``close``, the state and the lifecycle checks fall back as the ``*_env`` helpers of :mod:`gem_sandbox.faces` say.

    The lifecycle is the inner env's, which guards every step forwarded to it: wrappers are
    not guarded themselves, so stacking them costs and counts nothing more. A wrapper that
    answers a step without forwarding it (a tool call) calls :meth:`check_step` first.

    A wrapper's own per-episode state (a history, counters) is named in :attr:`_state_attrs`:
    :meth:`get_state`/:meth:`set_state` carry it with the inner env's, and copies
    (:meth:`spawn`, ``copy.deepcopy``) get their own. :attr:`_shared_attrs` names read-only
    configuration that copies share instead of duplicating (a tokenizer).
    """

    _guards = {}  # the inner env guards (see above)
    _expose_settings = False  # its attributes are the inner env's, forwarded

    #: Attributes holding this wrapper's own per-episode state.
    _state_attrs: ClassVar[tuple[str, ...]] = ()
    #: Attributes that copies of this wrapper share rather than deep-copy.
    _shared_attrs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, env: Env) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def __deepcopy__(self, memo: dict[int, Any]) -> EnvWrapper[ObsType, ActType]:
        cls = type(self)
        clone = cls.__new__(cls)
        memo[id(self)] = clone
        shared = self._shared_attrs
        for key, value in vars(self).items():
            vars(clone)[key] = value if key in shared else copy.deepcopy(value, memo)
        return clone

    # GEM's wrapper copies the inner env's attributes at construction, ``env_id`` among them.
    @property  # type: ignore[override]
    def env_id(self) -> str | None:
        return getattr(self.env, "env_id", None)

    @env_id.setter
    def env_id(self, value: str | None) -> None:
        self.env.env_id = value

    @property  # type: ignore[override]
    def entry_point(self) -> Any:
        return getattr(self.env, "entry_point", None)

    @entry_point.setter
    def entry_point(self, value: Any) -> None:
        self.env.entry_point = value

    @property
    def blocking(self) -> bool:  # type: ignore[override]
        return env_blocking(self.env)

    @property
    def suspends(self) -> bool:
        return env_suspends(self.env)

    @property
    def unwrapped(self) -> Env:
        return getattr(self.env, "unwrapped", self.env)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A wrapper written for GEM overrides the sync face only; every wrapper here has both
        # (forwarding, or their own), so the other face of what a subclass overrides is made
        # to run it: no path bypasses the override.
        super().__init_subclass__(**kwargs)
        complete_faces(cls)

    # -- the faces: forward ------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action: ActType) -> StepReturn:
        return self.env.step(action)

    def close(self) -> None:
        close_env(self.env)

    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return await areset_env(self.env, seed=seed, **kwargs)

    async def astep(self, action: ActType) -> StepReturn:
        return await astep_env(self.env, action)

    async def aclose(self) -> None:
        await aclose_env(self.env)

    async def _call_sync(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run this wrapper's own sync method from its async face: inline when nothing in it
        suspends (nothing can then block the loop or need it), else in a thread."""
        if not self.suspends:
            return fn(*args, **kwargs)
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    # -- helpers -----------------------------------------------------------------------
    def check_step(self, action: object) -> int:
        """The inner env's check; an env without a lifecycle of its own (GEM's) is not
        checked, as GEM does not check it, and counts as at turn 0."""
        check = getattr(self.env, "check_step", None)
        return check(action) if check is not None else 0

    def seed_rng(self, seed: int | None) -> None:
        seed_rng = getattr(self.env, "seed_rng", None)
        if seed_rng is not None:
            seed_rng(seed)

    def sample_random_action(self) -> ActType:
        return self.env.sample_random_action()

    def get_state(self) -> dict[str, Any]:
        """The inner env's state, and this wrapper's own under ``"wrapper"`` when it has any
        (the inner env's is then under ``"env"``)."""
        inner = get_state_of(self.env)
        if not self._state_attrs:
            return inner
        own = copy.deepcopy({name: getattr(self, name) for name in self._state_attrs})
        return {"env": inner, "wrapper": own}

    def set_state(self, state: dict[str, Any]) -> None:
        if self._state_attrs:
            for name, value in copy.deepcopy(state["wrapper"]).items():
                setattr(self, name, value)
            state = state["env"]
        set_state_of(self.env, state)

    def spawn(self, same_state: bool = False, **kwargs: Any) -> Env:
        """A copy of the stack, with its own state at every level. Unless ``same_state`` the
        copy starts a new episode; a wrapper with state of its own resets the copy through
        itself (a history must begin with the new episode's first observation), one without
        leaves that to the inner env's :meth:`~Env.spawn`."""
        clone = self._spawn_copy()
        if same_state or not self._state_attrs:
            clone.env = self.env.spawn(same_state=same_state, **kwargs)
        else:
            seed = kwargs.pop("seed", None)
            clone.env = self.env.spawn(same_state=True, **kwargs)
            clone.reset(seed=seed)
        return clone

    async def afork(self, n: int) -> list[Env]:
        """The inner env forked ``n`` ways, each copy under a copy of this wrapper."""
        clones = []
        for env in await self.env.afork(n):
            clone = self._spawn_copy()
            clone.env = env
            clones.append(clone)
        return clones

    def _spawn_copy(self) -> EnvWrapper[ObsType, ActType]:
        """This wrapper for :meth:`spawn`, before the inner env is replaced: a shallow copy
        (configuration shared) with its own copy of each of :attr:`_state_attrs`."""
        clone = copy.copy(self)
        for name in self._state_attrs:
            setattr(clone, name, copy.deepcopy(getattr(self, name)))
        return clone

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"
