"""Both faces of any env, GEM's sync-only ones included, and its state.

Wrappers and vector envs call the envs they hold through these helpers, so that an env with
only GEM's sync face (a ``gem.Env``: no ``areset``, ``close``, ``get_state``...) works as well
as an :class:`~gem_sandbox.core.Env`. :func:`complete_faces` gives a wrapper class the face it
does not define, running the one it does.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from gem_sandbox.bridge import run_sync

if TYPE_CHECKING:
    from gem_sandbox.core import Env, ResetReturn, StepReturn


def env_blocking(env: Any) -> bool:
    """Whether ``env``'s sync face may block; an env that does not say is assumed to."""
    return bool(getattr(env, "blocking", True))


def env_suspends(env: Any) -> bool:
    """Whether ``env``'s async face can suspend (see :attr:`Env.suspends`); a sync-only env's
    does, as it runs in a worker thread."""
    return bool(getattr(env, "suspends", True))


async def _sync_face(env: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a sync-only env's method the way :meth:`Env._call_sync` would: inline when the env
    says it does not block, else in a worker thread."""
    if not env_blocking(env):
        return fn(*args, **kwargs)
    return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))


async def areset_env(env: Any, seed: int | None = None, **kwargs: Any) -> ResetReturn:
    """``await env.areset(...)``, or a sync-only env's ``reset`` (see :func:`_sync_face`)."""
    areset = getattr(env, "areset", None)
    if areset is not None:
        return await areset(seed=seed, **kwargs)
    return await _sync_face(env, env.reset, seed=seed, **kwargs)


async def astep_env(env: Any, action: Any) -> StepReturn:
    """``await env.astep(action)``, or a sync-only env's ``step``."""
    astep = getattr(env, "astep", None)
    if astep is not None:
        return await astep(action)
    return await _sync_face(env, env.step, action)


def close_env(env: Any) -> None:
    """``env.close()`` where it has one (GEM's envs have none)."""
    close = getattr(env, "close", None)
    if close is not None:
        close()


async def aclose_env(env: Any) -> None:
    """``await env.aclose()``, else a sync ``close`` if it has one."""
    aclose = getattr(env, "aclose", None)
    if aclose is not None:
        await aclose()
    elif getattr(env, "close", None) is not None:
        await _sync_face(env, env.close)


def get_state_of(env: Any) -> dict[str, Any]:
    """``env.get_state()``, or for an env without one a deep copy of its attributes (what
    :meth:`Env.get_state` copies)."""
    get_state = getattr(env, "get_state", None)
    if get_state is not None:
        return get_state()
    return copy.deepcopy({k: v for k, v in vars(env).items() if not k.startswith("__")})


def set_state_of(env: Any, state: dict[str, Any]) -> None:
    """``env.set_state(state)``, or the inverse of :func:`get_state_of` for an env without one."""
    set_state = getattr(env, "set_state", None)
    if set_state is not None:
        set_state(state)
    else:
        vars(env).update(copy.deepcopy(state))


#: The pairs of faces: a wrapper subclass that overrides one of a pair gets the other through it.
_FACES = (("reset", "areset"), ("step", "astep"), ("close", "aclose"))


def _complete_face(cls: type, own_name: str, made_name: str) -> None:
    """Give ``cls``, which overrides only ``own_name`` of a pair of faces, the other face
    ``made_name`` running it (inline or in a thread from the async face, through
    :func:`run_sync` from the sync one).

    A base's face may itself bridge to the other face (the tool wrapper's sync ``step`` runs
    its ``astep``): while ``cls``'s own face runs, a call of the made face comes from such a
    bridge and goes on to the base's face of that name, instead of round again. The mark is
    an instance key (leading ``__``: :meth:`Env.get_state` leaves it out)."""
    own = cls.__dict__[own_name]
    running = f"__{cls.__module__}.{cls.__qualname__}.{own_name}"

    def enter(self: Env) -> dict[str, Any]:
        attrs = vars(self)
        attrs[running] = attrs.get(running, 0) + 1
        return attrs

    def leave(attrs: dict[str, Any]) -> None:
        attrs[running] -= 1
        if not attrs[running]:
            del attrs[running]

    if inspect.iscoroutinefunction(own):

        @functools.wraps(own)
        async def own_face(self: Env, *args: Any, **kwargs: Any) -> Any:
            attrs = enter(self)
            try:
                return await own(self, *args, **kwargs)
            finally:
                leave(attrs)

        def made_face(self: Env, *args: Any, **kwargs: Any) -> Any:
            if vars(self).get(running):
                return getattr(super(cls, self), made_name)(*args, **kwargs)
            return run_sync(getattr(self, own_name), *args, **kwargs)

    else:

        @functools.wraps(own)
        def own_face(self: Env, *args: Any, **kwargs: Any) -> Any:
            attrs = enter(self)
            try:
                return own(self, *args, **kwargs)
            finally:
                leave(attrs)

        async def made_face(self: Env, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            if vars(self).get(running):
                return await getattr(super(cls, self), made_name)(*args, **kwargs)
            return await self._call_sync(getattr(self, own_name), *args, **kwargs)

    made_face.__name__, made_face.__qualname__ = made_name, f"{cls.__qualname__}.{made_name}"
    made_face.__doc__ = f"``{own_name}`` (which this class overrides), from the other face."
    setattr(cls, own_name, own_face)
    setattr(cls, made_name, made_face)


def complete_faces(cls: type) -> None:
    """Give a wrapper class that overrides one face of a pair (GEM's wrappers override the
    sync face only) the other face, running the one it overrides: no path bypasses it."""
    for sync, async_ in _FACES:
        if sync in cls.__dict__ and async_ not in cls.__dict__:
            _complete_face(cls, sync, async_)
        elif async_ in cls.__dict__ and sync not in cls.__dict__:
            _complete_face(cls, async_, sync)
