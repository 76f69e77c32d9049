"""Sandboxes a client holds on leases kept elsewhere, on the pool service or on a Ray cluster's
nodes: what such a sandbox knows of its lease (:class:`HeldSandbox`), and the bookkeeping of
the pool that holds them (:class:`HeldPool`)."""

from __future__ import annotations

import dataclasses
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

import anyio

from gem_sandbox.sandbox.errors import SandboxError
from gem_sandbox.sandbox.pool import PoolStatistics, leased

CLOSE_TIMEOUT = 10.0  # seconds closing a pool gives the far side to end its leases


class HeldSandbox:
    """Base of the sandboxes a client holds on a lease kept elsewhere (the pool service's
    :class:`~gem_sandbox.sandbox.remote.RemoteSandbox`, a Ray node's
    :class:`~gem_sandbox.sandbox.cluster.RaySandbox`): alive until :meth:`end`, whose first
    reason sticks and says why it is not. ``pool`` is the pool that leased it; ``id`` the lease's."""

    pool: Any
    id: str
    death: str | None = None

    @property
    def alive(self) -> bool:
        """The lease has not ended, as far as this client knows."""
        return self.death is None

    def end(self, reason: str) -> None:
        """Mark the lease over (the first reason sticks)."""
        if self.death is None:
            self.death = reason


S = TypeVar("S", bound=HeldSandbox)


class HeldPool(Generic[S]):
    """Base of the pools whose leases are kept elsewhere: which ones this client holds, how
    many it took, and giving them back. A subclass records each lease it takes with
    :meth:`_hold` and tells the far side a lease is over in :meth:`_end`, which logs what it
    cannot tell (the far side's lease TTL then ends it)."""

    def __init__(self) -> None:
        self._leased: dict[str, S] = {}  # lease id -> sandbox, the leases this client holds
        self._leases = 0

    def statistics(self) -> PoolStatistics:
        """What this client did: the leases it took and those it holds (the far side's own
        pools keep their own counters)."""
        return dataclasses.replace(PoolStatistics.empty(), leases=self._leases, leased=len(self._leased))

    async def release(self, sandbox: Any) -> None:
        """End a lease; the far side resets its sandbox for the next tenant. Ending one twice,
        or one already over, is a no-op. A sandbox of another pool raises :class:`SandboxError`."""
        if getattr(sandbox, "pool", None) is not self:
            raise SandboxError(f"release() of {sandbox!r}, which {self!r} did not lease")
        if self._leased.pop(sandbox.id, None) is None:
            return
        sandbox.end("released")
        with anyio.CancelScope(shield=True):
            await self._end(sandbox)

    def lease(self, timeout: float | None = None) -> AbstractAsyncContextManager[S]:
        """``async with pool.lease() as sandbox:`` acquired, and released however the block ends."""
        return leased(self, timeout)

    def _hold(self, sandbox: S) -> S:
        self._leased[sandbox.id] = sandbox
        self._leases += 1
        return sandbox

    async def _end_all(self, reason: str) -> None:
        """End every lease this client holds, at once, within :data:`CLOSE_TIMEOUT`."""
        held, self._leased = list(self._leased.values()), {}
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
            async with anyio.create_task_group() as tg:
                for sandbox in held:
                    sandbox.end(reason)
                    tg.start_soon(self._end, sandbox)

    async def _end(self, sandbox: S) -> None:
        raise NotImplementedError
