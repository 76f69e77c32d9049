"""How a tool reaches a sandbox: which pool, and which leased sandbox for this episode.

Tools are shared and stateless (GEM's factory builds one tool instance for every env), so
neither the pool nor an episode's sandbox can live on the tool. They are looked up per call:

* **the pool**, by :func:`resolve_pool`: the tool's explicit ``pool=`` wins; else the pool of
  the enclosing ``with using_pool(pool):`` (a context variable, so it follows tasks started
  inside it and calls submitted through the shared loop); else the process-wide default pool
  of :mod:`gem_sandbox.sandbox.default`, reached through :func:`~gem_sandbox.sandbox.default.hop`
  when the caller runs on another event loop.
* **the episode's sandbox**, by :func:`current_episode`: the :class:`EpisodeSandboxes` that the
  tool wrapper makes current around each tool call. It leases a sandbox lazily, on the first
  stateful call, and keeps it until the wrapper releases it (episode end, reset, close).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio

from gem_sandbox.sandbox import default
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.pool import SandboxPool

T = TypeVar("T")

_context_pool: ContextVar[SandboxPool | None] = ContextVar("gem_sandbox_pool", default=None)
_episode: ContextVar[EpisodeSandboxes | None] = ContextVar("gem_sandbox_episode", default=None)


@dataclass(frozen=True)
class PoolRef:
    """A pool and how to reach the event loop it lives on."""

    pool: SandboxPool
    on_shared_loop: bool = False  # a default pool: calls from other loops hop to it

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """``await fn()`` on the pool's loop."""
        return await default.hop(fn) if self.on_shared_loop else await fn()


class using_pool:
    """``with using_pool(pool):`` or ``async with using_pool(pool):`` makes ``pool`` the one
    that tools without an explicit ``pool=`` use, in this context and tasks started from it."""

    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self._token: Token[SandboxPool | None] | None = None

    def __enter__(self) -> SandboxPool:
        self._token = _context_pool.set(self.pool)
        return self.pool

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _context_pool.reset(self._token)

    async def __aenter__(self) -> SandboxPool:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()


async def resolve_pool(pool: SandboxPool | None = None, backend: str | None = None) -> PoolRef:
    """The pool a tool should use: ``pool``, else the context's (unless ``backend`` names
    another backend than it runs), else the default pool of ``backend``."""
    if pool is not None:
        return PoolRef(pool)
    scoped = _context_pool.get()
    if scoped is not None and backend in (None, "auto", scoped.backend.name):
        return PoolRef(scoped)
    return PoolRef(await default.adefault_pool(backend), on_shared_loop=True)


class EpisodeSandboxes:
    """The sandboxes one episode leased: at most one per pool, leased on first use and kept
    (with its kernels, shell sessions and files) until :meth:`release`."""

    def __init__(self) -> None:
        self._leases: dict[int, tuple[PoolRef, Sandbox]] = {}  # by id(pool)

    def __len__(self) -> int:
        return len(self._leases)

    async def sandbox(self, ref: PoolRef) -> Sandbox:
        """This episode's sandbox from ``ref``'s pool. One that died is given back and a fresh
        one leased: the episode's state is lost either way, but later calls can succeed."""
        lease = self._leases.get(id(ref.pool))
        if lease is not None and not lease[1].alive:
            await self._release(id(ref.pool))
            lease = None
        if lease is None:
            lease = ref, await ref.call(ref.pool.acquire)
            self._leases[id(ref.pool)] = lease
        return lease[1]

    async def release(self) -> None:
        """Give every leased sandbox back to its pool (which resets it for the next tenant)."""
        with anyio.CancelScope(shield=True):
            for key in list(self._leases):
                await self._release(key)

    async def _release(self, key: int) -> None:
        ref, sandbox = self._leases.pop(key)
        await ref.call(partial(ref.pool.release, sandbox))

    async def __aenter__(self) -> EpisodeSandboxes:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


def current_episode() -> EpisodeSandboxes | None:
    """The episode a tool call belongs to, when a tool wrapper runs it."""
    return _episode.get()


@contextmanager
def episode_scope(episode: EpisodeSandboxes) -> Iterator[EpisodeSandboxes]:
    """Make ``episode`` current for the tool calls inside the block."""
    token = _episode.set(episode)
    try:
        yield episode
    finally:
        _episode.reset(token)
