"""The lifecycle guards and the settings exposure :class:`~gem_sandbox.core.Env` installs
around what each subclass defines (see ``Env.__init_subclass__``).

They live apart from the contract so that an env family with a contract of its own (the
multi-agent env, whose steps return per-agent dicts) installs the same guards.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gem_sandbox.core import Env, ResetReturn, StepReturn


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
def guard_reset(fn: Callable[..., ResetReturn]) -> Callable[..., ResetReturn]:
    @functools.wraps(fn)
    def reset(self: Env, *args: Any, **kwargs: Any) -> ResetReturn:
        self._turn, self._done = 0, False
        try:
            return fn(self, *args, **kwargs)
        except BaseException:  # even after a nested reset succeeded: no episode to step
            self._turn = None
            raise

    return reset


def guard_areset(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def areset(self: Env, *args: Any, **kwargs: Any) -> ResetReturn:
        self._turn, self._done = 0, False
        try:
            return await fn(self, *args, **kwargs)
        except BaseException:
            self._turn = None
            raise

    return areset


def guard_step(fn: Callable[..., StepReturn]) -> Callable[..., StepReturn]:
    @functools.wraps(fn)
    def step(self: Env, action: Any) -> StepReturn:
        turn = self._turn
        if turn is None or self._done or not isinstance(action, str):
            turn = self.check_step(action)  # raises; the fast path is the three checks above
        result = fn(self, action)
        self._turn, self._done = turn + 1, _ended(result)
        return result

    return step


def guard_astep(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def astep(self: Env, action: Any) -> StepReturn:
        turn = self._turn
        if turn is None or self._done or not isinstance(action, str):
            turn = self.check_step(action)
        result = await fn(self, action)
        self._turn, self._done = turn + 1, _ended(result)
        return result

    return astep


#: Constructor arguments never exposed as attributes: the seed lives in ``rng``/``_seed``.
_NOT_SETTINGS = frozenset({"self", "seed"})


def _is_plain(value: object) -> bool:
    """Whether ``value`` is a setting to expose: plain data, cheap and safe to copy with the
    env's state (not a runtime, a dataset or a tokenizer, which envs keep under names of their
    own choosing)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, PurePath)):
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_is_plain(k) and _is_plain(v) for k, v in value.items())
    return False


def exposing_settings(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a subclass's ``__init__`` so that each of its (plain) arguments the env did not
    store under its own name becomes an attribute of that name.

    GEM's envs store every setting (``env.max_turns`` is read before the first reset, as
    OpenRLHF's example does); envs here may keep settings in a structure of their own and set
    the attributes per episode (the games' ``-random`` variants draw them). Exposing what the
    constructor was given keeps GEM's contract for every env without each one repeating it.
    """
    signature = inspect.signature(init)
    params = [
        p
        for p in signature.parameters.values()
        if p.name not in _NOT_SETTINGS and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]

    @functools.wraps(init)
    def __init__(self: Env, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if not params or not type(self)._expose_settings:
            return
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:  # a signature init itself accepted some other way: nothing to add
            return
        bound.apply_defaults()
        attrs = getattr(self, "__dict__", None)
        if attrs is None:
            return
        for p in params:
            value = bound.arguments[p.name]
            if p.name not in attrs and not hasattr(type(self), p.name) and _is_plain(value):
                attrs[p.name] = value

    return __init__
